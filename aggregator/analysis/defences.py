"""Defences against fake clients, run on the crafted reports of ``ldp attack poison``.

:func:`aggregator.analysis.poisoning.simulate_poisoning` hands each defence one
:class:`PoisonedBatch` per attack and run, and keeps its :class:`DefenceVerdict`. The two
registered in :data:`DEFENCES` are the deployment's own checks, called as the deployment
calls them:

* :func:`plausibility`: the collector's check of single reports,
  ``mechanism.implausible(payload)`` (:mod:`client_sdk.mechanisms.plausibility`), the
  function ``collector/ingest.py`` calls on every report. Caught when it refuses at
  least one crafted report (the refusals show in
  ``ldp_collector_reports_implausible_total``); the verdict also says what the attack
  still gains once the refused reports are dropped, as the collector drops them.
* :class:`AggregateDetection`: the read side's poisoning alarms,
  :func:`aggregator.stats.detect.detect`, on the poisoned window (the run's genuine
  reports plus the crafted ones, with the local-hashing seed histogram the worker
  would keep) against :data:`~aggregator.stats.detect.TRAILING` ``["hour"]`` trailing
  windows pooled, each a fresh honest sample of the same population and size. Caught
  when any alarm fires at the false-alarm rate α per window.

The honest trailing windows are drawn by :class:`HonestWindows` from a generator the
simulator spawns from its own (seeded runs stay reproducible, and the gains do not
depend on which defences ran), once per run and shared by the run's attacks.

SIMULATION ONLY: numpy's PCG64, not a CSPRNG.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from aggregator.analysis.simulation import seed_histogram, simulate_reports
from aggregator.stats.arrays import IntArray
from aggregator.stats.codecs import Counts
from aggregator.stats.detect import DEFAULT_ALARM_RATE, TRAILING, detect
from aggregator.stats.frequency import estimate_from_counts
from aggregator.stats.kinds import codec_for
from client_sdk.mechanisms import FrequencyOracle, LocalHashing

__all__ = [
    "DEFENCES",
    "AggregateDetection",
    "Defence",
    "DefenceSummary",
    "DefenceVerdict",
    "HonestWindows",
    "PoisonedBatch",
    "plausibility",
    "summarise",
]


class HonestWindows:
    """Fresh honest windows of one population, each drawn on first use and then kept.

    Each window draws its users' true values from ``population`` (a multinomial of
    ``users``), perturbs every report with the vectorized encoder and decodes it with the
    real batch decoder (:func:`~aggregator.analysis.simulation.simulate_reports`): what
    :func:`~aggregator.stats.detect.detect` assumes of honest windows, "the same
    population, fresh reports".

    Args:
        mechanism: the genuine devices' mechanism.
        population: the true values' probabilities.
        users: reports per window.
        gen: the generator the windows are drawn with.
    """

    def __init__(
        self,
        mechanism: FrequencyOracle,
        population: npt.ArrayLike,
        users: int,
        gen: np.random.Generator,
    ) -> None:
        self.mechanism = mechanism
        self.population = np.asarray(population, dtype=np.float64)
        self.users = users
        self.gen = gen
        self._drawn: list[Counts] = []

    def take(self, count: int) -> list[Counts]:
        """The first ``count`` windows (drawing those not drawn yet)."""
        while len(self._drawn) < count:
            true_counts = self.gen.multinomial(self.users, self.population).astype(np.int64)
            self._drawn.append(simulate_reports(self.mechanism, true_counts, self.gen)[0])
        return self._drawn[:count]


@dataclass(frozen=True)
class PoisonedBatch:
    """What a defence gets to see: one run's crafted reports and the counts around them."""

    mechanism: FrequencyOracle
    attack: str
    payloads: list[dict[str, Any]]
    """The crafted payloads, as the collector would receive them."""
    genuine: Counts
    poisoned: Counts
    """Genuine plus crafted counts: what the aggregator would publish."""
    targets: tuple[int, ...] = ()
    """The values the attack promotes."""
    run: int = 0
    genuine_seeds: IntArray | None = None
    """The genuine reports' seed histogram (local hashing; None otherwise)."""
    honest: HonestWindows | None = None
    """Fresh honest windows of the genuine population and size, for tests of a window
    against its baseline (None: no baseline to compare with)."""


@dataclass(frozen=True)
class DefenceVerdict:
    """One defence's answer on one attack in one run."""

    defence: str
    attack: str
    flagged: int
    """Crafted reports it flagged one by one (0 for a test of the whole window)."""
    checked: int
    """Crafted reports it saw."""
    alarm: bool
    """Whether the defence would have raised the alarm on this run: caught."""
    detail: str = ""
    run: int = 0
    gain: float | None = None
    """Total gain over the targets left once the flagged reports are dropped (None: the
    defence drops nothing)."""
    alarms: tuple[str, ...] = ()
    """The kinds of the alarms raised (window tests)."""


Defence = Callable[[PoisonedBatch], DefenceVerdict]


def plausibility(batch: PoisonedBatch) -> DefenceVerdict:
    """The collector's plausibility check on each crafted report.

    Calls ``batch.mechanism.implausible`` on every payload (as ``collector/ingest.py``
    does with the metric's mechanism) and re-estimates the targets from the genuine
    reports plus the crafted ones it lets through.
    """
    m, payloads = batch.mechanism, batch.payloads
    reasons = [m.implausible(p) for p in payloads]
    kept = [p for p, reason in zip(payloads, reasons, strict=True) if reason is None]
    refused = [reason for reason in reasons if reason is not None]
    flagged = len(refused)
    t = np.asarray(batch.targets, dtype=np.int64)
    before = estimate_from_counts(m, batch.genuine).frequencies[t]
    through = batch.genuine + codec_for(m).decode(kept) if kept else batch.genuine
    gain = float((estimate_from_counts(m, through).frequencies[t] - before).sum())
    detail = f"refused {flagged:,} of {len(payloads):,} crafted reports"
    if refused:
        detail += f" ({', '.join(sorted({r.reason for r in refused}))})"
    return DefenceVerdict(
        "plausibility", batch.attack, flagged, len(payloads), flagged > 0, detail, batch.run, gain
    )


@dataclass(frozen=True)
class AggregateDetection:
    """The poisoning alarms of :mod:`aggregator.stats.detect` on the poisoned window.

    Attributes:
        alpha: the false-alarm rate per window (split over the tests that apply).
        trailing: honest windows pooled into the baseline.
    """

    alpha: float = DEFAULT_ALARM_RATE
    trailing: int = TRAILING["hour"]

    name = "detection"

    def __call__(self, batch: PoisonedBatch) -> DefenceVerdict:
        """Run every test of :func:`~aggregator.stats.detect.tests_for` on the window.

        Raises:
            ValueError: the batch has no honest windows to compare with.
        """
        if batch.honest is None:
            raise ValueError("aggregate detection needs the batch's honest windows")
        m, now = batch.mechanism, batch.poisoned
        baseline = batch.honest.take(self.trailing)
        n2 = sum(w.n for w in baseline)
        c2 = np.sum([w.support for w in baseline], axis=0)
        seeds = None
        if isinstance(m, LocalHashing) and batch.genuine_seeds is not None:
            codec = codec_for(m)
            crafted = seed_histogram(codec.seed_increments(codec.parse(batch.payloads)))
            seeds = batch.genuine_seeds + crafted
        alarms = detect(
            m,
            "poisoned",
            (now.n, now.support),
            (n2, c2),
            seeds,
            self.alpha,
            baseline=f"{self.trailing} honest windows",
        )
        kinds = tuple(a.kind for a in alarms)
        detail = "; ".join(f"{a.kind}: {a.evidence}" for a in alarms) or "no alarm"
        return DefenceVerdict(
            self.name,
            batch.attack,
            0,
            len(batch.payloads),
            bool(alarms),
            detail,
            batch.run,
            alarms=kinds,
        )


DEFENCES: tuple[Defence, ...] = (plausibility, AggregateDetection())
"""The defences ``simulate_poisoning`` runs by default on each attack's crafted reports:
the collector's plausibility check and the aggregate's alarms at the default α."""


@dataclass(frozen=True)
class DefenceSummary:
    """One defence on one attack over every run."""

    defence: str
    attack: str
    trials: int
    caught: int
    """Runs in which it raised the alarm."""
    flagged: int
    """Crafted reports flagged, over all runs."""
    checked: int
    gain: float | None
    """Mean total gain left once the flagged reports are dropped."""
    alarms: dict[str, int] = field(default_factory=dict)
    """Runs in which each kind of alarm fired."""
    per_trial: list[bool] = field(default_factory=list)

    @property
    def rate(self) -> float:
        """The share of runs caught."""
        return self.caught / self.trials

    @property
    def flagged_share(self) -> float:
        """The share of crafted reports flagged one by one."""
        return self.flagged / self.checked if self.checked else 0.0


def summarise(verdicts: Sequence[DefenceVerdict]) -> list[DefenceSummary]:
    """Per (defence, attack), in the order first seen: caught in how many runs, and more."""
    groups: dict[tuple[str, str], list[DefenceVerdict]] = {}
    for v in verdicts:
        groups.setdefault((v.defence, v.attack), []).append(v)
    return [_summary(defence, attack, group) for (defence, attack), group in groups.items()]


def _summary(defence: str, attack: str, group: list[DefenceVerdict]) -> DefenceSummary:
    """One (defence, attack)'s runs summed up."""
    gains = [v.gain for v in group if v.gain is not None]
    alarms = Counter(kind for v in group for kind in dict.fromkeys(v.alarms))
    return DefenceSummary(
        defence,
        attack,
        len(group),
        sum(v.alarm for v in group),
        sum(v.flagged for v in group),
        sum(v.checked for v in group),
        float(np.mean(gains)) if gains else None,
        dict(alarms),
        [v.alarm for v in group],
    )

"""Fake clients: what crafted reports do to the estimates (data poisoning of LDP).

An attacker who controls m fake devices can skip the randomizer and send any report the
wire format admits. The *maximal gain attack* (MGA) crafts every fake report to support
all of the attacker's r target values at once where the mechanism allows it; the
*input-manipulation* baseline (Cao et al.'s random item attack) has each fake device pick
a target and report it through the honest SDK randomizer, as a real user would.

In full: ``docs/security/poisoning.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from aggregator.analysis.crafting import InputManipulation, MaximalGain
from aggregator.analysis.defences import (
    DEFENCES,
    Defence,
    DefenceSummary,
    DefenceVerdict,
    HonestWindows,
    PoisonedBatch,
    summarise,
)
from aggregator.analysis.simulation import distribution, simulate_reports
from aggregator.stats.arrays import FloatArray, IntArray
from aggregator.stats.frequency import estimate_from_counts
from aggregator.stats.kinds import codec_for
from aggregator.stats.robustness import (
    expected_gain,
    gain_std,
)
from client_sdk.mechanisms import FrequencyOracle
from client_sdk.mechanisms.base import fields_of

__all__ = [
    "DEFENCES",
    "Defence",
    "DefenceSummary",
    "DefenceVerdict",
    "PoisonResult",
    "PoisonedBatch",
    "TargetGain",
    "simulate_poisoning",
]


# -- defences ----------------------------------------------------------------------------
# The hook (PoisonedBatch in, DefenceVerdict out) and the registered defences live in
# aggregator.analysis.defences; DEFENCES is re-exported here, where the simulator runs them.


# -- the simulation -----------------------------------------------------------------------


@dataclass(frozen=True)
class TargetGain:
    """One target's movement, averaged over the runs (frequencies as fractions)."""

    value: int
    frequency: float
    """Its true frequency among the genuine users."""
    before: float
    """The estimate from the genuine reports alone."""
    after: float
    """The estimate with the MGA's crafted reports added."""
    gain: float
    """Mean of after − before over the runs (MGA)."""
    gain_se: float
    """Standard error of that mean, from the spread of the runs (0 for one run)."""
    theory: float
    """Equation (1) at the runs' true frequencies, averaged."""
    theory_std: float
    """Equation (2): σ of one run's gain; the mean of R runs has σ/√R."""
    baseline: float
    """Mean gain of the input-manipulation baseline."""
    baseline_se: float
    baseline_theory: float
    baseline_std: float


@dataclass(frozen=True)
class PoisonResult:
    """What m fake devices did to the estimates of the targets, MGA against baseline."""

    mechanism: dict[str, Any]
    users: int
    fakes: int
    distribution: str
    runs: int
    seed: int | None
    targets: list[TargetGain]
    mga_support: list[float]
    """s_t of one crafted MGA report, per target."""
    defences: list[DefenceVerdict] = field(default_factory=list)
    """Verdicts of the defences on each attack in each run (empty when none ran)."""

    @property
    def defence_summary(self) -> list[DefenceSummary]:
        """Per defence and attack: caught in how many of the runs."""
        return summarise(self.defences)

    @property
    def beta(self) -> float:
        """The paper's fake fraction β = m/(n + m)."""
        return self.fakes / (self.users + self.fakes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            **fields_of(
                self, "mechanism", "users", "fakes", "beta", "distribution", "runs", "seed"
            ),
            "randomness": "simulation: numpy PCG64 (not a CSPRNG)",
            "mga_support": self.mga_support,
            "targets": [asdict(t) for t in self.targets],
            "defences": [asdict(d) for d in self.defences],
            "defence_summary": [
                {**asdict(d), "rate": d.rate, "flagged_share": d.flagged_share}
                for d in self.defence_summary
            ],
        }


def _target_gains(
    t: IntArray, a: dict[str, FloatArray], base_theory: FloatArray
) -> list[TargetGain]:
    """Each target's gains over the runs (``a``: each quantity's (runs, targets) rows)."""
    runs = len(a["f"])
    mean_f = a["f"].mean(axis=0)

    def se(x: FloatArray) -> FloatArray:
        return x.std(axis=0, ddof=1) / np.sqrt(runs) if runs > 1 else np.zeros(x.shape[1])

    return [
        TargetGain(
            value=int(t[i]),
            frequency=float(mean_f[i]),
            before=float(a["before"][:, i].mean()),
            after=float(a["after"][:, i].mean()),
            gain=float(a["mga"][:, i].mean()),
            gain_se=float(se(a["mga"])[i]),
            theory=float(a["theory"][:, i].mean()),
            theory_std=float(np.sqrt(np.mean(a["std"][:, i] ** 2))),
            baseline=float(a["base"][:, i].mean()),
            baseline_se=float(se(a["base"])[i]),
            baseline_theory=float(base_theory[i]),
            baseline_std=float(np.sqrt(np.mean(a["bstd"][:, i] ** 2))),
        )
        for i in range(len(t))
    ]


def simulate_poisoning(
    mechanism: FrequencyOracle,
    targets: Sequence[int],
    users: int,
    fakes: int,
    runs: int = 1,
    dist: str = "zipf",
    seed: int | None = None,
    defences: Sequence[Defence] | None = None,
    progress: Callable[[int], None] | None = None,
) -> PoisonResult:
    """Run MGA and the baseline against ``users`` genuine reports, ``runs`` times.

    Each run draws the genuine population from ``dist``, perturbs every genuine report
    with the vectorized encoder and counts it with the real batch decoder
    (:func:`~aggregator.analysis.simulation.simulate_counts`, ``method="reports"``), then
    decodes each attack's ``fakes`` crafted payloads with the same decoder (which
    rejects any payload the collector would) and estimates with
    :func:`~aggregator.stats.frequency.estimate_from_counts` before and after.

    Args:
        mechanism: the genuine devices' mechanism.
        targets: values to promote.
        users: n, genuine reports per run.
        fakes: m, crafted reports per run and attack.
        runs: independent populations.
        dist: the genuine values' distribution (a name of
            :data:`~aggregator.analysis.simulation.DISTRIBUTIONS`).
        seed: numpy seed (None: fresh entropy).
        defences: run on each attack's crafted reports in every run (default
            :data:`DEFENCES`); their honest windows come from a generator spawned from
            the simulation's, so the gains do not depend on them.
        progress: called with 1 after each run.

    Raises:
        ValueError: bad targets, users, fakes or runs.
        TypeError: a mechanism without a crafting rule.
    """
    if min(users, fakes, runs) < 1:
        raise ValueError("users, fakes and runs must be at least 1")
    gen = np.random.default_rng(seed)
    mga = MaximalGain(mechanism, targets, gen)
    base = InputManipulation(mechanism, targets)
    t = np.array(mga.targets)
    codec = codec_for(mechanism)
    probs = distribution(dist, mechanism.domain_size)
    rows: dict[str, list[FloatArray]] = {
        key: [] for key in ("f", "before", "after", "mga", "base", "theory", "std", "bstd")
    }
    supports = {"mga": mga.support(), "input": base.support()}
    verdicts: list[DefenceVerdict] = []
    checks = DEFENCES if defences is None else tuple(defences)
    defence_gen = gen.spawn(1)[0]  # the defences' draws leave the gains' stream alone
    beta = fakes / (users + fakes)
    for run in range(runs):
        true_counts = gen.multinomial(users, probs).astype(np.int64)
        genuine, seeds = simulate_reports(mechanism, true_counts, gen)
        before = estimate_from_counts(mechanism, genuine).frequencies[t]
        honest = HonestWindows(mechanism, probs, users, defence_gen)
        for attack, key in ((mga, "mga"), (base, "base")):
            payloads = attack.payloads(fakes, gen)
            poisoned = genuine + codec.decode(payloads)
            after = estimate_from_counts(mechanism, poisoned).frequencies[t]
            rows[key].append(after - before)
            if attack is mga:
                rows["after"].append(after)
            batch = PoisonedBatch(
                mechanism,
                attack.name,
                payloads,
                genuine,
                poisoned,
                tuple(int(x) for x in t),
                run,
                seeds,
                honest,
            )
            verdicts += [check(batch) for check in checks]
        f = true_counts[t] / users
        rows["f"].append(f)
        rows["before"].append(before)
        rows["theory"].append(expected_gain(mechanism, supports["mga"], beta, f))
        rows["std"].append(gain_std(mechanism, supports["mga"], users, fakes, true_counts[t]))
        rows["bstd"].append(gain_std(mechanism, supports["input"], users, fakes, true_counts[t]))
        if progress:
            progress(1)
    a = {key: np.array(value) for key, value in rows.items()}
    base_theory = expected_gain(mechanism, supports["input"], beta, a["f"]).mean(axis=0)
    gains = _target_gains(t, a, base_theory)
    return PoisonResult(
        mechanism=mechanism.params(),
        users=users,
        fakes=fakes,
        distribution=dist,
        runs=runs,
        seed=seed,
        targets=gains,
        mga_support=[float(x) for x in supports["mga"]],
        defences=verdicts,
    )

"""What every kind's estimator shares: the :class:`Estimator` protocol, what a reader
asks (:class:`Ask`) and reads with (:class:`Reader`), and the notes and ε views an
answer carries. See docs/architecture/layout.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypeVar

import redis

from aggregator.query.answers import (
    DEFAULT_CONFIDENCE,
    DistributionEstimates,
    Estimates,
    JointEstimates,
    MeanEstimate,
    ShuffledEpsilon,
    StringEstimates,
)
from aggregator.query.paging import Rows
from aggregator.query.window import newest_arrival, read_counts
from aggregator.stats.accounting import ReportsPerDevice, reports_per_device
from aggregator.stats.codecs import Counts
from aggregator.stats.detect import DEFAULT_ALARM_RATE
from aggregator.stats.frequency import FrequencyEstimate
from aggregator.stats.intervals import POPULATION, REPORTERS
from aggregator.stats.multiplicity import EACH, FDR, SIMULTANEOUS, multiplicity_of
from aggregator.stats.shuffling import shuffled_view
from client_sdk.wire import MetricDefinition
from ldp_api.models import Mechanism
from ldp_store.registry import Registry

T = TypeVar("T")
S = TypeVar("S")

Run = Callable[[tuple[str, int, str], int, Callable[[], Any]], Any]
"""How an expensive computation of a window runs: ``run(key, n, compute)`` (the web app's
read guard caches and bounds it; elsewhere it is ``compute()`` itself)."""


def run_directly(key: tuple[str, int, str], n: int, compute: Callable[[], T]) -> T:
    """``compute()``: what :class:`Reader` runs a discovery with outside the web app."""
    return compute()


@dataclass(frozen=True)
class Reader:
    """What reading needs: Redis, the registry (creation times), and how an expensive
    computation runs."""

    client: redis.Redis
    registry: Registry
    run: Run = run_directly


@dataclass(frozen=True)
class Ask:
    """What a reader asks of a window (the query of ``GET /v1/estimates/<name>``)."""

    confidence: float = DEFAULT_CONFIDENCE
    simultaneous: bool = False
    """Intervals that hold for every value at once (Bonferroni): the same as
    ``multiplicity="simultaneous"``."""
    estimand: str = REPORTERS
    """Whose share (or mean) the intervals are for."""
    multiplicity: str | None = None
    """Categorical and joint metrics: "each" (default), "fdr" or "simultaneous"
    (:mod:`aggregator.stats.multiplicity`)."""
    with_alarms: bool = False
    """Compute the window's poisoning alarms (the API does; an export has no column for
    them, and they cost the trailing windows' reads). String metrics always test theirs."""
    alarm_rate: float = DEFAULT_ALARM_RATE
    """The false-alarm rate per window."""
    candidates: Sequence[str] = field(default=())
    """String metrics: values to estimate besides those discovered."""
    marginals: Sequence[Sequence[int]] = field(default=())
    """Joint metrics: the marginals asked for, each by its attributes' indices (every
    1-way marginal when empty)."""
    rows: Rows | None = None
    """Categorical and joint metrics: the rows (values, cells) shown, and in which form
    (:mod:`aggregator.query.paging`); None: every row, one object each."""
    ranges: Sequence[tuple[float, float]] = field(default=())
    """Distribution metrics: the ranges [a, b] whose share is asked for."""
    quantiles: Sequence[float] | None = None
    """Distribution metrics: the quantiles asked for (None: p50, p90, p95, p99)."""

    @property
    def mode(self) -> str:
        """The multiplicity mode asked for (``simultaneous=True`` is "simultaneous").

        Raises:
            ValueError: an unknown mode, or one that contradicts ``simultaneous``.
        """
        return multiplicity_of(self.simultaneous, self.multiplicity)


Answer = Estimates | MeanEstimate | StringEstimates | JointEstimates | DistributionEstimates


class Estimator(Protocol[S]):
    """One metric kind's read side: a window's additive statistic, and the answer from it.

    ``sequence`` says whether the answer carries a confidence sequence ("valid while you
    watch"); a kind without one says why in ``no_sequence``.
    """

    sequence: ClassVar[bool]
    no_sequence: ClassVar[str]

    def read(self, reader: Reader, definition: MetricDefinition, window: str) -> S:
        """The window's statistic, summed over shards."""
        ...

    def estimate(
        self, reader: Reader, definition: MetricDefinition, window: str, stats: S, ask: Ask
    ) -> Answer:
        """The answer for the window from its statistic."""
        ...


class CountsRead:
    """The read of the kinds whose statistic is the window's counters as stored
    (frequency, joint and distribution metrics)."""

    def read(self, reader: Reader, definition: MetricDefinition, window: str) -> Counts:
        """The window's counters (:func:`~aggregator.query.window.read_counts`)."""
        return read_counts(reader.client, definition, window)


# -- frequency oracles ------------------------------------------------------------------------

POST_PROCESSING_NOTE = (
    "norm_sub: the estimates projected onto the probability simplex (Norm-Sub); "
    "post-processed and biased, for display. frequency: unbiased."
)

ANYTIME_NOTE = (
    "the fixed-n interval is right 95 % of the time if you look once; if you keep "
    "watching and stop when it looks interesting, use 'valid while you watch' (a "
    "confidence sequence): it stays right at every look, at the price of more width "
    "(beside it, a value is flagged when the sequence misses 0: cs_distinguishable_from_zero)"
)

PRAM_ANYTIME_NOTE = (
    "pram has no confidence sequence ('valid while you watch'): its estimate mixes all "
    "reported values through the inverse of its matrix; the fixed-n interval is right "
    "for one look"
)


def answer_head(
    definition: MetricDefinition, mechanism: Any, n: int, window: str
) -> dict[str, Any]:
    """The fields every estimate answer opens with: the metric version, its mechanism
    (name, ε, parameters), the reports counted and the window."""
    return {
        "metric": definition.name,
        "version": definition.version,
        "mechanism": mechanism.name,
        "epsilon": mechanism.epsilon,
        "mechanism_params": Mechanism.model_validate(mechanism.params()),
        "n": n,
        "window": window,
    }


def flags_note(multiplicity: str, confidence: float, k: int) -> str:
    """What a "distinguishable from zero" flag means in one mode, in one line."""
    alpha = f"{1 - confidence:.0%}"
    if multiplicity == FDR:
        return (
            "a flag marks a value whose interval misses 0; the flags come from the "
            f"Benjamini–Hochberg procedure, so on average at most {alpha} of the flagged "
            "values are really absent, and every interval is widened to the level they "
            "read (false coverage rate)"
        )
    if multiplicity == SIMULTANEOUS:
        return (
            "a flag marks a value whose interval misses 0; all intervals hold together, "
            f"so with probability {confidence:.0%} no absent value is flagged"
        )
    many = (
        f"; with {k} values, about {alpha} of the absent ones are flagged by chance "
        "(multiplicity=fdr controls that)"
        if k > 1
        else ""
    )
    return "a flag marks a value whose interval misses 0: the test of that value alone" + many


def intervals_note(est: FrequencyEstimate) -> str:
    """One sentence on what the intervals and the flags promise."""
    level = f"{est.confidence:.0%}"
    which = {
        SIMULTANEOUS: f"all {est.k} intervals hold together with {level} confidence (Bonferroni)",
        FDR: f"each interval is read at {est.level:.3%} (the level of the flags: at most "
        f"{1 - est.confidence:.0%} of the flagged values' intervals miss on average)",
        EACH: f"each interval holds the true share with {level} confidence",
    }[est.multiplicity if est.n else EACH]
    whose = (
        "that in a larger population the reporting devices are a random sample of "
        "(sampling spread included)"
        if est.estimand == POPULATION
        else f"that among the {est.n:,} devices that reported, not in a larger population "
        "they were drawn from (estimand=population gives that)"
    )
    how = "exact (counts too small for a normal tail)" if est.interval == "exact" else "score"
    return (
        f"{which} ({how} intervals, fixed n: valid for one look); the share is {whose}; "
        "a value is flagged 'distinguishable from zero' exactly when its interval misses 0"
    )


def shuffled_epsilon(epsilon: float, n: int, budgeted: int | None) -> ShuffledEpsilon | None:
    """``shuffled_epsilon`` of an answer (:func:`aggregator.stats.shuffling.shuffled_view`)."""
    return ShuffledEpsilon.of(shuffled_view(epsilon, n, budgeted))


def per_device_now(reader: Reader, definition: MetricDefinition) -> float:
    """The time a window's reports-per-device bound is read at: now, and with a budget
    never before the newest report arrived (this clock behind Redis's)."""
    now = time.time()
    if definition.budget is not None:
        now = max(now, newest_arrival(reader.client, definition) or now)
    return now


def _per_device(reader: Reader, definition: MetricDefinition, window: str) -> ReportsPerDevice:
    now = per_device_now(reader, definition)
    created = reader.registry.created(definition.name, definition.version)
    return reports_per_device(definition, created, window, now)

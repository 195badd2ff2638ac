"""Estimating a window of any metric kind, through one estimator protocol.

As the write side sees every kind through one codec protocol
(:mod:`aggregator.stats.batch`), the read side sees it through one :class:`Estimator`:
``read`` a window's additive statistic (:mod:`aggregator.query.window`), then
``estimate`` the answer from it (:mod:`aggregator.query.answers`).
:func:`estimator_for` picks a metric version's; :func:`estimate_window` and
:func:`trend` are what ``GET /v1/estimates/<name>`` (and ``…/trend``), ``ldp export`` and
``ldp estimates`` call, so they all hold the same numbers. Flask-free: the web views
parse the request and render the answer. See docs/architecture/layout.md and
docs/reference/http.md for the answers' fields.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any, ClassVar, Protocol, TypeVar

import numpy as np
import redis

from aggregator.query.alarms import alarm_models, current_alarms, window_alarms
from aggregator.query.answers import (
    DEFAULT_CONFIDENCE,
    EstimateRow,
    Estimates,
    JointCell,
    JointEstimates,
    JointMarginal,
    MeanEstimate,
    MeanTrendPoint,
    ShuffledEpsilon,
    StringEstimates,
    StringRow,
    Trend,
    TrendPoint,
)
from aggregator.query.window import list_windows, newest_arrival, read_counts, read_numeric
from aggregator.stats.accounting import (
    ReportsPerDevice,
    relayed_view,
    reports_per_device,
    shuffled_view,
)
from aggregator.stats.codecs import Counts, codec_for
from aggregator.stats.detect import DEFAULT_ALARM_RATE, detect_sketch
from aggregator.stats.discovery import Discovery, detection_threshold, discover
from aggregator.stats.frequency import FrequencyEstimate, estimate_from_counts
from aggregator.stats.intervals import POPULATION, REPORTERS, json_float
from aggregator.stats.joint import MarginalEstimate, consistent_tables, estimate_marginal
from aggregator.stats.numeric import NumericEstimate, NumericStats, estimate_mean
from aggregator.stats.shuffling import Amplification
from aggregator.stats.strings import SketchEstimator, padded_array
from client_sdk.mechanisms import Memoized, PostRandomization
from client_sdk.mechanisms.strings import display, normalise
from client_sdk.wire import MetricDefinition
from ldp_api.models import Mechanism
from ldp_store import schema
from ldp_store.registry import Registry

__all__ = [
    "Ask",
    "Estimator",
    "FrequencyEstimator",
    "JointEstimator",
    "MemoizedEstimator",
    "NumericEstimator",
    "PramEstimator",
    "Reader",
    "StringEstimator",
    "estimate_window",
    "estimator_for",
    "relayed_epsilon",
    "shuffled_epsilon",
    "trend",
]

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
    """Categorical metrics: intervals that hold for every value at once (Bonferroni)."""
    estimand: str = REPORTERS
    """Categorical metrics: whose share the intervals are for."""
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


Answer = Estimates | MeanEstimate | StringEstimates | JointEstimates


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


# -- frequency oracles ------------------------------------------------------------------------

POST_PROCESSING_NOTE = (
    "norm_sub: the estimates projected onto the probability simplex (Norm-Sub); "
    "post-processed and biased, for display. frequency: unbiased."
)

ANYTIME_NOTE = (
    "the fixed-n interval is right 95 % of the time if you look once; if you keep "
    "watching and stop when it looks interesting, use 'valid while you watch' (a "
    "confidence sequence): it stays right at every look, at the price of more width "
    "(the 'distinguishable from zero' flags are still for one look)"
)

PRAM_ANYTIME_NOTE = (
    "pram has no confidence sequence ('valid while you watch'): its estimate mixes all "
    "reported values through the inverse of its matrix; the fixed-n interval is right "
    "for one look"
)


def intervals_note(est: FrequencyEstimate) -> str:
    """One sentence on what the intervals and the flags promise."""
    level = f"{est.confidence:.0%}"
    which = (
        f"all {est.k} intervals hold together with {level} confidence (Bonferroni)"
        if est.simultaneous
        else f"each interval holds the true share with {level} confidence"
    )
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
        f"'distinguishable from zero' flags are wrong for at most {1 - est.confidence:.0%} "
        "of the flagged values on average (Benjamini–Hochberg false discovery rate)"
    )


def _shuffled(found: Amplification | None) -> ShuffledEpsilon | None:
    if found is None:
        return None
    return ShuffledEpsilon(
        epsilon=found.epsilon,
        delta=found.delta,
        devices=found.devices,
        reports_per_device=found.reports_per_device,
        condition=found.condition,
    )


def shuffled_epsilon(epsilon: float, n: int, budgeted: int | None) -> ShuffledEpsilon | None:
    """``shuffled_epsilon`` of an answer (:func:`aggregator.stats.accounting.shuffled_view`)."""
    return _shuffled(shuffled_view(epsilon, n, budgeted))


def relayed_epsilon(epsilon: float, batch: int, budgeted: int | None) -> ShuffledEpsilon | None:
    """The metric page's ε towards the collector's operator behind an Oblivious HTTP relay
    (:func:`aggregator.stats.accounting.relayed_view`)."""
    return _shuffled(relayed_view(epsilon, batch, budgeted))


def _per_device(reader: Reader, definition: MetricDefinition, window: str) -> ReportsPerDevice:
    now = time.time()
    if definition.budget is not None:
        # Never a bound that ends before reports arrived (this clock behind Redis's).
        now = max(now, newest_arrival(reader.client, definition) or now)
    created = reader.registry.created(definition.name, definition.version)
    return reports_per_device(definition, created, window, now)


class FrequencyEstimator:
    """The frequency oracles whose reports carry fresh noise: the GRR family (rr, grr,
    subset selection), the unary encodings (sue, oue), local hashing (olh, blh) and
    Hadamard response. One implementation serves them all: each is debiased through the
    p*, q* of its own mechanism object (:func:`aggregator.stats.frequency.estimate_from_counts`),
    and a local-hashing window's seed histogram is read by its alarms."""

    sequence: ClassVar[bool] = True
    no_sequence: ClassVar[str] = ""

    def read(self, reader: Reader, definition: MetricDefinition, window: str) -> Counts:
        """The window's support counts (:func:`~aggregator.query.window.read_counts`)."""
        return read_counts(reader.client, definition, window)

    def confidence_sequence(self, est: FrequencyEstimate) -> tuple[np.ndarray, np.ndarray]:
        """The answer's cs_low, cs_high (NaN without reports or without a sequence)."""
        if not self.sequence or not est.n:
            nan = np.full(est.k, np.nan)
            return nan, nan
        return est.confidence_sequence()

    def estimate(
        self, reader: Reader, definition: MetricDefinition, window: str, stats: Counts, ask: Ask
    ) -> Estimates:
        """The window's frequencies with intervals, confidence sequence, the reports per
        device they assume, the shuffled view's ε and (``ask.with_alarms``) its alarms (of
        the newest hour and day for ``all``)."""
        per_device = _per_device(reader, definition, window)
        est = estimate_from_counts(
            definition.oracle,
            stats,
            confidence=ask.confidence,
            simultaneous=ask.simultaneous,
            labels=definition.domain,
            reports_per_device=per_device.bound,
            estimand=ask.estimand,
        )
        found = []
        if ask.with_alarms:
            found = (
                current_alarms(reader.client, definition, ask.alarm_rate)
                if window == schema.ALL
                else window_alarms(reader.client, definition, window, ask.alarm_rate)
            )
        m = definition.mechanism
        zero = est.indistinguishable_from_zero()
        cs_low, cs_high = self.confidence_sequence(est)
        p_values = est.p_values if est.p_values is not None else [math.nan] * est.k
        return Estimates(
            metric=definition.name,
            version=definition.version,
            mechanism=m.name,
            epsilon=m.epsilon,
            mechanism_params=Mechanism.model_validate(m.params()),
            n=est.n,
            confidence=est.confidence,
            simultaneous=est.simultaneous,
            window=window,
            interval=est.interval,
            estimand=est.estimand,
            intervals_note=intervals_note(est),
            anytime_note=self.no_sequence or ANYTIME_NOTE.replace("95 %", f"{est.confidence:.0%}"),
            reports_per_device=per_device.bound,
            reports_per_device_note=per_device.reason,
            post_processing=POST_PROCESSING_NOTE,
            estimates=[
                EstimateRow(
                    value=label,
                    frequency=json_float(est.frequencies[i]),
                    std_error=json_float(est.std_errors[i]),
                    ci_low=json_float(est.ci_low[i]),
                    ci_high=json_float(est.ci_high[i]),
                    norm_sub=json_float(est.norm_sub[i]),
                    support_count=int(est.support_counts[i]),
                    cs_low=json_float(cs_low[i]),
                    cs_high=json_float(cs_high[i]),
                    p_value=json_float(p_values[i]),
                    distinguishable_from_zero=None if est.n == 0 else not bool(zero[i]),
                )
                for i, label in enumerate(definition.domain)
            ],
            alarms=alarm_models(definition, found),
            alarm_rate=ask.alarm_rate,
            shuffled_epsilon=shuffled_epsilon(m.epsilon, est.n, per_device.budgeted),
        )


class MemoizedEstimator(FrequencyEstimator):
    """Memoized (longitudinal) frequency oracles: a device's reports share its permanent
    response, so the intervals and the sequence assume the budget's r reports per device
    (:func:`aggregator.stats.accounting.reports_per_device`), and their counts are not
    tested for poisoning (:func:`aggregator.query.alarms.tested`)."""


class PramEstimator(FrequencyEstimator):
    """Post-randomization (pram): debiased through the inverse of its matrix; no single
    p*, q*, hence no confidence sequence."""

    sequence: ClassVar[bool] = False
    no_sequence: ClassVar[str] = PRAM_ANYTIME_NOTE


# -- numeric means ----------------------------------------------------------------------------

NUMERIC_POST_PROCESSING_NOTE = (
    "mean_clipped: the mean clipped into the metric's range; post-processed and biased, "
    "for display. mean: unbiased (it can leave the range when n is small)."
)

NUMERIC_ANYTIME_NOTE = ANYTIME_NOTE.removesuffix(
    " (the 'distinguishable from zero' flags are still for one look)"
)
"""A mean has no 'distinguishable from zero' flags to speak of."""

NUMERIC_FIELDS = ("mean", "std_error", "ci_low", "ci_high", "cs_low", "cs_high")
"""A numeric estimate's fields per CSV row (cs_*: the confidence sequence)."""


class NumericEstimator:
    """Numeric means (duchi, pm, hybrid): Σy and Σy² in, the mean with its interval and
    confidence sequence out."""

    sequence: ClassVar[bool] = True
    no_sequence: ClassVar[str] = ""

    def read(self, reader: Reader, definition: MetricDefinition, window: str) -> NumericStats:
        """The window's sums (:func:`~aggregator.query.window.read_numeric`)."""
        return read_numeric(reader.client, definition, window)

    def estimate(
        self,
        reader: Reader,
        definition: MetricDefinition,
        window: str,
        stats: NumericStats,
        ask: Ask,
    ) -> MeanEstimate:
        """The window's mean, in the metric's units."""
        est: NumericEstimate = estimate_mean(definition, stats, ask.confidence)
        m = definition.mechanism
        body = est.to_dict()
        cs_low, cs_high = est.confidence_sequence() if est.n else (math.nan, math.nan)
        return MeanEstimate(
            metric=definition.name,
            version=definition.version,
            kind="numeric",
            mechanism=m.name,
            epsilon=m.epsilon,
            mechanism_params=Mechanism.model_validate(m.params()),
            n=est.n,
            confidence=est.confidence,
            window=window,
            range=body["range"],
            **{name: body[name] for name in NUMERIC_FIELDS if name in body},
            cs_low=json_float(cs_low),
            cs_high=json_float(cs_high),
            interval=est.interval,
            anytime_note=NUMERIC_ANYTIME_NOTE.replace("95 %", f"{est.confidence:.0%}"),
            std_error_worst_case=body["std_error_worst_case"],
            mean_clipped=body["mean_clipped"],
            post_processing=NUMERIC_POST_PROCESSING_NOTE,
        )


# -- strings ----------------------------------------------------------------------------------

CLOCK_SLACK_SECONDS = 300.0
"""Windows are named by Redis's clock (the stream entry ids), the version's creation time
and "now" by this machine's: a window is outside the version's life only by more than
this, so a few minutes of skew never hide real reports."""

STRING_INTERVAL = (
    "candidates: normal, f̂ ± z·√Var, Var = the inner oracle's variance per row plus the "
    "sketch's collision variance (estimated from the sketch); discovered values "
    "(selection_adjusted): the conditional estimate and interval given that the value was "
    "discovered (truncated normal at the Benjamini–Hochberg cutoff, Lee et al. 2016)"
)


def in_life(created: float | None, window: str, now: float) -> bool:
    """Whether ``window`` overlaps the version's life, from its creation to now (give or
    take :data:`CLOCK_SLACK_SECONDS`)."""
    span = schema.window_span(window)
    if span is None:  # all
        return True
    if span[0] > now + CLOCK_SLACK_SECONDS:
        return False
    return created is None or span[1] > created - CLOCK_SLACK_SECONDS


def _string_row(
    value: str,
    f: float,
    var: float,
    p: float,
    z: float,
    discovered: bool,
    adjusted: tuple[float, float, float] | None = None,
) -> StringRow:
    """One row; ``adjusted``: the selection-adjusted (estimate, low, high) of a value
    listed because it was discovered, reported instead of f̂ ± z·σ."""
    se = float(np.sqrt(var)) if np.isfinite(var) else float("nan")
    f_out, low, high = adjusted if adjusted is not None else (f, f - z * se, f + z * se)
    return StringRow(
        value=value,
        frequency=json_float(f_out),
        std_error=json_float(se),
        ci_low=json_float(low),
        ci_high=json_float(high),
        p_value=json_float(p),
        discovered=discovered,
        selection_adjusted=adjusted is not None,
    )


class StringEstimator:
    """String metrics (the sketch): the values the discovery
    (:mod:`aggregator.stats.discovery`) calls present, each with its selection-adjusted
    frequency and interval (:mod:`aggregator.stats.selection`), the values asked for as
    candidates with the plain f̂ ± z·σ, the detection threshold, and the window's alarms
    (:func:`aggregator.stats.detect.detect_sketch`). No confidence sequence.

    Discovery walks every level of the sketch (about a second of CPU at any n): a window
    without reports (none yet, or outside the version's life) is answered empty without
    one, and the others run through ``reader.run`` (the web app's read guard: cached per
    window until its counts change, bounded, off the event loop).
    """

    sequence: ClassVar[bool] = False
    no_sequence: ClassVar[str] = "a string metric's discovered values have no sequence"

    def read(self, reader: Reader, definition: MetricDefinition, window: str) -> Counts:
        """The sketch's counts; zeros for a window outside the version's life (before it
        existed, or still to come: no reports, nothing to read)."""
        created = reader.registry.created(definition.name, definition.version)
        if in_life(created, window, time.time()):
            return read_counts(reader.client, definition, window)
        return Counts.zeros(definition.k)

    def discovery(
        self, reader: Reader, definition: MetricDefinition, window: str, counts: Counts
    ) -> tuple[Discovery, SketchEstimator]:
        """The window's discovery, with the estimator it was made with (candidates are
        estimated as it was made)."""
        est = SketchEstimator(codec_for(definition.sketch), counts)
        if counts.n == 0:
            return Discovery.empty(), est
        key = (definition.name, definition.version, window)
        found: tuple[Discovery, SketchEstimator] = reader.run(
            key, counts.n, lambda: (discover(est), est)
        )
        return found

    def estimate(
        self, reader: Reader, definition: MetricDefinition, window: str, stats: Counts, ask: Ask
    ) -> StringEstimates:
        """The discovered values and the candidates, alarms tested at ``ask.alarm_rate``."""
        sketch = definition.sketch
        found, est = self.discovery(reader, definition, window, stats)
        alarms = detect_sketch(est, window, found.values, found.known, ask.alarm_rate)
        z = NormalDist().inv_cdf(0.5 + ask.confidence / 2)
        adj = found.adjusted(ask.confidence)
        rows = [
            _string_row(
                display(v),
                float(f),
                float(var),
                float(p),
                z,
                True,
                (float(a), float(lo), float(hi)),
            )
            for v, f, var, p, a, lo, hi in zip(
                found.values,
                found.frequency,
                found.variance,
                found.p_values,
                adj.frequency,
                adj.low,
                adj.high,
                strict=True,
            )
        ]
        asked: list[StringRow] = []
        if ask.candidates:
            padded = [normalise(c, sketch.max_length) for c in ask.candidates]
            got = found.estimate(est, padded_array(padded, sketch.max_length))
            known = set(found.values)
            for c, v, f, var, p in zip(
                ask.candidates, padded, got.frequency, got.variance, got.p_values(), strict=True
            ):
                asked.append(_string_row(c, float(f), float(var), float(p), z, v in known))
        return StringEstimates(
            metric=definition.name,
            version=definition.version,
            kind="string",
            mechanism=sketch.name,
            epsilon=sketch.epsilon,
            mechanism_params=Mechanism.model_validate(sketch.params()),
            n=est.n,
            confidence=ask.confidence,
            window=window,
            max_length=sketch.max_length,
            alpha=found.alpha,
            tested=found.tested,
            detection_threshold=json_float(
                detection_threshold(found.null_std, found.tested, found.alpha)
            ),
            interval=STRING_INTERVAL,
            estimates=rows,
            candidates=asked,
            alarms=alarm_models(definition, alarms, found.labels),
            alarm_rate=ask.alarm_rate,
        )


# -- joint metrics ----------------------------------------------------------------------------

JOINT_POST_PROCESSING = (
    "frequency is unbiased; consistent is post-processed (shared 1-way margins made to "
    "agree across the groups at their inverse-variance mean, each table projected onto the "
    "simplex, repeated): biased, for display"
)


def _joint_marginal(
    definition: MetricDefinition, est: MarginalEstimate, seq: MarginalEstimate
) -> JointMarginal:
    labels = [definition.attributes[a][1] for a in est.attributes]
    data = est.to_dict(labels)
    sequence = seq.to_dict(labels)["cells"]
    return JointMarginal(
        attributes=[definition.attributes[a][0] for a in est.attributes],
        n=est.n,
        interval=est.interval,
        cells=[
            JointCell(
                cell=row["cell"],
                frequency=row["frequency"],
                std_error=row["std_error"],
                ci_low=row["ci_low"],
                ci_high=row["ci_high"],
                cs_low=cs["ci_low"],
                cs_high=cs["ci_high"],
                distinguishable_from_zero=row["distinguishable"],
                consistent=row["consistent"],
            )
            for row, cs in zip(data["cells"], sequence, strict=True)
        ],
    )


class JointEstimator:
    """Joint metrics (a tuple of attributes at one ε): the 1- and 2-way marginals asked
    for (``ask.marginals``; every 1-way one by default), each cell's unbiased frequency
    with its interval and confidence sequence, and the consistent (post-processed)
    estimate beside it (:mod:`aggregator.stats.joint`)."""

    sequence: ClassVar[bool] = True
    no_sequence: ClassVar[str] = ""

    def read(self, reader: Reader, definition: MetricDefinition, window: str) -> Counts:
        """The window's counts over the groups' cells."""
        return read_counts(reader.client, definition, window)

    def estimate(
        self, reader: Reader, definition: MetricDefinition, window: str, stats: Counts, ask: Ask
    ) -> JointEstimates:
        """The marginals of the window."""
        m = definition.joint
        tables = consistent_tables(m, stats.support) if stats.n else None
        wanted = [list(a) for a in ask.marginals] or [
            [a] for a in range(len(definition.attributes))
        ]
        out = [
            _joint_marginal(
                definition,
                *(
                    estimate_marginal(
                        m,
                        stats.support,
                        attrs,
                        ask.confidence,
                        simultaneous=ask.simultaneous,
                        anytime=anytime,
                        tables=tables,
                    )
                    for anytime in (False, True)
                ),
            )
            for attrs in wanted
        ]
        return JointEstimates(
            metric=definition.name,
            version=definition.version,
            kind="joint",
            mechanism=m.method,
            mechanism_reason=definition.mechanism_reason,
            epsilon=m.epsilon,
            n=stats.n,
            confidence=ask.confidence,
            window=window,
            marginals=out,
            post_processing=JOINT_POST_PROCESSING,
        )


# -- one entry --------------------------------------------------------------------------------

_FREQUENCY = FrequencyEstimator()
_MEMOIZED = MemoizedEstimator()
_PRAM = PramEstimator()
_NUMERIC = NumericEstimator()
_STRING = StringEstimator()
_JOINT = JointEstimator()


def estimator_for(definition: MetricDefinition) -> Estimator[Any]:
    """The estimator of a metric version's kind and mechanism."""
    if definition.kind == "string":
        return _STRING
    if definition.kind == "joint":
        return _JOINT
    if definition.kind == "numeric":
        return _NUMERIC
    m = definition.mechanism
    if isinstance(m, PostRandomization):
        return _PRAM
    if isinstance(m, Memoized):
        return _MEMOIZED
    return _FREQUENCY


def estimate_window(
    reader: Reader,
    definition: MetricDefinition,
    window: str,
    ask: Ask | None = None,
    stats: Any = None,
) -> Answer:
    """What ``GET /v1/estimates/<name>?window=…`` answers, as a model: the one function
    the API, ``ldp export`` and ``ldp estimates`` call, so an export holds the API's
    numbers.

    Args:
        reader: Redis, the registry, and how a discovery runs.
        definition: the metric version.
        window: ``all``, ``hour:…`` or ``day:…``.
        ask: the level, simultaneity, estimand, alarms and candidates asked for.
        stats: the window's statistic if the caller read it (its estimator's ``read``);
            read here otherwise.
    """
    estimator = estimator_for(definition)
    if stats is None:
        stats = estimator.read(reader, definition, window)
    return estimator.estimate(reader, definition, window, stats, ask or Ask())


def trend(
    reader: Reader,
    definition: MetricDefinition,
    granularity: str,
    ask: Ask,
    max_windows: int,
) -> Trend:
    """One estimate per hour or day window (the newest ``max_windows``), oldest first; no
    alarms.

    Raises:
        ValueError: a string metric (its values are discovered per window) or a joint one
            (its marginals are asked per window): no trend.
    """
    if definition.kind in ("string", "joint"):
        raise ValueError(f"a {definition.kind} metric has no trend")
    windows = [
        w for w in list_windows(reader.client, definition) if w.startswith(granularity + ":")
    ]
    points: list[TrendPoint | MeanTrendPoint] = []
    for window in sorted(windows[:max_windows]):
        body = estimate_window(reader, definition, window, ask)
        if isinstance(body, MeanEstimate):
            points.append(
                MeanTrendPoint(
                    window=window,
                    n=body.n,
                    mean=body.mean,
                    std_error=body.std_error,
                    ci_low=body.ci_low,
                    ci_high=body.ci_high,
                    cs_low=body.cs_low,
                    cs_high=body.cs_high,
                )
            )
        elif isinstance(body, Estimates):
            points.append(
                TrendPoint(
                    window=window,
                    n=body.n,
                    reports_per_device=body.reports_per_device,
                    estimates=body.estimates,
                )
            )
    return Trend(
        metric=definition.name,
        version=definition.version,
        granularity=granularity,
        confidence=ask.confidence,
        estimand=ask.estimand,
        windows=points,
    )

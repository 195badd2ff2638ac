"""The read side's answers: an estimate of a window of any kind, its alarms, a trend.

Pydantic models the estimators build and the web views serialise (through
:func:`ldp_api.models.answer`) and document (``/openapi.json``); ``ldp export`` reads
them too. See docs/reference/http.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field

from aggregator.stats.detect import ALARM_KINDS
from aggregator.stats.intervals import ESTIMANDS, REPORTERS
from aggregator.stats.multiplicity import EACH, MULTIPLICITIES
from client_sdk import mechanisms
from ldp_api.models import Absent, Mechanism, Model, OneOf

if TYPE_CHECKING:
    from aggregator.stats.shuffling import Amplification

__all__ = [
    "CdfPoint",
    "DistributionBin",
    "DistributionEstimates",
    "QuantileAnswer",
    "RangeAnswer",
    "SegmentEstimates",
    "SegmentGroup",
    "DEFAULT_CONFIDENCE",
    "GRANULARITIES",
    "INTERVALS",
    "MAX_TREND_WINDOWS",
    "EstimateColumns",
    "EstimateRow",
    "ExportRow",
    "ExportRows",
    "ExportVersion",
    "ExportWindows",
    "JointCell",
    "JointColumns",
    "JointEstimates",
    "JointMarginal",
    "Estimates",
    "MeanEstimate",
    "MeanTrendPoint",
    "PoisoningAlarm",
    "PoisoningBaseline",
    "RelayedWaiting",
    "Rest",
    "ShuffledEpsilon",
    "StringEstimates",
    "StringRow",
    "Trend",
    "TrendColumns",
    "TrendCompact",
    "TREND_DEFAULT_FIELDS",
    "TREND_FIELDS",
    "TrendPoint",
    "TREND_VALUES",
]

DEFAULT_CONFIDENCE = 0.95
"""The intervals' level unless a request asks for another: the convention of reports."""

GRANULARITIES = ("hour", "day")
"""The windows a trend can follow."""

MAX_TREND_WINDOWS = 24 * 366
"""A trend returns at most a year of hourly windows (the newest): every window the
default retention keeps (14 days of hours, 400 days of days) and more, while a trend
stays a few round trips and well under a second (docs/benchmarks/read-side.md)."""

TREND_FIELDS = ("frequency", "std_error", "ci_low", "ci_high", "cs_low", "cs_high", "norm_sub")
"""The statistics a compact trend can give (``?fields=``)."""
TREND_DEFAULT_FIELDS = ("frequency", "ci_low", "ci_high")
"""What a chart of a trend draws: each value's estimate and its interval."""

TREND_VALUES = 8
"""Values a categorical trend shows by default: every value of a domain this small, else
the 8 largest estimates over the trend's windows (a chart draws 6 lines)."""

Number = float | None
"""A statistic; null when n is 0 (no estimate)."""

Version = Annotated[int, Field(ge=1)]

INTERVALS = ("score", "exact")
"""How a frequency interval is built (see aggregator.stats.intervals)."""

Estimand = Annotated[str, OneOf(ESTIMANDS)]
"""Whose share a frequency's std_error and interval are for: reporters (the devices that
reported; default) or population (a larger population they are a random sample of)."""

Multiplicity = Annotated[str, OneOf(MULTIPLICITIES)]
"""How the intervals and flags account for the many values: each (every interval and
flag for its value alone; default), fdr (flags by Benjamini–Hochberg, every interval at
their level) or simultaneous (all intervals hold together, Bonferroni)."""

Level = Annotated[float, Field(gt=0, lt=1)] | None
"""The confidence each interval is read at; null when n is 0."""


class EstimateRow(Model):
    """One value of the domain."""

    value: str
    frequency: Number
    """Unbiased (it can leave [0, 1]); null when n is 0."""
    std_error: Number
    """Of the share named by the answer's ``estimand``."""
    ci_low: Number
    """ci_low/ci_high: the interval for the share named by the answer's ``estimand``: by
    default the share among the n devices that reported."""
    ci_high: Number
    norm_sub: Number
    """Projected onto the probability simplex (Norm-Sub): post-processed and biased, for
    display."""
    support_count: Annotated[int, Field(ge=0)]
    cs_low: Number
    """The confidence sequence ("valid while you watch"): holds at every n at once,
    however often the page is looked at; wider than ci_low/ci_high. For the share in the
    population the devices are drawn from at random (whatever the estimand). Null when n
    is 0."""
    cs_high: Number
    p_value: Number
    """Two-sided p-value of "nobody has this value" (f = 0), the dual of ci_low/ci_high:
    ≤ 1 − the answer's ``level`` exactly when the value is flagged; null when n is 0."""
    distinguishable_from_zero: bool | None
    """Exactly "0 lies outside [ci_low, ci_high]" (above it, or below it: no true share
    is, so chance or fake reports); what that promises is the answer's ``multiplicity``:
    each, the value's own test; fdr, at most 1 − confidence of the flagged values are
    really absent on average (Benjamini–Hochberg); simultaneous, no absent value is
    flagged with probability ≥ confidence. Null when n is 0."""
    cs_p_value: Number = None
    """Anytime-valid p-value of f = 0, the dual of cs_low/cs_high (≤ 1 − ``cs_level``
    exactly when ``cs_distinguishable_from_zero``); null when n is 0 or without a
    sequence."""
    cs_distinguishable_from_zero: bool | None = None
    """Exactly "0 lies outside [cs_low, cs_high]": the flag to show beside the confidence
    sequence (fdr: e-BH, whose false discovery rate holds at any look); null when n is 0
    or without a sequence."""


SHOWN = ("all", "top", "values", "page")
"""How an answer's rows were chosen (:mod:`aggregator.query.paging`)."""


class EstimateColumns(Model):
    """The rows of ``estimates`` as one array per field, in the rows' order
    (?format=columns): the same numbers in a fraction of the bytes."""

    value: list[str]
    frequency: list[Number]
    std_error: list[Number]
    ci_low: list[Number]
    ci_high: list[Number]
    norm_sub: list[Number]
    support_count: list[int]
    cs_low: list[Number]
    cs_high: list[Number]
    p_value: list[Number]
    distinguishable_from_zero: list[bool | None]
    cs_p_value: list[Number]
    cs_distinguishable_from_zero: list[bool | None]


class Rest(Model):
    """The rows an answer does not show, summed into one (?top=, ?values=, a page, or the
    default of a large table)."""

    values: Annotated[int, Field(ge=1)]
    """How many values (or cells) are not shown."""
    frequency: Number
    """Their unbiased frequencies summed (1 − the shown ones' sum, up to rounding)."""
    norm_sub: Number = None
    """Their Norm-Sub shares summed (categorical metrics; null for joint cells)."""


class PoisoningBaseline(Model):
    """Whether this window's poisoning alarms have a baseline, and what fakes could do to
    it without one (a fresh metric's first windows: only the baseline-free tests run)."""

    exists: bool
    """The shift test compares the window with its previous windows of the same kind
    (at least 1,000 reports pooled); false until a metric has them (for the all-time
    window: until its newest hour or day has them)."""
    fake_fraction: float
    """β, the share of the window's reports that fake clients send (1 %)."""
    fakes: Annotated[int, Field(ge=0)]
    """Fake reports that make β of this window's n (0 without reports)."""
    max_shift: float
    """How far β of crafted reports can move one value's estimated frequency (a
    fraction): β(1 − q*)/(p* − q*), Cao, Jia & Gong's maximal gain of one target."""
    std_errors: Number
    """max_shift over one estimate's standard error at this n (f ≈ 0); null at n = 0."""
    note: str
    """The same in one plain sentence (what the dashboard shows while ``exists`` is
    false)."""


class PoisoningAlarm(Model):
    """A window whose counts no honest population produces under the mechanism."""

    kind: Annotated[str, OneOf(ALARM_KINDS)]
    """shift: values rose more than sampling noise allows against the trailing windows;
    floor: GRR counts below what any honest population gives (no baseline needed);
    seeds: hash seeds reused far beyond chance (local hashing); support: the support
    counts' total is outside its honest band (unary encodings, local hashing); groups,
    rows: a string metric's reports, or a discovered value's, in few of the sketch's
    rows."""
    window: str
    """The window tested (hour:…, day:… or all)."""
    statistic: float
    """z (shift, support), the shortfall S (floor) or chi-square (seeds, groups, rows)."""
    threshold: float
    """The statistic's alarm threshold."""
    p_value: Annotated[float, Field(ge=0, le=1)]
    alpha: Annotated[float, Field(gt=0, lt=1)]
    """The level the p-value was compared with (the window's false-alarm rate, split
    over the tests and, for shift, the values)."""
    evidence: str
    """What was seen, in one sentence."""
    values: list[str]
    """The values that rose (shift) or whose reports sit in few rows (rows), most
    significant first; empty for the others."""


class ShuffledEpsilon(Model):
    """The central guarantee for whoever sees only the estimates (amplification by
    shuffling: Feldman, McMillan & Talwar, FOCS 2021, numerical bound)."""

    epsilon: Annotated[float, Field(ge=0)]
    """ε_c: the release is (ε_c, δ)-DP towards viewers of the estimates."""
    delta: Annotated[float, Field(gt=0, lt=1)]
    """δ = 1/N², N the devices the bound counts."""
    devices: Annotated[int, Field(ge=0)]
    """N: the fewest devices the reports can come from (reports rounded down to two
    significant digits, divided by the reports per device); the bound holds for more."""
    reports_per_device: Annotated[int, Field(ge=1)]
    """r: composed on the device (r·ε) before amplifying."""
    condition: str
    """When it holds, and for whom it does not (the server and Redis see ε-LDP reports)."""

    @classmethod
    def of(cls, found: Amplification | None) -> ShuffledEpsilon | None:
        """The model of a bound (:mod:`aggregator.stats.accounting`); None for None."""
        if found is None:
            return None
        return cls(
            epsilon=found.epsilon,
            delta=found.delta,
            devices=found.devices,
            reports_per_device=found.reports_per_device,
            condition=found.condition,
        )


class RelayedWaiting(Model):
    """Relayed reports of a metric version waiting for a shuffled batch (not yet in any
    window): the pool goes to the stream when it holds ``LDP_SHUFFLE_MIN_BATCH`` reports,
    or ``LDP_SHUFFLE_MAX_DELAY`` after its oldest arrived, whichever comes first."""

    reports: Annotated[int, Field(ge=1)]
    """Reports acknowledged (202) and waiting."""
    released_by: str
    """When the last of them reaches the stream at the latest (UTC, ISO 8601); counted a
    moment later."""
    note: str
    """The same in one sentence."""


class Estimates(Model):
    """A categorical metric's frequencies in one window."""

    metric: str
    version: Version
    mechanism: Annotated[str, OneOf(mechanisms.MECHANISMS)]
    epsilon: float
    mechanism_params: Mechanism
    n: Annotated[int, Field(ge=0)]
    """Reports counted."""
    confidence: float
    simultaneous: bool
    """Whether ``multiplicity`` is simultaneous (as ?simultaneous=true asks)."""
    multiplicity: Multiplicity = EACH
    """How intervals and flags account for the k values (?multiplicity=)."""
    level: Level = None
    """The confidence each ci_low/ci_high is read at: confidence (each), 1 − (1 −
    confidence)/k (simultaneous), 1 − R·(1 − confidence)/k with R values flagged (fdr:
    the false-coverage-rate level, where the Benjamini–Hochberg flags are exactly the
    intervals that miss 0)."""
    cs_level: Level = None
    """The confidence each cs_low/cs_high is read at (the same rule, fdr by e-BH); null
    without reports or without a sequence."""
    window: str
    interval: Annotated[str, OneOf(INTERVALS)]
    """How ci_low/ci_high were built: score (the exact variance at each candidate f) or
    exact (Clopper–Pearson, where counts are a handful)."""
    estimand: Estimand = REPORTERS
    """Whose share std_error and ci_low/ci_high are for: reporters, the n devices that
    reported (a finite population: only the mechanism's noise is random), or population,
    a larger population the devices are a random sample of (?estimand=population: the
    sampling variance f(1 − f)/n added). Read as a population's share, the reporters'
    intervals under-cover at high ε (GRR, k = 2, ε = 4: 40–82 %)."""
    intervals_note: str
    """The intervals and flags in one sentence a non-statistician reads correctly."""
    flags_note: str = ""
    """What a flag means in this answer's mode, in one line."""
    anytime_note: str
    """What cs_low/cs_high promise, against ci_low/ci_high, in one sentence."""
    reports_per_device: Annotated[int, Field(ge=1)]
    """The most reports of one device these counts may hold, as the intervals assume
    (memoized metrics: their reports share a permanent response); 1 otherwise."""
    reports_per_device_note: str
    """Why that many."""
    post_processing: str
    estimates: list[EstimateRow]
    """The values shown (``shown``): every domain value in the domain's order while the
    answer is small (k ≤ 256; a breakdown: groups × k ≤ 256), else the largest estimates
    first; empty with ?format=columns (see ``columns``)."""
    values_total: Annotated[int, Field(ge=2)] | Absent = None
    """k: the values of the domain, shown or not."""
    shown: Annotated[str, OneOf(SHOWN)] | Absent = None
    """How the rows were chosen: all (every value, domain order), top (the largest
    estimates, largest first: ?top=, or the default beyond 256 rows), values (?values=,
    in the order asked) or page (?offset=&limit=, domain order)."""
    rest: Rest | None = None
    """The values not shown, summed; null when every value is shown."""
    columns: EstimateColumns | None = None
    """With ?format=columns: the rows as one array per field."""
    alarms: list[PoisoningAlarm]
    """Poisoning alarms of this window (of the newest hour and day windows for window
    all); empty when none, or for memoized metrics, which are not tested."""
    alarm_rate: float
    """The configured false-alarm rate per window (LDP_ALARM_RATE)."""
    poisoning_baseline: PoisoningBaseline | None = None
    """Whether the alarms have a baseline yet, and how far 1 % of fakes could move a
    value at this ε and n; null for metrics that are not tested (memoized) or when the
    alarms were not asked for."""
    shuffled_epsilon: ShuffledEpsilon | None = None
    """ε_c of these n reports seen only as estimates; None without reports."""
    relayed_waiting: RelayedWaiting | None = None
    """Reports sent through an Oblivious HTTP relay, acknowledged and still waiting in the
    version's shuffle pool for a batch: not in n yet; null when none wait."""


class StringRow(Model):
    """One value of a string metric: discovered, or asked for as a candidate."""

    value: str
    frequency: Number
    """A candidate's: unbiased over the sketch's hash salt and the noise. A discovered
    value's (``selection_adjusted``): median-unbiased given that it was discovered. Null
    when no level has reports."""
    std_error: Number
    """Of the unadjusted estimate f̂."""
    ci_low: Number
    ci_high: Number
    """A candidate's: f̂ ± z·std_error. A discovered value's: the selection-adjusted
    interval, within [0, ∞), which covers the truth at ``confidence`` among the values
    discovered (f̂ ± z·std_error does not: they were found because f̂ came out high)."""
    p_value: Number
    """One-sided, of f = 0."""
    discovered: bool
    """Called present by the discovery (Benjamini–Hochberg at ``alpha`` over every value
    tested)."""
    selection_adjusted: bool
    """True in ``estimates`` (discovered values: frequency and interval conditional on
    the selection, :mod:`aggregator.stats.selection`), false in ``candidates`` (values
    chosen before the data: the plain f̂ ± z·σ, even when also discovered)."""


class StringEstimates(Model):
    """A string metric's discovered values (and asked-for candidates) in one window."""

    metric: str
    version: Version
    kind: Literal["string"]
    mechanism: str
    epsilon: float
    mechanism_params: Mechanism
    n: Annotated[int, Field(ge=0)]
    confidence: float
    estimand: Literal["reporters"] = "reporters"
    """Whose share: the devices that reported (the only one offered for strings:
    ?estimand=population is refused)."""
    window: str
    max_length: int
    alpha: float
    """False discovery rate of the values called present."""
    tested: Annotated[int, Field(ge=0)]
    """Complete values the discovery tested."""
    detection_threshold: Number
    """The frequency found with probability about ½ at this ε and n (a value of full
    length; shorter values are estimated from more levels and found a little below it)."""
    interval: str
    """How ci_low/ci_high are built."""
    estimates: list[StringRow]
    """The discovered values, by decreasing unadjusted estimate (selection-adjusted)."""
    candidates: list[StringRow]
    """The values of ``?candidates=``, in the order asked."""
    alarms: list[PoisoningAlarm]
    """Poisoning alarms of this window (``groups``, ``rows``: reports crafted into a few
    of the sketch's rows)."""
    alarm_rate: float
    """The configured false-alarm rate per window (LDP_ALARM_RATE)."""
    relayed_waiting: RelayedWaiting | None = None
    """Reports sent through an Oblivious HTTP relay, acknowledged and still waiting in the
    version's shuffle pool for a batch: not in n yet; null when none wait."""


class MeanEstimate(Model):
    """A numeric metric's mean in one window, in the metric's units."""

    metric: str
    version: Version
    kind: Literal["numeric"]
    mechanism: Annotated[str, OneOf(mechanisms.NUMERIC_MECHANISMS)]
    epsilon: float
    mechanism_params: Mechanism
    n: Annotated[int, Field(ge=0)]
    confidence: float
    estimand: Estimand = REPORTERS
    """Whose mean the interval is for, as asked (?estimand=): the same interval holds for
    both. Its variance is the reports' own spread s², which holds the devices' spread
    around the population's mean: it covers that mean, and the reporting devices' own
    mean conservatively (docs/statistics/numeric.md)."""
    window: str
    range: Annotated[list[float], Field(min_length=2, max_length=2)]
    mean: Number
    """Unbiased (it can leave the range); null when n is 0."""
    std_error: Number
    ci_low: Number
    ci_high: Number
    cs_low: Number
    """The confidence sequence ("valid while you watch"): holds at every n at once,
    however often the page is looked at; wider than ci_low/ci_high. Null when n is 0."""
    cs_high: Number
    relayed_waiting: RelayedWaiting | None = None
    """Reports sent through an Oblivious HTTP relay, acknowledged and still waiting in the
    version's shuffle pool for a batch: not in n yet; null when none wait."""
    interval: str
    """How ci_low/ci_high are built (a Student t score interval, its variance floored at
    the mechanism's least variance: it holds from n = 2 on)."""
    anytime_note: str
    """What cs_low/cs_high promise, against ci_low/ci_high, in one sentence."""
    std_error_worst_case: Number
    mean_clipped: Number
    """The mean clipped into the range: post-processed, biased."""
    post_processing: str


class DistributionBin(Model):
    """One bin of a distribution: [low, high) in the metric's units and its share."""

    low: float
    high: float
    share: float
    """Consistent (weighted least squares under the tree's sums): unbiased, may be
    slightly below 0 or above 1."""
    std_error: float
    ci_low: float
    ci_high: float


class CdfPoint(Model):
    """The CDF at one bin edge, with the simultaneous band."""

    value: float
    """The edge, in the metric's units."""
    cdf: float
    """Share of values below the edge (unbiased; may leave [0, 1])."""
    std_error: float
    band_low: float
    band_high: float
    """The band holds at every point at once with the answer's confidence."""


class RangeAnswer(Model):
    """The share of values in [low, high] (widened outward to bin edges)."""

    asked: Annotated[list[float], Field(min_length=2, max_length=2)]
    low: float
    high: float
    share: float
    std_error: float
    ci_low: float
    ci_high: float


class QuantileAnswer(Model):
    """The p-quantile: the point where the monotone CDF reaches p (linear within its bin,
    geometric on a log scale) and the interval from inverting the simultaneous band."""

    p: float
    value: float
    ci_low: float
    ci_high: float


class DistributionEstimates(Model):
    """A distribution metric's histogram, CDF, ranges and quantiles in one window."""

    metric: str
    version: Version
    kind: Literal["distribution"]
    mechanism: Annotated[str, OneOf(["hh", "haar"])]
    mechanism_reason: str
    epsilon: float
    mechanism_params: Mechanism
    n: Annotated[int, Field(ge=0)]
    n_levels: list[int]
    """Reports of each level of the tree (a device reports one level, at random)."""
    confidence: float
    window: str
    range: Annotated[list[float], Field(min_length=2, max_length=2)]
    scale: str
    """linear or log: how the bins divide the range."""
    ready: bool
    """False until every level has a report (then no estimate: empty lists)."""
    bins: list[DistributionBin]
    """Each bin's share with its interval (each for its bin alone)."""
    cdf: list[CdfPoint]
    """At every bin edge (every (D/1,024)-th beyond 1,024 bins)."""
    band_critical: Number
    """c: the band is cdf ± c·std_error (≥ the pointwise z)."""
    ranges: list[RangeAnswer]
    """The ranges asked (?range=a,b), each interval for that range alone."""
    quantiles: list[QuantileAnswer]
    """The quantiles asked (?quantiles=; default 0.5, 0.9, 0.95, 0.99): all intervals
    hold together, as the band they come from."""
    intervals_note: str
    relayed_waiting: RelayedWaiting | None = None
    """Reports sent through an Oblivious HTTP relay still waiting in the shuffle pool."""


class TrendPoint(Model):
    """A categorical metric's estimates in one window."""

    window: str
    n: Annotated[int, Field(ge=0)]
    reports_per_device: Annotated[int, Field(ge=1)]
    """As in the window's estimates: what its intervals assume."""
    estimates: list[EstimateRow]
    """The trend's values (``shown``), in the same order in every window."""
    rest: Rest | None = None
    """The values not shown, summed; null when every value is shown."""


class TrendColumns(Model):
    """A categorical trend as arrays (?format=columns): one entry per window, and per
    value one array over the windows. The same numbers as the windows' rows."""

    window: list[str]
    n: list[int]
    reports_per_device: list[int]
    values: list[str]
    """The values shown, in the order of the arrays below."""
    frequency: list[list[Number]]
    """``frequency[i][j]``: value ``values[i]`` in window ``window[j]``."""
    std_error: list[list[Number]]
    ci_low: list[list[Number]]
    ci_high: list[list[Number]]
    cs_low: list[list[Number]]
    cs_high: list[list[Number]]
    rest_frequency: list[Number]
    """Per window, the values not shown, summed (null without reports)."""


class TrendCompact(Model):
    """A categorical trend as a chart draws it (the default form): per window its name
    and n, per value shown one array over the windows of each statistic asked
    (``?fields=``: the estimate and its interval by default). Each number is rounded
    to the digit of the second significant digit of its standard error, never coarser:
    off by at most a twentieth of that error (docs/architecture/read-side.md)."""

    window: list[str]
    n: list[int]
    values: list[str]
    """The values shown, in the order of the arrays below."""
    fields: list[str]
    """The statistics given, in the order asked."""
    frequency: list[list[Number]] | Absent = None
    """``frequency[i][j]``: value ``values[i]`` in window ``window[j]``."""
    std_error: list[list[Number]] | Absent = None
    """Two significant digits."""
    ci_low: list[list[Number]] | Absent = None
    ci_high: list[list[Number]] | Absent = None
    cs_low: list[list[Number]] | Absent = None
    cs_high: list[list[Number]] | Absent = None
    norm_sub: list[list[Number]] | Absent = None
    rest_frequency: list[Number] | Absent = None
    """Per window, the values not shown, summed, at the finest digit of that window's
    values (null without reports); left out when every value is shown."""


class MeanTrendPoint(Model):
    """A numeric metric's mean in one window."""

    window: str
    n: Annotated[int, Field(ge=0)]
    mean: Number
    std_error: Number
    ci_low: Number
    ci_high: Number
    cs_low: Number
    cs_high: Number


class DistributionTrendPoint(Model):
    """A distribution metric's quantiles in one window, each with the interval read off
    a band simultaneous over that window's CDF edges: the window's own fit and standard
    errors, Bonferroni's critical value (no draws; a little above the window's own)."""

    window: str
    n: Annotated[int, Field(ge=0)]
    ready: bool
    """Whether every level has a report (else no quantile)."""
    band_critical: Number
    """Bonferroni's z over the band's edges (the same in every window)."""
    quantiles: list[QuantileAnswer]


class Trend(Model):
    """One estimate per window, oldest first."""

    metric: str
    version: Version
    granularity: Annotated[str, OneOf(GRANULARITIES)]
    confidence: float
    estimand: Estimand = REPORTERS
    """Whose share the categorical windows' intervals are for (as in the estimates)."""
    multiplicity: Multiplicity = EACH
    """As in the estimates: the level each window's intervals and flags are read at."""
    windows: Annotated[
        list[TrendPoint | MeanTrendPoint | DistributionTrendPoint],
        Field(max_length=MAX_TREND_WINDOWS),
    ]
    """Every window with counts that the retention keeps (at most the newest
    ``MAX_TREND_WINDOWS``), oldest first, with every statistic of the values shown
    (categorical metrics: ?format=json); empty in the compact and column forms (see
    ``compact``, ``columns``)."""
    values_total: Annotated[int, Field(ge=2)] | Absent = None
    """A categorical metric's k: the values of the domain, shown or not."""
    shown: Annotated[str, OneOf(SHOWN)] | Absent = None
    """How the values were chosen: all (k ≤ 8, or ?values=all), top (the largest
    estimates over the trend's windows: ?top=, or the default beyond 8 values), values
    (?values=, in the order asked) or page (?offset=&limit=)."""
    columns: TrendColumns | None = None
    """With ?format=columns (categorical metrics): the windows as arrays."""
    compact: TrendCompact | Absent = None
    """Categorical metrics, by default (?format=compact): the values shown as a chart
    draws them; ``windows`` is then empty."""


class JointCell(Model):
    """One cell of a marginal: a label of each of its attributes."""

    cell: list[str]
    frequency: float | None
    """Unbiased estimate of this cell's share (of the answer's ``estimand``)."""
    std_error: float | None
    ci_low: float | None
    ci_high: float | None
    cs_low: float | None
    """The confidence sequence: valid at every n at once, however often one looks."""
    cs_high: float | None
    p_value: Number = None
    """Two-sided p-value of f = 0, the dual of ci_low/ci_high (≤ 1 − the marginal's
    ``level`` exactly when flagged)."""
    distinguishable_from_zero: bool
    """Exactly "0 lies outside [ci_low, ci_high]", in the answer's ``multiplicity`` over
    the marginal's cells."""
    cs_p_value: Number = None
    """Anytime-valid p-value of f = 0, the dual of cs_low/cs_high."""
    cs_distinguishable_from_zero: bool | None = None
    """Exactly "0 lies outside [cs_low, cs_high]"."""
    consistent: float | None
    """Post-processed (shared margins agree across marginals, cells ≥ 0): biased."""


class JointColumns(Model):
    """The cells of a marginal as one array per field (?format=columns)."""

    cell: list[list[str]]
    frequency: list[Number]
    std_error: list[Number]
    ci_low: list[Number]
    ci_high: list[Number]
    cs_low: list[Number]
    cs_high: list[Number]
    p_value: list[Number]
    distinguishable_from_zero: list[bool]
    cs_p_value: list[Number]
    cs_distinguishable_from_zero: list[bool | None]
    consistent: list[Number]


class JointMarginal(Model):
    """One marginal over some of the metric's attributes."""

    attributes: list[str]
    n: int
    """Reports of the group this marginal is read from."""
    interval: str
    """score, exact (small counts) or anytime."""
    level: Level = None
    """The confidence each cell's ci_low/ci_high is read at (see Estimates.level)."""
    cs_level: Level = None
    """The confidence each cell's cs_low/cs_high is read at."""
    cells: list[JointCell]
    """The cells shown (``shown``): every cell, row-major, while the answer holds at
    most 256 cells in all, else each marginal's largest estimates first; empty with
    ?format=columns."""
    cells_total: Annotated[int, Field(ge=1)] | Absent = None
    """The marginal's cells, shown or not."""
    shown: Annotated[str, OneOf(SHOWN)] | Absent = None
    """How the cells were chosen: all, top or page (as in Estimates)."""
    rest: Rest | None = None
    """The cells not shown, summed; null when every cell is shown."""
    columns: JointColumns | None = None
    """With ?format=columns: the cells as one array per field."""


class JointEstimates(Model):
    """A joint metric's marginals in one window."""

    metric: str
    version: int
    kind: str
    mechanism: str
    """``joint`` (one oracle over the product domain) or ``marginals`` (pairwise groups)."""
    mechanism_reason: str
    epsilon: float
    n: int
    """Every report of the window (each device's tuple once)."""
    confidence: float
    estimand: Estimand = REPORTERS
    """Whose share the cells' std_error and ci_low/ci_high are for: reporters, the
    devices that reported, or population, a population they were drawn from at random
    (?estimand=population: the sampling variance f(1 − f)/n of the marginal's group
    added). Read as a population's share, the reporters' intervals under-cover at high
    ε (2×2 at ε = 4, n = 1,000: 54 %)."""
    multiplicity: Multiplicity = EACH
    """How each marginal's intervals and flags account for its cells (?multiplicity=)."""
    window: str
    marginals: list[JointMarginal]
    post_processing: str
    relayed_waiting: RelayedWaiting | None = None
    """Reports sent through an Oblivious HTTP relay, acknowledged and still waiting in the
    version's shuffle pool for a batch: not in n yet; null when none wait."""


class SegmentGroup(Model):
    """One value of a breakdown's dimension: its estimates, or why they are not shown."""

    value: str
    shown: bool
    reason: str | None = None
    """Why not shown (null when shown)."""
    estimates: Estimates | MeanEstimate | None = None
    """The group's estimates, exactly as a whole metric's (null when not shown), but for
    the notes every shown group shares: those are in the breakdown's ``notes``, once,
    and empty here."""


class SegmentEstimates(Model):
    """A breakdown by one public dimension (``?by=<dimension>``)."""

    metric: str
    version: int
    kind: Literal["segments"] = "segments"
    window: str
    by: str
    confidence: float
    estimand: Estimand = REPORTERS
    """Whose share (or mean) every shown group's intervals are for, as asked
    (?estimand=): the share among the group's reporting devices, or in the population
    they are a random sample of (each group's own ``estimand`` says the same)."""
    multiplicity: Multiplicity = EACH
    """How each shown group's intervals and flags account for its values (?multiplicity=),
    within the group: fdr flags a group's values by Benjamini–Hochberg among that group's
    values, simultaneous holds for all of that group's values at once. Numeric groups
    have one interval: each."""
    level: Level = None
    """The confidence every shown group's ci_low/ci_high is read at when it is one for all
    (each: confidence; simultaneous: 1 − (1 − confidence)/k); null under fdr, where it
    depends on how many values a group flags (each group's own ``level`` says), or when no
    group is shown."""
    min_segment_reports: int
    not_protected: str
    """What the dimensions are: public labels, NOT protected by ε."""
    released: str
    """What this answer releases, and how suppression keeps a small group hidden."""
    notes: dict[str, str] = Field(default_factory=dict)
    """The notes every shown group's estimates share, by field (``intervals_note``,
    ``flags_note``, ``anytime_note``, ``reports_per_device_note``, ``post_processing``,
    ``shuffled_epsilon.condition``: a dot names a field's field): given once here and
    left empty ("") in each group. A note that differs between groups stays in each."""
    groups: list[SegmentGroup]


class ExportRow(Model):
    """One row of an export: a value (or a numeric metric's mean) in one window, with the
    counts it is estimated from. Fields a kind has no use for are left out."""

    metric: str
    version: Version
    kind: str
    mechanism: str
    epsilon: float
    window: str
    window_start: str
    """The window's start, ISO 8601 UTC (empty for all)."""
    n: Annotated[int, Field(ge=0)]
    """Reports counted (a joint row: its marginal's group's)."""
    confidence: float
    estimand: Estimand = REPORTERS
    """Whose share (or mean) std_error and the intervals are for: reporters or population
    (as ?estimand= asks; docs/statistics/intervals.md)."""
    reports_per_device: Annotated[int, Field(ge=1)]
    value: str | Absent = None
    """The value (joint: ``attr=label;attr=label``); absent for a numeric mean."""
    support_count: Annotated[int, Field(ge=0)] | Absent = None
    sum_units: str | Absent = None
    """A numeric metric's Σy, an exact integer in units of 2⁻³⁰, as decimal text."""
    sum_sq_units: str | Absent = None
    """Σy², in units of 2⁻⁶⁰, as decimal text."""
    estimate: Number
    """A value's frequency (unbiased), or the mean."""
    std_error: Number
    ci_low: Number
    ci_high: Number
    cs_low: Number | Absent = None
    cs_high: Number | Absent = None
    band_low: Number | Absent = None
    """A distribution's CDF row (value ``< x``): the simultaneous band's lower end (it
    holds at every edge at once, at the confidence)."""
    band_high: Number | Absent = None
    norm_sub: Number | Absent = None
    """Norm-Sub (joint: the consistent estimate): post-processed, biased."""
    segment: str | Absent = None
    """``dimension=value``: a row of one shown group of a breakdown."""
    p_value: Number | Absent = None
    """Two-sided p-value of f = 0, the dual of ci_low/ci_high (multiplicity each)."""
    distinguishable_from_zero: bool | None | Absent = None
    """Exactly "0 lies outside [ci_low, ci_high]"."""


class ExportRows(Model):
    """One window's rows (``GET /v1/export/<name>``), what ``ldp export`` writes."""

    metric: str
    version: Version
    kind: str
    window: str
    n: Annotated[int, Field(ge=0)]
    """Every report of the window."""
    confidence: float
    rows: list[ExportRow]
    """Categorical: one per value, then the shown groups of each breakdown; numeric: the
    mean, then the groups; string: the discovered values; joint: every cell of every 1-
    and 2-way marginal; distribution: the quantiles (``p50``…), the ranges asked
    (``range [a, b)``), every bin (``[a, b)``) and the CDF at every band point (``< x``,
    with the simultaneous band)."""


class ExportVersion(Model):
    """A metric version's windows to export."""

    metric: str
    version: Version
    kind: str
    windows: list[str]
    """Oldest first, all last."""


class ExportWindows(Model):
    """What an export covers (``GET /v1/export``): each version's windows."""

    versions: list[ExportVersion]

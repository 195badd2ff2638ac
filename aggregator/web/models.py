"""The read APIs' query parameters and their limits, and the overview's and planning's
answers, as typed models.

:mod:`~aggregator.web.estimates`, :mod:`~aggregator.web.status` and
:mod:`~aggregator.web.plan` document themselves with these classes (the estimates'
answers are :mod:`aggregator.query.answers`), so ``/openapi.json`` shows what they send.
The query models state the limits the views enforce, which are defined here, once: a
view refuses what its query model documents as out of range.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field

from aggregator.query.answers import (
    DEFAULT_CONFIDENCE,
    GRANULARITIES,
    MAX_TREND_WINDOWS,
    Estimand,
    Multiplicity,
    PoisoningAlarm,
    RelayedWaiting,
    Version,
)
from aggregator.query.paging import MAX_ROWS
from aggregator.stats.intervals import REPORTERS
from aggregator.stats.robustness import DEFAULT_FAKE_FRACTION
from client_sdk import mechanisms
from client_sdk.wire import BUDGET_PERIODS, KINDS
from ldp_api.models import Absent, DeviceBudget, Mechanism, MetricName, Model, OneOf
from ldp_store import schema

__all__ = [
    "CURVE_MECHANISMS",
    "DEFAULT_CONFIDENCE",
    "DEFAULT_GRID",
    "COMPACT",
    "FORMATS",
    "GRANULARITIES",
    "MAX_CONFIDENCE",
    "MAX_N",
    "MAX_POINTS",
    "MAX_TREND_WINDOWS",
    "MIN_CONFIDENCE",
    "MIN_N",
    "MIN_WIDTH",
    "Curve",
    "CurveQuery",
    "Curves",
    "EstimatesQuery",
    "ExportQuery",
    "ExportWindowsQuery",
    "Backlog",
    "Overview",
    "OverviewRow",
    "RetentionInEffect",
    "MAX_CANDIDATES",
    "MAX_CANDIDATES_QUERY",
    "Plan",
    "OverviewQuery",
    "PlanQuery",
    "PlanTarget",
    "PlannedMechanism",
    "StringCurve",
    "StringCurveQuery",
    "StringPlan",
    "StringPlanQuery",
    "TREND_FORMATS",
    "TrendQuery",
]

FORMATS = ("json", "csv", "columns")
"""What ``GET /v1/estimates/<name>`` answers in: JSON, CSV, or JSON with each table's
rows as one array per field (columns)."""

COMPACT = "compact"
TREND_FORMATS = (COMPACT, "json", "columns")
"""What ``GET /v1/estimates/<name>/trend`` answers in: compact (the values shown as a
chart draws them: the statistics asked, rounded to their standard errors), every
statistic as rows per window (json), or as arrays (columns)."""

MIN_CONFIDENCE = 0.5
"""The lowest level a request may ask for: an interval below it is more likely wrong
than right, which no report wants; and far below it 1 − confidence rounds to 1 in
floating point (at 1e-300, say), leaving no interval to compute."""

MAX_CONFIDENCE = 0.999999
"""The highest level a request may ask for (six nines): beyond it no normal
approximation or count of reports means anything, and 1 − (1 − confidence)/k (the
Bonferroni level of each of k = 65,536 values) would round to 1 in floating point."""

MIN_WIDTH = 1e-6
"""The smallest target half-width of a plan (±0.0001 %): the users it needs already
exceed any population by many orders of magnitude; far below it the square of the width
underflows to zero."""

CURVE_MECHANISMS = tuple(
    name for name, cls in mechanisms.MECHANISMS.items() if not issubclass(cls, mechanisms.Memoized)
)
"""What a curve can be drawn for: from ε and k alone, except pram, which needs its matrix
(``&matrix=``); a memoized mechanism's variance also needs its ε∞."""

MAX_POINTS = 400
"""Points of a curve: a chart a few hundred pixels wide shows no more."""

MIN_N, MAX_N = 1.0, 1e12
"""The N axis: from one report to far more than any population."""

DEFAULT_GRID = (1e2, 1e8, 61)
"""10² to 10⁸ users, ten points per decade: smooth on a log axis."""

Confidence = Annotated[float, Field(ge=MIN_CONFIDENCE, le=MAX_CONFIDENCE)]
Epsilon = Annotated[float, Field(ge=mechanisms.MIN_EPSILON, le=mechanisms.MAX_EPSILON)]
DomainSize = Annotated[int, Field(ge=2, le=mechanisms.MAX_DOMAIN_SIZE)]
FakeFraction = Annotated[float, Field(gt=0, lt=1)]


# -- /v1/estimates/<name> and …/trend -------------------------------------------------------


MAX_CANDIDATES_QUERY = 300
"""Characters of ``?candidates=``: the whole request line must fit the web server's 4 KiB
limit (gunicorn's ``limit_request_line``, 4,094 bytes) even when every character is
percent-encoded UTF-8 (up to 12 bytes each); 300 characters are some 40 search terms."""

MAX_CANDIDATES = 100
"""Most candidate strings one request estimates: each costs a few hash evaluations per
level; 100 keep a request well under a millisecond of numpy per window."""


class EstimatesQuery(Model):
    """The query of ``GET /v1/estimates/<name>``."""

    version: Version | Absent = None
    """A version of the metric (default: the current one)."""
    window: Annotated[str, Field(pattern=f"^(?:{schema.WINDOW_REGEX})$")] = schema.ALL
    """all, an hour (hour:YYYY-MM-DDTHH) or a day (day:YYYY-MM-DD), UTC."""
    confidence: Confidence = DEFAULT_CONFIDENCE
    """The intervals' level."""
    simultaneous: str = "false"
    """Intervals that hold for every value at once (Bonferroni): 1, true or yes (any
    case) mean true, anything else false; the same as multiplicity=simultaneous. Ignored
    for numeric metrics."""
    multiplicity: Multiplicity | Absent = None
    """Categorical and joint metrics: each (default: every interval and flag for its value
    alone), fdr (flags by Benjamini–Hochberg at false discovery rate 1 − confidence, every
    interval read at their level) or simultaneous (all intervals together, Bonferroni). In
    every mode a value is flagged distinguishable_from_zero exactly when its interval
    misses 0. Ignored for numeric and string metrics."""
    estimand: Estimand = REPORTERS
    """Whose share (or mean) the intervals are for: reporters, the devices that reported
    (only the mechanism's noise is random), or population, a larger population they are a
    random sample of (categorical and joint: the sampling variance f(1 − f)/n added:
    wider, most at high ε; numeric: the same interval, valid for both). Refused (400) for
    string metrics."""
    format: Annotated[str, OneOf(FORMATS)] = FORMATS[0]
    """json; csv (categorical, numeric and joint metrics: one row per value or cell, every
    row unless top, values or a page is asked for); or columns: JSON whose tables
    (a categorical estimate's values, a marginal's cells, each group's values) are one
    array per field, in ``columns``, instead of one object per row."""
    top: Annotated[int, Field(ge=1, le=MAX_ROWS)] | Absent = None
    """Categorical and joint metrics (and each group of ?by=): the top values (cells) by
    estimated frequency, largest first; the others summed in ``rest``. Default: every
    value while the answer holds at most 256 rows in all (k ≤ 256; a breakdown's groups ×
    k ≤ 256; a joint answer's cells ≤ 256), else the top 256 (shared by the groups or
    marginals)."""
    values: Annotated[str, Field(max_length=MAX_CANDIDATES_QUERY)] | Absent = None
    """all (every value or cell: the full table), or comma-separated values of a
    categorical metric, answered in that order (values containing a comma: use top or a
    page). Not with top, offset or limit."""
    offset: Annotated[int, Field(ge=0, le=MAX_ROWS)] | Absent = None
    """A page of the table in its own order (the domain's; a marginal's cells row-major):
    its first row (default 0). Not with top or values."""
    limit: Annotated[int, Field(ge=1, le=MAX_ROWS)] | Absent = None
    """The rows of that page (default 256 when offset is given)."""
    candidates: Annotated[str, Field(max_length=MAX_CANDIDATES_QUERY)] | Absent = None
    """String metrics: comma-separated values to estimate besides those discovered (at
    most 100 values and 300 characters; each normalised like a device's value)."""
    marginal: Annotated[str, Field(max_length=MAX_CANDIDATES_QUERY)] | Absent = None
    """Joint metrics: comma-separated attributes of the marginal to estimate (one or two;
    default every 1-way marginal)."""
    by: Annotated[str, Field(max_length=MAX_CANDIDATES_QUERY)] | Absent = None
    """Joint metrics: an attribute to break the marginal down by (its cells first). A
    metric with public dimensions: a dimension to break the estimates down by (one
    estimate per value, groups below the minimum count not shown)."""
    range: Annotated[str, Field(max_length=MAX_NUMBERS_QUERY, pattern=RANGE_PATTERN)] | Absent = (
        None
    )
    """Distribution metrics: a,b asks the share of values in [a, b] (widened outward to
    bin edges); repeat it for several ranges (at most 20). Ignored for other kinds."""
    quantiles: (
        Annotated[str, Field(max_length=MAX_NUMBERS_QUERY, pattern=NUMBERS_PATTERN)] | Absent
    ) = None
    """Distribution metrics: comma-separated p in (0, 1) (default 0.5,0.9,0.95,0.99).
    Ignored for other kinds."""


NUMBER_REGEX = r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
"""A decimal number as ``?range=`` and ``?quantiles=`` take it (ASCII only)."""

RANGE_PATTERN = f"^{NUMBER_REGEX},{NUMBER_REGEX}$"
NUMBERS_PATTERN = f"^{NUMBER_REGEX}(?:,{NUMBER_REGEX})*$"

MAX_NUMBERS_QUERY = 100
"""Characters of ``?range=`` or ``?quantiles=``: ASCII digits, so 100 bytes each on the
request line (whose 4,094-byte limit ``?candidates=`` mostly takes)."""


EXPORT_GRANULARITIES = ("hour", "day", "all")
"""The windows an export can be limited to (``?granularity=``)."""


class ExportWindowsQuery(Model):
    """The query of ``GET /v1/export``."""

    metric: MetricName | Absent = None
    """One metric (default: every metric)."""
    version: Version | Absent = None
    """One version of ``metric`` (default: every version kept)."""
    granularity: Annotated[str, OneOf(EXPORT_GRANULARITIES)] | Absent = None
    """Only hour windows, day windows or the all-time window (default: every window)."""
    since: Annotated[str, Field(pattern=r"^\d{4}-\d{2}-\d{2}$")] | Absent = None
    """Only hour and day windows starting on or after this UTC date (YYYY-MM-DD)."""


class ExportQuery(Model):
    """The query of ``GET /v1/export/<name>``."""

    version: Version | Absent = None
    """A version of the metric (default: the current one)."""
    window: Annotated[str, Field(pattern=f"^(?:{schema.WINDOW_REGEX})$")] = schema.ALL
    """all, an hour (hour:YYYY-MM-DDTHH) or a day (day:YYYY-MM-DD), UTC."""
    confidence: Confidence = DEFAULT_CONFIDENCE
    """The intervals' level."""
    estimand: Estimand = REPORTERS
    """As for the estimates: reporters or population (refused, 400, for string metrics);
    every row names it."""
    range: Annotated[str, Field(max_length=MAX_NUMBERS_QUERY, pattern=RANGE_PATTERN)] | Absent = (
        None
    )
    """Distribution metrics: a,b adds a row with the share of values in [a, b] (widened
    outward to bin edges); repeatable (at most 20). Ignored for other kinds."""
    quantiles: (
        Annotated[str, Field(max_length=MAX_NUMBERS_QUERY, pattern=NUMBERS_PATTERN)] | Absent
    ) = None
    """Distribution metrics: the quantiles' rows, comma-separated p in (0, 1) (default
    0.5,0.9,0.95,0.99). Ignored for other kinds."""


class TrendQuery(Model):
    """The query of ``GET /v1/estimates/<name>/trend``."""

    version: Version | Absent = None
    """A version of the metric (default: the current one)."""
    granularity: Annotated[str, OneOf(GRANULARITIES)] = GRANULARITIES[0]
    confidence: Confidence = DEFAULT_CONFIDENCE
    """The intervals' level."""
    simultaneous: str = "false"
    """As for the estimates: 1, true or yes (any case) mean true."""
    multiplicity: Multiplicity | Absent = None
    """As for the estimates: each, fdr or simultaneous."""
    estimand: Estimand = REPORTERS
    """As for the estimates: reporters or population."""
    quantiles: (
        Annotated[str, Field(max_length=MAX_NUMBERS_QUERY, pattern=NUMBERS_PATTERN)] | Absent
    ) = None
    """Distribution metrics: comma-separated p in (0, 1) (default 0.5,0.9,0.95,0.99), each
    window's quantiles with their intervals. Ignored for other kinds."""
    format: Annotated[str, OneOf(TREND_FORMATS)] = COMPACT
    """Categorical metrics: compact (the default; in ``compact``): the values shown, each
    an array over the windows of each statistic in ``fields``, every number rounded to
    the second significant digit of its standard error; json: every statistic of every
    value shown, one row each per window (in ``windows``); columns: those as arrays (in
    ``columns``). Numeric and distribution trends answer ``windows`` in every format."""
    fields: Annotated[str, Field(max_length=200)] | Absent = None
    """A compact trend's statistics, comma-separated, from frequency, std_error, ci_low,
    ci_high, cs_low, cs_high and norm_sub (default frequency,ci_low,ci_high: the estimate
    and its interval). Ignored in the other formats."""
    top: Annotated[int, Field(ge=1, le=MAX_ROWS)] | Absent = None
    """Categorical metrics: the values with the largest estimates over the trend's
    windows, largest first. Default: every value while k ≤ 8, else the top 8."""
    values: Annotated[str, Field(max_length=MAX_CANDIDATES_QUERY)] | Absent = None
    """all (every value), or comma-separated values of a categorical metric, in that
    order. Not with top."""


class StringPlanQuery(Model):
    """The query of ``GET /v1/plan/strings``: give exactly one of users and frequency."""

    epsilon: Annotated[float, Field(ge=mechanisms.MIN_EPSILON, le=mechanisms.MAX_EPSILON)]
    max_length: Annotated[int, Field(ge=1, le=64)] = 16
    """Bytes per value."""
    users: Annotated[int, Field(ge=1, le=MAX_N)] | Absent = None
    """Print the frequency these users find."""
    frequency: Annotated[float, Field(gt=0, lt=1)] | Absent = None
    """Print the users needed to find values this frequent."""
    concentration: Annotated[float, Field(ge=0, le=1)] = 0.0
    """Σf² of the values discovery will not find (the collision floor; 0: ignored)."""
    power: Annotated[float, Field(ge=0.01, le=0.99)] = 0.5
    """Probability of finding a value at that frequency."""


class StringPlan(Model):
    """What a string metric can find: the frequency N users find, or the N a frequency needs."""

    epsilon: float
    max_length: int
    users: Annotated[int, Field(ge=1)] | None
    """Null: no number of users finds values this rare (below the collision floor)."""
    frequency: float
    power: float
    floor: float
    """The frequency below which no number of users finds a value."""


class StringCurveQuery(Model):
    """The query of ``GET /v1/plan/strings/curve``."""

    epsilon: Annotated[float, Field(ge=mechanisms.MIN_EPSILON, le=mechanisms.MAX_EPSILON)]
    max_length: Annotated[int, Field(ge=1, le=64)] = 16
    """Bytes per value."""
    concentration: Annotated[float, Field(ge=0, le=1)] = 0.0
    """Σf² of the values discovery will not find (the collision floor; 0: ignored)."""
    power: Annotated[float, Field(ge=0.01, le=0.99)] = 0.5
    """Probability of finding a value at the curve's frequency."""
    n_min: Annotated[float, Field(ge=MIN_N)] = DEFAULT_GRID[0]
    """Needs n_min < n_max."""
    n_max: Annotated[float, Field(le=MAX_N)] = DEFAULT_GRID[1]
    points: Annotated[int, Field(ge=2, le=MAX_POINTS)] = DEFAULT_GRID[2]


class StringCurve(Model):
    """The frequency N users find against N: the detectable frequency falls as 1/√N down
    to the collision floor."""

    epsilon: float
    max_length: int
    rows: int
    """h, hash rows per level of the sketch at this ε."""
    cells: int
    """m, cells per row."""
    concentration: float
    power: float
    floor: float
    """The collision floor: the curve's limit as N grows (0 when concentration is 0)."""
    n: Annotated[list[float], Field(min_length=2, max_length=MAX_POINTS)]
    """The N axis: a geometric grid from n_min to n_max."""
    frequency: list[float]
    """The frequency found with probability ``power`` at each N (above 1: none is)."""


# -- /v1/overview ---------------------------------------------------------------------------


class Backlog(Model):
    """What the aggregator has yet to count."""

    length: Annotated[int, Field(ge=0)]
    """Reports in the streams, not yet counted."""
    pending: Annotated[int, Field(ge=0)]
    """Of those, read by a worker but not yet acked."""


class RetentionInEffect(Model):
    """How long each kind of window is kept after it ends: the deployment's defaults
    (``LDP_RETENTION_HOUR_SECONDS``, ``LDP_RETENTION_DAY_SECONDS``) with the metric's own
    ``retention`` applied."""

    hour: Annotated[int, Field(ge=1)]
    """Seconds an hour window is kept after it ends."""
    day: Annotated[int, Field(ge=1)]
    """Seconds a day window is kept after it ends."""
    all: None
    """Null: the all-time window is kept while the version is live."""
    note: str
    """The same in words."""


class OverviewRow(Model):
    """A metric's current version at a glance."""

    name: str
    version: Version
    kind: Annotated[str, OneOf(KINDS)]
    description: str
    mechanism: str | None
    mechanism_params: Mechanism
    mechanism_reason: str
    epsilon: float | None
    """ε per report."""
    k: int | None
    """Domain size; null for numeric metrics."""
    range: list[float] | None
    """A numeric metric's [lo, hi]; null for categorical ones."""
    budget: DeviceBudget | None
    epsilon_per_period: float | None
    """reports_per_period × ε, when there is a budget."""
    period: Annotated[str, OneOf(BUDGET_PERIODS)] | None
    longitudinal: bool
    """Memoized responses."""
    permanent_epsilon: float | None
    """ε∞: what a device ever reveals about one value."""
    epsilon_per_day_max: float | None
    """The most one device can spend on the metric per UTC day under this definition:
    reports_per_period × ε (all of a period's reports may fall on one day), a memoized
    metric at most ε∞; null without a budget (unbounded)."""
    n: Annotated[int, Field(ge=0)]
    """Reports counted, all time."""
    last_window: str | None
    """The newest hour (else day) window with counts."""
    lag: Backlog
    relayed_waiting: RelayedWaiting | None = None
    """Relayed reports of this version acknowledged and waiting in the shuffle pool for a
    batch, and until when at the latest; null when none wait (not in n or lag yet)."""
    alarms: list[PoisoningAlarm]
    """Poisoning alarms of the newest hour and day windows (categorical metrics)."""
    memory_bytes: int | None
    """Redis memory of the metric's keys, every version (null: not measured)."""
    retired_at: str | None
    """When an operator retired the metric (it takes no reports); null if it takes them."""
    retention: RetentionInEffect


class RedisMemory(Model):
    """Redis memory: the total against the limit, and how the per-metric figures were read.

    Per metric is the sum of ``MEMORY USAGE`` over its keys, found by a bounded SCAN and
    cached for a minute (``ldp_store.lifecycle.MemoryUsage``): the figures may be that old.
    """

    used: int
    """``used_memory``, summed over the primaries."""
    maxmemory: int
    """``maxmemory``, summed over the primaries; 0 when there is no limit."""
    keys: int
    """Keys weighed."""
    partial: bool
    """The scan stopped at its key limit: per-metric figures are too low."""
    measured_at: float
    """When (Unix seconds)."""
    guard: int
    """Bytes of the replay guard's keys (every metric; in the per-metric figures too):
    memory only time frees, kept within ``guard_budget`` (``collector.memory``)."""
    guard_budget: int | None
    """The replay guard's budget in bytes (``LDP_GUARD_BUDGET`` of ``maxmemory``); None
    without a limit or outside ``ldp serve``'s app."""


class DeviceSpend(Model):
    """The most one device can spend per UTC day over every live metric (sequential
    composition: the metrics' maxima add up), against the published device-wide caps."""

    epsilon_per_day_max: float | None
    """Σ of the live metrics' ``epsilon_per_day_max``; null when one has no budget."""
    unbounded: list[str]
    """The live metrics without a budget (what makes the total unbounded), the first 20
    by name."""
    unbounded_total: Annotated[int, Field(ge=0)] | Absent = None
    """How many live metrics have no budget (``unbounded`` names at most 20 of them)."""
    epsilon_per_day_cap: float | None
    """``LDP_DEVICE_EPSILON_PER_DAY``: devices refuse reports past it (null: no cap)."""
    epsilon_lifetime_cap: float | None
    """``LDP_DEVICE_EPSILON_LIFETIME`` (null: no cap)."""


class Overview(Model):
    """Every metric's current version (a page of them), the device-wide spend, and Redis
    memory."""

    device: DeviceSpend
    """Over every live metric, whatever the page."""
    metrics: list[OverviewRow]
    """The page's metrics, by name: every metric while there are at most 50."""
    memory: RedisMemory | None
    """Null when it could not be read."""
    total: Annotated[int, Field(ge=0)] | Absent = None
    """The metrics that match ``q`` (every metric without it)."""
    offset: Annotated[int, Field(ge=0)] | Absent = None
    """The first of them on this page."""
    next_offset: int | None = None
    """Where the next page starts (?offset=); null on the last page."""


OVERVIEW_PAGE = 50
"""Metrics on one page of the overview: every metric of most deployments, and a page a
person scrolls; each row costs about nine Redis round trips and the alarms' tests
(~1.5 ms idle), so a page stays under 100 ms however many metrics there are."""

MAX_OVERVIEW_PAGE = 1000
"""Most metrics one page holds (?limit=)."""


class OverviewQuery(Model):
    """The query of ``GET /v1/overview`` (and of the dashboard's first page)."""

    q: Annotated[str, Field(max_length=MAX_CANDIDATES_QUERY)] | Absent = None
    """Only the metrics whose name or description contains this text (any case)."""
    offset: Annotated[int, Field(ge=0)] = 0
    """The first metric of the page, by name."""
    limit: Annotated[int, Field(ge=1, le=MAX_OVERVIEW_PAGE)] = OVERVIEW_PAGE
    """Metrics on the page."""


# -- /v1/plan and /v1/plan/curve ------------------------------------------------------------


class PlanTarget(Model):
    """What a plan is asked for: exactly one of users and width (two query parameters,
    ``users=N`` or ``width=W``, documented as one object so that their exclusion can be
    stated: OpenAPI has no dependencies between parameters)."""

    model_config = ConfigDict(
        json_schema_extra={"oneOf": [{"required": ["users"]}, {"required": ["width"]}]}
    )

    closed = True

    users: Annotated[int, Field(ge=MIN_N, le=MAX_N)] | Absent = None
    """The users: then each mechanism's half-width."""
    width: Annotated[float, Field(ge=MIN_WIDTH, lt=1)] | Absent = None
    """A target half-width, as a fraction (0.01 is ±1 %): then the users each needs."""


class PlanQuery(Model):
    """The query of ``GET /v1/plan``: ε, k, and exactly one of users and width."""

    epsilon: Epsilon
    """ε per report."""
    k: DomainSize
    """The domain size."""
    confidence: Confidence = DEFAULT_CONFIDENCE
    """The half-widths' level."""
    target: PlanTarget
    """users=N or width=W (exactly one)."""
    fake_fraction: FakeFraction = DEFAULT_FAKE_FRACTION
    """β, the share of all reports that fake clients send: the robustness figure's."""
    matrix: str | Absent = None
    """A pram transition matrix as JSON (k×k, rows the true value): pram is planned
    beside the others, at the ε its matrix realises."""


class PlannedMechanism(Model):
    """One mechanism's line of a plan (central Laplace last, as a reference)."""

    mechanism: str
    variance_star: float | None
    """null for central Laplace."""
    wire_bytes: int | None
    """null for central Laplace."""
    half_width: float
    users: Annotated[int, Field(ge=1)]
    auto: bool
    max_gain: float
    """Robustness: how far the maximal gain attack (Cao, Jia & Gong 2021) moves one value's
    estimate when ``fake_fraction`` of the reports are fake, β(1 − q*)/(p* − q*) as a
    fraction (0.01 = one point); central Laplace: β (a fake is one more raw value)."""


class Plan(Model):
    """Either users (then rows give half-widths) or width (then rows give the users each
    mechanism needs)."""

    model_config = ConfigDict(
        json_schema_extra={"oneOf": [{"required": ["users"]}, {"required": ["width"]}]}
    )

    epsilon: float
    k: int
    confidence: float
    users: int | Absent = None
    width: float | Absent = None
    auto: str | None
    """The mechanism 'auto' picks."""
    fake_fraction: float
    """β of the rows' ``max_gain``."""
    rows: list[PlannedMechanism]
    """Every mechanism, best first, then central Laplace."""


class CurveQuery(Model):
    """The query of ``GET /v1/plan/curve``."""

    epsilon: Epsilon
    """ε per report."""
    k: DomainSize
    """The domain size."""
    confidence: Confidence = DEFAULT_CONFIDENCE
    """The half-widths' level."""
    n_min: Annotated[float, Field(ge=MIN_N)] = DEFAULT_GRID[0]
    """Needs n_min < n_max."""
    n_max: Annotated[float, Field(le=MAX_N)] = DEFAULT_GRID[1]
    points: Annotated[int, Field(ge=2, le=MAX_POINTS)] = DEFAULT_GRID[2]
    mechanism: Annotated[str, OneOf(CURVE_MECHANISMS)] | Absent = None
    """Mark this curve as current (added if not planned; pram needs ``matrix``)."""
    matrix: str | Absent = None
    """A pram transition matrix as JSON (k×k, rows the true value), drawn beside the
    others at the ε it realises."""


class Curve(Model):
    """One mechanism's half-width against N."""

    mechanism: str
    half_width: list[float]
    """The half-width at each N."""
    auto: bool
    current: bool
    """The mechanism asked for."""
    central: bool
    """Central Laplace (a reference)."""


class Curves(Model):
    """The half-width against N, per mechanism, then central Laplace."""

    epsilon: float
    k: int
    confidence: float
    n: Annotated[list[float], Field(min_length=2, max_length=MAX_POINTS)]
    """The N axis: a geometric grid from n_min to n_max."""
    curves: list[Curve]

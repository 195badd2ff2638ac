"""The collector's request and response bodies, as typed models.

The views build their answers from these classes (through :func:`ldp_api.models.answer`)
and document themselves with them (:func:`ldp_api.openapi.documented`), so
``/openapi.json`` shows what the collector really sends. Request bodies are validated by
the SDK's wire code (:func:`client_sdk.wire.parse_spec`, :func:`~client_sdk.wire.check_report`),
which keeps its own error messages and its speed; their models state the same limits,
from the same constants, and ``tests/collector/test_collector_openapi.py`` keeps their
fields those of the wire code.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, RootModel, model_validator

from client_sdk import mechanisms
from client_sdk.mechanisms.distribution import DISTRIBUTION_NAMES, MAX_BINS, MIN_BINS, SCALES
from client_sdk.mechanisms.joint import JOINT_METHODS, MAX_ATTRIBUTE_SIZE, MAX_ATTRIBUTES
from client_sdk.mechanisms.memoized import MIN_EPSILON_GAP
from client_sdk.mechanisms.numeric import MAX_RANGE_MAGNITUDE
from client_sdk.mechanisms.strings import MAX_STRING_LENGTH
from client_sdk.wire import (
    KINDS,
    MAX_DESCRIPTION_LENGTH,
    MAX_DIMENSIONS,
    MAX_LABEL_LENGTH,
    MAX_SEGMENTS,
    MAX_SHARDS,
    REPORT_ID_PATTERN,
    MetricDefinition,
)
from collector import settings
from ldp_api.models import (
    Absent,
    DeviceBudget,
    DeviceEpsilonCap,
    Error,
    Mechanism,
    MetricName,
    Model,
    OneOf,
    WindowRetention,
)
from ldp_store.tokens import SCOPES

__all__ = [
    "AuditEntry",
    "AuditPage",
    "AuditQuery",
    "NewToken",
    "RotateRequest",
    "TokenInfo",
    "TokenList",
    "TokenPath",
    "TokenOfKind",
    "TokenOfScopes",
    "TokenRequest",
    "Attribute",
    "CategoricalSpec",
    "IngestError",
    "IngestRefusal",
    "JointSpec",
    "IngestResult",
    "KeyCount",
    "Longitudinal",
    "Metric",
    "MetricList",
    "MetricSpec",
    "NumericSpec",
    "StringSpec",
    "Rejection",
    "Report",
    "ReportBatch",
    "Retired",
    "Retirement",
    "Retry",
    "Status",
    "VersionQuery",
]

MAX_VERSION_DIGITS = 18
"""A version fits in a signed 64-bit integer; longer query values are not versions."""

Shards = Annotated[int, Field(ge=1, le=MAX_SHARDS)]
Range = Annotated[
    list[Annotated[float, Field(ge=-MAX_RANGE_MAGNITUDE, le=MAX_RANGE_MAGNITUDE)]],
    Field(min_length=2, max_length=2),
]
"""A numeric metric's [lo, hi] (lo < hi is checked by the wire code)."""
Kind = Annotated[str, OneOf(KINDS)]
MaxLength = Annotated[int, Field(ge=1, le=MAX_STRING_LENGTH)]
"""A string metric's bytes per value."""


class Attribute(Model):
    """One attribute of a joint metric: a name and its distinct labels."""

    closed = True

    name: MetricName
    domain: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=MAX_LABEL_LENGTH)]],
        Field(min_length=2, max_length=MAX_ATTRIBUTE_SIZE, json_schema_extra={"uniqueItems": True}),
    ]


class Dimension(Model):
    """One public dimension: a name and its allowed values, sent in the clear beside each
    report and NOT protected by ε (``docs/concepts/dimensions.md``)."""

    closed = True

    name: MetricName
    values: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=MAX_LABEL_LENGTH)]],
        Field(min_length=1, max_length=MAX_SEGMENTS, json_schema_extra={"uniqueItems": True}),
    ]


Dimensions = Annotated[list[Dimension], Field(max_length=MAX_DIMENSIONS)]
"""Public dimensions: at most MAX_SEGMENTS segments (the product of their value counts)."""


class Metric(Model):
    """One version of a metric, as apps read it (``MetricDefinition.to_dict()``)."""

    name: MetricName
    version: Annotated[int, Field(ge=1)]
    kind: Kind
    domain: list[str] | Absent = None
    """A categorical metric's values (a numeric one has a range instead)."""
    description: str
    mechanism: Mechanism
    mechanism_reason: str
    """Why ``auto`` chose this mechanism, or for ``pram`` the ε its matrix realises;
    empty when another mechanism was named."""
    budget: DeviceBudget | None
    """The device-side budget, if the metric has one."""
    shards: Shards
    """Streams this version's reports spread over."""
    retention: WindowRetention | None
    """This metric's own retention of hour and day windows, if it has one (null: the
    deployment's defaults; ``/v1/overview`` shows what applies)."""
    range: Range | Absent = None
    """A numeric metric's [lo, hi] (it has no domain)."""
    device_budget: DeviceEpsilonCap | Absent = None
    """The deployment's device-wide caps (as in ``GET /v1/metrics``), where it publishes
    any: ``GET /v1/metrics/<name>`` carries them beside the definition, so a device that
    fetches only the metrics it reports learns them."""
    retired_at: str | Absent = None
    """When an operator retired the metric (ISO 8601, UTC), where it is retired: it takes
    no reports (410), so a device stops reporting it before it spends ε on one."""
    max_length: MaxLength | Absent = None
    """A string metric's bytes per value (it has no domain: values are discovered)."""
    attributes: list[Attribute] | Absent = None
    """A joint metric's attributes, each with its values (it has no domain)."""
    dimensions: Dimensions | Absent = None
    """Public dimensions, where the metric declares any: NOT protected by ε."""

    @classmethod
    def of(
        cls,
        definition: MetricDefinition,
        device: DeviceEpsilonCap | None = None,
        retired_at: str | None = None,
    ) -> Metric:
        """The model of ``definition``'s JSON form (with the device-wide caps and the
        retirement, if given)."""
        data = definition.to_dict()
        if device is not None:
            data["device_budget"] = device
        if retired_at is not None:
            data["retired_at"] = retired_at
        return cls.model_validate(data)


class MetricList(Model):
    """Every metric's current version (with ``retired_at`` where it is retired), and the
    deployment's device-wide caps."""

    metrics: list[Metric]
    device_budget: DeviceEpsilonCap | None = None
    """The cap on the total ε one device spends per UTC day and over its lifetime, over
    all metrics (null: none published). Devices apply the stricter of it and their app's."""


class VersionQuery(Model):
    """``?version=N`` of ``GET /v1/metrics/<name>``."""

    version: Annotated[int, Field(ge=1, le=10**MAX_VERSION_DIGITS - 1)] | Absent = None
    """A version of the metric (default: the current one)."""


class Longitudinal(Model):
    """Memoized responses for values reported again and again."""

    closed = True

    permanent_epsilon: Annotated[
        float, Field(ge=mechanisms.MIN_EPSILON + MIN_EPSILON_GAP, le=mechanisms.MAX_EPSILON)
    ]
    """ε∞: what unlimited reports of one unchanged value reveal at most; at least
    epsilon + MIN_EPSILON_GAP (the smallest is shown)."""


Description = Annotated[str, Field(max_length=MAX_DESCRIPTION_LENGTH)]
Epsilon = Annotated[float, Field(ge=mechanisms.MIN_EPSILON, le=mechanisms.MAX_EPSILON)]


class CategoricalSpec(Model):
    """What an operator sends for a categorical metric (frequencies of labels).

    Changing ε, domain, mechanism or shards makes a new version; a description- or
    budget-only change keeps it. A longitudinal metric needs a budget.
    """

    model_config = ConfigDict(json_schema_extra={"dependentRequired": {"longitudinal": ["budget"]}})

    closed = True

    kind: Literal["categorical"] = "categorical"
    domain: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=MAX_LABEL_LENGTH)]],
        Field(
            min_length=2,
            max_length=mechanisms.MAX_DOMAIN_SIZE,
            json_schema_extra={"uniqueItems": True},
        ),
    ]
    """The values: distinct labels."""
    epsilon: Epsilon | Absent = None
    """ε per report; required but for pram, which reads it off its matrix (given, it is
    a ceiling)."""
    mechanism: Annotated[str, OneOf(mechanisms.NAMES)] = "auto"
    options: dict[str, Any] | Absent = None
    """A named mechanism's options (e.g. olh's g; pram's ``matrix``: k×k, rows the true
    value, entries numbers or strings such as "0.7" or "1/3"); auto takes none."""
    description: Description = ""
    longitudinal: Longitudinal | None = None
    """Memoized responses (null: none)."""
    budget: DeviceBudget | None = None
    """A device-side limit: at most reports_per_period reports per period (null: none)."""
    shards: Shards | None = 1
    """Streams to spread a hot metric over (each its own hash slot on a Redis Cluster);
    a report's shard follows from its id. Changing it makes a new version, so a replay
    always meets its first copy. Null: 1."""
    retention: WindowRetention | None = None
    dimensions: Dimensions | None = None
    """Public dimensions (sent in the clear, NOT protected by ε)."""
    """Seconds hour and day windows are kept after they end, where this metric differs
    from the deployment's defaults (null: the defaults). Keeps the version; applies to
    windows first written afterwards."""


class NumericSpec(Model):
    """What an operator sends for a numeric metric (the mean of a number in a range).

    No domain, no options, no longitudinal; the rest as for a categorical metric.
    """

    closed = True

    kind: Literal["numeric"]
    range: Range
    """[lo, hi], lo < hi."""
    epsilon: Epsilon
    """ε per report."""
    mechanism: Annotated[str, OneOf(mechanisms.NUMERIC_NAMES)] = "auto"
    description: Description = ""
    budget: DeviceBudget | None = None
    """A device-side limit: at most reports_per_period reports per period (null: none)."""
    shards: Shards | None = 1
    """As for a categorical metric."""
    retention: WindowRetention | None = None
    dimensions: Dimensions | None = None
    """Public dimensions (sent in the clear, NOT protected by ε)."""
    """As for a categorical metric."""


class DistributionShape(Model):
    """How a distribution metric's range is cut into bins."""

    closed = True

    bins: Annotated[int, Field(ge=MIN_BINS, le=MAX_BINS)] | Absent = None
    """A power of two (default 1,024)."""
    resolution: Annotated[float, Field(gt=0)] | Absent = None
    """Instead of bins: the widest bin wanted (the fewest power-of-two bins that fine;
    linear scale only)."""
    scale: Annotated[str, OneOf(SCALES)] | Absent = None
    """linear (default) or log (lo > 0: bins of equal ratio, for heavy tails)."""
    branching: Annotated[int, Field(ge=2, le=MAX_BINS)] | Absent = None
    """The tree's branching factor B (a power of two with B^h = bins); default: auto's."""


class DistributionSpec(Model):
    """What an operator sends for a numeric metric asked for its distribution: the
    histogram, ranges, CDF and quantiles (``"kind": "numeric"`` with ``distribution``, or
    ``"kind": "distribution"``)."""

    closed = True

    kind: Annotated[str, OneOf(["numeric", "distribution"])]
    range: Range
    """[lo, hi], lo < hi (lo > 0 on a log scale)."""
    epsilon: Epsilon
    """ε per report."""
    distribution: DistributionShape | Absent = None
    mechanism: Annotated[str, OneOf(DISTRIBUTION_NAMES)] = "auto"
    """hh (the hierarchical histogram), haar (HaarHRR: one bit per report, level with hh at
    ε ≤ 0.5), or auto: hh with auto's branching factor (its reason says when haar is level)."""
    description: Description = ""
    budget: DeviceBudget | None = None
    """A device-side limit: at most reports_per_period reports per period (null: none)."""
    shards: Shards | None = 1
    """As for a categorical metric."""
    retention: WindowRetention | None = None
    dimensions: Dimensions | None = None
    """Public dimensions (sent in the clear, NOT protected by ε)."""


class SketchOptions(Model):
    """The shape of a string metric's sketch (defaults suit most; see ``StringSketch``)."""

    closed = True

    rows: Annotated[int, Field(ge=1, le=256)] | Absent = None
    """Hash rows per level."""
    cells: Annotated[int, Field(ge=2, le=65536)] | Absent = None
    """Cells per row."""
    salt: Annotated[str, Field(pattern="^([0-9a-fA-F]{2}){1,32}$")] | Absent = None
    """Hex the hash coefficients derive from (default: derived from the metric's name)."""


class StringSpec(Model):
    """What an operator sends for a string metric (frequent values of an open domain).

    No domain: values are discovered. Values are normalised (NFC) and truncated to
    ``max_length`` UTF-8 bytes at a character boundary, then padded.
    """

    closed = True

    kind: Literal["string"]
    max_length: MaxLength
    """Bytes of a value after normalisation (longer values are truncated)."""
    epsilon: Epsilon
    """ε per report."""
    options: SketchOptions | Absent = None
    description: Description = ""
    budget: DeviceBudget | None = None
    """A device-side limit: at most reports_per_period reports per period (null: none)."""
    shards: Shards | None = 1
    """As for a categorical metric."""
    retention: WindowRetention | None = None
    dimensions: Dimensions | None = None
    """Public dimensions (sent in the clear, NOT protected by ε)."""
    """As for a categorical metric."""


class JointSpec(Model):
    """What an operator sends for a joint metric (marginals of a tuple of attributes).

    One report carries the whole tuple at ε; ``auto`` picks the layout (one oracle over
    the product domain, or pairwise marginal groups) and says why.
    """

    closed = True

    kind: Literal["joint"]
    attributes: Annotated[list[Attribute], Field(min_length=2, max_length=MAX_ATTRIBUTES)]
    """The attributes, in the order a device's tuple lists them; names distinct."""
    epsilon: Epsilon
    """ε per report (of the whole tuple)."""
    mechanism: Annotated[str, OneOf(["auto", *JOINT_METHODS])] = "auto"
    description: Description = ""
    budget: DeviceBudget | None = None
    """A device-side limit: at most reports_per_period reports per period (null: none)."""
    shards: Shards | None = 1
    """As for a categorical metric."""
    retention: WindowRetention | None = None
    dimensions: Dimensions | None = None
    """Public dimensions (sent in the clear, NOT protected by ε)."""
    """As for a categorical metric."""


class MetricSpec(
    RootModel[CategoricalSpec | NumericSpec | StringSpec | JointSpec | DistributionSpec]
):
    """The body of ``PUT /v1/metrics/<name>``: a categorical metric's spec, a numeric
    one's (``"kind": "numeric"``), a string one's (``"kind": "string"``), a joint
    one's (``"kind": "joint"``) or a distribution one's (``"kind": "numeric"`` with
    ``distribution``)."""


class Report(Model):
    """One perturbed report; nothing else (no device id, no time)."""

    closed = True

    metric: MetricName
    version: Annotated[int, Field(ge=1)]
    id: Annotated[str, Field(pattern=f"^{REPORT_ID_PATTERN.pattern}$")]
    """16 random bytes, used only to discard replays."""
    payload: dict[str, Any]
    """The mechanism's wire format."""
    dimensions: dict[str, str] | Absent = None
    """The metric's public dimensions, each declared one's value: sent in the clear, NOT
    protected by ε; only for a metric that declares dimensions."""


class ReportBatch(Model):
    """The body of ``POST /v1/reports``."""

    closed = True

    reports: Annotated[list[Report], Field(min_length=1, max_length=settings.MAX_REPORTS)]
    """At most MAX_REPORTS reports (the default is shown) and MAX_BODY_BYTES bytes."""


class Rejection(Model):
    """A report that will never be valid: where it was and what is wrong."""

    index: int
    """Its place in ``reports``."""
    error: str
    reason: str = Field(exclude=True)
    """The category counted by ``ldp_collector_rejected_total`` (not sent)."""
    metric: str | None = Field(default=None, exclude=True)
    """An implausible report's metric (not sent; counted by metric and test)."""
    test: str | None = Field(default=None, exclude=True)
    """The plausibility test an implausible report failed (not sent)."""


class Retired(Model):
    """A metric that takes no more reports: apps should stop reporting it."""

    metric: MetricName
    retired_at: str
    """When it was retired (UTC, ISO 8601)."""


class IngestResult(Model):
    """What happened to a request's reports (the 202 body)."""

    accepted: int
    """Reports appended now."""
    duplicates: int
    """Replays of known ids (already appended)."""
    rejected: list[Rejection]
    retired: list[Retired] | Absent = None
    """The retired metrics some rejected reports named (stop reporting them)."""


class IngestError(Error):
    """A 400 (or a 410: every report names a retired metric) of ``POST /v1/reports``;
    ``rejected`` lists every report when none was valid."""

    rejected: list[Rejection] | Absent = None
    retired: list[Retired] | Absent = None
    """The retired metrics the rejected reports named (stop reporting them)."""


class Retry(Model):
    """A valid report not stored now (its shard of storage cannot take writes, its
    stream's backlog is full, or its guard's share is spent): send it again later."""

    index: int
    """Its place in ``reports``."""
    error: str


class IngestRefusal(Error):
    """The 503 of ``POST /v1/reports``. When storage took some of the batch (the shards
    it could write), ``retry`` lists the positions to send again and the other fields
    say what became of the rest; without ``retry``, every report is to be sent again."""

    accepted: int | Absent = None
    """Reports appended now."""
    duplicates: int | Absent = None
    """Replays of known ids (already appended)."""
    rejected: list[Rejection] | Absent = None
    """Reports that will never be valid (drop them)."""
    retry: list[Retry] | Absent = None
    """The valid reports not stored now: send these again (after ``Retry-After``), and
    only these; every other position is done."""
    retired: list[Retired] | Absent = None
    """The retired metrics some rejected reports named (stop reporting them)."""


class Retirement(Model):
    """A metric's retirement, as ``POST /v1/metrics/<name>/retire`` answers it."""

    metric: MetricName
    retired: bool
    """Whether the metric refuses reports now."""
    retired_at: str | None
    """When it was retired (UTC, ISO 8601), null when it takes reports."""


class KeyCount(Model):
    """What a delete removes (or removed): the keys of the versions, by kind."""

    metric: MetricName
    versions: list[int]
    """The versions concerned."""
    keys: int
    """Keys found (every shard, every kind: streams, counts, windows, replay sets, dead
    letters...)."""
    by_kind: dict[str, int]
    """Keys per kind (the word after the version's hash tag)."""
    bytes: int
    """Their memory, as ``MEMORY USAGE`` counts it."""
    deleted: bool
    """False for the preview (``GET``), true once removed (``DELETE``)."""


class Status(Model):
    """Health and readiness."""

    status: str


class GuardRefusal(Model):
    """A metric version's shard whose reports the replay guard's shares refuse now."""

    metric: MetricName
    version: int
    shard: int
    until: str
    """When it expects to take reports again (UTC, ISO 8601)."""


class Readiness(Status):
    """Readiness: Redis answers and ingest is not refused as a whole (else a 503)."""

    refused: list[GuardRefusal]
    """Metric versions the replay guard refuses now (503 for their reports only; the
    collector takes every other metric's): an alert, not a reason to stop routing."""


TokenScope = Annotated[str, OneOf(SCOPES)]
"""One of the scopes a token may grant."""

TokenPrefix = Annotated[str, Field(pattern=r"^ldp_[0-9a-f]{12}$")]
"""A token's prefix: ``ldp_`` and its 12-hex-digit id (never its secret)."""

MAX_AUDIT_PAGE = 1000
"""Audit entries one request answers at most (page with ``before``)."""

MAX_TOKEN_NAME = 80
"""Characters of a token's name: a label for people (``ios-app``, ``ci-deploy``)."""

MAX_TOKEN_SECONDS = 10 * 365 * 86400
"""The longest lifetime or overlap, in seconds (ten years): anything longer is a typo."""


class _NoNullExpiry(Model):
    """``expires_in`` may be left out (never expires), not sent as null."""

    @model_validator(mode="before")
    @classmethod
    def _no_null(cls, data: Any) -> Any:
        if isinstance(data, dict) and "expires_in" in data and data["expires_in"] is None:
            raise ValueError(
                "expires_in must be seconds; leave it out for a token that never expires"
            )
        return data


class TokenOfKind(_NoNullExpiry):
    """A token of one of the usual kinds."""

    closed = True
    name: Annotated[str, Field(min_length=1, max_length=MAX_TOKEN_NAME)]
    """What it is for (shown in lists; not secret)."""
    kind: Literal["ingest", "read", "admin"]
    """ingest: scope ingest (public, for apps); read: metrics:read; admin: every scope but
    ingest."""
    expires_in: Annotated[int, Field(ge=1, le=MAX_TOKEN_SECONDS)] | Absent = None
    """Seconds until it expires; absent: never."""


class TokenOfScopes(_NoNullExpiry):
    """A token with the scopes listed."""

    closed = True
    name: Annotated[str, Field(min_length=1, max_length=MAX_TOKEN_NAME)]
    """What it is for (shown in lists; not secret)."""
    scopes: Annotated[list[TokenScope], Field(min_length=1)]
    """The scopes."""
    expires_in: Annotated[int, Field(ge=1, le=MAX_TOKEN_SECONDS)] | Absent = None
    """Seconds until it expires; absent: never."""


class TokenRequest(RootModel[TokenOfKind | TokenOfScopes]):
    """What ``POST /v1/tokens`` takes: a kind, or scopes (exactly one of them)."""


class RotateRequest(Model):
    """What ``POST /v1/tokens/<prefix>/rotate`` takes."""

    closed = True
    overlap: Annotated[int, Field(ge=0, le=MAX_TOKEN_SECONDS)] = 86400
    """Seconds the old token keeps working (default a day; 0: none, as a revocation)."""


class TokenPath(Model):
    """The ``<prefix>`` of a token's URL."""

    prefix: TokenPrefix


class TokenInfo(Model):
    """A token's record: never its secret."""

    prefix: TokenPrefix
    name: str
    project: str
    scopes: list[TokenScope]
    created: str
    """UTC, ISO 8601."""
    expires: str | None
    """When it stops working (UTC, ISO 8601), null: never."""
    revoked: str | None
    """When it was revoked (UTC, ISO 8601), null: not revoked."""
    created_by: str
    """Who made it: a configured token's name or a scoped token's prefix."""
    replaced_by: TokenPrefix | None
    """The token a rotation made in its place."""
    active: bool
    """Neither revoked nor expired now."""


class NewToken(TokenInfo):
    """A token just made: its text, shown this once (store it now)."""

    token: str
    """The bearer token: ``Authorization: Bearer <token>``."""


class TokenList(Model):
    """Every token (revoked and expired ones too)."""

    tokens: list[TokenInfo]


class AuditQuery(Model):
    """``GET /v1/audit-log``'s query."""

    limit: Annotated[int, Field(ge=1, le=MAX_AUDIT_PAGE)] = 100
    """Entries at most, newest first."""
    before: Annotated[str, Field(pattern=r"^[0-9]{1,19}-[0-9]{1,19}$")] | Absent = None
    """Only entries older than this id (the previous page's ``next``)."""


class AuditEntry(Model):
    """One admin action."""

    id: str
    """The entry's id (a cursor: ``before``)."""
    time: str
    """UTC, ISO 8601, milliseconds."""
    action: str
    """metric.create, metric.change, metric.retire, metric.unretire, metric.keys,
    metric.delete, metric.export, token.create, token.list, token.rotate,
    token.revoke, audit.read."""
    actor: str
    """admin-token, read-token, metrics-token, a scoped token's prefix, or anonymous."""
    project: str
    target: str
    """The metric or token concerned (empty: none)."""
    outcome: Literal["ok", "refused", "failed"]
    status: int
    """The HTTP status answered."""


class AuditPage(Model):
    """Audit-log entries, newest first."""

    entries: list[AuditEntry]
    next: str | None
    """Pass as ``before`` for older entries; null: no more."""

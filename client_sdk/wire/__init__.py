"""The wire protocol: metric definitions and reports, validated the same on both ends.

Standard library only and free of I/O. The collector validates with these functions,
the SDK builds reports with them, so the two can never disagree. One module a job:
:mod:`~client_sdk.wire.definition` (a metric version), :mod:`~client_sdk.wire.spec` (an
operator's spec parsed into one), :mod:`~client_sdk.wire.report` (building and checking a
report), :mod:`~client_sdk.wire.fields` (the fields' checks and limits),
:mod:`~client_sdk.wire.budget` (the device budget and its calendar),
:mod:`~client_sdk.wire.dimensions` (public dimensions, sent in the clear) and
:mod:`~client_sdk.wire.server` (shards and retention, which only the server acts on).
The protocol itself, for a second SDK: ``docs/protocol.md`` (with the conformance
vectors in ``conformance/``).

In full: ``docs/protocol.md``.
"""

from __future__ import annotations

from client_sdk.errors import DefinitionError, ReportError
from client_sdk.wire.budget import (
    BUDGET_PERIODS,
    MAX_REPORTS_PER_PERIOD,
    Budget,
    day_of,
    period_start,
)
from client_sdk.wire.definition import (
    MetricDefinition,
)
from client_sdk.wire.dimensions import (
    MAX_DIMENSIONS,
    MAX_SEGMENTS,
    segment_labels,
)
from client_sdk.wire.fields import (
    KINDS,
    MAX_DESCRIPTION_LENGTH,
    MAX_LABEL_LENGTH,
    MAX_NAME_LENGTH,
    NAME_PATTERN,
    check_name,
)
from client_sdk.wire.report import (
    OPTIONAL_REPORT_FIELDS,
    REPORT_FIELDS,
    REPORT_ID_PATTERN,
    build_report,
    check_report,
    new_report_id,
    normalise_value,
)
from client_sdk.wire.server import (
    MAX_RETENTION_SECONDS,
    MAX_SHARDS,
    MIN_RETENTION_SECONDS,
    RETENTION_KINDS,
    Retention,
)
from client_sdk.wire.spec import (
    JOINT_SPEC_FIELDS,
    NUMERIC_SPEC_FIELDS,
    SPEC_FIELDS,
    STRING_SPEC_FIELDS,
    parse_spec,
)

# DefinitionError and ReportError are defined in client_sdk.errors; re-exported because
# the collector and the aggregator import them from here.
__all__ = [
    "BUDGET_PERIODS",
    "Budget",
    "DefinitionError",
    "JOINT_SPEC_FIELDS",
    "KINDS",
    "MAX_DESCRIPTION_LENGTH",
    "MAX_DIMENSIONS",
    "MAX_SEGMENTS",
    "OPTIONAL_REPORT_FIELDS",
    "MAX_LABEL_LENGTH",
    "MAX_NAME_LENGTH",
    "MAX_REPORTS_PER_PERIOD",
    "MAX_RETENTION_SECONDS",
    "MAX_SHARDS",
    "MIN_RETENTION_SECONDS",
    "MetricDefinition",
    "NAME_PATTERN",
    "NUMERIC_SPEC_FIELDS",
    "REPORT_FIELDS",
    "REPORT_ID_PATTERN",
    "RETENTION_KINDS",
    "ReportError",
    "Retention",
    "SPEC_FIELDS",
    "STRING_SPEC_FIELDS",
    "build_report",
    "check_name",
    "check_report",
    "day_of",
    "new_report_id",
    "normalise_value",
    "parse_spec",
    "period_start",
    "segment_labels",
]

"""The export API: what ``ldp export`` and ``ldp estimates`` read over HTTP.

``GET /v1/export`` lists each metric version's windows (filtered as ``ldp export``'s
options filter them); ``GET /v1/export/<name>?window=…`` answers one window's rows, the
very rows ``ldp export`` writes from Redis (:mod:`aggregator.query.export` computes both),
so the command line reads the same numbers through the API with a read token as from a
local Redis. One window per request keeps each request bounded (a string metric's
discovery runs through the read guard). Rows of a breakdown follow the server's own
``LDP_MIN_SEGMENT_REPORTS``. Docs: docs/guides/data-lifecycle.md.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from flask import Blueprint, request
from werkzeug.exceptions import BadRequest, NotFound

from aggregator.query.answers import ExportRow, ExportRows, ExportVersion, ExportWindows
from aggregator.query.estimators import Reader, estimator_for
from aggregator.query.export import export_windows, window_rows
from aggregator.web.access import UNAUTHORIZED, documented_read
from aggregator.web.estimates import (
    confidence_asked,
    definition_of,
    distribution_asked,
    estimand_asked,
    min_segment_reports,
    refuse_expired,
    window_asked,
)
from aggregator.web.models import EXPORT_GRANULARITIES, ExportQuery, ExportWindowsQuery
from aggregator.web.read_guard import guarded
from client_sdk.wire import check_name
from ldp_api.context import shared
from ldp_api.models import Error, MetricPath, answer
from ldp_api.openapi import UNAVAILABLE, Reply
from ldp_api.projects import qualified
from ldp_store.registry import Registry

__all__ = ["bp"]

bp = Blueprint("export", __name__)


def _since() -> date | None:
    raw = request.args.get("since")
    if raw is None:
        return None
    try:
        return date.fromisoformat(raw)
    except ValueError:
        raise BadRequest(f"since must be a date YYYY-MM-DD, got {raw[:40]!r}") from None


@bp.get("/v1/export")
@documented_read(
    "The windows an export covers: each metric version's, oldest first.",
    {
        200: Reply("Each version's windows.", ExportWindows),
        400: Reply("A bad metric name, version, granularity or date.", Error),
        401: UNAUTHORIZED,
        404: Reply("No such metric or version.", Error),
        503: UNAVAILABLE,
    },
    description="What ldp export reads first over HTTP: then one GET /v1/export/<name> per window.",
    query=ExportWindowsQuery,
    audit="metric.export",
)
def get_export_windows() -> dict[str, Any]:
    """Each metric version's windows, as ``ldp export``'s options select them."""
    ext = shared()
    metric, raw_version, granularity, since = _windows_asked()
    names = [qualified(metric)] if metric is not None else ext.registry.names()
    found = []
    for name in names:
        for v in _versions_asked(ext.registry, name, metric is not None, raw_version):
            definition = ext.registry.get(name, v)
            if definition is None:
                continue
            windows = export_windows(ext.redis, definition, granularity, since)
            found.append(
                ExportVersion(metric=name, version=v, kind=definition.kind, windows=windows)
            )
    return answer(ExportWindows(versions=found))


def _windows_asked() -> tuple[str | None, str | None, str | None, date | None]:
    """``?metric=``, ``?version=``, ``?granularity=`` and ``?since=``, checked together.

    Raises:
        BadRequest: a bad granularity or name, since with granularity=all, or a version
            without its metric.
    """
    metric = request.args.get("metric")
    raw_version = request.args.get("version")
    granularity = request.args.get("granularity")
    if granularity is not None and granularity not in EXPORT_GRANULARITIES:
        raise BadRequest(f"granularity must be hour, day or all, got {granularity[:40]!r}")
    since = _since()
    if since is not None and granularity == "all":
        raise BadRequest("since selects hour and day windows; granularity=all has none")
    if raw_version is not None and metric is None:
        raise BadRequest("version is for one metric: pass metric= too")
    if metric is not None:
        try:
            check_name(metric)
        except ValueError as exc:
            raise BadRequest(f"metric: {exc}") from None
    return metric, raw_version, granularity, since


def _versions_asked(
    registry: Registry, name: str, named: bool, raw_version: str | None
) -> list[int]:
    """The versions of ``name`` to list: every one, or for the one metric ``named`` the
    version asked for.

    Raises:
        NotFound: the metric named has no version (or not the one asked for).
    """
    if not named:
        return registry.versions(name)
    versions = [definition_of(registry, name).version] if raw_version else []
    versions = versions or registry.versions(name)
    if not versions:
        raise NotFound(f"unknown metric {name!r}")
    return versions


@bp.get("/v1/export/<name>")
@documented_read(
    "One window's rows of an export: counts and estimates, as ldp export writes them.",
    {
        200: Reply("The rows.", ExportRows),
        400: Reply(
            "A bad version, window, confidence or estimand (population of a string metric).",
            Error,
        ),
        401: UNAUTHORIZED,
        404: Reply(
            "No such metric or version, or the window expired (the message says when).",
            Error,
        ),
        503: UNAVAILABLE,
    },
    description="The estimates are GET /v1/estimates' (multiplicity each, the estimand "
    "asked, default reporters, named in every row), beside the counts that make them: "
    "support counts, or a numeric metric's exact sums. Breakdowns by public dimensions "
    "follow LDP_MIN_SEGMENT_REPORTS.",
    path=MetricPath,
    query=ExportQuery,
    audit="metric.export",
)
def get_export_rows(name: str) -> dict[str, Any]:
    """One window's rows."""
    ext = shared()
    definition = definition_of(ext.registry, name)
    window = window_asked()
    refuse_expired(ext.registry, definition, window)
    confidence = confidence_asked()
    estimand = estimand_asked(definition)
    reader = Reader(ext.redis, ext.registry, guarded)
    stats = estimator_for(definition).read(reader, definition, window)
    minimum = min_segment_reports()
    ranges, quantiles = distribution_asked(definition)
    rows = window_rows(
        reader,
        definition,
        window,
        confidence,
        minimum,
        stats,
        estimand=estimand,
        ranges=ranges,
        quantiles=quantiles,
    )
    return answer(
        ExportRows(
            metric=definition.name,
            version=definition.version,
            kind=definition.kind,
            window=window,
            n=stats.n,
            confidence=confidence,
            rows=[ExportRow(**row) for row in rows],
        )
    )

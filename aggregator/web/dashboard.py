"""The operators' dashboard: server-rendered pages whose charts read the JSON APIs.

Pages:

* ``/`` — every metric: version, mechanism, ε per report (and per period where the
  definition has a device budget), n so far, last update, aggregator lag;
* ``/ui/metric/<name>`` — estimates with confidence intervals (raw unbiased and Norm-Sub
  side by side), a table of the same numbers, the CSV, a trend over hour/day windows;
  numeric metrics show their mean with its interval over time;
* ``/ui/metric/<name>/explorer`` and ``/ui/explorer?k=K`` — the privacy–utility–N
  explorer: half-width against N per mechanism and for central Laplace at a chosen ε,
  and the users a target half-width needs; in string mode (a string metric's, or
  ``/ui/explorer?kind=string&max_length=L``) the frequency N users find against N down
  to the collision floor, and the users needed to find values of a frequency;
* ``/ui/metric/<name>`` of a joint metric — one attribute's shares with intervals, or
  its breakdown by another: grouped bars with intervals and a heatmap;
* ``/ui/dictionary`` — the privacy dictionary of the registry ``ldp serve --metrics``
  applied (:mod:`aggregator.catalog.dictionary`);
* ``/ui/try`` — report a value of a categorical metric from this browser: the page
  perturbs it with the JavaScript SDK (``/sdk/ldp-telemetry/index.js``), shows the exact
  report that left it beside the true value, then the metric's n and estimates once the
  aggregator has counted it.

The pages hold no state: the server renders what a metric *is* (its definition), the
browser fetches what it *says* from ``/v1/estimates/…``, ``/v1/overview`` and
``/v1/plan…`` and draws it with plotly.js — the file the ``plotly`` wheel ships, served
from here, so nothing is loaded from another origin. Pages refresh every few seconds
while visible (``?refresh=SECONDS``, 0 for never). With ``LDP_READ_TOKEN`` set, see
:mod:`aggregator.web.access`.
"""

from __future__ import annotations

import functools
import gzip
import importlib.metadata
import importlib.util
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from flask import Blueprint, Response, abort, current_app, render_template, request, url_for
from werkzeug.exceptions import NotFound

from aggregator.alerts.evaluate import Alerts
from aggregator.alerts.rules import KINDS
from aggregator.catalog.dictionary import render_body
from aggregator.catalog.lint import lint
from aggregator.catalog.registry_file import parse_registry
from aggregator.query.relayed import relayed_guarantee
from aggregator.web.models import CURVE_MECHANISMS, OVERVIEW_PAGE
from aggregator.web.status import (
    alarm_rate,
    describe,
    overview_asked,
    overview_body,
    published_caps,
    retention_of,
)
from client_sdk import mechanisms
from client_sdk.mechanisms.strings import MAX_STRING_LENGTH
from client_sdk.wire import MetricDefinition
from ldp_api import auditing, auth
from ldp_api.context import shared
from ldp_store import alerts as alert_store
from ldp_store import keys
from ldp_store.auditlog import AuditLog
from ldp_store.lifecycle import human_bytes
from ldp_store.registry_source import load_source
from ldp_store.retention import duration_label

__all__ = ["CONTENT_SECURITY_POLICY", "bp", "plotly_js_path"]

bp = Blueprint(
    "dashboard",
    __name__,
    template_folder="templates",
    static_folder="static",
    static_url_path="/ui/static",
)

DEFAULT_REFRESH = 5
"""Seconds between refreshes: new reports are counted within about a second, and a
page that polls every 5 s costs the server a few reads of Redis per viewer."""

MAX_REFRESH = 3600
"""An hour: slower than that, reload by hand."""

DEFAULT_EXPLORER_K = 32
DEFAULT_EXPLORER_LENGTH = 16
"""The string mode's bytes per value before a metric exists (the API's default too)."""

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        # plotly.js sets inline styles and adds a <style> element for its own classes.
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data: blob:",
        "connect-src 'self'",
        "font-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
"""Everything from this origin, nothing else: the pages load no third-party code or
data, and a browser refuses it even if a template or a label tried."""

PLOTLY_CACHE_SECONDS = 7 * 24 * 3600
"""The URL carries plotly's version, so the file can be cached for a week."""


def plotly_js_path() -> Path | None:
    """The ``plotly.min.js`` the ``plotly`` wheel ships, without importing plotly."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / "package_data" / "plotly.min.js"
        if candidate.is_file():
            return candidate
    return None


@functools.cache
def _plotly_version() -> str:
    try:
        return importlib.metadata.version("plotly")
    except importlib.metadata.PackageNotFoundError:
        return "missing"


@functools.cache
def _plotly_gzip() -> bytes | None:
    """plotly.min.js compressed once per process (4.8 MB becomes about 1.4 MB)."""
    path = plotly_js_path()
    return gzip.compress(path.read_bytes(), compresslevel=6, mtime=0) if path else None


@bp.get("/ui/vendor/plotly.min.js")
def plotly_js() -> Response:
    """The charting library, from the installed ``plotly`` wheel (MIT licence)."""
    body = _plotly_gzip()
    path = plotly_js_path()
    if body is None or path is None:
        raise NotFound(
            "plotly.min.js: install the server extra (pip install 'ldp-telemetry[server]')"
        )
    gzip_ok = "gzip" in request.headers.get("Accept-Encoding", "")
    response = Response(body if gzip_ok else path.read_bytes(), mimetype="text/javascript")
    if gzip_ok:
        response.headers["Content-Encoding"] = "gzip"
    response.headers["Vary"] = "Accept-Encoding"
    response.cache_control.public = True
    response.cache_control.max_age = PLOTLY_CACHE_SECONDS
    response.add_etag()
    response.make_conditional(request)  # 304 when the browser has this version
    return response


@bp.after_request
def _security_headers(response: Response) -> Response:
    response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "no-referrer")
    if response.mimetype == "text/html":
        response.headers.setdefault("Cache-Control", "no-store")
    return response


@bp.app_context_processor
def _template_globals() -> dict[str, Any]:
    return {"plotly_version": _plotly_version()}


_PERIODS = {3600: "hour", 86400: "day", 7 * 86400: "week", 30 * 86400: "30 days"}


@bp.app_template_filter("period_label")
def period_label(period: Any) -> str:
    """A budget period for people: ``"day"`` as is, 86400 (seconds) as ``"day"``."""
    if isinstance(period, bool) or period in (None, ""):
        return "period"
    if isinstance(period, (int, float)):
        return _PERIODS.get(int(period), f"{period:g} s")
    return str(period)


@bp.app_template_filter("bytes_label")
def bytes_label(n: int | None) -> str:
    """Bytes for people (kB, MB, GB: powers of 1000), as overview.js writes them."""
    return "—" if n is None else human_bytes(n)


@bp.app_template_filter("duration_label")
def _duration_label(seconds: int) -> str:
    """A retention for people: ``14 days``, ``36 hours``."""
    return duration_label(seconds)


@bp.app_template_filter("window_label")
def window_label(window: str | None) -> str:
    """``hour:2026-11-25T23`` as ``2026-11-25 23:00 UTC``; ``day:…`` as the date."""
    if not window:
        return "no reports yet"
    kind, _, start = window.partition(":")
    if kind == "hour":
        return start.replace("T", " ") + ":00 UTC"
    return f"{start} (UTC day)" if kind == "day" else window


def _refresh_seconds() -> int:
    raw = request.args.get("refresh", str(DEFAULT_REFRESH))
    if not raw.isdigit() or int(raw) > MAX_REFRESH:
        abort(400, f"refresh must be whole seconds in [0, {MAX_REFRESH}]")
    return int(raw)


def _version() -> int | None:
    raw = request.args.get("version")
    if raw is None:
        return None
    if not raw.isdigit() or not 1 <= int(raw) < 10**18:
        abort(400, "version must be a positive integer")
    return int(raw)


def _missing(name: str) -> tuple[str, int]:
    return render_template("missing.html", name=name), 404


@bp.get("/")
def overview() -> str:
    """Every metric at a glance; the browser refreshes the numbers from /v1/overview."""
    ext = shared()
    search, offset, limit = overview_asked()
    body = overview_body(
        ext.redis, ext.registry, ext.memory, alarm_rate(), published_caps(), search, offset, limit
    )
    rows, memory, device = body["metrics"], body["memory"], body["device"]
    asked: dict[str, Any] = {k: v for k, v in (("q", search), ("offset", offset)) if v}
    if limit != OVERVIEW_PAGE:
        asked["limit"] = limit
    page = {
        "page": "overview",
        "refresh": _refresh_seconds(),
        "api": {"overview": url_for("status.get_overview", **asked)},
    }
    paging = {
        "q": search,
        "first": offset + 1 if rows else 0,
        "last": offset + len(rows),
        "total": body["total"],
        "previous": None
        if not offset
        else url_for("dashboard.overview", **{**asked, "offset": max(0, offset - limit)}),
        "next": None
        if body["next_offset"] is None
        else url_for("dashboard.overview", **{**asked, "offset": body["next_offset"]}),
    }
    return render_template(
        "overview.html", rows=rows, memory=memory, device=device, page=page, paging=paging
    )


@bp.get("/ui/alerts")
def alerts_page() -> str:
    """Firing and recent alerts, every rule, a form for a new one, the dead letters."""
    ext = shared()
    listing = Alerts(ext.redis, ext.registry).listing()
    page = {"page": "alerts", "api": {"list": url_for("alerts.list_alerts")}}
    return render_template(
        "alerts.html",
        rules=listing,
        events=alert_store.recent_events(ext.redis, 50),
        dead=alert_store.dead_letters(ext.redis, 50),
        kinds=KINDS,
        api=page["api"],
        page=page,
    )


@bp.get("/ui/dictionary")
def dictionary() -> str:
    """The privacy dictionary of the registry ``ldp serve --metrics`` applied
    (:mod:`aggregator.catalog.dictionary`), its expiries checked against today (UTC)."""
    source = load_source(shared().redis)
    body = ""
    if source is not None:
        name, text = source
        result = lint(parse_registry(text, name), datetime.now(UTC).date())
        body = render_body(result)
    return render_template("dictionary.html", body=body, page={"page": "dictionary"})


@bp.get("/ui/metric/<name>")
def metric(name: str) -> str | tuple[str, int]:
    """One metric version: estimates, intervals, table, CSV, trend."""
    ext = shared()
    version = _version()
    definition = ext.registry.get(name, version)
    if definition is None:
        return _missing(name)
    d = describe(definition)
    page_of = _KIND_PAGES.get(definition.kind)
    if page_of is not None:  # a kind with a page of its own
        return page_of(definition, d, ext.registry.current_version(name))
    policy = retention_of(definition)
    d["retention"] = {**policy.to_dict(), "note": policy.describe()}
    d["dimensions"] = [{"name": n, "values": list(v)} for n, v in definition.dimensions]
    if definition.kind == "categorical":
        config = current_app.config
        relayed, batch, released = relayed_guarantee(
            ext.redis,
            definition,
            int(config.get("SHUFFLE_MIN_BATCH", keys.SHUFFLE_MIN_BATCH)),
            float(config.get("SHUFFLE_MAX_DELAY", keys.SHUFFLE_MAX_DELAY)),
        )
        d["relayed"] = None if relayed is None else relayed.model_dump()
        d["relayed_batch"] = (
            f"the smallest released of {batch:,}" if released else f"full ones of {batch:,}"
        )
    query = {"version": d["version"]}
    page = {
        "page": "metric",
        "metric": d,
        "refresh": _refresh_seconds(),
        "api": {
            "estimates": url_for("estimates.get_estimates", name=name, **query),
            "trend": url_for("estimates.get_trend", name=name, **query),
        },
        "csv": url_for("estimates.get_estimates", name=name, format="csv", **query),
        "explorer": url_for("dashboard.metric_explorer", name=name, **query),
    }
    current = ext.registry.current_version(name)
    return render_template("metric.html", d=d, page=page, current_version=current)


def _string_page(definition: MetricDefinition, d: dict[str, Any], current: int | None) -> str:
    """A string metric's page: discovered values, the detection threshold, candidates."""
    page = {
        "page": "string",
        "metric": d,
        "refresh": _refresh_seconds(),
        "api": {
            "estimates": url_for(
                "estimates.get_estimates", name=definition.name, version=definition.version
            ),
            "plan": url_for("strings.get_string_plan"),
        },
        "max_length": definition.sketch.max_length,
        "explorer": url_for(
            "dashboard.metric_explorer", name=definition.name, version=definition.version
        ),
    }
    return render_template(
        "string.html", d=d, page=page, sketch=definition.sketch, current_version=current
    )


def _distribution_page(definition: MetricDefinition, d: dict[str, Any], current: int | None) -> str:
    """A distribution metric's page: the CDF with its simultaneous band, the quantiles,
    the quantiles over hour or day windows."""
    query: dict[str, Any] = {"name": definition.name, "version": definition.version}
    page = {
        "page": "distribution",
        "metric": d,
        "refresh": _refresh_seconds(),
        "scale": definition.histogram.scale,
        "api": {
            "estimates": url_for("estimates.get_estimates", **query),
            "trend": url_for("estimates.get_trend", **query),
        },
    }
    return render_template(
        "distribution.html",
        d=d,
        page=page,
        histogram=definition.histogram,
        current_version=current,
    )


def _joint_page(definition: MetricDefinition, d: dict[str, Any], current: int | None) -> str:
    """A joint metric's page: one attribute's shares, or its breakdown by another."""
    query: dict[str, Any] = {"name": definition.name, "version": definition.version}
    page = {
        "page": "joint",
        "metric": d,
        "refresh": _refresh_seconds(),
        "attributes": [name for name, _ in definition.attributes],
        "api": {"estimates": url_for("estimates.get_estimates", **query)},
        "csv": url_for("estimates.get_estimates", format="csv", **query),
    }
    return render_template(
        "joint.html",
        d=d,
        page=page,
        joint=definition.joint,
        attributes=definition.attributes,
        current_version=current,
    )


_KIND_PAGES: dict[str, Callable[[MetricDefinition, dict[str, Any], int | None], str]] = {
    "string": _string_page,
    "joint": _joint_page,
    "distribution": _distribution_page,
}
"""The kinds whose metric page is their own (the others share the categorical one)."""


def _explorer_page(
    d: dict[str, Any] | None,
    k: int,
    epsilon: float,
    kind: str = "categorical",
    max_length: int = DEFAULT_EXPLORER_LENGTH,
) -> dict[str, Any]:
    api: dict[str, str] = {
        "plan": url_for("plan.get_plan"),
        "curve": url_for("plan.get_curve"),
        "string_plan": url_for("strings.get_string_plan"),
        "string_curve": url_for("strings.get_string_curve"),
    }
    if d is not None:
        api["estimates"] = url_for("estimates.get_estimates", name=d["name"], version=d["version"])
    return {
        "page": "explorer",
        "metric": d,
        "kind": kind,
        "max_length": max_length,
        "k": k,
        "epsilon": epsilon,
        # Marked on the chart when the planner knows it (not a memoized form: its curve
        # needs ε∞, and /v1/plan/curve refuses it).
        "mechanism": d["mechanism"] if d and d["mechanism"] in CURVE_MECHANISMS else None,
        # pram is planned from its own matrix (/v1/plan's &matrix=), at the ε it realises.
        "matrix": (
            json.dumps(d["mechanism_params"].get("matrix"), separators=(",", ":"))
            if d and d["mechanism"] == "pram"
            else None
        ),
        "refresh": _refresh_seconds(),
        "api": api,
    }


@bp.get("/ui/metric/<name>/explorer")
def metric_explorer(name: str) -> str | tuple[str, int]:
    """The tradeoff explorer for a metric's k, starting at its ε and marking its N."""
    ext = shared()
    definition = ext.registry.get(name, _version())
    if definition is None:
        return _missing(name)
    d = describe(definition)
    if definition.kind == "string":
        sketch = definition.sketch
        page = _explorer_page(d, DEFAULT_EXPLORER_K, sketch.epsilon, "string", sketch.max_length)
        return render_template("explorer.html", d=d, page=page, unsupported=False)
    if d["k"] is None or d["kind"] != "categorical":
        return render_template("explorer.html", d=d, page=None, unsupported=True)
    page = _explorer_page(d, d["k"], float(d["epsilon"] or 1.0))
    return render_template("explorer.html", d=d, page=page, unsupported=False)


@bp.get("/ui/explorer")
def explorer() -> str:
    """The tradeoff explorer for any k (``?k=K&epsilon=E``), before a metric exists;
    ``?kind=string&max_length=L`` opens it in string mode."""
    try:
        k = int(request.args.get("k", DEFAULT_EXPLORER_K))
        epsilon = float(request.args.get("epsilon", 1.0))
        max_length = int(request.args.get("max_length", DEFAULT_EXPLORER_LENGTH))
    except ValueError:
        abort(400, "k and max_length must be integers and epsilon a number")
    kind = request.args.get("kind", "categorical")
    if kind not in ("categorical", "string"):
        abort(400, "kind must be categorical or string")
    if not 1 <= max_length <= MAX_STRING_LENGTH:
        abort(400, f"max_length must be in [1, {MAX_STRING_LENGTH}]")
    if not 2 <= k <= mechanisms.MAX_DOMAIN_SIZE:
        abort(400, f"k must be in [2, {mechanisms.MAX_DOMAIN_SIZE}]")
    if not mechanisms.MIN_EPSILON <= epsilon <= mechanisms.MAX_EPSILON:
        abort(400, f"epsilon must be in [{mechanisms.MIN_EPSILON}, {mechanisms.MAX_EPSILON}]")
    page = _explorer_page(None, k, epsilon, kind, max_length)
    return render_template("explorer.html", d=None, page=page, unsupported=False)


AUDIT_PAGE_ENTRIES = 200
"""Entries the dashboard's audit page shows (the newest; ``ldp audit-log`` pages through
all of them)."""


@bp.get("/ui/audit")
@auth.requires("audit:read")
def audit_log() -> str:
    """The audit log's newest entries (of the token's project), for owners."""
    found = auditing.AUDIT.find()
    audit = found if found is not None else AuditLog(shared().redis)
    who = auth.current()
    project = who.project if who is not None else None
    entries = [e for e in audit.read(AUDIT_PAGE_ENTRIES) if project is None or e.project == project]
    page = {"page": "audit", "refresh": 0}
    return render_template("audit.html", entries=entries, limit=AUDIT_PAGE_ENTRIES, page=page)


@bp.get("/ui/try")
def try_reporting() -> str:
    """Report a value from the browser and watch it arrive, perturbed, in the estimates.

    Lists the current categorical metrics (it defines none), with their public dimensions'
    values to pick from; the page's script does the rest with the JavaScript SDK the
    collector serves.
    """
    registry = shared().registry
    metrics = [
        {
            "name": d.name,
            "version": d.version,
            "domain": list(d.domain),
            "dimensions": [{"name": n, "values": list(v)} for n, v in d.dimensions],
            "estimates": url_for("estimates.get_estimates", name=d.name, version=d.version),
            "page": url_for("dashboard.metric", name=d.name, version=d.version),
        }
        for d in registry.all_current()
        if d.kind == "categorical" and d.domain and registry.retired(d.name) is None
    ]
    page = {
        "page": "try",
        "metrics": metrics,
        "sdk": url_for("sdk.module_file", name="index.js"),
        "refresh": 0,
    }
    return render_template("try.html", page=page, metrics=metrics)

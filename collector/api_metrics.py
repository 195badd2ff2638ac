"""``/v1/metrics``: metric definitions for apps (GET) and operators (PUT, with a token)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from flask import Blueprint, current_app, request

from client_sdk.errors import DefinitionError
from collector.body import read_json
from collector.context import services
from collector.errors import ApiError
from collector.models import MAX_VERSION_DIGITS, Metric, MetricList, MetricSpec, VersionQuery
from collector.quotas import QUOTAS
from collector.settings import device_budget
from ldp_api.models import DeviceEpsilonCap, Error, MetricPath, answer
from ldp_api.openapi import UNAVAILABLE, Header, Reply, Scheme, documented
from ldp_edge.answers import clip
from ldp_store import projects
from ldp_store.registry import MetricRetired

__all__ = ["ADMIN_TOKEN", "bp", "retired_at", "version_arg"]

bp = Blueprint("metrics", __name__)

_LOCATION = {"Location": Header("The version's URL: /v1/metrics/<name>?version=<version>.")}

ADMIN_TOKEN = Scheme(
    "adminToken",
    "bearer",
    "LDP_ADMIN_TOKEN (every scope), or a scoped token (ldp tokens) granting the "
    "operation's x-scope.",
    setting="ADMIN_TOKEN",
    unset="disabled",
)
"""What the operators' routes want; :mod:`ldp_api.auth` checks each route's scope."""


STALE_KEY = Reply(
    "An app's ingest key (a scoped token) that is no longer valid: revoked, expired or "
    "unknown. It names no project, so nothing is answered for it (the app drops its "
    "reports).",
    Error,
)
"""A definitions route's answer to a scoped token no longer valid (ldp_api/projects.py)."""


@bp.get("/v1/metrics")
@documented(
    "The current definition of every metric (with retired_at where it is retired).",
    {200: Reply("The metrics.", MetricList), 401: STALE_KEY, 503: UNAVAILABLE},
)
def list_metrics() -> dict[str, Any]:
    """The current definition of every metric, each with its retirement (as
    ``GET /v1/metrics/<name>`` has it: an operator reading the list sees which metrics
    take no reports), and the device-wide caps."""
    registry = services().registry
    metrics = [Metric.of(d, retired_at=retired_at(d.name)) for d in registry.all_current()]
    return answer(MetricList(metrics=metrics, device_budget=published_device_budget()))


@bp.get("/v1/metrics/<name>")
@documented(
    "One metric's current definition, or a given version.",
    {
        200: Reply("The definition.", Metric),
        400: Reply("The version is not a positive integer.", Error),
        401: STALE_KEY,
        404: Reply("No such metric or version.", Error),
        503: UNAVAILABLE,
    },
    path=MetricPath,
    query=VersionQuery,
)
def get_metric(name: str) -> dict[str, Any]:
    """One metric's current definition, or version ``?version=N``."""
    version = version_arg()
    definition = services().registry.get(name, version)
    if definition is None:
        which = f"metric {clip(name, 80)!r}" + (f" version {version}" if version else "")
        raise ApiError(404, f"unknown {which}", ["GET /v1/metrics lists the metrics"])
    return answer(Metric.of(definition, published_device_budget(), retired_at(name)))


def retired_at(name: str) -> str | None:
    """When ``name`` was retired (ISO 8601, UTC), or None
    (:meth:`~ldp_store.registry.Registry.refusing`)."""
    since = services().registry.refusing(name)
    return None if since is None else datetime.fromtimestamp(since, UTC).isoformat()


def published_device_budget() -> DeviceEpsilonCap | None:
    """The device-wide caps this collector publishes (``LDP_DEVICE_EPSILON_…``), if any."""
    budget = device_budget(current_app.config)
    return None if budget is None else DeviceEpsilonCap(**budget.to_dict())


@bp.put("/v1/metrics/<name>")
@documented(
    "Create or change a metric (operators only).",
    {
        200: Reply("Unchanged version (description or budget only).", Metric, _LOCATION),
        201: Reply("A new version was created.", Metric, _LOCATION),
        400: Reply("Invalid definition; every problem is in details.", Error),
        401: Reply("No bearer token.", Error, {"WWW-Authenticate": Header("Bearer.")}),
        403: Reply("Wrong token, or metric changes are disabled.", Error),
        409: Reply(
            "The metric is retired and the change would make a new version, or it is new "
            "and its project holds its quota of metrics.",
            Error,
        ),
        413: Reply("The body is too large.", Error),
        415: Reply("The body is not UTF-8 JSON.", Error),
        503: UNAVAILABLE,
    },
    path=MetricPath,
    body=MetricSpec,
    security=[ADMIN_TOKEN],
    scope="metrics:write",
    audit="metric.change",
)
def put_metric(name: str) -> tuple[dict[str, Any], int, dict[str, str]]:
    """Create or change a metric: 201 with a new version, 200 if the version is unchanged."""
    spec = read_json(request, current_app.config["MAX_BODY_BYTES"])
    registry = services().registry
    QUOTAS.get(current_app).admit_metric(
        lambda: [d.name for d in registry.all_current()], name, projects.project_of(name)
    )
    try:
        change = registry.put(name, spec)
    except DefinitionError as exc:
        raise ApiError(400, "invalid metric definition", exc.problems) from None
    except MetricRetired as exc:
        raise ApiError(
            409,
            f"{exc}: no new version of a retired metric",
            [f"un-retire it first (ldp metrics unretire {name}), or choose another name"],
        ) from None
    definition = change.definition
    location = f"/v1/metrics/{definition.name}?version={definition.version}"
    return answer(Metric.of(definition)), 201 if change.created else 200, {"Location": location}


def version_arg() -> int | None:
    """``?version=N`` of the request, checked (None when absent)."""
    raw = request.args.get("version")
    if raw is None:
        return None
    if not raw.isascii() or not raw.isdigit() or len(raw) > MAX_VERSION_DIGITS or int(raw) < 1:
        raise ApiError(400, "version must be a positive integer", [f"got {clip(raw, 40)!r}"])
    return int(raw)

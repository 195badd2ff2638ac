"""``/v1/metrics``: metric definitions for apps (GET) and operators (PUT, with a token)."""

from __future__ import annotations

import hmac
from typing import Any

from flask import Blueprint, current_app, request

from client_sdk.errors import DefinitionError
from collector.body import read_json
from collector.context import services
from collector.errors import ApiError, clip

__all__ = ["bp", "require_admin"]

bp = Blueprint("metrics", __name__)

MAX_VERSION_DIGITS = 18
"""A version fits in a signed 64-bit integer; longer query values are not versions."""


@bp.get("/v1/metrics")
def list_metrics() -> dict[str, Any]:
    """The current definition of every metric."""
    return {"metrics": [d.to_dict() for d in services().registry.all_current()]}


@bp.get("/v1/metrics/<name>")
def get_metric(name: str) -> dict[str, Any]:
    """One metric's current definition, or version ``?version=N``."""
    version = _version_arg()
    definition = services().registry.get(name, version)
    if definition is None:
        which = f"metric {clip(name, 80)!r}" + (f" version {version}" if version else "")
        raise ApiError(404, f"unknown {which}", ["GET /v1/metrics lists the metrics"])
    return definition.to_dict()


@bp.put("/v1/metrics/<name>")
def put_metric(name: str) -> tuple[dict[str, Any], int, dict[str, str]]:
    """Create or change a metric: 201 with a new version, 200 if the version is unchanged."""
    require_admin()
    spec = read_json(request, current_app.config["MAX_BODY_BYTES"])
    try:
        change = services().registry.put(name, spec)
    except DefinitionError as exc:
        raise ApiError(400, "invalid metric definition", exc.problems) from None
    definition = change.definition
    location = f"/v1/metrics/{definition.name}?version={definition.version}"
    return definition.to_dict(), 201 if change.created else 200, {"Location": location}


def _version_arg() -> int | None:
    raw = request.args.get("version")
    if raw is None:
        return None
    if not raw.isascii() or not raw.isdigit() or len(raw) > MAX_VERSION_DIGITS or int(raw) < 1:
        raise ApiError(400, "version must be a positive integer", [f"got {clip(raw, 40)!r}"])
    return int(raw)


def require_admin() -> None:
    """Check ``Authorization: Bearer <ADMIN_TOKEN>`` in constant time.

    Raises:
        ApiError: 403 if no token is configured (changes disabled) or the token is
            wrong, 401 if the header is missing or not a bearer token.
    """
    expected = current_app.config["ADMIN_TOKEN"]
    if not expected:
        raise ApiError(
            403,
            "metric changes are disabled on this collector",
            ["set LDP_ADMIN_TOKEN to enable PUT /v1/metrics/<name>"],
        )
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise ApiError(
            401,
            "an admin token is required",
            ["send 'Authorization: Bearer <token>'"],
            headers={"WWW-Authenticate": 'Bearer realm="ldp-metrics"'},
        )
    if not hmac.compare_digest(token.encode(), str(expected).encode()):
        raise ApiError(403, "the admin token is not valid")

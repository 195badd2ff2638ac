"""Retire and delete metrics (operators only, with the admin token): issue 17's lifecycle.

* ``POST /v1/metrics/<name>/retire`` — refuse the metric's reports from now on (410 when a
  request holds nothing else; the SDK stops reporting it), keep its estimates readable;
  ``POST …/unretire`` takes reports again. Retirement is per *metric* (every version):
  what an operator retires is a question apps stop asking, whatever its parameters.
  While retired, no new version can be created (409): un-retire first.
* ``GET /v1/metrics/<name>/keys[?version=N]`` — what a delete would remove: keys by kind
  and their memory (``ldp metrics delete`` shows it and asks before deleting).
* ``DELETE /v1/metrics/<name>[?version=N]`` — remove every key of the version(s): streams,
  consumer groups, counts, windows, replay sets, dead letters, found by the version's
  hash tag (:mod:`ldp_store.lifecycle`), then the registry's definitions, leaving a
  tombstone. The current version of a metric that is not retired is refused (409): apps
  would go on reporting it and bring keys back.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from flask import Blueprint

from collector.api_metrics import ADMIN_TOKEN, version_arg
from collector.context import services
from collector.errors import ApiError
from collector.models import KeyCount, Retirement, VersionQuery
from ldp_api.models import Error, MetricPath, answer
from ldp_api.openapi import UNAVAILABLE, Header, Reply, View, documented
from ldp_edge.answers import clip
from ldp_store import keys, lifecycle
from ldp_store.registry import CURRENT_TTL, Registry, retired_on

__all__ = ["bp"]

bp = Blueprint("lifecycle", __name__)

_AUTH: dict[int, Reply] = {
    401: Reply("No bearer token.", Error, {"WWW-Authenticate": Header("Bearer.")}),
    403: Reply("Wrong token, or metric changes are disabled.", Error),
    404: Reply("No such metric or version.", Error),
    503: UNAVAILABLE,
}


def _operators(
    summary: str, replies: dict[int, Reply], scope: str, audit: str, **more: Any
) -> Callable[[View], View]:
    """:func:`documented` for an operators-only route on one metric (admin token)."""
    return documented(
        summary,
        {**replies, **_AUTH},
        path=MetricPath,
        security=[ADMIN_TOKEN],
        scope=scope,
        audit=audit,
        **more,
    )


def _iso(since: float | None) -> str | None:
    return None if since is None else retired_on(since).replace(" UTC", "Z").replace(" ", "T")


def _unknown(name: str) -> ApiError:
    return ApiError(
        404, f"unknown metric {clip(name, 80)!r}", ["GET /v1/metrics lists the metrics"]
    )


def _known(registry: Registry, name: str) -> list[int]:
    versions = registry.versions(name)
    if not versions:
        raise _unknown(name)
    return versions


def _registered(registry: Registry, name: str) -> Registry:
    """``registry``, or a 404 unless it has ``name`` (deleted versions count: it may be
    retired)."""
    if not registry.redis.exists(keys.metric_key(name)):
        raise _unknown(name)
    return registry


def _which(registry: Registry, name: str, version: int | None) -> list[int]:
    """The versions a delete concerns: ``version``, or all of them."""
    versions = _known(registry, name)
    if version is None:
        return versions
    if version not in versions:
        raise ApiError(404, f"unknown metric {clip(name, 80)!r} version {version}")
    return [version]


@bp.post("/v1/metrics/<name>/retire")
@_operators(
    "Retire a metric: refuse its reports (410), keep its estimates (operators only).",
    {200: Reply("Retired (since the first retire call).", Retirement)},
    "metrics:write",
    "metric.retire",
)
def retire(name: str) -> dict[str, Any]:
    """Retire ``name`` (every version); repeating it keeps the first date."""
    since = _registered(services().registry, name).retire(name)
    return answer(Retirement(metric=name, retired=True, retired_at=_iso(since)))


@bp.post("/v1/metrics/<name>/unretire")
@_operators(
    "Take a retired metric's reports again (operators only).",
    {200: Reply("Taking reports.", Retirement)},
    "metrics:write",
    "metric.unretire",
)
def unretire(name: str) -> dict[str, Any]:
    """Take reports of ``name`` again."""
    _registered(services().registry, name).unretire(name)
    return answer(Retirement(metric=name, retired=False, retired_at=None))


def _count(name: str, versions: list[int], deleted: bool) -> tuple[KeyCount, list[bytes]]:
    client = services().redis
    found: list[bytes] = []
    for version in versions:
        found += lifecycle.version_keys(client, name, version)
    report = lifecycle.weigh(client, found)
    body = KeyCount(
        metric=name,
        versions=versions,
        keys=len(found),
        by_kind=report.by_kind,
        bytes=report.bytes,
        deleted=deleted,
    )
    return body, found


@bp.get("/v1/metrics/<name>/keys")
@_operators(
    "What deleting a metric (or one version) would remove (operators only).",
    {
        200: Reply("The keys by kind and their memory.", KeyCount),
        400: Reply("The version is not a positive integer.", Error),
    },
    "metrics:delete",
    "metric.keys",
    query=VersionQuery,
)
def preview_delete(name: str) -> dict[str, Any]:
    """The keys of every version of ``name`` (or ``?version=N``), by kind, with bytes."""
    versions = _which(services().registry, name, version_arg())
    body, _ = _count(name, versions, deleted=False)
    return answer(body)


@bp.delete("/v1/metrics/<name>")
@_operators(
    "Delete every key of a metric's versions, or of one (operators only).",
    {
        200: Reply("Deleted: what was removed.", KeyCount),
        400: Reply("The version is not a positive integer.", Error),
        409: Reply("The current version of a metric that is not retired.", Error),
    },
    "metrics:delete",
    "metric.delete",
    description="Streams, consumer groups, counts, windows, replay sets, dead letters and "
    "the definitions. Export first (ldp export): estimates cannot be recomputed after.",
    query=VersionQuery,
)
def delete_metric(name: str) -> dict[str, Any]:
    """Delete ``name``'s versions (or ``?version=N``): their keys, then their definitions."""
    ctx = services()
    registry = ctx.registry
    versions = _which(registry, name, version_arg())
    # Fresh: a retire just answered by another web worker must count (this worker's
    # cached state may be up to CURRENT_TTL old).
    state = registry.state(name, fresh=True)
    if state.retired is None and state.current in versions:
        raise ApiError(
            409,
            f"metric {name} version {state.current} is current and the metric is not retired",
            [
                f"retire it first (ldp metrics retire {name}), or delete older versions "
                "only (--version N): apps would go on reporting it"
            ],
        )
    registry.forget(name, versions)  # first: no worker or collector takes it up again
    body, found = _count(name, versions, deleted=True)
    lifecycle.delete_keys(ctx.redis, found)
    # Other processes trust their cached registry state for CURRENT_TTL: a report they
    # validated just before may still land. One more pass after that catches its keys.
    time.sleep(CURRENT_TTL)
    for version in versions:
        lifecycle.delete_keys(ctx.redis, lifecycle.version_keys(ctx.redis, name, version))
    return answer(body)

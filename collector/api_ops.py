"""Operations: liveness, readiness, Prometheus metrics and the OpenAPI document.

``/metrics`` counts reports per metric: with ``LDP_METRICS_TOKEN`` or ``LDP_READ_TOKEN``
set it wants ``Authorization: Bearer <token>`` (either of them, or the admin token), as
Prometheus sends with ``authorization: {credentials: ...}`` in its scrape config; with
neither set it stays open, as before (a collector on a private network).
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Any

import redis
from flask import Blueprint, Response, current_app
from redis.exceptions import RedisClusterException

from collector.context import services
from collector.memory import GuardReading
from collector.models import GuardRefusal, Readiness, Status
from ldp_api.models import Error, answer
from ldp_api.openapi import Header, Media, Reply, Scheme, document, documented
from ldp_store.lifecycle import MemoryReport

__all__ = ["METRICS_TOKEN", "bp"]

bp = Blueprint("ops", __name__)

log = logging.getLogger(__name__)

METRICS_TOKEN = Scheme(
    "metricsToken",
    "bearer",
    "LDP_METRICS_TOKEN or LDP_READ_TOKEN (or the admin token): asked for only when one of "
    "the first two is set; without them /metrics is open.",
    setting=("METRICS_TOKEN", "READ_TOKEN"),
)
"""What ``GET /metrics`` wants (scope ``prometheus:read``, checked by :mod:`ldp_api.auth`)."""


@bp.get("/healthz")
@documented("Liveness: the process answers.", {200: Reply("Alive.", Status)})
def healthz() -> dict[str, Any]:
    """The process is up (says nothing about Redis)."""
    return answer(Status(status="ok"))


@bp.get("/readyz")
@documented(
    "Readiness: Redis answers and takes reports.",
    {
        200: Reply(
            "Ready; `refused` lists the metric versions the replay guard refuses.", Readiness
        ),
        503: Reply(
            "Storage is unavailable, or at its memory high-water mark (every report would "
            "get a 503): retry after Retry-After seconds.",
            Error,
            {"Retry-After": Header("Seconds to wait.", "integer")},
        ),
    },
)
def readyz() -> dict[str, Any]:
    """Redis answers and ingest is not refused as a whole: 503 (via the handler) when
    Redis is down or at the memory high-water mark; 200 listing the metric versions the
    replay guard's shares refuse, whose reports alone get a 503."""
    ctx = services()
    ctx.redis.ping()
    memory = ctx.appender.memory
    reading = memory.check()  # raises Unavailable ("memory") at the mark
    refused = []
    for unit, until in sorted(reading.refusing(time.time()).items()):
        name, version, shard = unit.rsplit(":", 2)
        when = datetime.fromtimestamp(until, UTC).isoformat().replace("+00:00", "Z")
        refused.append(
            GuardRefusal(metric=name, version=int(version), shard=int(shard), until=when)
        )
    return answer(Readiness(status="ready", refused=refused))


@bp.get("/metrics")
@documented(
    "The collector's own metrics and Redis memory per metric (Prometheus text format).",
    {
        200: Reply(
            "Counters and histograms.", media={"text/plain": Media("Prometheus exposition.")}
        ),
        401: Reply(
            "A metrics or read token is configured and none valid was sent.",
            Error,
            {"WWW-Authenticate": Header("A Bearer challenge.")},
        ),
    },
    security=[METRICS_TOKEN],
    scope="prometheus:read",
)
def prometheus() -> Response:
    """The collector's counters and latency histogram, in Prometheus' text format."""
    ctx = services()
    memory: MemoryReport | None = None
    guard: GuardReading | None = None
    try:
        memory = ctx.memory.read(wait=0.0)  # a first scrape waits for no SCAN
        guard = ctx.appender.memory.reading()
    except (redis.RedisError, RedisClusterException) as exc:  # counters still answer
        log.warning("redis memory not read for /metrics: %s", type(exc).__name__)
    body, content_type = ctx.telemetry.exposition(memory, guard)
    return Response(body, content_type=content_type)


@bp.get("/openapi.json")
@documented(
    "This document: every route the app serves, from the routes' own models.",
    {200: Reply("OpenAPI 3.1.", media={"application/json": Media("The document.", "object")})},
)
def openapi() -> dict[str, Any]:
    """The OpenAPI 3.1 description of this app's API (the read APIs too, on ``ldp serve``)."""
    return document(current_app)

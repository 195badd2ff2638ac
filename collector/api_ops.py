"""Operations: liveness, readiness, Prometheus metrics and the OpenAPI document."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app

from collector.context import services
from collector.models import Status
from ldp_api.models import answer
from ldp_api.openapi import UNAVAILABLE, Media, Reply, document, documented

__all__ = ["bp"]

bp = Blueprint("ops", __name__)


@bp.get("/healthz")
@documented("Liveness: the process answers.", {200: Reply("Alive.", Status)})
def healthz() -> dict[str, Any]:
    """The process is up (says nothing about Redis)."""
    return answer(Status(status="ok"))


@bp.get("/readyz")
@documented("Readiness: Redis answers.", {200: Reply("Ready.", Status), 503: UNAVAILABLE})
def readyz() -> dict[str, Any]:
    """Redis answers PING: the collector can take reports (else 503 via the handler)."""
    services().redis.ping()
    return answer(Status(status="ready"))


@bp.get("/metrics")
@documented(
    "The collector's own metrics (Prometheus text format).",
    {200: Reply("Counters and histograms.", media={"text/plain": Media("Prometheus exposition.")})},
)
def prometheus() -> Response:
    """The collector's counters and latency histogram, in Prometheus' text format."""
    body, content_type = services().telemetry.exposition()
    return Response(body, content_type=content_type)


@bp.get("/openapi.json")
@documented(
    "This document: every route the app serves, from the routes' own models.",
    {200: Reply("OpenAPI 3.1.", media={"application/json": Media("The document.", "object")})},
)
def openapi() -> dict[str, Any]:
    """The OpenAPI 3.1 description of this app's API (the read APIs too, on ``ldp serve``)."""
    return document(current_app)

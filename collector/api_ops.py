"""Operations: liveness, readiness, Prometheus metrics and the OpenAPI document."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app

from collector.context import services
from collector.openapi import document

__all__ = ["bp"]

bp = Blueprint("ops", __name__)


@bp.get("/healthz")
def healthz() -> dict[str, Any]:
    """The process is up (says nothing about Redis)."""
    return {"status": "ok"}


@bp.get("/readyz")
def readyz() -> dict[str, Any]:
    """Redis answers PING: the collector can take reports (else 503 via the handler)."""
    services().redis.ping()
    return {"status": "ready"}


@bp.get("/metrics")
def prometheus() -> Response:
    """The collector's counters and latency histogram, in Prometheus' text format."""
    body, content_type = services().telemetry.exposition()
    return Response(body, content_type=content_type)


@bp.get("/openapi.json")
def openapi() -> dict[str, Any]:
    """The OpenAPI 3.1 description of this app's API (the read APIs too, on ``ldp serve``)."""
    return document(current_app)

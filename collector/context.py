"""The collector's request context: the shared one (:mod:`ldp_api.context`) and its own parts."""

from __future__ import annotations

from dataclasses import dataclass

from flask import Flask

from collector.ingest import Appender
from collector.telemetry import Telemetry
from collector.throttle_log import ThrottleLog
from ldp_api.context import SharedContext, shared
from ldp_edge.admission import Admission

__all__ = ["Services", "services"]


@dataclass(frozen=True)
class Services(SharedContext):
    """The shared context (Redis client, metric registry, cached reading of Redis memory
    per metric) with the collector's stream appender, metrics, limiter and its log.

    The read side, mounted on the same app by ``ldp serve``, reads the shared part
    through :func:`ldp_api.context.shared`.
    """

    telemetry: Telemetry
    appender: Appender
    admission: Admission
    throttle_log: ThrottleLog


def services(app: Flask | None = None) -> Services:
    """``app``'s :class:`Services` (default: the current app's)."""
    return shared(Services, app)

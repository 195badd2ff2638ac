"""What every request of one app shares, attached once as ``app.extensions["ldp"]``."""

from __future__ import annotations

from dataclasses import dataclass

import redis
from flask import current_app

from collector.admission import Admission
from collector.ingest import Appender
from collector.telemetry import Telemetry
from ldp_store.lifecycle import MemoryUsage
from ldp_store.registry import Registry

__all__ = ["Services", "services"]


@dataclass(frozen=True)
class Services:
    """The app's Redis client, metric registry, stream appender, metrics, limiter and the
    cached reading of Redis memory per metric (for ``/metrics`` and the dashboard).

    The aggregator's blueprints, mounted on the same app by ``ldp serve``, read
    ``redis`` and ``registry`` from here too.
    """

    redis: redis.Redis
    registry: Registry
    appender: Appender
    telemetry: Telemetry
    admission: Admission
    memory: MemoryUsage


def services() -> Services:
    """The current app's :class:`Services`."""
    found = current_app.extensions["ldp"]
    assert isinstance(found, Services)
    return found

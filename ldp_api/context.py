"""What every request of one app shares, attached once and read through typed accessors.

The collector's app factory builds the app's :class:`SharedContext` (its subclass
:class:`collector.context.Services`) and attaches it with :func:`attach`; the read side,
mounted on the same app by the composition root (:mod:`ldp_server.app`), reads the same
object with :func:`shared`. A room's own per-app object (the read guard, the retention
policy) has a typed :class:`Slot` too. This module is the only one that touches
``app.extensions`` (``tests/test_architecture.py``). See docs/architecture/layout.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, overload

import redis
from flask import Flask, current_app
from prometheus_client import CollectorRegistry
from prometheus_client.registry import Collector

from ldp_store.lifecycle import MemoryUsage
from ldp_store.registry import Registry

__all__ = [
    "MetricsHooks",
    "SharedContext",
    "Slot",
    "attach",
    "on_worker_start",
    "shared",
    "worker_started",
]

T = TypeVar("T")
C = TypeVar("C", bound="SharedContext")


class MetricsHooks(Protocol):
    """The app's Prometheus metrics, as the read side adds to them."""

    registry: CollectorRegistry
    """Where a room registers a metric of its own (the read guard's counters)."""

    def add_collector(self, collector: Collector) -> None:
        """Export ``collector`` (evaluated at each scrape) on the app's ``/metrics``."""


@dataclass(frozen=True)
class SharedContext:
    """What both services need from a request's app: one Redis client (server or
    cluster), the metric registry over it, the cached reading of Redis memory per metric,
    and the app's metrics."""

    redis: redis.Redis
    registry: Registry
    memory: MemoryUsage
    telemetry: MetricsHooks


class Slot(Generic[T]):
    """A typed place for one object per app, under its own ``app.extensions`` key.

    Args:
        key: the extension's name (one per slot).
        kind: the type every attached object has (checked on attach and read).
    """

    def __init__(self, key: str, kind: type[T]) -> None:
        self.key = key
        self.kind = kind

    def attach(self, app: Flask, value: T) -> None:
        """Attach ``value`` to ``app`` (at start, once)."""
        if not isinstance(value, self.kind):
            raise TypeError(f"{self.key}: expected {self.kind.__name__}, got {type(value)}")
        app.extensions[self.key] = value

    def find(self, app: Flask | None = None) -> T | None:
        """``app``'s object (default: the current app's), or None when none is attached."""
        found = (app or current_app).extensions.get(self.key)
        if found is not None and not isinstance(found, self.kind):
            raise TypeError(f"{self.key}: expected {self.kind.__name__}, got {type(found)}")
        return found

    def get(self, app: Flask | None = None) -> T:
        """``app``'s object (default: the current app's).

        Raises:
            LookupError: nothing is attached: the app was not built by the app factory
                that attaches it.
        """
        found = self.find(app)
        if found is None:
            raise LookupError(f"no {self.key} attached to this app")
        return found


SHARED: Slot[SharedContext] = Slot("ldp", SharedContext)
"""The app's shared context (attached by the collector's app factory)."""


def attach(app: Flask, context: SharedContext) -> None:
    """Attach ``context`` as ``app``'s shared context."""
    SHARED.attach(app, context)


@overload
def shared(kind: None = None, app: Flask | None = None) -> SharedContext: ...
@overload
def shared(kind: type[C], app: Flask | None = None) -> C: ...
def shared(kind: type[SharedContext] | None = None, app: Flask | None = None) -> SharedContext:
    """The shared context of ``app`` (default: the current app), as ``kind`` when given (a
    subclass such as the collector's ``Services``, checked).

    Raises:
        LookupError: no context is attached to the app.
        TypeError: the attached context is not a ``kind``.
    """
    found = SHARED.get(app)
    if kind is not None and not isinstance(found, kind):
        raise TypeError(f"the app's context is a {type(found).__name__}, not a {kind.__name__}")
    return found


_WORKER_START = "ldp_worker_start"


def on_worker_start(app: Flask, hook: Callable[[], None]) -> None:
    """Call ``hook`` in each web server process that serves ``app``, once it is ready to
    serve (:func:`worker_started`), not in a master that only forks them."""
    app.extensions.setdefault(_WORKER_START, []).append(hook)


def worker_started(app: Flask) -> None:
    """``app`` is about to serve requests in this process (gunicorn's ``post_worker_init``,
    after a fork and gevent's patching): run its :func:`on_worker_start` hooks."""
    for hook in app.extensions.get(_WORKER_START, ()):
        hook()

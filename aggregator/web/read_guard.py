"""Expensive reads kept from starving the service: a string metric's discovery.

A discovery walks every level of the sketch: about a second of CPU whatever the window
holds. :class:`ReadGuard` (one per app) keeps each window's result until its counts
change (keyed by n); once a window has one, a newer discovery runs behind the answer
(:meth:`ReadGuard.get`), so only a window's first read waits for one. It runs one
request's discovery for every request that asks for the same window meanwhile, on a
native thread so the worker's event loop keeps serving, and at most
``READ_DISCOVERIES`` at once per process: one more is refused with 503 and
``Retry-After`` instead of queueing CPU work nobody bounds. A window without reports
never gets here (:class:`aggregator.query.estimators.StringEstimator` answers it empty).
The process's warmer (:mod:`aggregator.query.warm`) makes the discoveries of the string
reads its lane records through the same guard (:meth:`ReadGuard.warm_state`), so that a
read process that starts has them before its first request.
``ldp serve`` also runs the read side in worker processes of their own, at a lower CPU
priority than ingest (:mod:`ldp_server.serve`). In full: ``docs/architecture/read-side.md``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeVar

from flask import Flask, has_app_context
from prometheus_client import Counter
from werkzeug.exceptions import ServiceUnavailable

from aggregator.query.estimators.base import Reader
from aggregator.query.estimators.strings import StringEstimator
from aggregator.query.memo import held_bytes, off_loop
from aggregator.query.warm import Later, Replay
from client_sdk.wire import MetricDefinition
from ldp_api.context import Slot, shared

__all__ = [
    "CACHED_BYTES",
    "CACHED_WINDOWS",
    "DEFAULT_DISCOVERIES",
    "REDISCOVER_SECONDS",
    "ReadGuard",
    "WarmState",
    "cached",
    "discovery_replay",
    "guarded",
    "install",
]

T = TypeVar("T")
log = logging.getLogger(__name__)
Key = tuple[str, int, str]
"""(metric, version, window)."""
WarmState = Literal["run", "later", "none"]
"""What a warm-up of a window does (:meth:`ReadGuard.warm_state`)."""

REDISCOVER_SECONDS = 30.0
"""How long a window's discovery is reused as it is while its reports keep arriving (a
discovery costs about a second of CPU; the dashboard refreshes far more often); after
that a newer one runs behind the answer."""

CACHED_WINDOWS = 64
"""Discoveries kept per process (the newest windows of a few dozen string metrics)."""

CACHED_BYTES = 256 << 20
"""Bytes of arrays the kept discoveries may hold per process, the oldest dropped first
(the newest is always kept). A discovery is kept with its estimator, which holds the
window's counts and the tables derived from them: ≈ 8 MiB at max_length 16 and 32 MiB at
64 (ε = 4: 128 rows of 128 cells a level), so 64 windows of long strings held 2 GiB."""

KEPT_DEPTH = 4
"""How deep :func:`~aggregator.query.memo.held_bytes` looks into a kept result: (the
discovery, its estimator) → the discovery → its list of levels → a level's table."""

DEFAULT_DISCOVERIES = 1
"""Discoveries one process runs at once (``LDP_READ_DISCOVERIES``). Each is CPU-bound
and holds the interpreter most of the time, so a second one in the same process only
halves the speed of both; more read processes (``ldp serve``'s ``LDP_READ_WORKERS``)
are what adds throughput."""

MAX_DISCOVERIES = 64
"""Upper bound of the setting: beyond it the bound is no bound."""

WAIT_SECONDS = 60.0
"""How long a request waits for another request's discovery of the same window before
it answers 503 (a discovery takes seconds; the gunicorn worker timeout is 30 s)."""

DROPPED_WINDOWS = 4 * CACHED_WINDOWS
"""Windows dropped for the bounds that this process remembers, so that its warm-up does
not make them again (each would drop another, every batch)."""

RETRY_AFTER_SECONDS = 2
"""``Retry-After`` of a refused discovery: about one discovery's time."""


@dataclass
class _Flight:
    """A discovery under way: who else asked for the window waits on ``done``."""

    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None


class ReadGuard:
    """The cache, the single-flight table and the bound of one app's discoveries.

    Args:
        limit: discoveries run at once in this process.
        registry: where the counters go (the app's Prometheus registry), or None.
        clock: seconds, for :data:`REDISCOVER_SECONDS` (tests pass their own).
    """

    def __init__(
        self,
        limit: int = DEFAULT_DISCOVERIES,
        registry: Any = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: OrderedDict[Key, tuple[int, float, Any, int]] = OrderedDict()
        self._bytes = 0
        self._dropped: OrderedDict[Key, None] = OrderedDict()
        self._flights: dict[Key, _Flight] = {}
        self._running = 0
        self.runs = Counter(
            "ldp_read_discoveries",
            "String-metric discoveries run (each about a second of CPU); a cached or "
            "empty window runs none.",
            registry=registry,
        )
        self.refused = Counter(
            "ldp_read_refused",
            "Reads refused with 503 because READ_DISCOVERIES discoveries were running.",
            registry=registry,
        )

    def peek(self, key: Key) -> Any:
        """The last result for ``key``, however old, or None; runs nothing."""
        with self._lock:
            hit = self._cache.get(key)
        return None if hit is None else hit[2]

    def warm_state(self, key: Key) -> WarmState:
        """What a warm-up of window ``key`` does now, before it reads the counts: "run"
        (:meth:`get` with them: a first discovery, or the kept one with a newer behind
        when due); "later" (the kept one is younger than :data:`REDISCOVER_SECONDS`, or
        ``limit`` discoveries are running: the next pass asks again); "none" (one is
        under way, or the window is not kept and making it would drop another: what is
        kept stays within :data:`CACHED_WINDOWS` and :data:`CACHED_BYTES`)."""
        now = self._clock()
        with self._lock:
            hit = self._cache.get(key)
            if key in self._flights:
                return "none"
            if hit is not None:
                return "later" if now - hit[1] < REDISCOVER_SECONDS else "run"
            if (
                key in self._dropped
                or len(self._cache) >= CACHED_WINDOWS
                or self._bytes >= CACHED_BYTES
            ):
                return "none"
            return "later" if self._running >= self.limit else "run"

    def get(self, key: Key, n: int, compute: Callable[[], T]) -> T:
        """The discovery of window ``key`` holding ``n`` reports: the last one made for
        the window, if any, and then, when n changed at least :data:`REDISCOVER_SECONDS`
        after it was made, a newer one starts behind the answer (unless one is under way
        or ``limit`` are running: the next read tries again); else ``compute()``, run
        once for all concurrent askers, off the event loop.

        Raises:
            ServiceUnavailable: the window has no discovery yet and ``limit`` are running
                (with ``Retry-After``), or the one this request waited for failed or took
                too long.
        """
        now = self._clock()
        with self._lock:
            hit = self._cache.get(key)
            flight = self._flights.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                due = hit[0] != n and now - hit[1] >= REDISCOVER_SECONDS
                if not due or flight is not None or self._running >= self.limit:
                    return hit[2]
            mine = flight is None
            if flight is None:
                if self._running >= self.limit:
                    self.refused.inc()
                    raise _busy(f"{self._running} discoveries are running")
                flight = self._flights[key] = _Flight()
                self._running += 1
        if hit is not None:
            # a thread of its own (a greenlet where gevent patched threading: off_loop
            # moves the CPU to a native thread as for a request's own discovery)
            threading.Thread(
                target=self._rediscover,
                args=(key, n, now, flight, lambda: off_loop(compute)),
                name="ldp-rediscovery",
                daemon=True,
            ).start()
            return hit[2]
        if not mine:
            if not flight.done.wait(WAIT_SECONDS) or flight.result is None:
                raise _busy("the discovery of this window did not finish")
            return flight.result
        return self._run(key, n, now, flight, lambda: off_loop(compute))

    def _run(
        self, key: Key, n: int, started: float, flight: _Flight, compute: Callable[[], T]
    ) -> T:
        """Run ``flight``'s discovery, keep it, and let its waiters go."""
        try:
            self.runs.inc()
            result = compute()
            size = held_bytes(result, KEPT_DEPTH)
            with self._lock:
                replaced = self._cache.pop(key, None)
                self._bytes += size - (0 if replaced is None else replaced[3])
                self._cache[key] = (n, started, result, size)
                self._dropped.pop(key, None)
                while len(self._cache) > 1 and (
                    len(self._cache) > CACHED_WINDOWS or self._bytes > CACHED_BYTES
                ):
                    dropped, kept = self._cache.popitem(last=False)
                    self._bytes -= kept[3]
                    self._dropped[dropped] = None
                while len(self._dropped) > DROPPED_WINDOWS:
                    self._dropped.popitem(last=False)
            flight.result = result
            return result
        finally:
            with self._lock:
                self._running -= 1
                del self._flights[key]
            flight.done.set()

    def _rediscover(
        self, key: Key, n: int, started: float, flight: _Flight, compute: Callable[[], object]
    ) -> None:
        """:meth:`_run` behind an answer: a failure is logged, and the window keeps its
        last discovery (the next read that finds it due tries again)."""
        try:
            self._run(key, n, started, flight, compute)
        except Exception:
            log.exception("rediscovering %s failed; its last discovery is served", key)


def _busy(why: str) -> ServiceUnavailable:
    return ServiceUnavailable(
        f"too many string estimates are being computed ({why}); retry after "
        f"{RETRY_AFTER_SECONDS} s (a window already computed answers at once)",
        retry_after=RETRY_AFTER_SECONDS,
    )


def read_limit(app: Flask) -> int:
    """``READ_DISCOVERIES`` (``LDP_READ_DISCOVERIES``), checked.

    Raises:
        ValueError: not an integer in [1, :data:`MAX_DISCOVERIES`].
    """
    raw: Any = app.config.get("READ_DISCOVERIES", DEFAULT_DISCOVERIES)
    try:
        limit = int(raw)
    except (TypeError, ValueError):
        limit = 0
    if isinstance(raw, bool) or not 1 <= limit <= MAX_DISCOVERIES or str(limit) != str(raw):
        raise ValueError(
            f"LDP_READ_DISCOVERIES must be an integer in [1, {MAX_DISCOVERIES}], got {raw!r}"
        )
    return limit


GUARD: Slot[ReadGuard] = Slot("ldp_read_guard", ReadGuard)
"""The app's guard."""


def install(app: Flask) -> None:
    """Give ``app`` its guard, counting into its Prometheus registry."""
    GUARD.attach(app, ReadGuard(read_limit(app), shared(app=app).telemetry.registry))


def cached(key: Key) -> Any:
    """The current app's last result for ``key``, however old, or None (none yet, or
    outside an app): for views that show what a discovery found without running one."""
    if not has_app_context():
        return None
    return GUARD.get().peek(key)


def guarded(key: Key, n: int, compute: Callable[[], T]) -> T:
    """:meth:`ReadGuard.get` of the current app's guard; outside an app (``ldp export``)
    ``compute()`` itself.

    Raises:
        ServiceUnavailable: see :meth:`ReadGuard.get`.
    """
    if not has_app_context():
        return compute()
    return GUARD.get().get(key, n, compute)


def discovery_replay(
    guard: ReadGuard, definition: MetricDefinition, window: str, confidence: float
) -> Replay:
    """The warm-up of a string read (:mod:`aggregator.query.warm`): its window's
    discovery through ``guard`` (a first one, or the kept one with a newer one behind
    when due: never more often than a request's read would make one), and its
    selection-adjusted intervals at ``confidence``; the counts are read only when the
    guard may run one (:meth:`ReadGuard.warm_state`).

    Raises:
        Later: the guard puts it off (paced, or its discoveries all running).
    """
    key = (definition.name, definition.version, window)
    strings = StringEstimator()

    def replay(reader: Reader) -> None:
        state = guard.warm_state(key)
        if state == "later":
            raise Later(f"the discovery of {key} is paced or the guard is busy")
        if state == "none":
            return
        counts = strings.read(reader, definition, window)
        try:
            found, _ = strings.discovery(replace(reader, run=guard.get), definition, window, counts)
        except ServiceUnavailable as exc:  # another request's discovery took the bound
            raise Later(str(exc)) from None
        found.adjusted(confidence)

    return replay

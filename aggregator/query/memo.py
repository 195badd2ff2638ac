"""The statistics of an answer kept per process, keyed by the counts they were computed
from: a read whose counts have not changed since the last (a dashboard refreshing, many
readers of one metric) reuses them instead of recomputing every value's intervals, tests
and confidence sequence. A new batch counted changes the counts, hence the key: the next
read computes afresh, unless the process's warmer (:mod:`aggregator.query.warm`) already
did. The numbers are those a fresh computation gives (the same pure function of the same
inputs). In full: docs/architecture/read-side.md.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from client_sdk.wire import MetricDefinition

__all__ = [
    "MEMO_BYTES",
    "MemoStats",
    "clear",
    "counts_key",
    "held_bytes",
    "off_loop",
    "remembered",
    "stats",
]

T = TypeVar("T")

MEMO_BYTES = 64 << 20
"""Bytes of arrays a process keeps (oldest dropped first): a k = 65,536 estimate holds
about 5 MB of statistics, a 4-value one a few hundred bytes."""

FLIGHT_WAIT_SECONDS = 30.0
"""How long a read waits for the same statistics another read (or the warmer) is
computing before it computes them itself: a breakdown's first read takes up to 10 s at
load 25, and the ingest workers that forward a read wait 40 s for its answer."""

_lock = threading.Lock()
_kept: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
_size = [0]
_flights: dict[Hashable, threading.Event] = {}
_counted = {"hits": 0, "computed": 0}


@dataclass(frozen=True)
class MemoStats:
    """What this process's memo did: reads that found their statistics kept (``hits``,
    waiting for another's computation included), computations (``computed``), and what
    it holds (``entries``, ``bytes``)."""

    hits: int
    computed: int
    entries: int
    bytes: int


def stats() -> MemoStats:
    """This process's :class:`MemoStats` now."""
    with _lock:
        return MemoStats(_counted["hits"], _counted["computed"], len(_kept), _size[0])


def clear() -> None:
    """Forget every statistic kept (its counters stay)."""
    with _lock:
        _kept.clear()
        _size[0] = 0


def off_loop(work: Callable[[], T]) -> T:
    """``work()`` (pure: no Redis, no greenlet switch) on a native thread when gevent has
    patched this process, so the worker's event loop keeps serving other reads meanwhile
    (the calling greenlet waits); else ``work()`` in this thread."""
    try:
        from gevent import get_hub, monkey  # type: ignore[import-untyped]  # noqa: PLC0415
    except ImportError:  # pragma: no cover - gevent is a dependency
        return work()
    if not monkey.is_module_patched("threading"):
        return work()
    result: T = get_hub().threadpool.spawn(work).get()
    return result


def counts_key(definition: MetricDefinition, n: int, support: Any, *rest: Hashable) -> Hashable:
    """What an answer's statistics depend on: the metric version (its mechanism and
    labels), n, a digest of the support counts, and ``rest`` (the level, estimand, …)."""
    counts = np.ascontiguousarray(support)
    digest = hashlib.blake2b(counts.tobytes(), digest_size=16).digest()
    labels = hash((definition.domain, repr(definition.mechanism)))  # a version recreated
    return (definition.name, definition.version, labels, n, counts.dtype.str, digest, *rest)


def held_bytes(value: Any, depth: int = 3) -> int:
    """Bytes of the numpy arrays ``value`` holds (in its fields and items, ``depth``
    levels down), and 256 for the rest."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if depth == 0:
        return 256
    if isinstance(value, tuple | list):
        parts: Any = value
    elif isinstance(value, dict):
        parts = value.values()
    else:
        parts = (getattr(value, "__dict__", None) or {}).values()
    return 256 + sum(held_bytes(x, depth - 1) for x in parts)


def remembered(key: Hashable, compute: Callable[[], T]) -> T:
    """``compute()``, or what it returned for ``key`` before (kept while it fits in
    :data:`MEMO_BYTES` with the newer ones). A read that finds ``key`` being computed by
    another (a concurrent read, the warmer) waits for that result, up to
    :data:`FLIGHT_WAIT_SECONDS`, instead of computing it a second time."""
    while True:
        with _lock:
            found = _kept.get(key)
            if found is not None:
                _kept.move_to_end(key)
                _counted["hits"] += 1
                return found[0]
            flight = _flights.get(key)
            mine = flight is None
            if flight is None:
                flight = _flights[key] = threading.Event()
        if mine:
            break
        if not flight.wait(FLIGHT_WAIT_SECONDS):
            with _lock:
                _counted["computed"] += 1
            return compute()  # the other computation is stuck: not waited on twice
        # kept now (a hit), or that computation failed: then this read computes it
    try:
        value = compute()
        size = held_bytes(value)
        with _lock:
            _counted["computed"] += 1
            if key not in _kept:
                _kept[key] = (value, size)
                _size[0] += size
            while _size[0] > MEMO_BYTES and len(_kept) > 1:
                _, (_, dropped) = _kept.popitem(last=False)
                _size[0] -= dropped
        return value
    finally:
        with _lock:
            _flights.pop(key, None)
        flight.set()

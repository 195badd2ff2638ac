"""The statistics of an answer kept per process, keyed by the counts they were computed
from: a read whose counts have not changed since the last (a dashboard refreshing, many
readers of one metric) reuses them instead of recomputing every value's intervals, tests
and confidence sequence. A new batch counted changes the counts, hence the key: the next
read computes afresh. The numbers are those a fresh computation gives (the same pure
function of the same inputs). In full: docs/architecture/read-side.md.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import numpy as np

from client_sdk.wire import MetricDefinition

__all__ = ["MEMO_BYTES", "counts_key", "held_bytes", "remembered"]

T = TypeVar("T")

MEMO_BYTES = 64 << 20
"""Bytes of arrays a process keeps (oldest dropped first): a k = 65,536 estimate holds
about 5 MB of statistics, a 4-value one a few hundred bytes."""

_lock = threading.Lock()
_kept: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
_size = [0]


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
    :data:`MEMO_BYTES` with the newer ones)."""
    with _lock:
        found = _kept.get(key)
        if found is not None:
            _kept.move_to_end(key)
            return found[0]
    value = compute()
    size = held_bytes(value)
    with _lock:
        if key not in _kept:
            _kept[key] = (value, size)
            _size[0] += size
        while _size[0] > MEMO_BYTES and len(_kept) > 1:
            _, (_, dropped) = _kept.popitem(last=False)
            _size[0] -= dropped
    return value

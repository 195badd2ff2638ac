"""The upload queue: perturbed reports waiting to be sent, bounded by count and bytes.

Items are reports already perturbed and serialized (compact JSON bytes), so a queue never
holds a true value, and a batch body is the items joined with commas. The uploader peeks
the oldest items, sends them, and acks them once the answer is processed: a report
leaves the queue only when the collector took it, or said it never will.

This module is the queue's contract and the in-memory queue. :class:`ReportQueue` (with
:class:`Entry` and the default quotas) is what the client and its uploader need;
:class:`Quotas` is what both kinds of queue share (the quota checks, ``nbytes``,
``evicted``); :class:`MemoryQueue` keeps items in memory. The durable queue,
:class:`client_sdk.store.Store` (a small SQLite file, so reports made offline or before a
crash survive a restart: ``Client(url, storage_dir=...)``), implements the same contract
and imports it from here. The arrow points from ``store/`` to this module, never back,
so a client without a ``storage_dir`` never loads the store or ``sqlite3``.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import NamedTuple, Protocol

from client_sdk.errors import QueueFullError
from client_sdk.numbers import is_count

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_COUNT",
    "Entry",
    "MemoryQueue",
    "Quotas",
    "ReportQueue",
]

DEFAULT_MAX_COUNT = 10_000
"""Reports kept at most by default: a day of a busy app's telemetry while offline."""

DEFAULT_MAX_BYTES = 8 * 1024 * 1024
"""Bytes kept at most by default: memory an app can spare. 10 000 reports of a unary
metric at k = 1024 (about 265 bytes each) take 2.6 MiB; the rest is room for bigger ones."""


class Entry(NamedTuple):
    """One queued report: a key to ack it by and its serialized bytes."""

    key: int
    data: bytes


class ReportQueue(Protocol):
    """What the client and its uploader need from a queue. Implementations are thread-safe.

    Quotas drop the *oldest* items first (Glean's pending-ping quotas), and count them.
    """

    durable: bool
    """Whether items survive the process (then shutdown keeps them instead of dropping)."""

    def put(self, item: bytes) -> int:
        """Append an item, dropping the oldest ones beyond the quotas.

        Returns:
            The number of items queued after the put.

        Raises:
            QueueFullError: the item alone exceeds the byte quota.
        """
        ...

    def peek(self, max_count: int, max_bytes: int) -> list[Entry]:
        """The oldest items, at most ``max_count``, joined by commas at most ``max_bytes``.

        Always at least one item when the queue is not empty, however large it is.
        """
        ...

    def ack(self, keys: Iterable[int]) -> None:
        """Remove the items with these keys (keys no longer queued are ignored)."""
        ...

    def clear(self) -> int:
        """Remove every item; return how many there were."""
        ...

    def __len__(self) -> int:
        """The number of queued items."""
        ...

    @property
    def nbytes(self) -> int:
        """The bytes of all queued items."""
        ...

    @property
    def evicted(self) -> int:
        """Items dropped so far to respect the quotas."""
        ...

    def after_fork_in_child(self) -> None:
        """Make the queue usable in a forked child (fresh locks; the child owns no items)."""
        ...


class Quotas:
    """What both queues share: their quotas, checked once, and the totals they report.

    Args:
        max_count: most items kept.
        max_bytes: most bytes kept (sum of the items' lengths).

    Raises:
        ValueError: a quota below 1.
    """

    _bytes: int
    _evicted: int

    def __init__(self, max_count: int, max_bytes: int) -> None:
        for name, value in (("max_count", max_count), ("max_bytes", max_bytes)):
            if not is_count(value):
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.max_count = max_count
        self.max_bytes = max_bytes

    @property
    def nbytes(self) -> int:  # noqa: D102
        return self._bytes

    @property
    def evicted(self) -> int:  # noqa: D102
        return self._evicted


class MemoryQueue(Quotas):
    """An in-memory :class:`ReportQueue`.

    Args:
        max_count: most items kept.
        max_bytes: most bytes kept (sum of the items' lengths).

    Raises:
        ValueError: a quota below 1.
    """

    durable = False

    def __init__(
        self, max_count: int = DEFAULT_MAX_COUNT, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        super().__init__(max_count, max_bytes)
        self._lock = threading.Lock()
        self._items: deque[Entry] = deque()
        self._bytes = 0
        self._next_key = 0
        self._evicted = 0

    def put(self, item: bytes) -> int:  # noqa: D102
        size = len(item)
        if size > self.max_bytes:
            raise QueueFullError(f"a {size}-byte item exceeds the queue's {self.max_bytes} bytes")
        with self._lock:
            items = self._items
            items.append(Entry(self._next_key, item))
            self._next_key += 1
            self._bytes += size
            while len(items) > self.max_count or self._bytes > self.max_bytes:
                self._bytes -= len(items.popleft().data)
                self._evicted += 1
            return len(items)

    def peek(self, max_count: int, max_bytes: int) -> list[Entry]:  # noqa: D102
        batch: list[Entry] = []
        total = -1  # n items joined by n - 1 commas
        with self._lock:
            for entry in self._items:
                total += len(entry.data) + 1
                if batch and (len(batch) >= max_count or total > max_bytes):
                    break
                batch.append(entry)
        return batch

    def ack(self, keys: Iterable[int]) -> None:  # noqa: D102
        done = set(keys)
        if not done:
            return
        with self._lock:
            items = self._items
            while items and items[0].key in done:
                done.discard(items[0].key)
                self._bytes -= len(items.popleft().data)
            # Keys grow with every put, so keys below the head's were evicted meanwhile.
            head = items[0].key if items else self._next_key
            done = {key for key in done if key > head}
            if done:  # acked out of order: rare, so a linear pass is fine
                self._keep_only(lambda e: e.key not in done)

    def discard(self, drop: Callable[[bytes], bool]) -> int:
        """Remove the items ``drop`` says to (e.g. a retired metric's); return how many."""
        with self._lock:
            return self._keep_only(lambda e: not drop(e.data))

    def _keep_only(self, keep: Callable[[Entry], bool]) -> int:
        """Keep the items ``keep`` accepts, in order (a linear pass, under the lock);
        return how many went."""
        kept = deque(e for e in self._items if keep(e))
        gone = len(self._items) - len(kept)
        self._items = kept
        self._bytes = sum(len(e.data) for e in kept)
        return gone

    def clear(self) -> int:  # noqa: D102
        with self._lock:
            n = len(self._items)
            self._items.clear()
            self._bytes = 0
            return n

    def __len__(self) -> int:
        return len(self._items)

    def after_fork_in_child(self) -> None:
        """Fresh lock, no items: the parent still holds and delivers what it queued."""
        self._lock = threading.Lock()
        self._items = deque()
        self._bytes = 0
        self._evicted = 0

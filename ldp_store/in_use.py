"""The metric versions in use: a set the writers keep, so a scrape reads only their counters.

A version enters :data:`~ldp_store.keys.IN_USE` when reports are appended to it (the
collector) and when its counts are committed (the worker): ``/metrics`` then reads the
counters of a few hundred versions, not the four keys of each of ten thousand. A set that
was never filled by a full pass (a deployment from before it, a Redis restored or
flushed) lacks the member :data:`SWEPT`: the next scrape weighs every metric once and
records what it found. Why and what it costs: docs/architecture/read-side.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import redis

from ldp_store import keys
from ldp_store.connection import as_text

__all__ = ["MARK_SECONDS", "SWEPT", "Marks", "marked", "member", "record_sweep"]

SWEPT = "*"
"""The member that says a full pass filled the set (a metric name has no ``*``)."""

MARK_SECONDS = 600.0
"""Seconds a process trusts its own mark of a version: it sends ``SADD`` again after
that, so a set lost meanwhile (and swept before the loss was seen) misses a version for
ten minutes at most, at one command per version and ten minutes per process."""

MARKS_KEPT = 65_536
"""Versions whose marks a process remembers: above ten thousand metrics' versions."""


def member(name: str, version: int) -> str:
    """The set member of a metric version (names have no colon)."""
    return f"{name}:{version}"


class Marks:
    """A process's marks: ``SADD`` a version once per :data:`MARK_SECONDS`.

    Args:
        client: Redis (a cluster client too: the set is one key, written on its own).
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(self, client: redis.Redis, clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.clock = clock
        self._at: dict[str, float] = {}

    def mark(self, name: str, version: int) -> None:
        """Note that ``name`` version ``version`` has reports (appended or counted).

        Raises:
            redis.RedisError: Redis is unavailable (the mark is sent again next time).
        """
        key, now = member(name, version), self.clock()
        if now - self._at.get(key, float("-inf")) < MARK_SECONDS:
            return
        self.client.sadd(keys.IN_USE, key)
        if len(self._at) >= MARKS_KEPT:
            self._at.clear()
        self._at[key] = now


def marked(client: redis.Redis) -> set[str] | None:
    """The members of the set, or None when no full pass filled it yet (:data:`SWEPT`)."""
    raw = client.smembers(keys.IN_USE)
    found = {as_text(m) for m in raw}
    return found if SWEPT in found else None


def record_sweep(client: redis.Redis, found: Iterable[tuple[str, int]], *, every: bool) -> None:
    """Add the versions a full pass found in use; with ``every`` (the pass saw every
    project's metrics), mark the set as filled."""
    members = [member(name, version) for name, version in found]
    if every:
        members.append(SWEPT)
    if members:
        client.sadd(keys.IN_USE, *members)

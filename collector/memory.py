"""The memory high-water mark and the replay guard's budget: refuse ingest (503) before

Redis refuses writes, but never for memory that only time frees.

In full: ``docs/guides/operating.md``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import redis
from redis.cluster import RedisCluster

from collector.errors import Unavailable
from ldp_store import guard, keys
from ldp_store.connection import is_cluster
from ldp_store.lifecycle import delete_keys, guard_day_keys

__all__ = [
    "CHECK_INTERVAL",
    "NEAR",
    "NEAR_INTERVAL",
    "SHORTEN_LOCK_SECONDS",
    "GuardReading",
    "MemoryGuard",
    "fullest",
]

log = logging.getLogger(__name__)

SHORTEN_LOCK_SECONDS = 600
"""One collector drops yesterday's guard; the others see the lock and go on serving. Ten
minutes is far longer than the SCAN and UNLINKs take (seconds for millions of keys)."""

CHECK_INTERVAL = 1.0
"""Seconds a reading of ``INFO memory`` is reused while memory is far from the mark."""

NEAR = 0.10
"""Within this share of ``maxmemory`` below the mark, readings are refreshed faster."""

NEAR_INTERVAL = 0.1
"""Seconds a reading is reused near the mark: the overshoot is what ingest adds in it."""


def _fill(info: Mapping[str, Any]) -> float | None:
    """The share of ``maxmemory`` one node uses as Redis counts it for the limit."""
    limit = int(info.get("maxmemory", 0) or 0)
    if limit <= 0:
        return None
    # Redis leaves the AOF and replication buffers out when it compares with maxmemory.
    used = int(info.get("used_memory", 0)) - int(info.get("mem_not_counted_for_evict", 0))
    return used / limit


def fullest(info: Mapping[str, Any]) -> float | None:
    """The highest fill of ``INFO memory``'s answer: one node's fields, or (a cluster
    client's answer) a mapping of node name to fields. None if no node has a limit."""
    nodes = (
        list(info.values()) if info and all(isinstance(v, dict) for v in info.values()) else [info]
    )
    fills = [f for f in (_fill(node) for node in nodes) if f is not None]
    return max(fills) if fills else None


def _nodes(info: Mapping[str, Any]) -> list[tuple[int, int]]:
    """(used, maxmemory) of each node of ``INFO memory``'s answer that has a limit."""
    nodes = (
        list(info.values()) if info and all(isinstance(v, dict) for v in info.values()) else [info]
    )
    out = []
    for node in nodes:
        limit = int(node.get("maxmemory", 0) or 0)
        used = int(node.get("used_memory", 0)) - int(node.get("mem_not_counted_for_evict", 0))
        if limit > 0:
            out.append((used, limit))
    return out


@dataclass(frozen=True)
class GuardReading:
    """One reading: Redis memory per node with a limit, and the guard's ids by day.

    Attributes:
        nodes: (used, maxmemory) of each primary that has a ``maxmemory``.
        held_today: ids the guard took today (UTC), all metrics.
        held_yesterday: the same for yesterday (0 once the window was shortened).
        guard_share: the guard's budget, a share of ``maxmemory``.
    """

    nodes: tuple[tuple[int, int], ...]
    held_today: int
    held_yesterday: int
    guard_share: float

    @property
    def guard_bytes(self) -> int:
        """The guard's memory as the collectors count it (all primaries)."""
        return (self.held_today + self.held_yesterday) * guard.BYTES_PER_ID

    @property
    def budget_bytes(self) -> int:
        """The guard's budget (all primaries; 0 without ``maxmemory``)."""
        return int(self.guard_share * sum(limit for _, limit in self.nodes))

    def guard_fill(self) -> float | None:
        """The guard's share of its budget (None without ``maxmemory``)."""
        budget = self.budget_bytes
        return self.guard_bytes / budget if budget else None

    def fill(self) -> float | None:
        """The fullest node's drainable fill: its memory less its part of the guard, over
        what the guard's budget leaves of its ``maxmemory``. None without a limit."""
        if not self.nodes:
            return None
        part = self.guard_bytes / len(self.nodes)
        return max(
            max(0.0, used - part) / (limit * (1 - self.guard_share)) for used, limit in self.nodes
        )


class MemoryGuard:
    """Answers 503 at the high-water mark of drainable memory, and keeps the replay
    guard within its budget (see the module's docstring).

    Args:
        client: the collector's Redis (or Redis Cluster) client.
        high_water: the mark, a share of what the guard's budget leaves (0 < x ≤ 1).
        guard_share: the guard's budget, a share of ``maxmemory`` (0 ≤ x < 1).
        interval: seconds a reading is reused far from the limits.
        near_interval: seconds a reading is reused within :data:`NEAR` of one.
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(
        self,
        client: redis.Redis,
        high_water: float,
        guard_share: float = 0.0,
        interval: float = CHECK_INTERVAL,
        near_interval: float = NEAR_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 0 < high_water <= 1:
            raise ValueError(f"high_water must be in (0, 1], got {high_water}")
        if not 0 <= guard_share < 1:
            raise ValueError(f"guard_share must be in [0, 1), got {guard_share}")
        self.client = client
        self.high_water = high_water
        self.guard_share = guard_share
        self.interval = interval
        self.near_interval = near_interval
        self.clock = clock
        self.last: GuardReading | None = None
        """The latest reading (``/metrics`` shows it)."""
        self._days: tuple[str, str] = ("", "")
        self._read_at = float("-inf")

    def reading(self, now: datetime | None = None) -> GuardReading:
        """A reading at most ``interval`` (near a limit ``near_interval``) seconds old,
        read again at once when the UTC day changed.

        Raises:
            redis.RedisError: Redis is unavailable.
        """
        days = guard.day_pair(now or datetime.now(UTC))
        last, tick = self.last, self.clock()
        near = last is not None and (
            (last.fill() or 0) >= self.high_water - NEAR or (last.guard_fill() or 0) >= 1 - NEAR
        )
        wait = self.near_interval if near else self.interval
        if last is None or days != self._days or tick - self._read_at >= wait:
            if is_cluster(self.client):
                info = self.client.info("memory", target_nodes=RedisCluster.PRIMARIES)
            else:
                info = self.client.info("memory")
            with self.client.pipeline(transaction=False) as pipe:
                for day in days:
                    pipe.get(keys.guard_held_key(day))
                today, yesterday = (int(x or 0) for x in pipe.execute())
            self.last = GuardReading(tuple(_nodes(info)), today, yesterday, self.guard_share)
            self._days, self._read_at = days, tick
        assert self.last is not None
        return self.last

    def fill(self) -> float | None:
        """The fullest node's drainable fill (see :meth:`GuardReading.fill`).

        Raises:
            redis.RedisError: Redis is unavailable.
        """
        return self.reading().fill()

    def check(self, now: datetime | None = None) -> str | None:
        """Pass below both limits. At the guard's budget, shorten its window (returns the
        day dropped, if this process dropped it).

        Raises:
            Unavailable: reason ``memory`` at the mark; reason ``guard`` when today's ids
                alone fill the guard's budget.
            redis.RedisError: Redis is unavailable.
        """
        now = now or datetime.now(UTC)
        reading = self.reading(now)
        dropped = None
        guard_fill = reading.guard_fill()
        if guard_fill is not None and guard_fill >= 1:
            if reading.held_yesterday:
                dropped = self._shorten(now, reading)
            else:
                raise Unavailable(
                    f"the replay guard holds its budget of today's report ids "
                    f"({reading.held_today:,} ids, {guard_fill:.0%} of "
                    f"{reading.budget_bytes:,} bytes); it frees at 00:00 UTC: retry later",
                    "guard",
                )
        fill = reading.fill()
        if fill is not None and fill >= self.high_water:
            raise Unavailable(
                f"storage memory is {fill:.0%} used (ingest pauses at "
                f"{self.high_water:.0%} so the aggregator can drain); retry later",
                "memory",
            )
        return dropped

    def _shorten(self, now: datetime, reading: GuardReading) -> str | None:
        """Drop yesterday's guard (every metric's), once across collectors: the window
        becomes "since 00:00 UTC" until tomorrow. Returns the day if this process did it."""
        yesterday = guard.day_pair(now)[1]
        lock = keys.guard_held_key(yesterday) + ":dropping"
        if not self.client.set(lock, "1", nx=True, ex=SHORTEN_LOCK_SECONDS):
            return None  # another collector is at it: serve on meanwhile
        found = guard_day_keys(self.client, yesterday)
        removed = delete_keys(self.client, found)
        self.client.delete(keys.guard_held_key(yesterday))
        log.warning(
            "replay guard at its budget (%d ids, %d of %d bytes): dropped yesterday's "
            "ids (%s, %d keys); until 00:00 UTC replays are refused only for reports "
            "accepted today (LDP_GUARD_BUDGET raises the budget)",
            reading.held_today + reading.held_yesterday,
            reading.guard_bytes,
            reading.budget_bytes,
            yesterday,
            removed,
        )
        self._read_at = float("-inf")  # read again at the next request
        return yesterday

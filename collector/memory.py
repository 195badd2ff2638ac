"""The memory high-water mark: refuse ingest (503) before Redis refuses writes.

Redis runs with ``maxmemory`` and ``noeviction``: at the limit it refuses every command
that may grow memory, and the collector answers 503 for the OOM error. That is safe for
what was accepted, but too late for the aggregator: its commit adds counts as it drains,
so ingest must stop while there is room left. :class:`MemoryGuard` reads ``INFO memory``
and refuses ingest while Redis uses ``high_water`` or more of its ``maxmemory``; below
the mark ingest resumes by itself, e.g. once the aggregator has drained and trimmed.

This is also the global backlog limit. ``MAX_BACKLOG`` bounds each stream, inside the
append script; a count across streams would need a key that every metric's script
updates, and on a Redis Cluster one script may touch only one hash slot, so no such
counter can be kept atomically. Memory is what a backlog actually exhausts (with the
replay guard and the counts beside it), it is global per Redis node, and INFO reads it in
one command. On a cluster the fullest node decides: a full node stops ingest everywhere,
which is coarse but never lets a node reach the point where its aggregator cannot drain.

``INFO memory`` costs Redis about 6 µs and the collector about 100 µs to parse, too much
for every request at 100,000 reports/s (``benchmarks/bench_replay_guard.py`` measures
it), so a reading is reused for ``interval`` seconds, and for ``near_interval`` once
memory is within ``NEAR`` of the mark. What ingest can add in that time (at 100,000
reports/s and a few hundred bytes each, about 3 MB in 0.1 s) is what the margin above
the mark must hold; past it Redis refuses writes itself and the collector still answers
503.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import redis
from redis.cluster import RedisCluster

from collector.errors import Unavailable
from ldp_store.connection import is_cluster

__all__ = ["CHECK_INTERVAL", "NEAR", "NEAR_INTERVAL", "MemoryGuard", "fullest"]

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


class MemoryGuard:
    """Answers 503 while Redis uses ``high_water`` or more of its ``maxmemory``.

    Args:
        client: the collector's Redis (or Redis Cluster) client.
        high_water: the mark, a share of ``maxmemory`` (0 < high_water ≤ 1).
        interval: seconds a reading is reused far from the mark.
        near_interval: seconds a reading is reused within :data:`NEAR` of the mark.
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(
        self,
        client: redis.Redis,
        high_water: float,
        interval: float = CHECK_INTERVAL,
        near_interval: float = NEAR_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 0 < high_water <= 1:
            raise ValueError(f"high_water must be in (0, 1], got {high_water}")
        self.client = client
        self.high_water = high_water
        self.interval = interval
        self.near_interval = near_interval
        self.clock = clock
        self._fill: float | None = None
        self._read_at = float("-inf")

    def fill(self) -> float | None:
        """The fullest node's share of its ``maxmemory`` (None: no limit set), from a
        reading at most ``interval`` (near the mark ``near_interval``) seconds old.

        Raises:
            redis.RedisError: Redis is unavailable.
        """
        now = self.clock()
        near = self._fill is not None and self._fill >= self.high_water - NEAR
        if now - self._read_at >= (self.near_interval if near else self.interval):
            if is_cluster(self.client):
                info = self.client.info("memory", target_nodes=RedisCluster.PRIMARIES)
            else:
                info = self.client.info("memory")
            self._fill = fullest(info)
            self._read_at = now
        return self._fill

    def check(self) -> None:
        """Pass below the mark; raise :class:`Unavailable` (reason ``memory``) at it."""
        fill = self.fill()
        if fill is not None and fill >= self.high_water:
            raise Unavailable(
                f"storage memory is {fill:.0%} used (ingest pauses at "
                f"{self.high_water:.0%} so the aggregator can drain); retry later",
                "memory",
            )

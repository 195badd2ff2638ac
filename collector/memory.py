"""The memory high-water mark and the replay guard's budget: refuse ingest (503) before
Redis refuses writes, never for memory that only time frees, and weigh the guard's ids
by unit so that one metric's flood takes no other metric's share.

In full: ``docs/guides/operating.md``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import redis
from redis.cluster import RedisCluster
from redis.exceptions import RedisClusterException

from collector.errors import Unavailable
from ldp_store import guard, keys
from ldp_store.connection import is_cluster, node_infos, unavailable

log = logging.getLogger(__name__)

__all__ = [
    "CHECK_INTERVAL",
    "NEAR",
    "NEAR_INTERVAL",
    "REFUSALS_KEPT",
    "GuardReading",
    "MemoryGuard",
    "fullest",
]

CHECK_INTERVAL = 1.0
"""Seconds a reading of ``INFO memory`` is reused while memory is far from the mark."""

NEAR = 0.10
"""Within this share of ``maxmemory`` below the mark, readings are refreshed faster."""

NEAR_INTERVAL = 0.1
"""Seconds a reading of memory is reused near the mark, and a reading of the guard's
counts always: the overshoot is what ingest adds in it."""

REFUSALS_KEPT = 3_600
"""Seconds a unit's refusal stays listed after it ended: a reading then forgets it."""


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
    fills = [f for f in (_fill(node) for node in node_infos(info)) if f is not None]
    return max(fills) if fills else None


def _nodes(info: Mapping[str, Any]) -> list[tuple[int, int]]:
    """(used, maxmemory) of each node of ``INFO memory``'s answer that has a limit."""
    out = []
    for node in node_infos(info):
        limit = int(node.get("maxmemory", 0) or 0)
        used = int(node.get("used_memory", 0)) - int(node.get("mem_not_counted_for_evict", 0))
        if limit > 0:
            out.append((used, limit))
    return out


@dataclass(frozen=True)
class GuardReading:
    """One reading: Redis memory per node with a limit, and the guard's ids by unit.

    Attributes:
        nodes: (used, maxmemory) of each primary that has a ``maxmemory``.
        held: ids each unit (:func:`ldp_store.keys.guard_unit`) holds in its epochs of
            today and yesterday (UTC), as the collectors counted them.
        held_today: ids in today's epochs, all units.
        held_yesterday: the same for yesterday's.
        units: the units the budget's reserved part is split among.
        guard_share: the guard's budget, a share of ``maxmemory``.
        refused: units the guard's shares refuse, with when they expect to take reports
            again (Unix seconds).
    """

    nodes: tuple[tuple[int, int], ...]
    held: Mapping[str, int]
    held_today: int
    held_yesterday: int
    units: int
    guard_share: float
    refused: Mapping[str, float] = field(default_factory=dict)

    @property
    def guard_bytes(self) -> int:
        """The guard's memory as the collectors count it (all primaries)."""
        return (self.held_today + self.held_yesterday) * guard.BYTES_PER_ID

    @property
    def budget_bytes(self) -> int:
        """The guard's budget (all primaries; 0 without ``maxmemory``)."""
        return int(self.guard_share * sum(limit for _, limit in self.nodes))

    @property
    def reserve(self) -> int:
        """Ids each unit may hold whatever the others hold (-1: no budget)."""
        budget = self.budget_bytes // guard.BYTES_PER_ID
        if budget <= 0:
            return -1
        return int(guard.RESERVED_SHARE * budget / max(1, self.units))

    @property
    def pool(self) -> int:
        """Ids the units may hold beyond their reserves, all together (0: no budget)."""
        reserve = self.reserve
        if reserve < 0:
            return 0
        return self.budget_bytes // guard.BYTES_PER_ID - reserve * max(1, self.units)

    def pool_used(self) -> int:
        """Ids the units hold beyond their reserves."""
        reserve = self.reserve
        return sum(max(0, ids - reserve) for ids in self.held.values()) if reserve >= 0 else 0

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

    def refusing(self, now: float) -> dict[str, float]:
        """The units refused at ``now`` (Unix seconds), with until when."""
        return {unit: until for unit, until in self.refused.items() if until > now}


def _send(pipe: Any, pending: Mapping[tuple[str, str], int]) -> None:
    """Queue the counts' increments, and their days' expiry, on a pipeline."""
    for (day, unit), ids in sorted(pending.items()):
        pipe.hincrby(keys.guard_ids_key(day), unit, ids)
    for day in sorted({day for day, _ in pending}):
        pipe.expireat(keys.guard_ids_key(day), guard.expires_at(day))


def _held_ids(*days: dict[bytes, Any]) -> dict[str, int]:
    """Each unit's guard ids over the days' counts (a negative count: none)."""
    held: dict[str, int] = {}
    for counts in days:
        for unit, ids in counts.items():
            held[unit.decode()] = held.get(unit.decode(), 0) + max(0, int(ids))
    return held


def _total(counts: dict[bytes, Any]) -> int:
    """A day's guard ids over every unit (a negative count: none)."""
    return sum(max(0, int(x)) for x in counts.values())


def _forget_ended(client: redis.Redis, refused: Mapping[str, float], wall: float) -> None:
    """Delete the guard's refusals that ended :data:`REFUSALS_KEPT` before ``wall``."""
    ended = [unit for unit, until in refused.items() if until < wall - REFUSALS_KEPT]
    if ended:
        client.hdel(keys.guard_refused_key(), *ended)


class MemoryGuard:
    """Answers 503 at the high-water mark of drainable memory, and reads the replay guard's
    ids against its budget (see the module's docstring).

    Args:
        client: the collector's Redis (or Redis Cluster) client.
        high_water: the mark, a share of what the guard's budget leaves (0 < x ≤ 1).
        guard_share: the guard's budget, a share of ``maxmemory`` (0 ≤ x < 1).
        interval: seconds a reading is reused far from the limits.
        near_interval: seconds a reading is reused within :data:`NEAR` of one.
        clock: monotonic seconds (tests pass their own).
        units: how many units the budget's reserve is split among (the registry's metric
            versions' shards); None: the units the guard holds ids of.
    """

    def __init__(
        self,
        client: redis.Redis,
        high_water: float,
        guard_share: float = 0.0,
        interval: float = CHECK_INTERVAL,
        near_interval: float = NEAR_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        units: Callable[[], int] | None = None,
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
        self.units = units
        self.last: GuardReading | None = None
        """The latest reading (``/metrics`` shows it)."""
        self._pending: dict[tuple[str, str], int] = {}  # ids by (day, unit), not yet sent
        self._pending_lock = threading.Lock()
        self._held: dict[str, int] = {}
        self._pool_used = 0
        self._days: tuple[str, str] = ("", "")
        self._read_at = float("-inf")  # when memory was last read (the clock's seconds)
        self._counted_at = float("-inf")  # when the guard's counts were
        self._failed_at = float("-inf")  # when a reading last failed (a node unavailable)

    def reading(self, now: datetime | None = None) -> GuardReading:
        """A reading whose memory is at most ``interval`` (near the mark ``near_interval``)
        seconds old and whose guard counts at most ``near_interval``; both read again at
        once when the UTC day changed.

        When a node cannot be read (a cluster primary that died, until its replica takes
        over), the last reading stands, and the nodes are read again ``interval`` later:
        the appends to the other nodes go on meanwhile.

        Raises:
            redis.RedisError: Redis is unavailable and there is no earlier reading.
        """
        tick = self.clock()
        if self.last is not None and tick - self._failed_at < self.interval:
            return self.last
        try:
            return self._reading(now)
        except (redis.RedisError, RedisClusterException) as exc:
            if self.last is None or not unavailable(exc):
                raise
            log.warning("memory reading failed (%s: %s); the last one stands for %.1f s",
                        type(exc).__name__, exc, self.interval)  # fmt: skip
            self._failed_at = tick
            return self.last

    def _reading(self, now: datetime | None) -> GuardReading:
        now = now or datetime.now(UTC)
        days, wall = guard.day_pair(now), now.timestamp()
        last, tick = self.last, self.clock()
        nodes = last.nodes if last is not None else ()
        if self._memory_due(last, days, tick):
            nodes, self._read_at = self._read_memory(), tick
        elif tick - self._counted_at < self.near_interval:
            assert last is not None
            return last
        today, yesterday, refused = self._read_counts(days)
        held = _held_ids(today, yesterday)
        self.last = GuardReading(
            nodes,
            held,
            _total(today),
            _total(yesterday),
            self.units() if self.units is not None else max(1, len(held)),
            self.guard_share,
            {unit.decode(): float(until) for unit, until in refused.items()},
        )
        self._days, self._counted_at = days, tick
        self._held = dict(held)
        self._pool_used = self.last.pool_used()
        _forget_ended(self.client, self.last.refused, wall)
        return self.last

    def _memory_due(self, last: GuardReading | None, days: tuple[str, str], tick: float) -> bool:
        """Whether memory is read again: a first reading, a new day, or its interval
        passed (the shorter one near the high-water mark)."""
        if last is None or days != self._days:
            return True
        near = (last.fill() or 0) >= self.high_water - NEAR
        return tick - self._read_at >= (self.near_interval if near else self.interval)

    def _read_memory(self) -> tuple[Any, ...]:
        """Each node's memory reading (every primary of a cluster)."""
        if is_cluster(self.client):
            info = self.client.info("memory", target_nodes=RedisCluster.PRIMARIES)
        else:
            info = self.client.info("memory")
        return tuple(_nodes(info))

    def _read_counts(self, days: tuple[str, str]) -> tuple[Any, Any, Any]:
        """The guard's counts of both days and its refusals: a few small hashes, read
        every near_interval (the others' appends since are the budget's margin), in the
        round trip that sends this process's own first (so a reading holds every id its
        process appended)."""
        with self._pending_lock:
            pending, self._pending = self._pending, {}
        try:
            with self.client.pipeline(transaction=False) as pipe:
                _send(pipe, pending)
                for day in days:
                    pipe.hgetall(keys.guard_ids_key(day))
                pipe.hgetall(keys.guard_refused_key())
                today, yesterday, refused = pipe.execute()[-3:]
        except BaseException:
            self._restore(pending)
            raise
        return today, yesterday, refused

    def count(self, day: str, unit: str, ids: int) -> None:
        """Add ``ids`` (negative: an epoch dropped) to the unit's count of the day's guard
        ids (:func:`ldp_store.keys.guard_ids_key`): sent with the next reading of the
        counts, at most ``near_interval`` later if requests keep coming (one round trip
        for both); a crash loses at most that much."""
        with self._pending_lock:
            self._pending[day, unit] = self._pending.get((day, unit), 0) + ids

    def flush(self) -> None:
        """Send the counts :meth:`count` added up, now.

        Raises:
            redis.RedisError: Redis is unavailable (the counts are kept for the next).
        """
        with self._pending_lock:
            pending, self._pending = self._pending, {}
        if not pending:
            return
        try:
            with self.client.pipeline(transaction=False) as pipe:
                _send(pipe, pending)
                pipe.execute()
        except BaseException:
            self._restore(pending)
            raise

    def _restore(self, pending: dict[tuple[str, str], int]) -> None:
        """Counts that were not sent go back, to be sent with the next."""
        with self._pending_lock:
            for key, ids in pending.items():
                self._pending[key] = self._pending.get(key, 0) + ids

    def shares(self, now: datetime) -> guard.Shares:
        """What a unit may add now: the latest reading's reserve, and its pool's room less
        what this process's appends took since (:meth:`note`)."""
        reading = self.reading(now)
        reserve = reading.reserve
        if reserve < 0:
            return guard.UNLIMITED
        return guard.Shares(reserve, max(0, reading.pool - self._pool_used))

    def note(self, unit: str, ids: int) -> None:
        """A unit holds ``ids`` now, as the append script just said: the pool's use is
        updated at once, not at the next reading (a process never overshoots on its own)."""
        reading = self.last
        if reading is None or reading.reserve < 0:
            return
        reserve = reading.reserve
        with self._pending_lock:
            before = self._held.get(unit, 0)
            self._held[unit] = ids
            self._pool_used += max(0, ids - reserve) - max(0, before - reserve)

    def fill(self) -> float | None:
        """The fullest node's drainable fill (see :meth:`GuardReading.fill`).

        Raises:
            redis.RedisError: Redis is unavailable.
        """
        return self.reading().fill()

    def check(self, now: datetime | None = None) -> GuardReading:
        """Pass below the mark; return the reading (whose shares the appends weigh).

        Raises:
            Unavailable: reason ``memory`` at the mark.
            redis.RedisError: Redis is unavailable.
        """
        reading = self.reading(now or datetime.now(UTC))
        fill = reading.fill()
        if fill is not None and fill >= self.high_water:
            raise Unavailable(
                f"storage memory is {fill:.0%} used (ingest pauses at "
                f"{self.high_water:.0%} so the aggregator can drain); retry later",
                "memory",
            )
        return reading

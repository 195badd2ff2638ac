"""The shuffler: relayed reports reach the stream in shuffled batches of at least B.

Reports that came through the Oblivious HTTP gateway are appended, with the same replay
guard and limits as any, to their version's *shuffle pool* (a Redis stream beside the
report stream, :func:`ldp_store.keys.pool_key`) and acknowledged (202) once Redis holds
them: persisted, not held in memory, so a collector that dies loses nothing it
acknowledged. When a pool holds ``min_batch`` reports (B) they are released to the report
stream in an order drawn from the OS's CSPRNG (``secrets.SystemRandom``), by one script
(:data:`ldp_store.scripts.SHUFFLE`) that appends and deletes together: stream order no
longer follows arrival order, and who sees the stream sees batches of at least B.

A pool below B waits: with ``max_delay`` 0 (the default) for as long as it takes, which
keeps "at least B" a guarantee; with ``max_delay`` > 0 a pool whose oldest report waited
that long is released anyway (counted as ``full="false"`` in ``ldp_shuffle_batches``).
A timer thread in each collector process that has pooled a report releases due pools
every :data:`TICK_SECONDS`; a pool left at B by a crash between its append and its release
goes with the next relayed report anywhere, or that timer.

In full: ``docs/concepts/privacy-model.md`` and ``docs/security/threat-model.md``.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import threading
import time
import weakref
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

import redis
from prometheus_client import Counter, Histogram

from collector.ingest import Appender, Item, RetiredOnAppend
from ldp_api.context import Slot
from ldp_store import keys, scripts

if TYPE_CHECKING:
    from collector.context import Services

__all__ = [
    "DEFAULT_MAX_DELAY",
    "POOL",
    "DEFAULT_MIN_BATCH",
    "TICK_SECONDS",
    "PoolAppender",
    "Shuffler",
    "stop_timers",
]

log = logging.getLogger(__name__)

DEFAULT_MIN_BATCH = keys.SHUFFLE_MIN_BATCH
"""B: reports a batch holds at least (100). Within a batch the stream order carries no
arrival information; ``docs/concepts/privacy-model.md`` shows the ε_c each B buys."""

DEFAULT_MAX_DELAY = 0.0
"""Seconds after which a pool below B is released anyway; 0: never (a guarantee of B)."""

TICK_SECONDS = 1.0
"""How often a collector process looks for pools to release (one ``SMEMBERS`` and one
``XLEN`` per pool with reports)."""

RELEASE_TRIES = 3
"""Attempts at one release when another collector released the same pool meanwhile."""


def _member(name: str, version: int, shard: int) -> str:
    return f"{name}:{version}:{shard}"


def _parse(member: bytes | str) -> tuple[str, int, int]:
    text = member.decode() if isinstance(member, bytes) else member
    name, version, shard = text.rsplit(":", 2)
    return name, int(version), int(shard)


class Shuffler:
    """Releases shuffle pools to their streams.

    Args:
        client: the Redis client.
        min_batch: B, the least reports a released batch holds (>= 1).
        max_delay: seconds after which a pool below B is released anyway; 0: never.
        registry: the Prometheus registry for its counters.
        clock: Unix seconds (compared with the pool entries' ids).
    """

    def __init__(
        self,
        client: redis.Redis,
        min_batch: int = DEFAULT_MIN_BATCH,
        max_delay: float = DEFAULT_MAX_DELAY,
        registry: Any = None,
        clock: Any = time.time,
    ) -> None:
        self.client = client
        self.min_batch = min_batch
        self.max_delay = max_delay
        self.clock = clock
        self._random = secrets.SystemRandom()
        self._timer: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self.batches = Counter(
            "ldp_shuffle_batches",
            "Shuffled batches released from a pool to its stream; full=false: released "
            "below the minimum batch after LDP_SHUFFLE_MAX_DELAY.",
            ["full"],
            registry=registry,
        )
        self.released = Counter(
            "ldp_shuffle_reports",
            "Relayed reports released to the streams in shuffled batches.",
            registry=registry,
        )
        self.wait = Histogram(
            "ldp_shuffle_wait_seconds",
            "How long the oldest report of a released batch waited in its pool.",
            buckets=(0.1, 1, 10, 60, 600, 3600, 86400),
            registry=registry,
        )

    def pooled(self, name: str, version: int, shard: int) -> None:
        """Note that a pool received reports, release it if it holds B, and make sure
        this process's timer runs."""
        self.client.sadd(keys.POOLS_SET, _member(name, version, shard))
        self.release(name, version, shard)
        self.start()

    def release(self, name: str, version: int, shard: int) -> int:
        """Release the pool if it holds B reports (or is overdue): returns how many."""
        pool = keys.pool_key(name, version, shard)
        stream = keys.stream_key(name, version, shard)
        for _ in range(RELEASE_TRIES):
            count = int(self.client.xlen(pool))
            if count == 0:
                return 0
            full = count >= self.min_batch
            waited = self._waited(pool)
            if not full and not (self.max_delay and waited >= self.max_delay):
                return 0
            order = list(range(1, count + 1))
            self._random.shuffle(order)
            call = scripts.shuffle_call(self.client, pool=pool, stream=stream, order=order)
            if int(call.run()) == count:
                self.batches.labels(full=str(full).lower()).inc()
                self.released.inc(count)
                self.wait.observe(waited)
                return count
        return 0

    def _waited(self, pool: str) -> float:
        first = self.client.xrange(pool, "-", "+", count=1)
        if not first:
            return 0.0
        entry_id = first[0][0]
        text = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
        millis = int(text.split("-")[0])
        return max(0.0, self.clock() - millis / 1000)

    def release_due(self) -> int:
        """Release every pool that is due; forget empty ones. Returns reports released."""
        released = 0
        for member in self.client.smembers(keys.POOLS_SET):
            name, version, shard = _parse(member)
            released += self.release(name, version, shard)
            if not self.client.exists(keys.pool_key(name, version, shard)):
                self.client.srem(keys.POOLS_SET, member)
        return released

    def start(self) -> None:
        """Start the timer thread of this process (once; a forked child starts its own)."""
        if self._timer is not None and self._timer.is_alive():
            return
        with self._lock:
            if self._timer is None or not self._timer.is_alive():
                self._stopped.clear()
                self._timer = threading.Thread(target=self._tick, name="ldp-shuffle", daemon=True)
                self._timer.start()
                _RUNNING.add(self)

    def stop(self) -> None:
        """Stop the timer thread (it finishes the release it is in)."""
        self._stopped.set()

    def _tick(self) -> None:
        while not self._stopped.wait(TICK_SECONDS):
            try:
                self.release_due()
            except (redis.RedisError, redis.exceptions.RedisClusterException) as exc:
                log.warning("shuffle timer: %s", type(exc).__name__)


_RUNNING: weakref.WeakSet[Shuffler] = weakref.WeakSet()


def stop_timers() -> None:
    """Stop every shuffler timer of this process (tests: apps of earlier tests share it)."""
    for shuffler in list(_RUNNING):
        shuffler.stop()


class PoolAppender(Appender):
    """An :class:`~collector.ingest.Appender` whose reports go to the shuffle pools, each
    group then offered to the :class:`Shuffler`."""

    def __init__(self, base: Appender, shuffler: Shuffler) -> None:
        self.__dict__.update(base.__dict__)  # the same client, limits and layout cache
        self.shuffler = shuffler

    def target(self, name: str, version: int, shard: int) -> str:  # noqa: D102
        return keys.pool_key(name, version, shard)

    def append(
        self, name: str, version: int, items: list[Item], now: datetime, shards: int = 1
    ) -> tuple[int, int]:
        """Append to the pools as :meth:`Appender.append` does, then release full ones."""
        try:
            added, duplicates = super().append(name, version, items, now, shards)
        except RetiredOnAppend as exc:  # other shards may have taken theirs before
            self._pooled(name, version, items, shards, exc.added)
            raise
        self._pooled(name, version, items, shards, added)
        return added, duplicates

    def _pooled(self, name: str, version: int, items: list[Item], shards: int, added: int) -> None:
        if added:
            for shard in sorted(
                {keys.shard_of(rid, shards) for rid, _ in items} if shards > 1 else {0}
            ):
                self.shuffler.pooled(name, version, shard)


def install(
    config: Mapping[str, Any], appender: Appender, client: redis.Redis, registry: Any
) -> PoolAppender | None:
    """The pool appender for relayed reports, from ``SHUFFLE_MIN_BATCH`` and
    ``SHUFFLE_MAX_DELAY``; None when B is 1 (no shuffling: relayed reports go straight
    to the streams)."""
    from collector.settings import ConfigError

    batch = config.get("SHUFFLE_MIN_BATCH", DEFAULT_MIN_BATCH)
    delay = config.get("SHUFFLE_MAX_DELAY", DEFAULT_MAX_DELAY)
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ConfigError(f"LDP_SHUFFLE_MIN_BATCH must be an integer >= 1, got {batch!r}")
    if isinstance(delay, bool) or not isinstance(delay, (int, float)) or delay < 0:
        raise ConfigError(f"LDP_SHUFFLE_MAX_DELAY must be a number >= 0, got {delay!r}")
    if batch == 1:
        return None
    return PoolAppender(appender, Shuffler(client, batch, float(delay), registry))


POOL: Slot[PoolAppender] = Slot("ldp_shuffle", PoolAppender)
"""The app's :class:`PoolAppender` (none attached: no shuffling)."""


def relayed(ctx: Services) -> Services:
    """The services an inner (relayed) request ingests with: the app's
    :class:`PoolAppender` in place of its appender, when shuffling is on."""
    pool = POOL.find()
    return ctx if pool is None else dataclasses.replace(ctx, appender=pool)

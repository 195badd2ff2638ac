"""Shuffle pools: where relayed reports wait for a batch, and when they must leave.

A report that came through an Oblivious HTTP relay is appended to its version's pool
(:func:`ldp_store.keys.pool_key`), acknowledged, and released to the stream with the
rest of its pool, in an order drawn from the OS's CSPRNG, by :func:`release`: as soon as
the pool holds B reports (the collector, at append), or once its oldest report has
waited the pool's release bound (the aggregator's workers, every second:
:func:`release_due`), whatever became of its version since (superseded, retired). Each
pool's record (:func:`ldp_store.keys.shuffled_key`) holds the bound the collector set
and what was released, the smallest batch above all: the shuffled ε_c towards the
collector is computed from it (:func:`released`); :func:`waiting` says what still waits.

In full: ``docs/security/threat-model.md`` (the bound and ε_c) and
``docs/guides/relay.md``.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import cast

import redis

from ldp_store import keys
from ldp_store.connection import as_text
from ldp_store.scripts import shuffle_call

__all__ = [
    "RELEASE_TRIES",
    "PoolState",
    "Releases",
    "Waiting",
    "note_bound",
    "pool_states",
    "release",
    "release_due",
    "released",
    "waiting",
    "waiting_many",
]

RELEASE_TRIES = 3
"""Attempts at one release when another caller released the same pool meanwhile."""

_RANDOM = secrets.SystemRandom()

Member = tuple[str, int, int]
"""A pool, as (metric name, version, shard)."""


@dataclass(frozen=True)
class PoolState:
    """What one pool holds now, and when its oldest report is due."""

    reports: int
    oldest: float | None
    """When its oldest report arrived (Unix seconds, Redis's clock); None: empty."""
    delay: float
    """Its release bound in seconds (the record's, else the default)."""

    @property
    def due(self) -> float | None:
        """When the pool goes at the latest (Unix seconds); None: empty."""
        return None if self.oldest is None else self.oldest + self.delay


def note_bound(client: redis.Redis, name: str, version: int, shard: int, delay: float) -> None:
    """Record the release bound (seconds) of a pool that just received reports."""
    client.hset(keys.shuffled_key(name, version, shard), "delay_ms", round(delay * 1000))


def release(
    client: redis.Redis,
    name: str,
    version: int,
    shard: int,
    min_batch: int,
    default_delay: float = keys.SHUFFLE_MAX_DELAY,
) -> int:
    """Release the pool if it holds ``min_batch`` (B; 0: never for its size) or is due.

    Returns:
        Reports released (0: none, the pool being empty, below B and not due).
    """
    pool = keys.pool_key(name, version, shard)
    for _ in range(RELEASE_TRIES):
        count = int(client.xlen(pool))
        if count == 0:
            return 0
        order = list(range(1, count + 1))
        _RANDOM.shuffle(order)
        done = int(
            shuffle_call(
                client,
                pool=pool,
                stream=keys.stream_key(name, version, shard),
                record=keys.shuffled_key(name, version, shard),
                order=order,
                min_batch=min_batch,
                default_delay_ms=round(default_delay * 1000),
            ).run()
        )
        if done == count:
            return count
        if done == -2:  # neither full nor due
            return 0
    return 0


def pool_states(
    client: redis.Redis, members: Sequence[Member], default_delay: float = keys.SHUFFLE_MAX_DELAY
) -> list[PoolState]:
    """The state of each pool (one pipeline: its length, oldest entry and bound)."""
    pipe = client.pipeline(transaction=False)
    for name, version, shard in members:
        pool = keys.pool_key(name, version, shard)
        pipe.xlen(pool)
        pipe.xrange(pool, "-", "+", count=1)
        pipe.hget(keys.shuffled_key(name, version, shard), "delay_ms")
    replies = pipe.execute()
    states = []
    for i in range(len(members)):
        length, first, bound = replies[3 * i : 3 * i + 3]
        oldest = None
        if first:
            entry_id = first[0][0]
            text = as_text(entry_id)
            oldest = int(text.split("-")[0]) / 1000
        delay = default_delay if bound is None else int(bound) / 1000
        states.append(PoolState(int(length), oldest, delay))
    return states


def release_due(
    client: redis.Redis,
    members: Sequence[Member],
    default_delay: float = keys.SHUFFLE_MAX_DELAY,
    now: float | None = None,
) -> int:
    """Release every pool of ``members`` whose oldest report has waited its bound (by this
    machine's clock: the script checks again by Redis's). Returns reports released."""
    if not members:
        return 0
    now = time.time() if now is None else now
    released_now = 0
    for member, state in zip(members, pool_states(client, members, default_delay), strict=True):
        if state.due is not None and state.due <= now:
            released_now += release(client, *member, min_batch=0, default_delay=default_delay)
    return released_now


@dataclass(frozen=True)
class Waiting:
    """Relayed reports of one metric version still in its pools."""

    reports: int
    released_by: float
    """When the last of them reaches the stream at the latest (Unix seconds)."""


def waiting(
    client: redis.Redis,
    name: str,
    version: int,
    shards: int = 1,
    default_delay: float = keys.SHUFFLE_MAX_DELAY,
) -> Waiting | None:
    """What waits in a version's pools (every shard); None: nothing."""
    return waiting_many(client, [(name, version, shards)], default_delay)[0]


def waiting_many(
    client: redis.Redis,
    versions: Sequence[tuple[str, int, int]],
    default_delay: float = keys.SHUFFLE_MAX_DELAY,
) -> list[Waiting | None]:
    """:func:`waiting` of each (name, version, shards), the pools read in one pipeline."""
    members = [(name, version, s) for name, version, shards in versions for s in range(shards)]
    states = iter(pool_states(client, members, default_delay) if members else [])
    return [_waiting([next(states) for _ in range(shards)]) for _, _, shards in versions]


def _waiting(pools: list[PoolState]) -> Waiting | None:
    """What waits in one version's pools (one per shard); None: nothing."""
    dues = [s.due for s in pools if s.due is not None]
    total = sum(s.reports for s in pools)
    return Waiting(total, max(dues)) if total and dues else None


@dataclass(frozen=True)
class Releases:
    """What a version's pools released so far (every shard)."""

    batches: int
    reports: int
    smallest: int | None
    """The smallest batch released; None: none yet."""
    delay: float | None
    """The longest release bound a collector set for these pools; None: none pooled."""


def released(client: redis.Redis, name: str, version: int, shards: int = 1) -> Releases:
    """The releases of a version's pools, from their records."""
    pipe = client.pipeline(transaction=False)
    for shard in range(shards):
        pipe.hmget(
            keys.shuffled_key(name, version, shard), "batches", "reports", "smallest", "delay_ms"
        )
    batches = reports = 0
    smallest: list[int] = []
    delays: list[float] = []
    for row in cast(Iterable[list[bytes | None]], pipe.execute()):
        b, r, s, d = (None if v is None else int(v) for v in row)
        batches += b or 0
        reports += r or 0
        if s is not None:
            smallest.append(s)
        if d is not None:
            delays.append(d / 1000)
    return Releases(batches, reports, min(smallest, default=None), max(delays, default=None))

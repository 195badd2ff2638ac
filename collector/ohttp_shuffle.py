"""The shuffler: relayed reports reach the stream in shuffled batches of at least B, or
within the release bound.

Reports that came through the Oblivious HTTP gateway are appended, with the same replay
guard and limits as any, to their version's *shuffle pool* (a Redis stream beside the
report stream, :func:`ldp_store.keys.pool_key`) and acknowledged (202) once Redis holds
them: persisted, not held in memory, so a collector that dies loses nothing it
acknowledged. When a pool holds ``min_batch`` reports (B) this collector releases it to
the report stream in an order drawn from the OS's CSPRNG (:func:`ldp_store.shuffle.release`,
one script that appends and deletes together): stream order no longer follows arrival
order. A pool below B is released ``max_delay`` seconds after its oldest report arrived
(an hour by default) by the aggregator's workers, whatever became of its version: no
acknowledged report waits longer, and none is lost. The bound is written in the pool's
record for them and for the read side (what waits, until when, and the ε_c of the
smallest batch released).

In full: ``docs/concepts/privacy-model.md`` and ``docs/security/threat-model.md``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

import redis
from prometheus_client import Counter

from client_sdk.numbers import is_count
from collector.ingest import Appender, Item, Refused, RetiredOnAppend
from collector.settings import ConfigError
from ldp_api.context import Slot
from ldp_store import keys, shuffle

if TYPE_CHECKING:
    from collector.context import Services

__all__ = [
    "DEFAULT_MAX_DELAY",
    "DEFAULT_MIN_BATCH",
    "LONGEST_MAX_DELAY",
    "POOL",
    "PoolAppender",
    "Shuffler",
]

log = logging.getLogger(__name__)

DEFAULT_MIN_BATCH = keys.SHUFFLE_MIN_BATCH
"""B: a pool is released as soon as it holds B reports (100). Within a batch the stream
order carries no arrival information; ``docs/concepts/privacy-model.md`` shows the ε_c
each batch size buys."""

DEFAULT_MAX_DELAY = keys.SHUFFLE_MAX_DELAY
"""Seconds after which a pool below B is released anyway (an hour)."""

LONGEST_MAX_DELAY = 7 * 86_400.0
"""The longest release bound accepted: a week. A pool waits in Redis and its reports are
not counted meanwhile; longer, and an acknowledged report is as good as lost to the
estimates, while the reports one device can have in a batch grow with the periods a pool
spans (docs/security/threat-model.md)."""


class Shuffler:
    """Releases full shuffle pools to their streams, and records each pool's bound.

    Args:
        client: the Redis client.
        min_batch: B, the reports a pool holds when it is released at once (>= 2).
        max_delay: seconds after which a pool below B is released (by the aggregator).
        registry: the Prometheus registry for its counters.
    """

    def __init__(
        self,
        client: redis.Redis,
        min_batch: int = DEFAULT_MIN_BATCH,
        max_delay: float = DEFAULT_MAX_DELAY,
        registry: Any = None,
    ) -> None:
        self.client = client
        self.min_batch = min_batch
        self.max_delay = max_delay
        self._noted: set[tuple[str, int, int]] = set()
        self.batches = Counter(
            "ldp_shuffle_batches",
            "Full shuffled batches (LDP_SHUFFLE_MIN_BATCH) this collector released from a "
            "pool to its stream (pools released at LDP_SHUFFLE_MAX_DELAY are released by "
            "the aggregator and shown on the overview).",
            registry=registry,
        )
        self.released = Counter(
            "ldp_shuffle_reports",
            "Relayed reports this collector released to the streams in full batches.",
            registry=registry,
        )

    def pooled(self, name: str, version: int, shard: int) -> None:
        """Note that a pool received reports: record its bound (once per process), and
        release it if it holds B."""
        member = (name, version, shard)
        if member not in self._noted:
            shuffle.note_bound(self.client, name, version, shard, self.max_delay)
            self._noted.add(member)
        if int(self.client.xlen(keys.pool_key(name, version, shard))) < self.min_batch:
            return
        count = shuffle.release(self.client, name, version, shard, self.min_batch, self.max_delay)
        if count:
            self.batches.inc()
            self.released.inc(count)


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
        except Refused as exc:  # the guard's share or the backlog, after some were taken
            self._pooled(name, version, items, shards, exc.appended)
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
    batch = config.get("SHUFFLE_MIN_BATCH", DEFAULT_MIN_BATCH)
    delay = config.get("SHUFFLE_MAX_DELAY", DEFAULT_MAX_DELAY)
    if not is_count(batch):
        raise ConfigError(f"LDP_SHUFFLE_MIN_BATCH must be an integer >= 1, got {batch!r}")
    number = isinstance(delay, (int, float)) and not isinstance(delay, bool)
    if not number or not 0 < delay <= LONGEST_MAX_DELAY:
        raise ConfigError(
            f"LDP_SHUFFLE_MAX_DELAY must be seconds in (0, {LONGEST_MAX_DELAY:.0f}] (a pool "
            f"below B is released that long after its oldest report; 0 no longer means "
            f"never: such reports were acknowledged and never counted), got {delay!r}"
        )
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

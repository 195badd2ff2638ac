"""The release of a shuffle pool into its stream, in one script
(``docs/architecture/storage.md``; the pools' bound in :mod:`ldp_store.shuffle`)."""

from __future__ import annotations

from collections.abc import Sequence

import redis

from ldp_store import keys
from ldp_store.connection import is_cluster
from ldp_store.scripts.call import Call, script

__all__ = ["SHUFFLE", "shuffle_call"]

SHUFFLE = """
-- KEYS: 1 the shuffle pool, 2 the stream, 3 the pool's record (one hash slot), 4 (a
--       single Redis only) the doorbell (ldp_store.keys.DOORBELL)
-- ARGV: 1 n, the pool's length as the caller read it; 2 B, the least batch released
-- before its time (0: only a due pool); 3 the release bound in ms if the record has none;
-- then a permutation of 1..n, then (with KEYS 4) the doorbell's length cap
local n = tonumber(ARGV[1])
local entries = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', n)
if #entries < n then return -1 end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local least = tonumber(ARGV[2])
if least == 0 or n < least then
  local bound = tonumber(redis.call('HGET', KEYS[3], 'delay_ms') or ARGV[3])
  local oldest = tonumber(string.match(entries[1][1], '^(%d+)'))
  if oldest + bound > now then return -2 end
end
for i = 4, n + 3 do
  local fields = entries[tonumber(ARGV[i])][2]
  redis.call('XADD', KEYS[2], '*', unpack(fields))
end
if #KEYS == 4 and n > 0 then
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[n + 4], '*', 's', KEYS[2])
end
local ids = {}
for _, entry in ipairs(entries) do
  ids[#ids + 1] = entry[1]
  if #ids == 1000 then
    redis.call('XDEL', KEYS[1], unpack(ids))
    ids = {}
  end
end
if #ids > 0 then redis.call('XDEL', KEYS[1], unpack(ids)) end
if redis.call('XLEN', KEYS[1]) == 0 then redis.call('DEL', KEYS[1]) end
redis.call('HINCRBY', KEYS[3], 'batches', 1)
redis.call('HINCRBY', KEYS[3], 'reports', n)
local smallest = tonumber(redis.call('HGET', KEYS[3], 'smallest'))
if smallest == nil or n < smallest then redis.call('HSET', KEYS[3], 'smallest', n) end
redis.call('HSET', KEYS[3], 'released_ms', now)
return n
"""
"""The release of one pool: its first ``n`` reports, in the order the caller's permutation
gives (drawn from a CSPRNG), appended to the stream, and deleted from the pool, in one
script: a crash leaves each report in the pool or in the stream, never both or neither.
Released only as a full batch (``n`` ≥ B) or once its oldest report (by its pool entry's
id: Redis's clock) has waited the pool's release bound (its record's ``delay_ms``), so a
caller cannot release a pool early by mistake. The pool's record counts what was
released (``batches``, ``reports``, the ``smallest`` batch, when: ``released_ms``), what
the shuffled ε_c is computed from. Reports came into the pool through :data:`APPEND`,
whose replay guard already judged them. On a single Redis it rings the doorbell
(:data:`ldp_store.keys.DOORBELL`) with the stream, as :data:`APPEND` does. Answers
``n``; -1 when the pool holds fewer than ``n`` (released by another caller meanwhile);
-2 when it is neither full nor due: nothing done."""


def shuffle_call(
    client: redis.Redis,
    *,
    pool: str,
    stream: str,
    record: str,
    order: Sequence[int],
    min_batch: int,
    default_delay_ms: int,
) -> Call:
    """Build the :data:`SHUFFLE` call releasing the first ``len(order)`` reports of ``pool``.

    Args:
        pool: the shuffle pool (:func:`ldp_store.keys.pool_key`).
        stream: the stream of the same version and shard.
        record: the pool's record (:func:`ldp_store.keys.shuffled_key`).
        order: a permutation of 1..n: the pool's ``order[i]``-th report is appended i-th.
        min_batch: B: a pool of at least B goes at once; 0: only a due pool goes.
        default_delay_ms: the release bound of a pool whose record names none.
    """
    ring = [] if is_cluster(client) else [keys.DOORBELL]  # its own slot: a single Redis
    return Call(
        script(client, SHUFFLE),
        [pool, stream, record, *ring],
        [
            len(order),
            min_batch,
            default_delay_ms,
            *order,
            *([keys.DOORBELL_LENGTH] if ring else []),
        ],
    )

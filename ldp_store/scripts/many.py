"""One read command over many keys, in one call: a pass over every metric
(``docs/architecture/read-side.md``: ten thousand metrics)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import redis

from ldp_store import keys as key_names
from ldp_store.connection import is_cluster
from ldp_store.scripts.call import script

__all__ = [
    "GUARD_UNITS",
    "IN_USE",
    "MANY",
    "MANY_CHUNK",
    "READS",
    "UnitCounters",
    "guard_units",
    "read_many",
    "units_in_use",
]

MANY = """
-- KEYS: keys of one node; ARGV: 1 a read command, then its arguments after the key.
local out = {}
for i, key in ipairs(KEYS) do
  out[i] = redis.call(ARGV[1], key, unpack(ARGV, 2))
end
return out
"""
"""The reply of one read command for every key, in order."""

READS = frozenset(["GET", "HGET", "HMGET", "HKEYS", "XLEN"])
"""The commands :func:`read_many` runs: reads of one key."""

MANY_CHUNK = 5_000
"""Keys per call: Redis serves nobody else while a script runs; 5,000 reads are about
2 ms of it."""


def read_many(client: redis.Redis, command: str, keys: Sequence[str], *args: Any) -> list[Any]:
    """``command key *args`` for every key, in a call per :data:`MANY_CHUNK` keys instead of
    one command each: the per-command cost of a client (tens of µs in redis-py) is what
    a pass over ten thousand metrics spends. On a Redis Cluster the keys lie in many
    slots: one pipeline (a round trip per node).

    Raises:
        ValueError: a command not in :data:`READS`.
    """
    name = command.upper()
    if name not in READS:
        raise ValueError(f"read_many runs one of {sorted(READS)}, not {command!r}")
    if not keys:
        return []
    if is_cluster(client):
        with client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.execute_command(name, key, *args)
            return list(pipe.execute())
    found = script(client, MANY)
    out: list[Any] = []
    for start in range(0, len(keys), MANY_CHUNK):
        out += found(keys=list(keys[start : start + MANY_CHUNK]), args=[name, *args])
    return out


GUARD_UNITS = """
-- KEYS: registry hashes (ldp_store.keys.metric_key), of one node.
-- Reply: the shards of every version of every metric not retired, summed (a definition
-- stored without "shards" has one).
local total = 0
for _, key in ipairs(KEYS) do
  if redis.call('HEXISTS', key, 'retired') == 0 then
    local fields = redis.call('HGETALL', key)
    for i = 1, #fields, 2 do
      if string.match(fields[i], '^v%d+$') then
        total = total + tonumber(string.match(fields[i + 1], '"shards": *(%d+)') or '1')
      end
    end
  end
end
return total
"""
"""The replay guard's units of many metrics (:meth:`ldp_store.registry.Registry.units`)."""


def guard_units(client: redis.Redis, hashes: Sequence[str]) -> int | None:
    """:data:`GUARD_UNITS` over ``hashes``, in a call per :data:`MANY_CHUNK` // 4 metrics
    (a hash of one version is read and matched in about a microsecond); None on a Redis
    Cluster (the hashes lie on many nodes: the caller counts them itself)."""
    if is_cluster(client):
        return None
    found = script(client, GUARD_UNITS)
    step = MANY_CHUNK // 4
    return sum(
        int(found(keys=list(hashes[at : at + step]), args=[])) for at in range(0, len(hashes), step)
    )


IN_USE = """
-- KEYS: per unit (a metric version's shard) four keys, of one node: its all-time counts
-- hash, its stream, its batched count and its dead-letter stream.
-- Reply: for each unit with anything in them, its index (from 0), then n, the stream's
-- length, the batched count and the dead letters (n and batched as stored).
local out = {}
for i = 1, #KEYS, 4 do
  local n = redis.call('HGET', KEYS[i], 'n') or '0'
  local length = redis.call('XLEN', KEYS[i + 1])
  local batched = redis.call('GET', KEYS[i + 2]) or '0'
  local dead = redis.call('XLEN', KEYS[i + 3])
  if n ~= '0' or length ~= 0 or batched ~= '0' or dead ~= 0 then
    table.insert(out, (i - 1) / 4)
    table.insert(out, n)
    table.insert(out, length)
    table.insert(out, batched)
    table.insert(out, dead)
  end
end
return out
"""
"""What ``/metrics`` and the overview show of many metric versions, only for those in use."""


class UnitCounters(NamedTuple):
    """A metric version's shard: reports counted, stream entries, the reports its batch
    entries hold beyond one each, dead letters."""

    n: int
    length: int
    batched: int
    dead: int


def units_in_use(
    client: redis.Redis, units: Sequence[tuple[str, int, int]]
) -> dict[int, UnitCounters]:
    """The counters of each (name, version, shard) that has any (reports counted, waiting
    or dead-lettered), by index in ``units``; the others are all zero. In a call per
    :data:`MANY_CHUNK` keys whose reply holds only the units in use: a scrape over ten
    thousand metrics of which a few hundred report. On a Redis Cluster: one pipeline.
    """
    found: dict[int, UnitCounters] = {}
    if is_cluster(client):
        with client.pipeline(transaction=False) as pipe:
            for name, version, shard in units:
                pipe.hget(key_names.counts_key(name, version, "all", shard), "n")
                pipe.xlen(key_names.stream_key(name, version, shard))
                pipe.get(key_names.batched_key(name, version, shard))
                pipe.xlen(key_names.dead_key(name, version, shard))
            replies = pipe.execute()
        for i in range(len(units)):
            n, length, batched, dead = replies[4 * i : 4 * i + 4]
            counted = UnitCounters(int(n or 0), int(length), int(batched or 0), int(dead))
            if any(counted):
                found[i] = counted
        return found
    call = script(client, IN_USE)
    step = MANY_CHUNK // 4
    for start in range(0, len(units), step):
        chunk: list[str] = []
        for unit in units[start : start + step]:
            chunk += _unit_keys(unit)
        reply = call(keys=chunk, args=[])
        for at in range(0, len(reply), 5):
            index, n, length, batched, dead = reply[at : at + 5]
            found[start + int(index)] = UnitCounters(int(n), int(length), int(batched), int(dead))
    return found


_UNIT_KEYS: dict[tuple[str, int, int], tuple[str, str, str, str]] = {}
"""The four keys of each unit seen (a version's keys never change): building 40,000 key
names is most of a pass's CPU at ten thousand metrics."""

UNIT_KEYS_KEPT = 65_536
"""Units whose keys a process keeps: above the shards of ten thousand metrics."""


def _unit_keys(unit: tuple[str, int, int]) -> tuple[str, str, str, str]:
    found = _UNIT_KEYS.get(unit)
    if found is None:
        name, version, shard = unit
        if len(_UNIT_KEYS) >= UNIT_KEYS_KEPT:
            _UNIT_KEYS.clear()
        found = _UNIT_KEYS[unit] = (
            key_names.counts_key(name, version, "all", shard),
            key_names.stream_key(name, version, shard),
            key_names.batched_key(name, version, shard),
            key_names.dead_key(name, version, shard),
        )
    return found

"""One read command over many keys, in one call: a pass over every metric
(``docs/architecture/read-side.md``: ten thousand metrics)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis

from ldp_store.connection import is_cluster
from ldp_store.scripts.call import script

__all__ = ["MANY", "MANY_CHUNK", "READS", "read_many"]

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

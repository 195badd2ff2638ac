"""A window's counts read as one snapshot (``docs/architecture/storage.md``)."""

from __future__ import annotations

from collections.abc import Sequence

import redis
from redis.cluster import RedisCluster

from ldp_store import keys
from ldp_store.scripts.call import script

__all__ = ["WINDOW", "WindowReply", "read_window", "read_windows"]

WINDOW = """
-- KEYS: counts hash, packed support, delta list of one window. One snapshot of all three:
-- a fold between separate reads could count a blob twice or not at all.
return {redis.call('HGETALL', KEYS[1]), redis.call('GET', KEYS[2]) or false,
        redis.call('LRANGE', KEYS[3], 0, -1)}
"""
"""A window's counts as one atomic snapshot: ``[hash fields flat, packed support or nil,
[delta blobs]]`` (see Deltas in :mod:`ldp_store.schema`)."""


WindowReply = tuple[dict[bytes, bytes], bytes | None, list[bytes]]
"""A window's counts hash fields, packed support counts (None: none) and delta blobs."""

PIPELINE_WINDOWS = 256
"""Windows read per pipeline by :func:`read_windows`: a trend's months of windows go in a
few round trips, each reply a few MB at most (256 windows of k = 1,024 packed counts)."""


def read_window(
    client: redis.Redis, *, name: str, version: int, window: str, shard: int = 0
) -> WindowReply:
    """Run :data:`WINDOW`: one window's counts hash fields, packed support counts (None:
    none) and delta blobs, as one snapshot."""
    flat, packed, blobs = script(client, WINDOW)(
        keys=list(keys.window_keys(name, version, window, shard))
    )
    return dict(zip(flat[0::2], flat[1::2], strict=True)), packed, list(blobs)


def read_windows(
    client: redis.Redis, *, name: str, version: int, windows: Sequence[tuple[str, int]]
) -> list[WindowReply]:
    """:func:`read_window` of many (window, shard) pairs, :data:`PIPELINE_WINDOWS` to a
    round trip (on a Redis Cluster, one call each: its pipelines split by node)."""
    if isinstance(client, RedisCluster):
        return [
            read_window(client, name=name, version=version, window=w, shard=s) for w, s in windows
        ]
    found = script(client, WINDOW)
    out: list[WindowReply] = []
    for start in range(0, len(windows), PIPELINE_WINDOWS):
        with client.pipeline(transaction=False) as pipe:
            for window, shard in windows[start : start + PIPELINE_WINDOWS]:
                found(keys=list(keys.window_keys(name, version, window, shard)), client=pipe)
            replies = pipe.execute()
        for flat, packed, blobs in replies:
            out.append((dict(zip(flat[0::2], flat[1::2], strict=True)), packed, list(blobs)))
    return out

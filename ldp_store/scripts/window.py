"""A window's counts read as one snapshot (``docs/architecture/storage.md``)."""

from __future__ import annotations

import redis

from ldp_store import keys
from ldp_store.scripts.call import script

__all__ = ["WINDOW", "read_window"]

WINDOW = """
-- KEYS: counts hash, packed support, delta list of one window. One snapshot of all three:
-- a fold between separate reads could count a blob twice or not at all.
return {redis.call('HGETALL', KEYS[1]), redis.call('GET', KEYS[2]) or false,
        redis.call('LRANGE', KEYS[3], 0, -1)}
"""
"""A window's counts as one atomic snapshot: ``[hash fields flat, packed support or nil,
[delta blobs]]`` (see Deltas in :mod:`ldp_store.schema`)."""


def read_window(
    client: redis.Redis, *, name: str, version: int, window: str, shard: int = 0
) -> tuple[dict[bytes, bytes], bytes | None, list[bytes]]:
    """Run :data:`WINDOW`: one window's counts hash fields, packed support counts (None:
    none) and delta blobs, as one snapshot."""
    flat, packed, blobs = script(client, WINDOW)(
        keys=list(keys.window_keys(name, version, window, shard))
    )
    return dict(zip(flat[0::2], flat[1::2], strict=True)), packed, list(blobs)

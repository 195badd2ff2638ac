"""Tidying a window's delta list: fold it into the packed counts, or merge it
(``docs/architecture/storage.md``, Deltas)."""

from __future__ import annotations

from typing import Literal

import redis

from ldp_store import keys
from ldp_store.scripts.call import script

__all__ = ["FOLD", "fold_window"]

FOLD = """
-- KEYS: packed support, delta list, counts hash of one window.
-- ARGV: how many blobs the caller read from the head of the list, the SHA-1 of those
--       blobs joined, the SHA-1 of the packed string it read ('' when there was none),
--       'fold' or 'merge', and the new packed counts or the one merged blob.
-- Writes only if the head of the list and the string are still what the caller read.
local m = tonumber(ARGV[1])
if redis.call('LLEN', KEYS[2]) < m then return 0 end
if redis.sha1hex(table.concat(redis.call('LRANGE', KEYS[2], 0, m - 1))) ~= ARGV[2] then
  return 0
end
local packed = redis.call('GET', KEYS[1])
if redis.sha1hex(packed or '') ~= ARGV[3] then return 0 end
local ttl = redis.call('PTTL', KEYS[3])  -- the window's expiry is its hash's
if ttl < 0 then ttl = redis.call('PTTL', KEYS[2]) end
-- The one write that can be refused (Redis at its memory limit) comes first, so a refusal
-- changes nothing; trimming after it frees memory and is never refused.
if ARGV[4] == 'merge' then
  redis.call('RPUSH', KEYS[2], ARGV[5])  -- at the tail: order in the list means nothing
  redis.call('LTRIM', KEYS[2], m, -1)
  return 1
end
if packed then
  if #packed ~= #ARGV[5] then
    return redis.error_reply('FOLD ' .. KEYS[1] .. ' holds ' .. #packed ..
      ' bytes, the fold ' .. #ARGV[5])
  end
  redis.call('SETRANGE', KEYS[1], 0, ARGV[5])  -- keeps the key's expiry
else
  redis.call('SET', KEYS[1], ARGV[5])
  if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
end
redis.call('LTRIM', KEYS[2], m, -1)
return 1
"""
"""Tidy a window's delta list: fold its first blobs into the packed support counts, or
merge them into one blob, as the caller computed — only if the list still starts with
the blobs it read and the string is the one it read (else 0, nothing changed). A merged
list keeps neither the batches' boundaries nor their order."""


def fold_window(
    client: redis.Redis,
    *,
    name: str,
    version: int,
    window: str,
    shard: int,
    blobs: int,
    blobs_sha1: str,
    packed_sha1: str,
    mode: Literal["fold", "merge"],
    payload: bytes,
) -> bool:
    """Run :data:`FOLD` on one window.

    Args:
        name, version, window, shard: the window.
        blobs: how many blobs the caller read from the head of its delta list.
        blobs_sha1: the SHA-1 (hex) of those blobs joined.
        packed_sha1: the SHA-1 (hex) of the packed string read (of b"" when none).
        mode: ``"fold"`` (``payload`` is the new packed counts) or ``"merge"``
            (``payload`` is the one merged blob).
        payload: what to write.

    Returns:
        Whether it wrote (False: the list or the string changed since the caller read).
    """
    counts, support, delta = keys.window_keys(name, version, window, shard)
    done = script(client, FOLD)(
        keys=[support, delta, counts], args=[blobs, blobs_sha1, packed_sha1, mode, payload]
    )
    return bool(int(done))

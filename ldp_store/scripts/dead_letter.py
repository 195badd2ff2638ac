"""Dead-lettering undecodable entries, once however many workers saw them
(``docs/architecture/pipeline.md``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis

from ldp_store import keys
from ldp_store.scripts.call import script
from ldp_store.scripts.trim import TRIM

__all__ = ["DEAD", "dead"]

DEAD = (
    TRIM
    + """
-- KEYS: stream, dead, batched; ARGV: group, maxlen, then id/reason/payload triples, every
-- report of each entry (a batch entry's reports share its id and follow each other).
-- An entry is dead-lettered only if this call acknowledged it (XACK returned 1), so a
-- bad entry lands in the dead-letter stream once however many workers saw it.
local moved, entries, acked = 0, 0, {}
for i = 3, #ARGV, 3 do
  local id = ARGV[i]
  if acked[id] == nil then
    acked[id] = redis.call('XACK', KEYS[1], ARGV[1], id) == 1
    if acked[id] then entries = entries + 1 end
  end
  if acked[id] then
    redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], '*',
               'p', ARGV[i + 2], 'reason', ARGV[i + 1])
    moved = moved + 1
  end
end
if moved > entries then
  if redis.call('DECRBY', KEYS[3], moved - entries) <= 0 then redis.call('DEL', KEYS[3]) end
end
trim(KEYS[1])
return moved
"""
)
"""Move undecodable entries to the dead-letter stream (capped, approximately), a report
each, with its payload and reason. An entry moves only if this call acknowledged it (XACK
returned 1), so a bad entry lands there once however many workers saw it; the reports a
batch entry held beyond one leave the stream's batched count; then the stream is trimmed
as after a commit."""


def dead(
    client: redis.Redis,
    *,
    stream: str,
    dead_letters: str,
    batched: str,
    entries: Sequence[tuple[bytes | str, str, bytes]],
    maxlen: int,
    group: str = keys.GROUP,
) -> int:
    """Run :data:`DEAD`: move ``entries`` (id, reason, payload; every report of each entry
    id, adjacent) of ``stream`` to the dead-letter stream ``dead_letters`` (capped near
    ``maxlen``), lowering ``batched`` (the stream's :func:`~ldp_store.keys.batched_key`);
    returns how many reports moved."""
    args: list[Any] = [group, maxlen]
    for entry in entries:
        args += entry
    return int(script(client, DEAD)(keys=[stream, dead_letters, batched], args=args))

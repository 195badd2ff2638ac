"""The worker's read script and its typed call: fresh entries, its own history, or a claim
(``docs/architecture/pipeline.md``, step 8)."""

from __future__ import annotations

from typing import Any

import redis

from ldp_store import keys
from ldp_store.scripts.call import ID_CHUNK, script

__all__ = ["READ", "read_batch"]

READ = (
    """
-- KEYS[1] stream, KEYS[2] claim fence; ARGV: group, consumer, count, mode ('>', a history
-- cursor, or 'claim'), min idle ms and start id (claim only).
-- Returns {cursor, ids, sizes, payloads, deliveries, fence, counts}, each comma-joined;
-- sizes and payloads are per report (a batch entry's 's' and 'b' as they are), the others
-- per entry; counts (the reports of each entry) is '' when every entry holds one. Size
-- -1: entry deleted, -2: no payload field, -3: a batch entry whose sizes do not add up
-- (payload '' for these). One reply of a few strings instead of thousands of nested
-- arrays keeps the client's parsing cheap.
-- A claim or a history read may hand out entries another batch in flight holds (another
-- worker's, or a process running under the same consumer name), so both bump the fence.
local stream, group, me, count, mode = KEYS[1], ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local entries, cursor = {}, ''
if mode == 'claim' then
  -- JUSTID first (Redis 6.2 returns a deleted entry's content as nil, without its id),
  -- then XCLAIM the ids for their content, which also counts a delivery.
  local res = redis.call('XAUTOCLAIM', stream, group, me, ARGV[5], ARGV[6], 'COUNT', count,
                         'JUSTID')
  cursor = res[1]  -- res[3] (7.0+: ids of deleted entries) is already out of the PEL
  local ids = res[2]
  if #ids > 0 or (res[3] and #res[3] > 0) then redis.call('INCR', KEYS[2]) end
  for i = 1, #ids, """
    + str(ID_CHUNK)
    + """ do
    local j = math.min(#ids, i + """
    + str(ID_CHUNK - 1)
    + """)
    local got = redis.call('XCLAIM', stream, group, me, 0, unpack(ids, i, j))
    local byid = {}
    for _, e in ipairs(got) do
      if e then byid[e[1]] = e end
    end
    for n = i, j do
      entries[#entries + 1] = byid[ids[n]] or {ids[n], false}
    end
  end
else
  local res = redis.call('XREADGROUP', 'GROUP', group, me, 'COUNT', count,
                         'STREAMS', stream, mode)
  if res and res[1] then entries = res[1][2] end
  if mode ~= '>' and #entries > 0 then redis.call('INCR', KEYS[2]) end
end
-- A batch entry ('s' sizes, 'b' payloads) whose sizes do not match its payloads: -3.
local function batch(s, b)
  local total, count, at = 0, 0, 1
  while true do
    local comma = string.find(s, ',', at, true)
    local x = string.sub(s, at, (comma or 0) - 1)
    if #x > 15 or not string.match(x, '^%d+$') then return nil end
    total = total + tonumber(x)
    count = count + 1
    if not comma then break end
    at = comma + 1
  end
  if count == 0 or total + count - 1 ~= #b then return nil end
  return count
end
local ids, sizes, payloads, deliveries, counts, batches = {}, {}, {}, {}, {}, false
for i, e in ipairs(entries) do
  ids[i] = e[1]
  local fields, payload, size, count = e[2], '', -1, 1
  if fields then
    size = -2
    local s, b = nil, nil
    for f = 1, #fields, 2 do
      local name = fields[f]
      if name == 'p' then payload = fields[f + 1]; size = #payload; s = nil; break end
      if name == 's' then s = fields[f + 1] elseif name == 'b' then b = fields[f + 1] end
    end
    if s and b then
      local n = batch(s, b)
      if n then
        payload, size, count, batches = b, s, n, true
      else
        size = -3
      end
    end
  end
  payloads[i] = payload
  sizes[i] = size
  counts[i] = count
end
if mode ~= '>' and #ids > 0 then
  local seen = {}
  local pel = redis.call('XPENDING', stream, group, ids[1], ids[#ids], 2 * #ids, me)
  for _, p in ipairs(pel) do seen[p[1]] = p[4] end
  for i, id in ipairs(ids) do deliveries[i] = seen[id] or 0 end
end
return {cursor, table.concat(ids, ','), table.concat(sizes, ','),
        table.concat(payloads, ','), table.concat(deliveries, ','),
        redis.call('GET', KEYS[2]) or '0', batches and table.concat(counts, ',') or ''}
"""
)
"""A worker's read: fresh entries (``>``), its own history (a cursor), or a claim of
idle entries (XAUTOCLAIM, then XCLAIM for content and delivery counts). The reply packs
ids, sizes, payloads and delivery counts into comma-joined strings, then the claim
fence's value (see :data:`COMMIT`) and each entry's report count (batch entries)."""


def read_batch(
    client: redis.Redis,
    *,
    stream: str,
    fence: str,
    consumer: str,
    count: int,
    mode: str,
    min_idle_ms: int = 0,
    start: str = "0-0",
    group: str = keys.GROUP,
) -> list[Any]:
    """Run :data:`READ`: a history read or a claim of one stream's entries.

    Args:
        stream: the stream's key.
        fence: its claim fence (:func:`ldp_store.keys.claims_key`).
        consumer: the reading consumer's name.
        count: the most entries to read.
        mode: ``'>'`` (fresh), a history cursor, or ``'claim'``.
        min_idle_ms: a claim's least idle time.
        start: a claim's start id.
        group: the consumer group.

    Returns:
        ``[cursor, ids, sizes, payloads, deliveries, fence, counts]``, each comma-joined
        (see :data:`READ`).
    """
    reply = script(client, READ)(
        keys=[stream, fence], args=[group, consumer, count, mode, min_idle_ms, start]
    )
    return list(reply)

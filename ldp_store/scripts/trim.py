"""What removes stream entries and keys: ``trim(stream)`` for the scripts that acknowledge,
and :data:`UNLINK` for the lifecycle's deletes (``docs/architecture/storage.md``)."""

from __future__ import annotations

__all__ = ["TRIM", "UNLINK"]

TRIM = """
-- Compare two entry ids exactly: digit strings without leading zeros order by length,
-- then lexically (no float rounding, whatever their size).
local function digits_less(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end

local function id_less(a, b)
  local am, as = string.match(a, '^(%d+)%-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)%-(%d+)$')
  if am ~= bm then return digits_less(am, bm) end
  return digits_less(as, bs)
end

-- The id just after `id`: the trim floor of a group with nothing pending.
local function id_after(id)
  local ms, text = string.match(id, '^(%d+)%-(%d+)$')
  if #text >= 15 then return id end  -- beyond exact doubles: keep one entry, harmlessly
  return ms .. '-' .. string.format('%.0f', tonumber(text) + 1)
end

-- XTRIM MINID below what every group still needs; returns the entries removed.
local function trim(stream)
  local groups = redis.call('XINFO', 'GROUPS', stream)
  if #groups == 0 then return 0 end
  local floor = nil
  for _, g in ipairs(groups) do
    local info = {}
    for i = 1, #g, 2 do info[g[i]] = g[i + 1] end
    local candidate
    if tonumber(info['pending']) > 0 then
      candidate = redis.call('XPENDING', stream, info['name'])[2]
    else
      candidate = id_after(info['last-delivered-id'])
    end
    if floor == nil or id_less(candidate, floor) then floor = candidate end
  end
  return redis.call('XTRIM', stream, 'MINID', floor)
end
"""
"""Lua functions the scripts below share: exact entry-id order and ``trim(stream)``."""


UNLINK = """
-- KEYS: keys of one hash slot
return redis.call('UNLINK', unpack(KEYS))
"""
"""UNLINK keys of one slot in one step, none gone while another is there (a cluster
pipeline sends no multi-key UNLINK; sent with ``EVAL``, so no node lacks it)."""

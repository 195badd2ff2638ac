"""Every Lua script of the storage contract, in one module (as rq keeps ``rq/scripts.py``).

Each script touches only keys of one metric version and shard, which share a hash tag
(:func:`ldp_store.keys.tag`), so every one runs unchanged on a Redis Cluster. Beside each
script is the typed function that calls it: the only code that knows its KEYS/ARGV
layout; callers pass named values. Each function registers its script once per client
(redis-py's ``register_script``, which reloads a script after a restart: ``NOSCRIPT``).

| script | function | caller | what |
|---|---|---|---|
| :data:`APPEND` | :func:`append_call` | collector | replay guard + ``XADD``, or "backlog" |
| :data:`FORGET` | :func:`forget_epochs` | collector | delete a guard epoch ended early |
| :data:`READ` | :func:`read` | worker | history or claim reads as one packed reply |
| :data:`COMMIT` | :func:`commit` | worker | acknowledge + count, exactly once; trim |
| :data:`DEAD` | :func:`dead` | worker | dead-letter undecodable entries once; trim |
| :data:`WINDOW` | :func:`read_window` | readers | a window's counts, one snapshot |
| :data:`FOLD` | :func:`fold` | worker | fold a window's deltas into its packed counts |
| :data:`SHUFFLE` | :func:`shuffle_call` | collector, worker | a full or due pool into the stream |
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Literal

import msgspec.msgpack as msgpack
import redis
from redis.commands.core import Script

from ldp_store import guard, keys
from ldp_store.schema import (
    MAX_WINDOW_REPORTS,
    SUPPORT_BYTES,
    SUPPORT_TYPE,
    Increments,
    increment_fields,
    segment_increments,
)

__all__ = [
    "APPEND",
    "UNLINK",
    "COMMIT",
    "DEAD",
    "FOLD",
    "FORGET",
    "ID_CHUNK",
    "READ",
    "SHUFFLE",
    "WINDOW",
    "AppendReply",
    "Call",
    "append_call",
    "commit",
    "dead",
    "fold",
    "forget_epochs",
    "read",
    "read_window",
    "shuffle_call",
]

_REGISTERED: weakref.WeakKeyDictionary[Any, dict[str, Script]] = weakref.WeakKeyDictionary()
"""Per client: its registered scripts, by source."""


def _script(client: redis.Redis, source: str) -> Script:
    """``client.register_script(source)``, once per client."""
    mine = _REGISTERED.get(client)
    if mine is None:
        mine = _REGISTERED[client] = {}
    found = mine.get(source)
    if found is None:
        found = mine[source] = client.register_script(source)
    return found


@dataclass(frozen=True, slots=True)
class Call:
    """One script call as a function below builds it: :meth:`run` it, or hand it to a
    runner that sends it its own way (:class:`collector.replicas.ReplicaWait`)."""

    script: Script
    keys: list[str]
    args: list[Any]

    @property
    def slot_key(self) -> str:
        """A key of the call's one hash slot (every key of a call shares it)."""
        return self.keys[0]

    @property
    def source(self) -> str:
        """The script's Lua source (to load it on a node that lacks it)."""
        return str(self.script.script)

    def run(self) -> Any:
        """The script's reply (``EVALSHA``, loading the script on ``NOSCRIPT``)."""
        return self.script(keys=self.keys, args=self.args)

    def queue(self, pipe: Any) -> None:
        """Queue the call on a pipeline as a bare ``EVALSHA`` (its ``NOSCRIPT`` is the
        caller's: :meth:`load`, then queue it again)."""
        pipe.evalsha(self.script.sha, len(self.keys), *self.keys, *self.args)

    def load(self, node: Any) -> None:
        """Load the script on a node (``SCRIPT LOAD``) that answered ``NOSCRIPT``."""
        node.script_load(self.source)


ID_CHUNK = 1_000
"""Ids per command inside a script: Lua's ``unpack`` fails beyond about 8,000 values."""

_TRIM = """
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


def read(
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
    reply = _script(client, READ)(
        keys=[stream, fence], args=[group, consumer, count, mode, min_idle_ms, start]
    )
    return list(reply)


COMMIT = (
    _TRIM
    + """
-- KEYS: stream, counts:all, counts:hour:…, counts:day:…, windows, claim fence,
--       support:all, support:hour:…, support:day:…, expiries, seeds:hour:…, seeds:day:…,
--       delta:all, delta:hour:…, delta:day:…, batched (reports beyond one an entry),
--       dead letters
-- ARGV: group, consumer, ids (comma-joined, each entry once), hour name, hour start, day
--       name, day start, the fast-path token '<fence>:<own pending>' read with a fresh
--       delivery ('' for any other), hour expiry and day expiry (ms since the epoch), k
--       (the packed support counters; 0: none), seed-bin increments 'bin,count,…' (''
--       for none), the reports the entries hold (counted + dead-lettered here; 0: one an
--       entry), D the reports to dead-letter, the dead-letter stream's cap, D
--       id/reason/payload triples (reports of these entries the worker could not count),
--       then field/increment pairs ('n' first; 'c:<v>' go to the packed support counts,
--       'd' (a blob of (v, C(v)) pairs) to the windows' delta lists, the others,
--       segments' 'g<s>:…' fields included, to the counts hashes).
-- Returns the number of entries counted when every id was still pending; otherwise
-- changes nothing and returns the ids that are (the caller recounts exactly those).
local stream, group, me = KEYS[1], ARGV[1], ARGV[2]
local ids = {}
for id in string.gmatch(ARGV[3], '[^,]+') do ids[#ids + 1] = id end
-- Every check comes before the first write: a refusal changes nothing.
local size = tonumber(ARGV[11])
local rows, dead = tonumber(ARGV[13]), tonumber(ARGV[14])
local head = 16 + 3 * dead  -- the first field
local fields, ops, delta = {}, {}, nil
for f = head, #ARGV, 2 do
  local v = size > 0 and string.match(ARGV[f], '^c:(%d+)$')
  if size > 0 and ARGV[f] == 'd' then
    delta = ARGV[f + 1]
    if #delta == 0 or #delta % 8 ~= 0 then
      return redis.error_reply('DELTA blob of ' .. #delta .. ' bytes is not whole (v, C(v)) pairs')
    end
  elseif v then
    if tonumber(v) >= size then
      return redis.error_reply('SUPPORT value ' .. v .. ' outside 0..' .. (size - 1))
    end
    ops[#ops + 1] = 'INCRBY'; ops[#ops + 1] = '"""
    + SUPPORT_TYPE
    + """'; ops[#ops + 1] = '#' .. v
    ops[#ops + 1] = ARGV[f + 1]
  else
    fields[#fields + 1] = ARGV[f]; fields[#fields + 1] = ARGV[f + 1]
  end
end
local batch_n = ARGV[head] == 'n' and tonumber(ARGV[head + 1]) or 0
-- n + batch_n > the limit, exactly: a double holds 53 bits, so the 19 digits are split
-- into two parts (high digits, low 9 digits) that it holds exactly.
local function split(digits)
  local cut = math.max(0, #digits - 9)
  return tonumber(string.sub(digits, 1, cut)) or 0, tonumber(string.sub(digits, cut + 1))
end
local limit_high, limit_low = split('"""
    + str(MAX_WINDOW_REPORTS)
    + """')
for w = 2, 4 do
  local held = redis.call('HGET', KEYS[w], 'n') or '0'
  local high, low = split(held)
  low = low + batch_n
  high = high + math.floor(low / 1e9)
  low = low % 1e9
  if high > limit_high or (high == limit_high and low > limit_low) then
    return redis.error_reply('FULL ' .. KEYS[w] .. ' holds ' .. held ..
      ' reports; counting ' .. batch_n .. ' more would pass the most a window may hold')
  end
end
-- The fast path holds when no claim or history read bumped the fence since the fresh
-- read, and this consumer still has exactly as many entries pending as right after it:
-- then nothing has taken or acknowledged any of them, and they are all still ours.
local function untouched(token)
  local fence, own = string.match(token, '^(%d+):(%d+)$')
  if not fence or (redis.call('GET', KEYS[6]) or '0') ~= fence then return false end
  local consumers = redis.call('XPENDING', stream, group)[4]
  local mine = 0
  if consumers then
    for _, c in ipairs(consumers) do
      if c[1] == me then mine = tonumber(c[2]) end
    end
  end
  return mine == tonumber(own)
end
local pending = {}
if untouched(ARGV[8]) then
  -- XACK them by the thousand.
  local acked = 0
  for i = 1, #ids, """
    + str(ID_CHUNK)
    + """ do
    acked = acked + redis.call('XACK', stream, group, unpack(ids, i, math.min(#ids, i + """
    + str(ID_CHUNK - 1)
    + """)))
  end
  -- None acknowledged now: all were before (only by hand, past both checks), so nothing
  -- was lost here and nothing is left to count.
  if acked == 0 then return {} end
  if acked ~= #ids then
    return redis.error_reply('FENCE ' .. (#ids - acked) .. ' of ' .. #ids ..
      ' fresh entries were acknowledged outside the workers; ' .. acked ..
      ' acknowledged now are not counted')
  end
  pending = ids
else
  -- XACK one id at a time: each reply (1 = it was pending) says exactly which ids no
  -- other worker has acknowledged.
  for i = 1, #ids do
    if redis.call('XACK', stream, group, ids[i]) == 1 then pending[#pending + 1] = ids[i] end
  end
end
if #pending < #ids then
  -- Some were counted elsewhere: put ours back, pending and owned by us, count nothing.
  for i = 1, #pending, """
    + str(ID_CHUNK)
    + """ do
    local args = {stream, group, me, 0}
    for n = i, math.min(#pending, i + """
    + str(ID_CHUNK - 1)
    + """) do args[#args + 1] = pending[n] end
    args[#args + 1] = 'FORCE'
    args[#args + 1] = 'JUSTID'
    redis.call('XCLAIM', unpack(args))
  end
  redis.call('INCR', KEYS[6])  -- owners changed: no batch in flight may take the fast path
  return pending
end
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expires = {0, tonumber(ARGV[9]), tonumber(ARGV[10])}  -- all (never), hour, day
local names = {'all', ARGV[4], ARGV[6]}
local zeros = nil
local windows = {}
for w = 1, 3 do
  local at = expires[w]
  -- A window already past its retention (a backlog counted late) is not written at all.
  if at == 0 or at > now_ms then
    local hash, packed = KEYS[w + 1], KEYS[w + 6]
    for i = 1, #fields, 2 do redis.call('HINCRBY', hash, fields[i], fields[i + 1]) end
    if delta then
      local list = KEYS[w + 12]
      redis.call('RPUSH', list, delta)  -- one blob for the whole batch
      if at > 0 and redis.call('PTTL', list) == -1 then
        -- The window's expiry is its counts hash's (set by the first write, under the
        -- policy of the worker that made it), not this worker's policy.
        local ttl = redis.call('PTTL', hash)
        if ttl > 0 then redis.call('PEXPIRE', list, ttl) else redis.call('PEXPIREAT', list, at) end
      end
    end
    if #ops > 0 then
      if redis.call('EXISTS', packed) == 0 then
        -- Full length at once: an exact allocation (growing it would over-allocate).
        zeros = zeros or string.rep('\0', """
    + str(SUPPORT_BYTES)
    + """ * size)
        redis.call('SET', packed, zeros)
      end
      for i = 1, #ops, """
    + str(4 * ID_CHUNK)
    + """ do
        redis.call('BITFIELD', packed, 'OVERFLOW', 'FAIL',
                   unpack(ops, i, math.min(#ops, i + """
    + str(4 * ID_CHUNK - 1)
    + """)))
      end
    end
    if at > 0 then
      -- The expiry is set by the write that creates the key (PTTL -1: none yet).
      if redis.call('PTTL', hash) == -1 then redis.call('PEXPIREAT', hash, at) end
      if redis.call('PTTL', packed) == -1 then redis.call('PEXPIREAT', packed, at) end
      redis.call('ZADD', KEYS[10], 'NX', at, names[w])
    end
    if w > 1 then
      -- Seed bins (local hashing), in keys of their own, counted with the rest: exactly
      -- once, and kept as long as their window.
      local seeds = KEYS[w + 9]
      for bin, count in string.gmatch(ARGV[12], '(%d+),(%d+)') do
        redis.call('HINCRBY', seeds, bin, count)
      end
      if at > 0 and redis.call('PTTL', seeds) == -1 then redis.call('PEXPIREAT', seeds, at) end
    end
    windows[#windows + 1] = w == 1 and 0 or (w == 2 and ARGV[5] or ARGV[7])
    windows[#windows + 1] = names[w]
  end
end
redis.call('ZADD', KEYS[5], unpack(windows))
-- Expired windows leave the listing (their keys expire on their own).
local gone = redis.call('ZRANGEBYSCORE', KEYS[10], '-inf', now_ms, 'LIMIT', 0, """
    + str(ID_CHUNK)
    + """)
if #gone > 0 then
  redis.call('ZREM', KEYS[5], unpack(gone))
  redis.call('ZREM', KEYS[10], unpack(gone))
end
-- The acknowledged entries' reports leave the backlog; the ones the worker could not
-- count go to the dead letters with them: both exactly once, as the counts.
if rows > #ids then
  if redis.call('DECRBY', KEYS[16], rows - #ids) <= 0 then redis.call('DEL', KEYS[16]) end
end
for d = 16, head - 1, 3 do
  redis.call('XADD', KEYS[17], 'MAXLEN', '~', ARGV[15], '*',
             'p', ARGV[d + 2], 'reason', ARGV[d + 1])
end
trim(stream)
return #ids
"""
)
"""Acknowledge a batch and add its counts, exactly once; give new windows their expiry.

**Exactly once.** The pending list is the idempotency set. The script acknowledges the
batch's ids one XACK at a time: each reply (1: it was still pending) says exactly which
ids no other worker has acknowledged. If every id was, it applies the batch's increments
(``HINCRBY`` on the ``all``, hour and day counts hashes, ``BITFIELD … INCRBY`` on their
packed support counts; layout in :mod:`ldp_store.schema`; and a local-hashing batch's
seed bins on the hour and day seed histograms, :func:`ldp_store.keys.seeds_key`) in the
same script; if only some were, it puts those back into the pending list (``XCLAIM …
FORCE JUSTID``, now owned by this worker), changes nothing else and returns them, and the
worker counts exactly that subset and commits again. A script runs atomically and reaches
the AOF as one transaction, so a crash anywhere neither loses a report (it stays pending
until its counts land) nor counts one twice, and any number of workers may race on a
stream. (Checking first with ``XCLAIM <ids> JUSTID``, which answers the same question,
costs about 19 µs per id against 2 µs for XACK: XCLAIM propagates a 14-argument command
per id to the AOF and replicas.)

**The fast path.** Most batches are fresh entries (``>``), delivered to exactly one
consumer. Such an entry can reach another batch only through a claim (XAUTOCLAIM of an
idle entry) or a history read (``XREADGROUP … 0``, which a second process running under
the same consumer name would also make), and both bump a per-stream counter, the *claim
fence* (:func:`ldp_store.keys.claims_key`; :data:`READ` bumps it). In the round trip of a
fresh read the worker reads the fence before it and its own pending count (XPENDING's
summary) after it, and passes both as the token. If at commit time the fence has not
moved and the pending count is the same, nothing has taken or acknowledged any of the
batch's entries (a worker of another version, which does not bump the fence, changes the
count), so the script acknowledges them a thousand per XACK (about 1 µs per id in Redis
instead of 2.4) and checks that XACK acknowledged all of them. Otherwise it checks id by
id as above. Only a client that both acknowledges and claims entries by hand, keeping the
count, could fail the bulk check: the script then answers an error starting ``FENCE``,
which the worker raises as ``FenceBroken``.

**Deltas.** A metric with k ≥ :data:`~ldp_store.schema.DELTA_MIN_K` sends its batch's
support counts as one blob (field ``d``), which the script appends to each window's delta
list instead of one ``BITFIELD`` increment per counter;
workers fold the lists into the packed strings with :data:`FOLD` (see Deltas in
:mod:`ldp_store.schema`). The blob goes in with the acknowledgement, in this one script, so
the argument above holds for it unchanged.

**Expiry and overflow.** Every check comes before the first write: the increments'
values lie in the domain, and no window's ``n`` would pass
:data:`~ldp_store.schema.MAX_WINDOW_REPORTS` (else the script answers an error starting
``FULL`` and changes nothing: the entries stay pending). A window's keys get their
``PEXPIREAT`` (:mod:`ldp_store.retention`) from the write that creates them, in this same
script; a window already expired is skipped; expired windows leave the windows set. None
of this touches which entries are acknowledged and counted, so the argument above holds.

**Batch entries.** An entry may hold many reports (:data:`APPEND`); the worker passes
each entry once, with how many reports the entries hold and those of their reports it
could not decode (a bad payload inside an entry whose other reports count): the script
dead-letters those after the acknowledgement, in the same script, so they too land once,
and lowers the stream's batched count (:func:`ldp_store.keys.batched_key`) by what the
acknowledged entries held beyond one each.

**Trimming.** After the counts land, the script trims the stream with ``XTRIM MINID``
below the oldest pending entry of every group (or just past a group's last-delivered id
when nothing is pending): an entry id is an arrival time, kept no longer than needed, and
nothing unacknowledged is ever trimmed.
"""


def commit(
    client: redis.Redis,
    *,
    name: str,
    version: int,
    shard: int,
    consumer: str | bytes,
    ids: bytes,
    hour: str,
    hour_start: int,
    day: str,
    day_start: int,
    fence: bytes,
    hour_expiry_ms: int,
    day_expiry_ms: int,
    k: int,
    seeds: Sequence[int],
    increments: Increments,
    segments: Sequence[tuple[int, Increments]] = (),
    reports: int = 0,
    dead: Sequence[tuple[bytes, str, bytes]] = (),
    dead_maxlen: int = 100_000,
    group: str = keys.GROUP,
) -> int | list[bytes]:
    """Run :data:`COMMIT` for one batch of one stream, all of one hour.

    Args:
        name, version, shard: the stream's metric version and shard (which name its keys).
        consumer: the committing consumer's name.
        ids: the batch's entry ids, comma-joined.
        hour, hour_start, day, day_start: the batch's hour and day windows and their
            starts (:func:`ldp_store.schema.window_names`).
        fence: the fast-path token ``<fence>:<own pending>`` read with a fresh delivery
            of ``ids``, or empty: every id is checked one by one.
        hour_expiry_ms, day_expiry_ms: when the hour and day windows expire (ms since
            the epoch).
        k: the metric's packed support counters (0: none).
        seeds: seed-bin increments as flat (bin, count) pairs (local hashing; else empty).
        increments: what the batch adds to the counts.
        segments: what each segment's part of the batch adds (public dimensions): its
            fields go to the same counts hashes under ``g<segment>:``
            (:func:`ldp_store.schema.segment_increments`), in the same script.
        reports: how many reports the entries hold, counted or in ``dead`` (0: one an
            entry, as every entry written before batch entries).
        dead: (entry id, reason, payload) of the entries' reports that cannot be counted,
            dead-lettered with the acknowledgement.
        dead_maxlen: the dead-letter stream's approximate cap.
        group: the consumer group.

    Returns:
        The entries counted when every id was pending; otherwise the ids that still are
        (nothing changed).

    Raises:
        redis.ResponseError: starting ``FULL`` (a window would hold too many reports) or
            ``FENCE`` (ids acknowledged by hand); nothing counted.
    """
    windows = ("all", hour, day)
    script_keys = [
        keys.stream_key(name, version, shard),
        *(keys.counts_key(name, version, w, shard) for w in windows),
        keys.windows_key(name, version, shard),
        keys.claims_key(name, version, shard),
        *(keys.support_key(name, version, w, shard) for w in windows),
        keys.expiries_key(name, version, shard),
        keys.seeds_key(name, version, hour, shard),
        keys.seeds_key(name, version, day, shard),
        *(keys.delta_key(name, version, w, shard) for w in windows),
        keys.batched_key(name, version, shard),
        keys.dead_key(name, version, shard),
    ]
    args: list[Any] = [
        group,
        consumer,
        ids,
        hour,
        hour_start,
        day,
        day_start,
        fence,
        hour_expiry_ms,
        day_expiry_ms,
        k,
        ",".join(map(str, seeds)),
        reports,
        len(dead),
        dead_maxlen,
    ]
    for entry in dead:
        args += entry
    args += increment_fields(increments)
    for segment, part in segments:
        args += segment_increments(segment, part)
    reply = _script(client, COMMIT)(keys=script_keys, args=args)
    return reply if isinstance(reply, int) else list(reply)


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
    flat, packed, blobs = _script(client, WINDOW)(
        keys=list(keys.window_keys(name, version, window, shard))
    )
    return dict(zip(flat[0::2], flat[1::2], strict=True)), packed, list(blobs)


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


def fold(
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
    done = _script(client, FOLD)(
        keys=[support, delta, counts], args=[blobs, blobs_sha1, packed_sha1, mode, payload]
    )
    return bool(int(done))


DEAD = (
    _TRIM
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
    return int(_script(client, DEAD)(keys=[stream, dead_letters, batched], args=args))


APPEND = (
    """
-- KEYS: 1 the stream (or a shuffle pool), 2 the stream's batched-report count, 3 today's
--       guard hash (the guard's state), 4 yesterday's, 5 and 6 the legacy replay sets of
--       today and yesterday, 7 the bitmap of the current epoch's newest generation's
--       buckets whose expiry is set, 8.. guard buckets, last: the version's retirement
--       mark (all in one hash slot)
-- ARGV: 1 max backlog (reports), 2 when today's guard expires (Unix s), 3 the current
--       epoch as the caller believes it ('<name>:<generations>'), 4 the previous one,
--       5 ids a bucket is sized for, 6 ids a bucket holds before a new generation starts,
--       7 the generation step, 8 the raw 16-byte ids concatenated, 9 the payloads
--       comma-joined, 10 'b' (batch entries of at most ARGV 11 reports) or 'p' (an entry
--       per report: a shuffle pool), 12 MessagePack of [members, home, made, lookups,
--       sizes, starts]:
--       members: each report's 64-bit member (a string); home: each report's bucket in
--       the current epoch's newest generation (a KEYS index); made: that generation's
--       first bucket's KEYS index, then its buckets' numbers (their bits in KEYS[7];
--       empty: no bitmap); lookups: per other generation (the current epoch's older ones,
--       then the previous epoch's) {runs: a bucket's KEYS index and how many reports fall
--       in it, flat; the reports' positions in run order; their members in that order};
--       sizes: each payload's size; starts: where each payload starts in ARGV 9, then
--       where a payload n + 1 would;
--       13 today's name, 14 yesterday's, 15 now (Unix s), 16 today's start (Unix s),
--       17 the ids this version's shard may hold whatever others hold (its reserve; -1:
--       no budget), 18 the ids it may add beyond that (the pool's room), 19 the shortest
--       time an accepted id is remembered (s).
-- Today's hash holds the guard's state: 'g' and 'n' the current epoch's generations and
-- ids; when today's guard ended an epoch early, also 'c' its name ('<day>.<k>'), 't' its
-- start, 'p', 'pg' and 'pn' the previous epoch's name, generations and ids (otherwise the
-- previous epoch is yesterday's current one, as yesterday's hash holds it) and 'x' the
-- epochs dropped whose keys are still to be deleted ('<name>|<generations>', ';'-joined).
-- First refuse a retired metric's reports, then agree on the layout, then sort the
-- reports into new ones and replays, then weigh the new ones against the shares and the
-- backlog, then write: a refusal changes nothing.
local retired = redis.call('GET', KEYS[#KEYS])
if retired then return {-2, retired} end
local function gens(s)
  local t = {}
  for x in string.gmatch(s, '%d+') do t[#t + 1] = tonumber(x) end
  return t
end
local function sized(before)  -- the first generation of an epoch after one of `before` ids
  local j = 0
  while j < 40 and 2 ^ j * tonumber(ARGV[5]) < before do j = j + 1 end
  return tostring(j)
end
local past = redis.call('HMGET', KEYS[4], 'g', 'n', 'c')
local state = redis.call('HMGET', KEYS[3], 'g', 'n', 'c', 't', 'p', 'pg', 'pn', 'x')
local today = state[1]
if not today then
  today = sized(tonumber(past[2] or '0'))
  redis.call('HSET', KEYS[3], 'g', today)
  redis.call('EXPIREAT', KEYS[3], ARGV[2])
end
local current = state[3] or ARGV[13]
local yesterday, previous, pn = past[1] or '', past[3] or ARGV[14], tonumber(past[2] or '0')
if state[5] then yesterday, previous, pn = state[6] or '', state[5], tonumber(state[7] or '0') end
local dropped = state[8] or ''
if current .. ':' .. today ~= ARGV[3] or previous .. ':' .. yesterday ~= ARGV[4] then
  return {-1, current .. ':' .. today, previous .. ':' .. yesterday, 0, dropped, 0}
end
local count = tonumber(state[2] or '0')
local now, window, reserve = tonumber(ARGV[15]), tonumber(ARGV[19]), tonumber(ARGV[17])
local started = tonumber(state[4] or ARGV[16])
local day_end = tonumber(ARGV[16]) + 86400
-- What the shares let this version's shard add: its reserve less what it holds, and the
-- pool's room; an epoch that started early ('t') takes at most half the reserve while
-- younger than the window, so the epoch after it has room for as much.
local room = math.huge
if reserve >= 0 then
  local pool = tonumber(ARGV[18])
  room = math.max(0, reserve - count - pn) + pool
  if state[4] and now - started < window then
    room = math.min(room, math.max(0, math.floor(reserve / 2) - count) + pool)
  end
end
-- End the current epoch early: it becomes the previous one, the previous one is dropped
-- (its ids are older than the window: it ended when the current one started). Never
-- within the window of the day's end, so the epoch the day's end drops is as old.
local function rotate()
  if reserve < 0 or now - started < window or now > day_end - window then return nil end
  local k = tonumber(string.match(current, '%.(%d+)$') or '0') + 1
  local name, first = ARGV[13] .. '.' .. k, sized(count)
  if yesterday ~= '' then
    dropped = (dropped == '' and '' or dropped .. ';') .. previous .. '|' .. yesterday
  end
  redis.call('HSET', KEYS[3], 'c', name, 't', now, 'g', first, 'n', 0, 'p', current,
             'pg', today, 'pn', count, 'x', dropped)
  return {-1, name .. ':' .. first, current .. ':' .. today, 1, dropped, pn}
end
-- When the shares refuse: seconds until an epoch can end (the day's end, within its window).
local function wait()
  local at = started + window
  if at > day_end - window then at = day_end end
  return math.max(1, math.ceil(at - now))
end
local gt = gens(today)
local packed = cmsgpack.unpack(ARGV[12])
local members, homes, made, lookups = packed[1], packed[2], packed[3], packed[4]
local sizes, starts = packed[5], packed[6]
local n = #members
local batched = ARGV[10] == 'b'
local legacy_t = redis.call('EXISTS', KEYS[5]) == 1
local legacy_y = redis.call('EXISTS', KEYS[6]) == 1
-- Replays by any generation but today's newest: one SMISMEMBER a bucket.
local before = {}
for _, lookup in ipairs(lookups) do
  local runs, order, asked = lookup[1], lookup[2], lookup[3]
  local x = 0  -- reports of this generation's runs before this run
  for r = 1, #runs, 2 do
    local key, count = KEYS[runs[r]], runs[r + 1]
    for c = x + 1, x + count, """
    + str(ID_CHUNK)
    + """ do
      local e = math.min(x + count, c + """
    + str(ID_CHUNK - 1)
    + """)
      local found = redis.call('SMISMEMBER', key, unpack(asked, c, e))
      for f = 1, #found do
        if found[f] == 1 then before[order[c + f - 1]] = true end
      end
    end
    x = x + count
  end
end
if legacy_t or legacy_y then
  for i = 1, n do
    local id = string.sub(ARGV[8], 16 * i - 15, 16 * i)
    if (legacy_t and redis.call('SISMEMBER', KEYS[5], id) == 1)
      or (legacy_y and redis.call('SISMEMBER', KEYS[6], id) == 1) then
      before[i] = true
    end
  end
end
-- The reports the stream holds now: its entries, plus what batch entries hold beyond one.
local held = redis.call('XLEN', KEYS[1])
if batched then held = held + tonumber(redis.call('GET', KEYS[2]) or '0') end
local limit = tonumber(ARGV[1])
local duplicates, touched, chosen, refused = 0, {}, {}, 0
if held + n <= limit and n <= room then
  -- Even if every report is new the stream stays within the backlog and the guard
  -- within the shares: nothing can be refused but by Redis at the first write (then
  -- nothing is written). SADD to the newest generation is then its own lookup: 0 means
  -- the id was there (or earlier in this call), and a refused write is never made.
  for i = 1, n do
    local k = homes[i]
    if not before[i] and redis.call('SADD', KEYS[k], members[i]) == 1 then
      touched[k] = true
      chosen[#chosen + 1] = i
    else
      duplicates = duplicates + 1
    end
  end
else
  local fresh = {}
  for i = 1, n do
    local k = homes[i]
    local seen = k .. ' ' .. members[i]
    if fresh[seen] or before[i] or redis.call('SISMEMBER', KEYS[k], members[i]) == 1 then
      duplicates = duplicates + 1
    else
      fresh[seen] = true
      chosen[#chosen + 1] = i
    end
  end
  if #chosen > room then
    -- More new ids than the shares let in: end the epoch if it may end (the caller
    -- retries with the new layout), else take the first ones that fit and refuse the rest.
    local rotated = rotate()
    if rotated then return rotated end
    refused = wait()
    for i = #chosen, room + 1, -1 do chosen[i] = nil end
  end
  if #chosen == 0 then return {0, duplicates, 0, refused, count, pn, dropped} end
  if held + #chosen > limit then return {0, duplicates, 1, 0, count, pn, dropped} end
  for _, i in ipairs(chosen) do
    local k = homes[i]
    redis.call('SADD', KEYS[k], members[i])
    touched[k] = true
  end
end
local new = #chosen
if new == 0 then return {0, duplicates, 0, 0, count, pn, dropped} end
-- The entries: one per report ('p'), or one per ARGV[11] reports ('s' their sizes, 'b'
-- their payloads comma-joined; a lone report still gets a 'p' entry).
local function payloads(a, z)  -- reports a..z, consecutive: their payloads, comma-joined
  return string.sub(ARGV[9], starts[a], starts[z + 1] - 2)
end
local per = batched and tonumber(ARGV[11]) or 1
for c = 1, new, per do
  local e = math.min(new, c + per - 1)
  local a, z = chosen[c], chosen[e]
  if e == c then
    redis.call('XADD', KEYS[1], '*', 'p', payloads(a, a))
  elseif z - a == e - c then  -- reports a..z, all new: their stretch of the arguments
    redis.call('XADD', KEYS[1], '*', 's', table.concat(sizes, ',', a, z), 'b', payloads(a, z))
  else
    local s, b = {}, {}
    for g = c, e do
      s[#s + 1] = sizes[chosen[g]]
      b[#b + 1] = payloads(chosen[g], chosen[g])
    end
    redis.call('XADD', KEYS[1], '*', 's', table.concat(s, ','), 'b', table.concat(b, ','))
  end
end
local beyond = new - math.ceil(new / per)
if beyond > 0 then redis.call('INCRBY', KEYS[2], beyond) end
-- A bucket's expiry is its day's, set once: when its bit in KEYS[7] is 0 (read from the
-- whole bitmap, or by BITFIELD for a large one), the bit then set. With no bitmap, at
-- every write (NX: from Redis 7.0, an expiry already set is neither changed nor written
-- to the AOF again).
local nx = redis.REDIS_VERSION_NUM ~= nil
local function expire(k)
  if nx then
    redis.call('EXPIREAT', KEYS[k], ARGV[2], 'NX')
  else
    redis.call('EXPIREAT', KEYS[k], ARGV[2])
  end
end
if #made == 0 then
  for k in pairs(touched) do expire(k) end
else
  local first = made[1] - 2  -- made[k - first]: bucket k's number
  -- BITFIELD on the bitmap, one operation (op(ops, k) appends it) per bucket of list,
  -- """
    + str(ID_CHUNK)
    + """ a call: the replies, in order.
  local function bitfield(list, op)
    local replies = {}
    for c = 1, #list, """
    + str(ID_CHUNK)
    + """ do
      local ops = {}
      for x = c, math.min(#list, c + """
    + str(ID_CHUNK - 1)
    + """) do op(ops, list[x]) end
      for _, v in ipairs(redis.call('BITFIELD', KEYS[7], unpack(ops))) do
        replies[#replies + 1] = v
      end
    end
    return replies
  end
  local unset = {}  -- the written buckets whose bit is 0: their expiry is not set yet
  if gt[#gt] <= """
    + str(guard.MADE_READ_WHOLE)
    + """ then  -- a small bitmap: read whole, its bits tested here
    local map = redis.call('GET', KEYS[7]) or ''
    for k in pairs(touched) do
      local b = made[k - first]
      local byte = string.byte(map, math.floor(b / 8) + 1) or 0
      if bit.band(byte, bit.rshift(128, b % 8)) == 0 then unset[#unset + 1] = k end
    end
  else  -- a large one: its bits of the written buckets
    local written = {}
    for k in pairs(touched) do written[#written + 1] = k end
    local bits = bitfield(written, function(ops, k)
      ops[#ops + 1] = 'GET'
      ops[#ops + 1] = 'u1'
      ops[#ops + 1] = made[k - first]
    end)
    for x, k in ipairs(written) do
      if bits[x] == 0 then unset[#unset + 1] = k end
    end
  end
  if #unset > 0 then
    for _, k in ipairs(unset) do expire(k) end
    bitfield(unset, function(ops, k)
      ops[#ops + 1] = 'SET'
      ops[#ops + 1] = 'u1'
      ops[#ops + 1] = made[k - first]
      ops[#ops + 1] = 1
    end)
    redis.call('EXPIREAT', KEYS[7], ARGV[2])
  end
end
count = redis.call('HINCRBY', KEYS[3], 'n', new)
redis.call('EXPIREAT', KEYS[3], ARGV[2])
local capacity = 0
for _, j in ipairs(gt) do capacity = capacity + 2 ^ j * tonumber(ARGV[6]) end
if count > capacity and gt[#gt] < 40 then
  redis.call('HSET', KEYS[3], 'g', today .. ',' .. (gt[#gt] + tonumber(ARGV[7])))
end
return {new, duplicates, 0, refused, count, pn, dropped}
"""
)
"""The collector's append of one group of reports (one metric version and shard), with
the bucketed replay guard of :mod:`ldp_store.guard`.

The caller passes the guard's layout as it believes it (the current and previous epochs'
names and generations); if Redis holds another (a new day, an epoch ended, a generation
started), the script writes nothing but today's first generation and answers
``{-1, current, previous, …}``, and the caller retries with that layout. Otherwise a
report whose 64-bit member is in none of its buckets (one per generation of both epochs),
nor in the legacy raw-id sets, nor earlier in the same call, is new; the others are
duplicates.

The new ones are then weighed against the version's shard's shares of the guard's
budget (:class:`ldp_store.guard.Shares`: its reserve less what both epochs hold, plus
the pool's room; an epoch that started early takes at most half the reserve while it is
younger than the window). If
they do not fit and the current epoch is at least the window old (and the day's end is
more than the window away), the script ends the epoch (the state only: it becomes the
previous one, the previous one is listed in ``x`` for the caller to delete) and answers
the new layout with the flag 1 and the dropped epoch's ids; the caller retries. If it may
not end, the first new ones that fit are appended and the rest refused, with the seconds
until an epoch can end. If the new ones would take the stream past ``max backlog``
reports, the script writes nothing and answers "backlog" (the batch is counted, so the
stream never overshoots the limit).

Otherwise it appends the new reports to the stream — batch entries ``XADD stream * s
<sizes> b <payloads>`` of at most :data:`ldp_store.keys.ENTRY_REPORTS` reports each (a
lone report: ``p <payload>``), adding what they hold beyond one report an entry to the
stream's :func:`~ldp_store.keys.batched_key` — or, into a shuffle pool, one ``p`` entry
per report (:data:`SHUFFLE` permutes reports). It adds each new member to its bucket in
the current epoch's newest generation (expiring at the end of tomorrow, UTC), adds them to
the epoch's count ``n``, and starts a generation 2**step times larger when ``n`` passes
what the generations hold. Every write comes after every check, so a refusal (backlog, or
Redis out of memory at the first write) appends nothing. Returns {appended, duplicates,
backlog flag, seconds refused (0: none), the current and previous epochs' ids, ``x``};
or ``{-2, since}``, nothing written, when the version's
:func:`~ldp_store.keys.retired_key` is set: the metric was retired (at ``since``), which
every collector process obeys from the moment the retire returns, whatever its cached
registry state says.

When the stream and the shares hold room for the whole batch (the usual case), no refusal
is possible but Redis's own at the first write, and the newest generation's lookup is the
``SADD`` itself (0: the member was there); only a batch near a limit takes the look-first
path. The caller does the per-report arithmetic (:meth:`ldp_store.guard.Layout.packed_args`:
members, buckets, the older generations' ids grouped by bucket, where each payload
starts) and sends it as one MessagePack argument that ``cmsgpack`` unpacks in C: the
script splits, parses and groups nothing a report in Lua. A bucket's expiry is set once,
when its bit in the generation's bitmap (:func:`ldp_store.keys.guard_made_key`) is 0,
not at every write (issue 27)."""


@dataclass(frozen=True, slots=True)
class AppendReply:
    """:data:`APPEND`'s answer."""

    appended: int
    duplicates: int
    backlog: bool
    layout: tuple[tuple[int, ...], tuple[int, ...]] | None = None
    """When Redis holds another guard layout: the current and previous epochs' generations
    as it holds them (nothing appended; retry with them and :attr:`epochs`)."""
    epochs: tuple[str, str] = ("", "")
    """With :attr:`layout`: the current and previous epochs' names."""
    refused: int = 0
    """Seconds until the shares can take the new reports not appended (0: none refused)."""
    held: tuple[int, int] = (0, 0)
    """Ids of the current and previous epoch after the call."""
    ended: int | None = None
    """This call ended the current epoch early: the ids of the epoch it dropped."""
    dropped: str = ""
    """Dropped epochs whose keys are still to be deleted (:func:`forget_epochs`)."""
    retired: float | None = None
    """When the metric was retired (Unix seconds), if it is: nothing appended."""

    @classmethod
    def of(cls, reply: Sequence[Any]) -> AppendReply:
        """Parse the script's reply."""
        if int(reply[0]) == -2:
            return cls(0, 0, False, retired=float(reply[1]))
        if int(reply[0]) < 0:
            (current, today), (previous, yesterday) = map(guard.parse_epoch, reply[1:3])
            ended = int(reply[5]) if int(reply[3]) else None
            return cls(
                0,
                0,
                False,
                (today, yesterday),
                (current, previous),
                ended=ended,
                dropped=_text(reply[4]),
            )
        appended, duplicates, backlog, refused, count, before, dropped = reply
        return cls(
            int(appended),
            int(duplicates),
            bool(int(backlog)),
            refused=int(refused),
            held=(int(count), int(before)),
            dropped=_text(dropped),
        )


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def append_call(
    client: redis.Redis,
    *,
    layout: guard.Layout,
    reports: Sequence[tuple[bytes, str | bytes]],
    max_backlog: int,
    now: float,
    shares: guard.Shares = guard.UNLIMITED,
    stream: str | None = None,
) -> Call:
    """Build the :data:`APPEND` call of one group of reports (one metric version and shard).

    Args:
        layout: the replay guard's layout of that version and shard as the caller believes
            it (its day pair picks the guard's state).
        reports: (16-byte report id, payload) pairs.
        max_backlog: the most reports the stream may hold (not yet counted).
        now: the time (Unix seconds), which an epoch's age is measured with.
        shares: what the version's shard may add to the guard.
        stream: where the reports go: the version's stream (None), or its shuffle pool
            (:func:`ldp_store.keys.pool_key`), whose reports :data:`SHUFFLE` moves on.

    Returns:
        The call: :meth:`Call.run` it (or hand it to a runner), then parse the reply with
        :meth:`AppendReply.of`.
    """
    raw_ids = b"".join([rid for rid, _ in reports])
    packed = layout.packed_args(raw_ids, lead=2)
    payloads = [p.encode() if isinstance(p, str) else p for _, p in reports]
    sizes = list(map(len, payloads))
    starts = list(accumulate(map((1).__add__, sizes), initial=1))  # in ARGV 9, 1-based
    own = keys.stream_key(layout.name, layout.version, layout.shard)
    if stream is None:
        stream = own
    structure = [packed.members, packed.home, packed.made, packed.lookups, sizes, starts]
    args: list[Any] = [
        max_backlog,
        guard.expires_at(layout.days[0]),
        *layout.believed(),
        guard.SIZED_FOR,
        guard.BUCKET_FILL,
        guard.GENERATION_STEP,
        raw_ids,
        b",".join(payloads),
        "b" if stream == own else "p",
        keys.ENTRY_REPORTS,
        msgpack.encode(structure),
        *layout.days,
        repr(float(now)),
        guard.day_start(layout.days[0]),
        shares.reserve,
        shares.pool,
        guard.MIN_WINDOW,
    ]
    batched = keys.batched_key(layout.name, layout.version, layout.shard)
    retired = keys.retired_key(layout.name, layout.version, layout.shard)
    return Call(_script(client, APPEND), [stream, batched, *packed.keys, retired], args)


FORGET = """
-- KEYS: 1 today's guard hash, then keys of the dropped epochs it lists in 'x'
-- ARGV: the 'x' entries whose keys these are (the last call for them: else none)
if #KEYS > 1 then redis.call('UNLINK', unpack(KEYS, 2)) end
if #ARGV == 0 then return 0 end
local left = {}
for entry in string.gmatch(redis.call('HGET', KEYS[1], 'x') or '', '[^;]+') do
  local done = false
  for _, gone in ipairs(ARGV) do
    if gone == entry then done = true end
  end
  if not done then left[#left + 1] = entry end
end
if #left == 0 then redis.call('HDEL', KEYS[1], 'x')
else redis.call('HSET', KEYS[1], 'x', table.concat(left, ';')) end
return #left
"""
"""Delete a dropped epoch's keys (a version's shard's slot), and with the last of them its
entry in ``x``: an epoch the append script ended early stays listed until its keys are
gone, so a caller that fails midway leaves it for the next."""


def forget_epochs(client: redis.Redis, *, layout: guard.Layout, dropped: str) -> int:
    """Delete the keys of the dropped epochs ``dropped`` (the script's ``x``) and unlist them.

    Every bucket of each generation is named (2**j keys; a thousand a call: a generation
    of 2**20 buckets, about 270 M ids, takes about a second, once per ``MIN_WINDOW`` at
    most), with each generation's expiry bitmap.

    Args:
        layout: the version's shard, and today's day (whose hash lists them).
        dropped: ``'<name>|<generations>'`` entries, ``;``-joined.

    Returns:
        How many keys were named (existing or not).
    """
    name, version, shard = layout.name, layout.version, layout.shard
    state = keys.guard_key(name, version, layout.days[0], shard)
    script = _script(client, FORGET)
    named = 0
    for entry in filter(None, dropped.split(";")):
        epoch, _, generations = entry.partition("|")
        found: list[str] = []
        for j in guard.parse_generations(generations):
            prefix = keys.guard_bucket_key(name, version, epoch, j, 0, shard)[:-1]
            found.append(keys.guard_made_key(name, version, epoch, j, shard))
            found += [f"{prefix}{b}" for b in range(2**j)]
        named += len(found)
        for start in range(0, max(1, len(found)), ID_CHUNK):
            last = start + ID_CHUNK >= len(found)
            script(keys=[state, *found[start : start + ID_CHUNK]], args=[entry] if last else [])
    return named


UNLINK = """
-- KEYS: keys of one hash slot
return redis.call('UNLINK', unpack(KEYS))
"""
"""UNLINK keys of one slot in one step, none gone while another is there (a cluster
pipeline sends no multi-key UNLINK; sent with ``EVAL``, so no node lacks it)."""


SHUFFLE = """
-- KEYS: 1 the shuffle pool, 2 the stream, 3 the pool's record (one hash slot)
-- ARGV: 1 n, the pool's length as the caller read it; 2 B, the least batch released
-- before its time (0: only a due pool); 3 the release bound in ms if the record has none;
-- then a permutation of 1..n
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
whose replay guard already judged them. Answers ``n``; -1 when the pool holds fewer than
``n`` (released by another caller meanwhile); -2 when it is neither full nor due: nothing
done."""


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
    return Call(
        _script(client, SHUFFLE),
        [pool, stream, record],
        [len(order), min_batch, default_delay_ms, *order],
    )

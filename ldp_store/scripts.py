"""Every Lua script of the storage contract, in one module (as rq keeps ``rq/scripts.py``).

Each script touches only keys of one metric version and shard, which share a hash tag
(:func:`ldp_store.keys.tag`), so every one runs unchanged on a Redis Cluster. Callers
load them with redis-py's ``register_script``, which reloads a script after a restart
(``NOSCRIPT``).

| script | caller | what |
|---|---|---|
| :data:`APPEND` | the collector's ingest | replay guard + ``XADD``, or "backlog" |
| :data:`READ` | the stream worker | fresh, history or claim reads as one packed reply |
| :data:`COMMIT` | the stream worker | acknowledge + count, exactly once; trim |
| :data:`DEAD` | the stream worker | dead-letter undecodable entries once; trim |
"""

from __future__ import annotations

__all__ = [
    "APPEND",
    "COMMIT",
    "DEAD",
    "GUARD_FILL",
    "GUARD_MAX_BITS",
    "GUARD_STEP",
    "ID_CHUNK",
    "READ",
]

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
-- Returns {cursor, ids, sizes, payloads, deliveries, fence}, each comma-joined; size -1:
-- entry deleted, -2: no field p (payload '' for both). One reply of a few strings
-- instead of thousands of nested arrays keeps the client's parsing cheap.
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
local ids, sizes, payloads, deliveries = {}, {}, {}, {}
for i, e in ipairs(entries) do
  ids[i] = e[1]
  local fields, payload, size = e[2], '', -1
  if fields then
    size = -2
    for f = 1, #fields, 2 do
      if fields[f] == 'p' then payload = fields[f + 1]; size = #payload; break end
    end
  end
  payloads[i] = payload
  sizes[i] = size
end
if mode ~= '>' and #ids > 0 then
  local seen = {}
  local pel = redis.call('XPENDING', stream, group, ids[1], ids[#ids], 2 * #ids, me)
  for _, p in ipairs(pel) do seen[p[1]] = p[4] end
  for i, id in ipairs(ids) do deliveries[i] = seen[id] or 0 end
end
return {cursor, table.concat(ids, ','), table.concat(sizes, ','),
        table.concat(payloads, ','), table.concat(deliveries, ','),
        redis.call('GET', KEYS[2]) or '0'}
"""
)
"""A worker's read: fresh entries (``>``), its own history (a cursor), or a claim of
idle entries (XAUTOCLAIM, then XCLAIM for content and delivery counts). The reply packs
ids, sizes, payloads and delivery counts into comma-joined strings, and ends with the
claim fence's value (see :data:`COMMIT`)."""

COMMIT = (
    _TRIM
    + """
-- KEYS: stream, counts:all, counts:hour:…, counts:day:…, windows, claim fence
-- ARGV: group, consumer, ids (comma-joined), hour name, hour start, day name, day start,
--       the fast-path token '<fence>:<own pending>' read with a fresh delivery ('' for
--       any other), then field/increment pairs ('n' first).
-- Returns the number of entries counted when every id was still pending; otherwise
-- changes nothing and returns the ids that are (the caller recounts exactly those).
local stream, group, me = KEYS[1], ARGV[1], ARGV[2]
local ids = {}
for id in string.gmatch(ARGV[3], '[^,]+') do ids[#ids + 1] = id end
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
for w = 2, 4 do
  for f = 9, #ARGV, 2 do redis.call('HINCRBY', KEYS[w], ARGV[f], ARGV[f + 1]) end
end
redis.call('ZADD', KEYS[5], 0, 'all', ARGV[5], ARGV[4], ARGV[7], ARGV[6])
trim(stream)
return #ids
"""
)
"""Acknowledge a batch and add its counts, exactly once.

**Exactly once.** The pending list is the idempotency set. The script acknowledges the
batch's ids one XACK at a time: each reply (1: it was still pending) says exactly which
ids no other worker has acknowledged. If every id was, it applies the batch's increments
(``HINCRBY`` on the ``all``, hour and day counts hashes; fields in
:mod:`ldp_store.schema`) in the same script; if only some were, it puts those back into
the pending list (``XCLAIM … FORCE JUSTID``, now owned by this worker), changes nothing
else and returns them, and the worker counts exactly that subset and commits again. A
script runs atomically and reaches the AOF as one transaction, so a crash anywhere neither
loses a report (it stays pending until its counts land) nor counts one twice, and any
number of workers may race on a stream. (Checking first with ``XCLAIM <ids> JUSTID``,
which answers the same question, costs about 19 µs per id against 2 µs for XACK: XCLAIM
propagates a 14-argument command per id to the AOF and replicas.)

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

**Trimming.** After the counts land, the script trims the stream with ``XTRIM MINID``
below the oldest pending entry of every group (or just past a group's last-delivered id
when nothing is pending): an entry id is an arrival time, kept no longer than needed, and
nothing unacknowledged is ever trimmed.
"""

DEAD = (
    _TRIM
    + """
-- KEYS: stream, dead; ARGV: group, maxlen, then id/reason/payload triples.
-- An entry is dead-lettered only if this call acknowledged it (XACK returned 1), so a
-- bad entry lands in the dead-letter stream once however many workers saw it.
local moved = 0
for i = 3, #ARGV, 3 do
  if redis.call('XACK', KEYS[1], ARGV[1], ARGV[i]) == 1 then
    redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], '*',
               'p', ARGV[i + 2], 'reason', ARGV[i + 1])
    moved = moved + 1
  end
end
trim(KEYS[1])
return moved
"""
)
"""Move undecodable entries to the dead-letter stream (capped, approximately) with their
payload and reason. An entry moves only if this call acknowledged it (XACK returned 1), so
a bad entry lands there once however many workers saw it; then the stream is trimmed as
after a commit."""


GUARD_FILL = 512
"""Report ids per replay-guard bucket at which a day's guard starts a finer epoch: a
bucket is one string that a lookup copies into Lua and scans (512 ids: about 8 KB, a
microsecond), while each bucket key costs Redis about 100 bytes of its own, so buckets
should hold hundreds of ids."""

GUARD_STEP = 4
"""Bits a new epoch adds to the bucket prefix: 16 times the buckets, so a day that grows
from nothing to 200 million ids passes through at most 6 epochs (each one more lookup
per id, for that day and the next)."""

GUARD_MAX_BITS = 28
"""The finest bucket prefix: 2^28 buckets of 512 ids hold 137 billion ids a day."""

APPEND = (
    """
-- KEYS: the stream, today's and yesterday's replay guard (hashes: n, bits), today's and
--       yesterday's legacy replay sets (read only until they expire); one hash slot.
-- ARGV: max backlog, TTL in seconds of today's guard keys, then id1, payload1, ...
local stream, today, yesterday = KEYS[1], KEYS[2], KEYS[3]
local FILL, STEP, MAXBITS = """
    + f"{GUARD_FILL}, {GUARD_STEP}, {GUARD_MAX_BITS}"
    + """

-- A day's guard: ids stored so far and the bucket prefix bits of each epoch, oldest first.
local function epochs(meta)
  local got = redis.call('HMGET', meta, 'n', 'bits')
  local list = {}
  for b in string.gmatch(got[2] or '', '%d+') do list[#list + 1] = tonumber(b) end
  return tonumber(got[1]) or 0, list
end

-- The bucket of an id in an epoch (its first `bits` bits, as a number) and its record
-- there: the id without the whole bytes the bucket name already says.
local function bucket(meta, bits, id)
  local whole, v = math.ceil(bits / 8), 0
  for i = 1, whole do v = v * 256 + string.byte(id, i) end
  v = math.floor(v / 2 ^ (whole * 8 - bits))
  return meta .. ':' .. bits .. ':' .. v, string.sub(id, math.floor(bits / 8) + 1)
end

local cache, dirty = {}, {}
local function stored(key)
  local s = cache[key]
  if s == nil then
    s = redis.call('GET', key) or ''
    cache[key] = s
  end
  return s
end

-- Whether the string of fixed-width records `s` holds `rec` at a record boundary.
local function holds(s, rec)
  local w, from = #rec, 1
  while true do
    local at = string.find(s, rec, from, true)
    if not at then return false end
    if (at - 1) % w == 0 then return true end
    from = at + 1
  end
end

local function seen(meta, list, id)
  for _, bits in ipairs(list) do
    local key, rec = bucket(meta, bits, id)
    if holds(stored(key), rec) then return true end
  end
  return false
end

-- Records are kept in byte order, not arrival order: the guard must not say which
-- stream entry (also in arrival order) an id belongs to.
local function insert(key, rec)
  local s, w = stored(key), #rec
  local lo, hi = 0, #s / w
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if string.sub(s, mid * w + 1, mid * w + w) < rec then lo = mid + 1 else hi = mid end
  end
  cache[key] = string.sub(s, 1, lo * w) .. rec .. string.sub(s, lo * w + 1)
  if not dirty[key] then dirty[key] = true; dirty[#dirty + 1] = key end
end

local n, mine = epochs(today)
local before_n, before = epochs(yesterday)
if #mine == 0 then
  -- A new day starts as fine as yesterday ended: one epoch, one lookup per id.
  local bits = 0
  while bits < MAXBITS and 2 ^ bits * FILL < before_n do bits = bits + STEP end
  mine = {bits}
end
local legacy_today = redis.call('EXISTS', KEYS[4]) == 1
local legacy_yesterday = redis.call('EXISTS', KEYS[5]) == 1
local fresh, new, duplicates = {}, {}, 0
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  if fresh[id]
      or (legacy_today and redis.call('SISMEMBER', KEYS[4], id) == 1)
      or (legacy_yesterday and redis.call('SISMEMBER', KEYS[5], id) == 1)
      or seen(yesterday, before, id) or seen(today, mine, id) then
    duplicates = duplicates + 1
  else
    fresh[id] = true
    local bits = mine[#mine]
    if n >= 2 ^ bits * FILL and bits < MAXBITS then
      bits = bits + STEP
      mine[#mine + 1] = bits
    end
    insert(bucket(today, bits, id))
    n = n + 1
    new[#new + 1] = i
  end
end
if #new == 0 then return {0, duplicates, 0} end
-- The backlog counts this batch too: the stream never grows past the limit.
if redis.call('XLEN', stream) + #new > tonumber(ARGV[1]) then
  return {0, duplicates, 1}
end
for _, i in ipairs(new) do redis.call('XADD', stream, '*', 'p', ARGV[i + 1]) end
for _, key in ipairs(dirty) do redis.call('SET', key, cache[key], 'EX', ARGV[2]) end
redis.call('HSET', today, 'n', n, 'bits', table.concat(mine, ','))
redis.call('EXPIRE', today, ARGV[2])
return {#new, duplicates, 0}
"""
)
"""The collector's append of one group of reports (one metric version and shard).

For each report whose 16-byte id the replay guard has not seen today or yesterday (UTC),
it appends ``XADD stream * p <payload>`` and records the id in today's guard; a replayed
id (also one repeated within the call) counts as a duplicate. If the new reports would
take the stream past ``max backlog`` entries it writes nothing and answers "backlog".
Returns {appended, duplicates, backlog flag}. Every write comes after every check, so a
refusal (backlog, or Redis out of memory at the first XADD) changes nothing.

**The replay guard, exact and compact.** A day's ids live in string keys of fixed-width
records (:func:`ldp_store.keys.guard_key` ``:<bits>:<prefix>``): an id goes to the bucket
named by its first ``bits`` bits and is stored as the id without the whole bytes that
name already says (16 bytes at fewer than 8 bits, 15 below 16, ...). A lookup copies the
bucket into Lua and searches it (``string.find`` at record boundaries): every id is
compared in full, so a report is never mistaken for another. A string has no per-element
overhead, so an id costs its record plus its share of the bucket key: about 15–17 bytes,
against about 64–80 in the old per-day ``SET`` (``benchmarks/bench_replay_guard.py``).

Buckets must hold hundreds of ids to share their key's overhead, and few enough to scan
fast, whatever a metric's volume. So a day's guard has *epochs*: the guard hash
(``n``: ids so far, ``bits``: each epoch's prefix bits) starts the day at the bits that
held yesterday's ids (``GUARD_FILL`` per bucket), and when ``n`` reaches 2^bits ×
``GUARD_FILL`` a new epoch with ``GUARD_STEP`` more bits takes the new ids. A lookup
searches every epoch of both days: one each for a steady metric, up to six on the day a
metric grows from nothing to 200 million reports. The encoding does not depend on any
server setting (``hash-max-listpack-entries`` and the like), so it packs the same on
Redis 6.2 and 7.

The legacy ``seen:<day>`` sets of earlier releases are still read (one EXISTS per call)
until they expire, so an upgrade keeps the guarantee."""

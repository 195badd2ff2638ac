"""The collector's append script (replay guard, shares, backlog, then ``XADD``) and the
deletion of guard epochs it ended early (``docs/architecture/pipeline.md``, step 7)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

import msgspec.msgpack as msgpack
import redis

from ldp_store import guard, keys
from ldp_store.connection import as_text, is_cluster
from ldp_store.scripts.call import ID_CHUNK, Call, script

__all__ = ["APPEND", "FORGET", "AppendReply", "append_call", "forget_epochs"]

APPEND = (
    """
-- KEYS: 1 the stream (or a shuffle pool), 2 the stream's batched-report count, 3 today's
--       guard hash (the guard's state), 4 yesterday's, 5 and 6 the legacy replay sets of
--       today and yesterday, 7 the bitmap of the current epoch's newest generation's
--       buckets whose expiry is set, 8.. guard buckets, then the version's retirement
--       mark (all in one hash slot), and last, with ARGV 20 > 0, the doorbell
--       (ldp_store.keys.DOORBELL; a single Redis only: its own slot)
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
--       time an accepted id is remembered (s), 20 the doorbell's length cap (0: none).
-- Today's hash holds the guard's state: 'g' and 'n' the current epoch's generations and
-- ids; when today's guard ended an epoch early, also 'c' its name ('<day>.<k>'), 't' its
-- start, 'p', 'pg' and 'pn' the previous epoch's name, generations and ids (otherwise the
-- previous epoch is yesterday's current one, as yesterday's hash holds it) and 'x' the
-- epochs dropped whose keys are still to be deleted ('<name>|<generations>', ';'-joined).
-- First refuse a retired metric's reports, then agree on the layout, then sort the
-- reports into new ones and replays, then weigh the new ones against the shares and the
-- backlog, then write: a refusal changes nothing.
local bell = tonumber(ARGV[20] or '0')
local retired = redis.call('GET', KEYS[bell > 0 and #KEYS - 1 or #KEYS])
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
if bell > 0 then  -- the stream or pool that got entries, for idle workers
  redis.call('XADD', KEYS[#KEYS], 'MAXLEN', '~', bell, '*', 's', KEYS[1])
end
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
                dropped=as_text(reply[4]),
            )
        appended, duplicates, backlog, refused, count, before, dropped = reply
        return cls(
            int(appended),
            int(duplicates),
            bool(int(backlog)),
            refused=int(refused),
            held=(int(count), int(before)),
            dropped=as_text(dropped),
        )


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
    ring = [] if is_cluster(client) else [keys.DOORBELL]
    args.append(keys.DOORBELL_LENGTH if ring else 0)
    return Call(script(client, APPEND), [stream, batched, *packed.keys, retired, *ring], args)


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
    forget = script(client, FORGET)
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
            forget(keys=[state, *found[start : start + ID_CHUNK]], args=[entry] if last else [])
    return named

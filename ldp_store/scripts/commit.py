"""The worker's commit script: acknowledge a batch and count it, exactly once, then trim
(``docs/architecture/pipeline.md``, step 10). :class:`CommitBatch` is a call's inputs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import redis

from ldp_store import keys
from ldp_store.schema import (
    MAX_WINDOW_REPORTS,
    SUPPORT_BYTES,
    SUPPORT_TYPE,
    Increments,
    increment_fields,
    segment_increments,
    window_names,
)
from ldp_store.scripts.call import ID_CHUNK, script
from ldp_store.scripts.trim import TRIM

__all__ = ["COMMIT", "CommitBatch", "Hours", "commit_batch"]

COMMIT = (
    TRIM
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


@dataclass(frozen=True, slots=True)
class Hours:
    """The hour and day windows of a batch (all of one hour): names, starts, expiries."""

    hour: str
    hour_start: int
    day: str
    day_start: int
    hour_expiry_ms: int
    """When the hour window expires (ms since the epoch)."""
    day_expiry_ms: int

    @classmethod
    def of(cls, ms: int, expires_at: Callable[[str], float | None]) -> Hours:
        """The windows of an entry id's time ``ms`` (:func:`ldp_store.schema.window_names`),
        each expiring at ``expires_at(window)`` (Unix seconds)."""
        hour, hour_start, day, day_start = window_names(ms)
        hour_expiry, day_expiry = (round(1000 * cast(float, expires_at(w))) for w in (hour, day))
        return cls(hour, hour_start, day, day_start, hour_expiry, day_expiry)


@dataclass(frozen=True, slots=True)
class CommitBatch:
    """The inputs of one :data:`COMMIT` call: one batch of one stream, all of one hour."""

    name: str
    version: int
    shard: int
    """The stream's metric version and shard (which name its keys)."""
    consumer: str | bytes
    """The committing consumer's name."""
    ids: bytes
    """The batch's entry ids, comma-joined."""
    hours: Hours
    fence: bytes
    """The fast-path token ``<fence>:<own pending>`` read with a fresh delivery of
    ``ids``, or empty: every id is checked one by one."""
    k: int
    """The metric's packed support counters (0: none)."""
    seeds: Sequence[int]
    """Seed-bin increments as flat (bin, count) pairs (local hashing; else empty)."""
    increments: Increments
    """What the batch adds to the counts."""
    segments: Sequence[tuple[int, Increments]] = ()
    """What each segment's part of the batch adds (public dimensions): its fields go to
    the same counts hashes under ``g<segment>:``
    (:func:`ldp_store.schema.segment_increments`), in the same script."""
    reports: int = 0
    """How many reports the entries hold, counted or in ``dead`` (0: one an entry, as
    every entry written before batch entries)."""
    dead: Sequence[tuple[bytes, str, bytes]] = ()
    """(entry id, reason, payload) of the entries' reports that cannot be counted,
    dead-lettered with the acknowledgement."""
    dead_maxlen: int = 100_000
    """The dead-letter stream's approximate cap."""
    group: str = keys.GROUP

    def script_keys(self) -> list[str]:
        """The script's KEYS, in its order."""
        name, version, shard = self.name, self.version, self.shard
        windows = ("all", self.hours.hour, self.hours.day)
        return [
            keys.stream_key(name, version, shard),
            *(keys.counts_key(name, version, w, shard) for w in windows),
            keys.windows_key(name, version, shard),
            keys.claims_key(name, version, shard),
            *(keys.support_key(name, version, w, shard) for w in windows),
            keys.expiries_key(name, version, shard),
            keys.seeds_key(name, version, self.hours.hour, shard),
            keys.seeds_key(name, version, self.hours.day, shard),
            *(keys.delta_key(name, version, w, shard) for w in windows),
            keys.batched_key(name, version, shard),
            keys.dead_key(name, version, shard),
        ]

    def script_args(self) -> list[Any]:
        """The script's ARGV, in its order."""
        h = self.hours
        args: list[Any] = [
            self.group,
            self.consumer,
            self.ids,
            h.hour,
            h.hour_start,
            h.day,
            h.day_start,
            self.fence,
            h.hour_expiry_ms,
            h.day_expiry_ms,
            self.k,
            ",".join(map(str, self.seeds)),
            self.reports,
            len(self.dead),
            self.dead_maxlen,
        ]
        for entry in self.dead:
            args += entry
        args += increment_fields(self.increments)
        for segment, part in self.segments:
            args += segment_increments(segment, part)
        return args


def commit_batch(client: redis.Redis, batch: CommitBatch) -> int | list[bytes]:
    """Run :data:`COMMIT` for one batch of one stream, all of one hour.

    Returns:
        The entries counted when every id was pending; otherwise the ids that still are
        (nothing changed).

    Raises:
        redis.ResponseError: starting ``FULL`` (a window would hold too many reports) or
            ``FENCE`` (ids acknowledged by hand); nothing counted.
    """
    reply = script(client, COMMIT)(keys=batch.script_keys(), args=batch.script_args())
    return reply if isinstance(reply, int) else list(reply)

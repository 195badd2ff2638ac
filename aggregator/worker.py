"""The stream worker: turns every report in the streams into support counts, exactly once.

One consumer group (:data:`collector.keys.GROUP`) per metric-version stream; each worker
is a consumer with a *stable* name, so a restarted worker finds its own pending entries.
The loop, per stream (models: walrus ``ConsumerGroup``, rq's worker)::

    own pending (XREADGROUP … 0) until empty ─► XAUTOCLAIM a dead worker's entries ─►
    fence + new entries (XREADGROUP … >) ─► decode ─► Lua: XACK-check + HINCRBY ─► XTRIM MINID

**Exactly once.** The pending list is the idempotency set. The commit script acknowledges
the batch's ids one XACK at a time: each reply (1: it was still pending) says exactly
which ids no other worker has acknowledged. If every id was, it applies the batch's
support counts in the same script; if only some were, it puts those back into the
pending list (``XCLAIM … FORCE JUSTID``, now owned by this worker), changes nothing else
and returns them, and the worker counts exactly that subset and commits again. A script
runs atomically and reaches the AOF as one transaction, so a crash anywhere neither loses
a report (it stays pending until its counts land) nor counts one twice, and any number of
workers may race on a stream. (Checking first with ``XCLAIM <ids> JUSTID``, which answers
the same question, costs about 19 µs per id against 2 µs for XACK here: XCLAIM
propagates a 14-argument command per id to the AOF and replicas.)

**The fast path.** Most batches are fresh entries (``>``), delivered to exactly one
consumer. Such an entry can reach another batch only through a claim (XAUTOCLAIM of an
idle entry) or a history read (``XREADGROUP … 0``, which a second process running under
the same consumer name would also make), and both bump a per-stream counter, the *claim
fence*. In the round trip of a fresh read the worker reads the fence before it and its
own pending count (XPENDING's summary) after it. If at commit time the fence has not
moved and the pending count is the same, nothing has taken or acknowledged any of the
batch's entries (a worker of another version, which does not bump the fence, changes the
count), so the script acknowledges them a thousand per XACK (about 1 µs per id in Redis
instead of 2.4) and checks that XACK acknowledged all of them. Otherwise it checks id by
id as above. Only a client that both acknowledges and claims entries by hand, keeping the
count, could fail the bulk check: the script then raises :class:`FenceBroken`. Fresh
entries are read with a plain XREADGROUP whose reply hiredis parses, not through a
script: Redis spends a third less per entry when it need not turn entries into Lua
tables and back.

**Numeric metrics** commit the same way: their increments are ``n`` and the base-2³²
limbs of Σy and Σy² (``s:<i>``, ``s2:<i>``; see :mod:`aggregator.numeric`), exact integers
added with the same HINCRBY in the same script.

**Shards.** A version with ``shards`` N has N streams (:func:`collector.keys.stream_key`
with shard 0..N−1, each in its own hash slot, so on a Redis Cluster they spread over the
nodes); each is consumed like any other stream, with its own counts hashes, which the
readers (:mod:`aggregator.counts`) sum.

**Windows.** Counts go to the hashes ``counts:all``, ``counts:hour:<YYYY-MM-DDTHH>`` and
``counts:day:<YYYY-MM-DD>`` of the entries' arrival time (the entry id's milliseconds,
UTC); a batch spanning an hour boundary is committed per hour.

**Dead letters.** An entry that cannot be decoded (invalid JSON, a payload the mechanism
rejects, no ``p`` field, deleted from the stream) or that was delivered more than
``max_deliveries`` times is moved to the dead-letter stream with its payload and the
reason, and acknowledged, in one script: a bad entry never stops the worker.

**Trimming.** After each commit the same script trims the stream with ``XTRIM MINID``
below the oldest pending entry of every group (or just past a group's last-delivered id
when nothing is pending): an entry id is an arrival time, kept no longer than needed, and
nothing unacknowledged is ever trimmed.

**Signals.** The first SIGTERM/SIGINT finishes the current batch and returns; a second
stops at once (which is safe: whatever was not committed is still pending).
"""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import FrameType
from typing import Any, cast

import numpy as np
import redis
from redis.exceptions import RedisClusterException

from aggregator.decoding import Batch, Codec, codec_for
from aggregator.numeric import NumericCodec
from client_sdk.errors import DefinitionError, PayloadError
from client_sdk.mechanisms import NumericMechanism
from client_sdk.wire import MetricDefinition
from collector import keys
from collector.connection import is_cluster, unavailable
from collector.registry import Registry

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_BLOCK_MS",
    "DEFAULT_CLAIM_IDLE_MS",
    "DEFAULT_NAME",
    "FenceBroken",
    "MAX_BATCH_SIZE",
    "MAX_DELIVERIES",
    "Worker",
    "WorkerAborted",
    "WorkerStats",
    "ensure_group",
    "window_names",
]

log = logging.getLogger("ldp.aggregator.worker")

DEFAULT_NAME = "worker-1"
"""The consumer name when none is given. It must be stable across restarts (never
hostname-pid): a restarted worker finds its pending entries only under the same name."""

DEFAULT_BATCH_SIZE = 10_000
"""Entries per read. Per-call costs (round trips, one script run, numpy set-up) vanish per
report above a few thousand (measured: 5k–20k drain equally fast), while one batch stays
a few MB of memory and one commit script runs a few ms, during which Redis serves nobody
else."""

MAX_BATCH_SIZE = 50_000
"""Largest allowed batch: a commit script over 50k ids keeps Redis busy for roughly
50 ms, the most a shared Redis should be blocked by one client."""

DEFAULT_BLOCK_MS = 1_000
"""How long an idle worker waits for new entries per call before looking again at its
other duties (claiming, rediscovery)."""

DEFAULT_CLAIM_IDLE_MS = 60_000
"""Idle time after which another worker's pending entry is presumed abandoned and taken
over. Far above a batch's processing time (milliseconds), so a live worker is not
robbed, and short enough that a crashed worker's entries are counted within a minute."""

MAX_DELIVERIES = 10
"""Deliveries after which an entry is dead-lettered unread: a report that keeps killing
its worker (a poison pill) must not crash-loop every worker. Ten leaves room for several
restarts and takeovers of a healthy entry."""

MIN_CLAIM_INTERVAL = 0.05
"""Seconds between XAUTOCLAIM passes at the least. A pass starts every
``claim_idle_ms / 2``: no entry waits much beyond its idle time, and with a tiny idle time
(tests) a pass still does not run between every two batches."""

CLUSTER_POLL_MIN = 0.01
"""Seconds of the first idle pause on a Redis Cluster (see ``Worker._wait_for_entries``):
short enough that a burst after a quiet moment starts within milliseconds."""

DISCOVER_INTERVAL = 5.0
"""Seconds between registry scans for new metrics or versions: new metrics start being
counted within seconds, at the cost of a few cheap reads."""

DEAD_MAXLEN = 100_000
"""Approximate cap of a dead-letter stream. It holds entries for an operator to inspect,
never reports still to be counted; the cap bounds the memory a systematic failure (a bug
dead-lettering everything) can take."""

ID_CHUNK = 1_000
"""Ids per command inside a script: Lua's ``unpack`` fails beyond about 8,000 values."""

RECONNECT_MAX_WAIT = 10.0
"""Longest pause between attempts while Redis is unreachable (the pause doubles from
0.1 s); nothing is lost meanwhile: uncommitted entries stay pending."""

ONCE_RECONNECT_ATTEMPTS = 5
"""In burst mode, give up after this many consecutive connection failures."""

_HOUR_MS = 3_600_000
_DAY_MS = 86_400_000

# -- Lua -------------------------------------------------------------------------------------
# Every script touches only keys of one metric version and shard, which share a hash tag.

_LUA_TRIM = """
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

_LUA_READ = (
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

_LUA_COMMIT = (
    _LUA_TRIM
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

_LUA_DEAD = (
    _LUA_TRIM
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


# -- values --------------------------------------------------------------------------------


class FenceBroken(Exception):
    """A fresh batch's bulk commit found some entries acknowledged by someone else.

    The fast commit path acknowledges a fresh batch in bulk when the claim fence has not
    moved and this consumer's pending count is unchanged since the read. Workers (of any
    version) cannot get past both checks; a client that by hand acknowledges some of the
    batch's entries *and* claims as many others into this consumer can. The script then
    counts nothing and says so, and the entries it acknowledged stay uncounted.
    """


class WorkerAborted(Exception):
    """A second stop signal arrived: the worker stopped at once, mid-batch if need be.

    Nothing is lost: whatever was not committed is still pending under the worker's name.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped at once by a second signal {signal.Signals(signum).name}")
        self.signum = signum


class _Wakeup(Exception):
    """Raised by the signal handler to leave an idle blocking read."""


@dataclass
class WorkerStats:
    """What a worker did since it started."""

    counted: int = 0
    """Entries whose support counts were committed."""
    dead_lettered: int = 0
    """Entries moved to a dead-letter stream."""
    batches: int = 0
    """Batches read (own pending, claimed, new)."""
    claimed: int = 0
    """Entries taken over from other consumers with XAUTOCLAIM."""
    recounted: int = 0
    """Commits retried with a smaller subset because another worker had acked some ids."""
    already_counted: int = 0
    """Entries this worker decoded but another committed first (a race, harmless)."""
    fence_broken: int = 0
    """Fresh entries left uncounted because something outside the workers acknowledged
    entries of the batch (see :class:`FenceBroken`); zero unless Redis is tampered with."""
    streams: int = 0
    """Streams being consumed."""

    def to_dict(self) -> dict[str, int]:
        """Plain dict, for JSON."""
        return dict(self.__dict__)


@dataclass
class _Stream:
    """One metric version's stream and where this worker stands on it."""

    definition: MetricDefinition
    codec: Codec | NumericCodec
    key: str
    dead: str
    windows: str
    claims: str
    shard: int = 0
    """Which of the version's ``definition.shards`` streams this is."""
    pending_cursor: str | None = "0"
    """Next history read position in our own pending list; None once drained."""
    claim_cursor: str = "0-0"
    next_claim: float = 0.0
    claim_passes: int = 0


@dataclass
class _Delivery:
    """A batch as the read script returns it: packed, not yet decoded."""

    ids: list[bytes]
    sizes: list[int]
    blob: bytes
    """The payloads, comma-joined (sizes say where each is)."""
    deliveries: list[int] | None
    cursor: str = ""
    joined_ids: bytes = b""
    """``ids`` comma-joined, as the commit script takes them."""
    fence: bytes = b""
    """The fast-path token of a fresh (``>``) read, ``b"<fence>:<own pending>"``; empty for
    any other delivery, whose commit must check its ids one by one."""

    @classmethod
    def from_reply(cls, reply: Sequence[bytes]) -> _Delivery:
        """From the read script's packed reply (own pending entries, claimed entries)."""
        cursor, ids, sizes, blob, deliveries, _fence = reply
        if not ids:
            return cls([], [], b"", None, cursor.decode())
        return cls(
            ids=ids.split(b","),
            sizes=list(map(int, sizes.split(b","))),
            blob=blob,
            deliveries=list(map(int, deliveries.split(b","))) if deliveries else None,
            cursor=cursor.decode(),
            joined_ids=ids,
        )

    @classmethod
    def from_entries(cls, entries: Sequence[Sequence[Any]], fence: bytes = b"") -> _Delivery:
        """From XREADGROUP entries (fresh entries, never delivered before).

        Args:
            entries: ``[id, fields]`` pairs, the fields a flat ``[name, value, …]`` list
                (the raw reply) or a dict (redis-py's parsed reply), None if deleted.
            fence: the fast-path token read with them, if they are a fresh read.
        """
        ids = [entry[0] for entry in entries]
        fields = [entry[1] for entry in entries]
        try:  # the usual raw entry: exactly [b"p", payload]
            if set(map(len, fields)) == {2} and [f[0] for f in fields].count(b"p") == len(ids):
                payloads = [f[1] for f in fields]
                sizes = list(map(len, payloads))
                return cls(
                    ids, sizes, b",".join(payloads), None, joined_ids=b",".join(ids), fence=fence
                )
        except (TypeError, KeyError):  # a deleted entry (None), or parsed dicts
            pass
        sizes, payloads = [], []
        for entry_fields in fields:
            if entry_fields is None:
                payload = None
            elif isinstance(entry_fields, dict):
                payload = entry_fields.get(b"p")
            else:
                payload = dict(zip(entry_fields[::2], entry_fields[1::2], strict=True)).get(b"p")
            sizes.append(-1 if entry_fields is None else -2 if payload is None else len(payload))
            payloads.append(payload or b"")
        return cls(ids, sizes, b",".join(payloads), None, joined_ids=b",".join(ids), fence=fence)

    def raw(self) -> Iterator[bytes]:
        """Each entry's payload bytes (empty for a deleted entry or one without ``p``)."""
        offset = 0
        for size in self.sizes:
            length = max(size, 0)
            yield self.blob[offset : offset + length]
            offset += length + 1


# -- pure helpers --------------------------------------------------------------------------

_DECODER = json.JSONDecoder()


def _raw_reader(client: Any) -> Any:
    """A client on ``client``'s connections whose XREADGROUP replies stay as parsed by hiredis.

    redis-py turns every entry into a tuple and a dict in Python, about 2 µs per entry,
    as much as the rest of the worker's work; :meth:`_Delivery.from_entries` reads the raw
    lists directly. A cluster client keeps its own callbacks (its replies are parsed).
    """
    if not isinstance(client, redis.Redis):
        return client
    raw = redis.Redis(connection_pool=client.connection_pool)
    raw.set_response_callback("XREADGROUP", lambda response, **options: response)
    return raw


def _stream_entries(reply: Any, key: str) -> list[Sequence[Any]]:
    """One stream's entries in an XREAD(GROUP) reply, whatever its shape.

    Raw RESP3 and redis-py's parsed reply are ``{stream: entries}``; RESP2 and redis-py's
    legacy form are ``[[stream, entries]]``.
    """
    pairs = reply.items() if isinstance(reply, dict) else (reply or [])
    for name, entries in pairs:
        if (name.decode() if isinstance(name, bytes) else name) == key:
            return list(entries)
    return []


def _ms(entry_id: bytes) -> int:
    return int(entry_id.split(b"-", 1)[0])


def window_names(ms: int) -> tuple[str, int, str, int]:
    """The hour and day windows of an arrival time.

    Args:
        ms: milliseconds since the epoch (an entry id's first part).

    Returns:
        (hour name, hour start, day name, day start), starts in seconds since the epoch,
        names as ``hour:YYYY-MM-DDTHH`` and ``day:YYYY-MM-DD`` (UTC).
    """
    hour_start = ms // _HOUR_MS * 3600
    day_start = ms // _DAY_MS * 86400
    hour = datetime.fromtimestamp(hour_start, tz=UTC)
    return f"hour:{hour:%Y-%m-%dT%H}", hour_start, f"day:{hour:%Y-%m-%d}", day_start


_BRACKETS = np.zeros(256, dtype=np.int8)
_BRACKETS[[ord("{"), ord("[")]] = 1
_BRACKETS[[ord("}"), ord("]")]] = -1


def _bulk_json(blob: bytes, sizes: list[int]) -> list[Any] | None:
    """Every payload in one ``json.loads``, when that provably equals parsing each alone.

    ``blob`` is the payloads joined by commas, so ``[blob]`` parses as one array. That is
    the per-entry parse only if every joining comma separates top-level elements; a crafted
    pair such as ``{"v":[1`` and ``2]}`` would otherwise merge into one valid payload.
    Without backslashes, a byte lies outside every string exactly when an even number of
    quotes precede it, so numpy checks, from the positions of quotes and brackets only,
    that each joining comma is outside any string at bracket depth 0. Then the n − 1
    joining commas are top-level separators; an array of exactly n elements has no others,
    so element i is entry i's text, which ``json.loads`` alone would accept with the same
    value.

    Returns:
        The n objects, or None: use the per-entry parse.
    """
    if b"\\" in blob:
        return None
    try:
        objects = json.loads(b"[" + blob + b"]")
    except ValueError:
        return None
    if len(objects) != len(sizes):
        return None
    if len(sizes) > 1:
        buf = np.frombuffer(blob, dtype=np.uint8)
        quotes = np.flatnonzero(buf == ord('"'))
        kinds = _BRACKETS[buf]
        where = np.flatnonzero(kinds)
        outside = (np.searchsorted(quotes, where) & 1) == 0
        depth = np.concatenate(([0], np.cumsum(kinds[where] * outside, dtype=np.int64)))
        commas = np.cumsum(np.asarray(sizes[:-1], dtype=np.int64) + 1) - 1
        if depth[np.searchsorted(where, commas)].any():
            return None
        if (np.searchsorted(quotes, commas) & 1).any():
            return None
    return objects


def _decode_json(
    delivery: _Delivery, skip: dict[int, str]
) -> tuple[list[Any], list[int], list[tuple[int, str]]]:
    """Parse every payload exactly as ``json.loads`` of that payload alone would.

    Whole batches go through :func:`_bulk_json`. Otherwise the packed payloads are decoded
    once and each is scanned in place from its offset; one whose scan does not end exactly
    at its length (whitespace around it, say) falls back to ``json.loads`` of its bytes.

    Args:
        delivery: the packed batch.
        skip: entries already rejected (index → reason), not parsed.

    Returns:
        (objects, their indices in the batch, [(index, reason)] of every bad entry).
    """
    sizes, blob = delivery.sizes, delivery.blob
    if not skip and sizes and min(sizes) >= 0:
        bulk = _bulk_json(blob, sizes)
        if bulk is not None:
            return bulk, list(range(len(sizes))), []
    objects: list[Any] = []
    good: list[int] = []
    bad: list[tuple[int, str]] = list(skip.items())
    try:
        text = blob.decode("utf-8")
    except UnicodeDecodeError:
        text = ""
    fast = len(text) == len(blob)  # ASCII only: character offsets are byte offsets
    scan = _DECODER.scan_once  # type: ignore[attr-defined]  # the C scanner json.loads uses
    offset = 0
    for i, size in enumerate(sizes):
        start, offset = offset, offset + max(size, 0) + 1
        if i in skip:
            continue
        if size < 0:
            bad.append((i, "entry deleted from the stream" if size == -1 else "no field 'p'"))
            continue
        end = -1
        if fast:
            try:
                obj, end = scan(text, start)
            except (StopIteration, ValueError):
                end = -1
        if end != start + size:
            try:
                obj = json.loads(blob[start : start + size])
            except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
                bad.append((i, f"invalid JSON: {exc}"))
                continue
        objects.append(obj)
        good.append(i)
    return objects, good, bad


def _parse_payloads(
    codec: Codec | NumericCodec, payloads: list[Any], index: list[int]
) -> tuple[Batch, list[int], list[tuple[int, str]]]:
    """``codec.parse``, separating the payloads it rejects.

    Returns:
        (the batch of good payloads, their batch indices, [(index, reason)] rejected).
    """
    try:
        return codec.parse(payloads), index, []
    except (PayloadError, AssertionError):
        pass
    bad: list[tuple[int, str]] = []
    kept: list[Any] = []
    kept_index: list[int] = []
    for payload, i in zip(payloads, index, strict=True):
        try:
            codec.m.check_payload(payload)
        except PayloadError as exc:
            bad.append((i, str(exc)))
            continue
        kept.append(payload)
        kept_index.append(i)
    try:
        return codec.parse(kept), kept_index, bad
    except (PayloadError, AssertionError):
        pass
    # The batch codec is stricter than the reference checker on some payload: one by one.
    final: list[Any] = []
    final_index: list[int] = []
    for payload, i in zip(kept, kept_index, strict=True):
        try:
            codec.parse([payload])
        except (PayloadError, AssertionError) as exc:
            bad.append((i, f"rejected by the decoder: {exc}"))
            continue
        final.append(payload)
        final_index.append(i)
    return codec.parse(final), final_index, bad


def _take(batch: Batch, rows: np.ndarray) -> Batch:
    """The rows ``rows`` of a parsed batch."""
    return Batch(len(rows), {name: col[rows] for name, col in batch.columns.items()})


def _codec(definition: MetricDefinition) -> Codec | NumericCodec:
    """The batch codec of a metric version's mechanism (frequency oracle or numeric)."""
    m = definition.mechanism
    return NumericCodec(m) if isinstance(m, NumericMechanism) else codec_for(m)


def _increments(codec: Codec | NumericCodec, batch: Batch) -> list[str | int]:
    """HINCRBY field/increment pairs of a batch: ``n``, then ``c:<v>`` for nonzero C(v).

    A numeric batch gives ``n`` and the limbs of Σy and Σy² instead.
    """
    if isinstance(codec, NumericCodec):
        return codec.increments(batch)
    support = codec.count(batch)
    pairs: list[str | int] = ["n", batch.n]
    for v in np.flatnonzero(support).tolist():
        pairs += [f"c:{v}", int(support[v])]
    return pairs


def ensure_group(client: redis.Redis, stream: str) -> bool:
    """Create the aggregators' consumer group (and the stream) if missing.

    Returns:
        True if created, False if it existed (``BUSYGROUP``).
    """
    try:
        client.xgroup_create(stream, keys.GROUP, id="0", mkstream=True)
    except redis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise
        return False
    return True


# -- the worker ----------------------------------------------------------------------------


class Worker:
    """A consumer in every metric stream's group, counting each report exactly once.

    Args:
        client: a redis-py client (``decode_responses`` off).
        name: the consumer name; keep it stable across restarts of the same worker.
        batch_size: entries per read, 1..:data:`MAX_BATCH_SIZE`.
        block_ms: longest wait for new entries per idle read.
        claim_idle_ms: idle time after which other consumers' pending entries are taken.
        max_deliveries: deliveries after which an entry is dead-lettered unread.
        discover_interval: seconds between scans of the registry for new streams.
        handle_signals: install SIGTERM/SIGINT handlers while running (main thread only).

    Raises:
        ValueError: a parameter out of range.
    """

    def __init__(
        self,
        client: redis.Redis,
        name: str = DEFAULT_NAME,
        batch_size: int = DEFAULT_BATCH_SIZE,
        block_ms: int = DEFAULT_BLOCK_MS,
        claim_idle_ms: int = DEFAULT_CLAIM_IDLE_MS,
        max_deliveries: int = MAX_DELIVERIES,
        discover_interval: float = DISCOVER_INTERVAL,
        handle_signals: bool = True,
    ) -> None:
        if not name or any(c.isspace() for c in name):
            raise ValueError(f"consumer name must be non-empty without spaces, got {name!r}")
        if not 1 <= batch_size <= MAX_BATCH_SIZE:
            raise ValueError(f"batch_size must be in [1, {MAX_BATCH_SIZE}], got {batch_size}")
        if block_ms < 1:
            raise ValueError(f"block_ms must be at least 1, got {block_ms}")
        if claim_idle_ms < 0:
            raise ValueError(f"claim_idle_ms must be non-negative, got {claim_idle_ms}")
        if max_deliveries < 1:
            raise ValueError(f"max_deliveries must be at least 1, got {max_deliveries}")
        if client.get_connection_kwargs().get("decode_responses"):
            raise ValueError("the worker needs a client with decode_responses=False")
        self.redis = client
        self.name = name
        self.batch_size = batch_size
        self.block_ms = block_ms
        self.claim_idle_ms = claim_idle_ms
        self.max_deliveries = max_deliveries
        self.discover_interval = discover_interval
        self.handle_signals = handle_signals
        self.stats = WorkerStats()
        self.registry = Registry(client)
        self._reader = _raw_reader(client)
        self._read = client.register_script(_LUA_READ)
        self._commit = client.register_script(_LUA_COMMIT)
        self._dead = client.register_script(_LUA_DEAD)
        self._streams: dict[str, _Stream] = {}
        self._known: set[tuple[str, int]] = set()
        """Metric versions whose every shard is joined."""
        self._cluster = is_cluster(client)
        self._name_bytes = name.encode()
        self._reread_done = False
        self._idle_wait = 0.0
        """The cluster's idle poll interval, doubling up to block_ms (see
        :meth:`_wait_for_entries`); 0 after a round that handled entries."""
        self._next_discovery = 0.0
        self._stopping = False
        self._blocking = False

    # -- control ------------------------------------------------------------------------
    def stop(self) -> None:
        """Ask the worker to return after the current batch (what the first signal does)."""
        self._stopping = True

    @property
    def stopping(self) -> bool:
        """Whether a stop was requested."""
        return self._stopping

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self._stopping:
            raise WorkerAborted(signum)
        log.info("%s: finishing the current batch, then exiting", signal.Signals(signum).name)
        self._stopping = True
        if self._blocking:
            raise _Wakeup()

    def _install_signals(self) -> Callable[[], None]:
        if not self.handle_signals or threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}

        def restore() -> None:
            for s, handler in previous.items():
                signal.signal(s, handler)

        return restore

    # -- discovery ----------------------------------------------------------------------
    def discover(self) -> list[str]:
        """Find every version of every metric and join its stream's group.

        Returns:
            The stream keys newly joined.
        """
        added = []
        for name in self.registry.names():
            for version in self.registry.versions(name):
                if (name, version) in self._known:
                    continue
                try:
                    definition = self.registry.get(name, version)
                except DefinitionError as exc:
                    log.error("metric %s v%d: unreadable definition: %s", name, version, exc)
                    continue
                if definition is None:
                    continue
                codec = _codec(definition)
                for shard in range(definition.shards):  # each shard: its own stream and slot
                    key = keys.stream_key(name, version, shard)
                    if key in self._streams:  # joined before a failure on a later shard
                        continue
                    ensure_group(self.redis, key)
                    self._streams[key] = _Stream(
                        definition=definition,
                        codec=codec,
                        key=key,
                        dead=keys.dead_key(name, version, shard),
                        windows=keys.windows_key(name, version, shard),
                        claims=keys.claims_key(name, version, shard),
                        shard=shard,
                    )
                    added.append(key)
                    log.info("consuming %s (%s)", key, definition.mechanism.name)
                self._known.add((name, version))
        self.stats.streams = len(self._streams)
        self._next_discovery = time.monotonic() + self.discover_interval
        return added

    # -- the loop -----------------------------------------------------------------------
    def run(self, once: bool = False) -> WorkerStats:
        """Consume until stopped (or, with ``once``, until nothing is left to do).

        Burst mode (``once=True``) drains this worker's own pending entries, makes one
        full XAUTOCLAIM pass over the other consumers' entries idle longer than
        ``claim_idle_ms``, and reads new entries until there are none; then it rereads
        anything still pending under its name once more, and returns.

        Returns:
            The statistics of this run.

        Raises:
            WorkerAborted: a second stop signal arrived.
            redis.ConnectionError: in burst mode, Redis stayed unreachable.
        """
        restore = self._install_signals()
        failures = 0
        self._reread_done = False
        try:
            while not self._stopping:
                try:
                    if self._round(once):
                        break
                    failures = 0
                except (redis.RedisError, RedisClusterException) as exc:
                    if not unavailable(exc):
                        raise
                    # Redis is out of reach for now: wait, retry; nothing is lost.
                    failures += 1
                    if once and failures >= ONCE_RECONNECT_ATTEMPTS:
                        raise
                    wait = min(RECONNECT_MAX_WAIT, 0.1 * 2 ** (failures - 1))
                    log.warning("redis unavailable (%s); retrying in %.1f s", exc, wait)
                    self._sleep(wait)
                    for s in self._streams.values():
                        s.pending_cursor = "0"  # a batch in flight is still pending: reread
                except _Wakeup:
                    break
        finally:
            restore()
        return self.stats

    def _round(self, once: bool) -> bool:
        """One pass over every stream; returns True when burst mode is done."""
        if time.monotonic() >= self._next_discovery:
            self.discover()
        handled = 0
        for stream in list(self._streams.values()):
            if self._stopping:
                return True
            try:
                handled += self._step(stream)
            except redis.ResponseError as exc:
                if "NOGROUP" not in str(exc):
                    raise
                log.warning("%s lost its group (stream deleted?); recreating it", stream.key)
                ensure_group(self.redis, stream.key)
                stream.pending_cursor, stream.claim_cursor = "0", "0-0"
        if handled:
            self._idle_wait = 0.0
            return False
        if once:
            if not all(s.pending_cursor is None and s.claim_passes for s in self._streams.values()):
                return False
            return not self._reread_own_pending()
        self._wait_for_entries()
        return False

    def _reread_own_pending(self) -> bool:
        """Before a burst ends, once: whether any stream still has entries pending under our
        name (then they are reread first).

        A read whose reply was lost and that redis-py then retried (a cluster client
        retries) leaves the first reply's entries pending under our name. They are reread
        here (history reads: each id is checked, a poison entry is dead-lettered after
        ``max_deliveries``) instead of waiting for the next run or another worker's claim.
        Once per run: a process serving under the same name keeps adding entries, and a
        burst must end.
        """
        if self._reread_done:
            return False
        self._reread_done = True
        again = False
        for s in self._streams.values():
            try:
                summary = self.redis.xpending(s.key, keys.GROUP)
            except redis.ResponseError as exc:
                if "NOGROUP" not in str(exc):
                    raise
                continue  # deleted meanwhile: nothing of ours is pending there
            if any(self._is_me(c["name"]) and int(c["pending"]) for c in summary["consumers"]):
                s.pending_cursor, again = "0", True
        return again

    def _is_me(self, consumer: bytes | str) -> bool:
        """Whether a consumer name from a reply is ours (names of other tools' consumers
        need not be UTF-8)."""
        return consumer in (self.name, self._name_bytes)

    def _step(self, s: _Stream) -> int:
        """Handle at most one batch of one stream; returns the entries handled."""
        if s.pending_cursor is not None:
            delivery = self._fetch(s, s.pending_cursor)
            if delivery.ids:
                s.pending_cursor = delivery.ids[-1].decode()
                return self._handle(s, delivery)
            s.pending_cursor = None
        now = time.monotonic()
        if now >= s.next_claim:
            delivery = self._fetch(s, "claim", s.claim_cursor)
            s.claim_cursor = delivery.cursor or "0-0"
            if s.claim_cursor == "0-0":  # a full pass: rest until entries may be idle enough
                s.claim_passes += 1
                s.next_claim = now + max(MIN_CLAIM_INTERVAL, self.claim_idle_ms / 2000)
            if delivery.ids:
                self.stats.claimed += len(delivery.ids)
                return self._handle(s, delivery)
        delivery = self._fetch(s, ">")
        return self._handle(s, delivery) if delivery.ids else 0

    def _read_args(self, mode: str, start: str) -> list[str | int]:
        return [keys.GROUP, self.name, self.batch_size, mode, self.claim_idle_ms, start]

    def _fetch(self, s: _Stream, mode: str, start: str = "0-0") -> _Delivery:
        if mode == ">":
            return self._fetch_new(s)
        reply = self._read(keys=[s.key, s.claims], args=self._read_args(mode, start))
        return _Delivery.from_reply(reply)

    def _fetch_new(self, s: _Stream) -> _Delivery:
        """Read fresh entries with a plain XREADGROUP, between the fence and our pending count.

        Fresh entries skip the read script: Redis spends about a third less per entry
        when it need not turn them into Lua tables and back, and the worker has time to
        spare for redis-py's parsing. The claim fence, read first in the same round trip,
        and this consumer's pending count, read right after, make the fast-path token
        that lets the commit acknowledge the batch in bulk (see :data:`_LUA_COMMIT`).
        """
        pipe = self._reader.pipeline(transaction=False)
        pipe.get(s.claims)
        pipe.xreadgroup(keys.GROUP, self.name, {s.key: ">"}, count=self.batch_size)
        pipe.xpending(s.key, keys.GROUP)
        fence, reply, summary = pipe.execute()
        entries = _stream_entries(reply, s.key)
        if not entries:
            return _Delivery([], [], b"", None)
        own = next((int(c["pending"]) for c in summary["consumers"] if self._is_me(c["name"])), 0)
        return _Delivery.from_entries(entries, b"%s:%d" % (fence or b"0", own))

    def _wait_for_entries(self) -> None:
        """Block until some stream has new entries (or ``block_ms`` passes), then handle them.

        One blocking read over every stream; only the few entries it returns go through
        redis-py's reply parser, the rest are read in packed batches.

        On a Redis Cluster that read would be a multi-key command across hash slots
        (CROSSSLOT), and a blocking read can only wait on the streams of one slot, so
        waiting on all of them would take a connection (and a thread) per stream. Instead
        an idle worker polls: it sleeps, then the next round reads every stream once
        (one cheap script call each). The pause starts at ``CLUSTER_POLL_MIN`` and
        doubles while rounds find nothing, up to ``block_ms``: a new entry waits at most
        ``block_ms``, a burst after a quiet moment is picked up within milliseconds, and
        an idle worker costs the cluster about one call per stream per ``block_ms``.
        """
        if not self._streams:
            self._sleep(self.block_ms / 1000)
            return
        if self._cluster:
            self._idle_wait = min(self.block_ms / 1000, max(CLUSTER_POLL_MIN, 2 * self._idle_wait))
            self._sleep(self._idle_wait)
            return
        self._blocking = True
        try:
            if self._stopping:
                return
            reply = cast(
                list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes] | None]]]] | None,
                self.redis.xreadgroup(
                    keys.GROUP,
                    self.name,
                    {key: ">" for key in self._streams},
                    count=1,
                    block=self.block_ms,
                ),
            )
        except redis.ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            return  # a stream was deleted: the next round's per-stream read recreates it
        finally:
            self._blocking = False
        for key, stream in self._streams.items():
            entries = _stream_entries(reply, key)
            if entries:
                self._handle(stream, _Delivery.from_entries(entries))

    def _sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self._stopping and time.monotonic() < deadline:
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    # -- one batch ----------------------------------------------------------------------
    def _handle(self, s: _Stream, delivery: _Delivery) -> int:
        """Decode, count and commit one batch; dead-letter what cannot be counted.

        Returns:
            The entries handled (counted, dead-lettered, or found acked by another worker).
        """
        self.stats.batches += 1
        skip: dict[int, str] = {}
        if delivery.deliveries is not None:
            skip = {
                i: f"delivered {d} times without being counted"
                for i, d in enumerate(delivery.deliveries)
                if d > self.max_deliveries
            }
        payloads, index, bad = _decode_json(delivery, skip)
        if payloads:
            batch, index, rejected = _parse_payloads(s.codec, payloads, index)
            bad += rejected
            if batch.n:
                if len(index) == len(delivery.ids):
                    self._count(s, delivery.ids, batch, delivery.joined_ids, delivery.fence)
                else:
                    self._count(s, [delivery.ids[i] for i in index], batch, fence=delivery.fence)
        if bad:
            self._dead_letter(s, delivery, bad)
        return len(delivery.ids)

    def _count(
        self, s: _Stream, ids: list[bytes], batch: Batch, joined: bytes = b"", fence: bytes = b""
    ) -> None:
        """Commit a parsed batch, one script call per hour window it spans."""
        first, last = _ms(ids[0]) // _HOUR_MS, _ms(ids[-1]) // _HOUR_MS
        if first == last:
            self._commit_all(s, ids, batch, joined, fence)
            return
        runs: dict[int, list[int]] = {}
        for row, entry_id in enumerate(ids):
            runs.setdefault(_ms(entry_id) // _HOUR_MS, []).append(row)
        for rows in runs.values():
            picked = np.asarray(rows, dtype=np.int64)
            # No fast path: the first part's commit changes our pending count.
            self._commit_all(s, [ids[r] for r in rows], _take(batch, picked))

    def _commit_all(
        self, s: _Stream, ids: list[bytes], batch: Batch, joined: bytes = b"", fence: bytes = b""
    ) -> None:
        """Commit until done: recount exactly the subset still pending after a race."""
        while ids:
            try:
                counted, pending = self.commit(s.definition, ids, batch, joined, s.shard, fence)
            except FenceBroken as exc:
                self.stats.fence_broken += len(ids)
                log.error("%s: %s", s.key, exc)
                return
            joined, fence = b"", b""
            if counted:
                return
            self.stats.already_counted += len(ids) - len(pending)
            if not pending:
                return
            self.stats.recounted += 1
            still = set(pending)
            rows = [i for i, entry_id in enumerate(ids) if entry_id in still]
            ids = [ids[i] for i in rows]
            batch = _take(batch, np.asarray(rows, dtype=np.int64))

    def commit(
        self,
        definition: MetricDefinition,
        ids: Sequence[bytes | str],
        batch: Batch,
        joined: bytes = b"",
        shard: int = 0,
        fence: bytes = b"",
    ) -> tuple[int, list[bytes]]:
        """Run the commit script once: count ``batch`` and ack ``ids`` if all are pending.

        Args:
            definition: the metric version of the stream.
            ids: the entry ids, all of one hour, in the rows' order of ``batch``.
            batch: their parsed payloads.
            joined: ``ids`` already comma-joined, if at hand.
            shard: the shard of the stream the ids are from.
            fence: the fast-path token read with a fresh (``>``) delivery of ``ids``, or
                empty: then every id is checked one by one.

        Returns:
            ``(len(ids), [])`` when every id was pending and is now counted and acked;
            otherwise ``(0, still_pending)``: nothing changed, and ``still_pending`` (maybe
            empty) are the ids no other worker has acknowledged yet.

        Raises:
            ValueError: ids of different hours, or not one per row of ``batch``.
            FenceBroken: ``fence`` was given and some ids had been acknowledged by hand
                (see :class:`FenceBroken`); nothing was counted.
        """
        raw = [x.encode() if isinstance(x, str) else x for x in ids] if not joined else ids
        raw = cast(list[bytes], raw)
        if len(raw) != batch.n:
            raise ValueError(f"{len(raw)} ids for a batch of {batch.n}")
        if not raw:
            return 0, []
        ms = _ms(raw[0])
        if _ms(raw[-1]) // _HOUR_MS != ms // _HOUR_MS:
            raise ValueError("a commit covers one hour window; split the batch")
        stream = self._streams.get(keys.stream_key(definition.name, definition.version, shard))
        codec = stream.codec if stream is not None else _codec(definition)
        hour, hour_start, day, day_start = window_names(ms)
        name, version = definition.name, definition.version
        try:
            reply = self._commit(
                keys=[
                    keys.stream_key(name, version, shard),
                    keys.counts_key(name, version, "all", shard),
                    keys.counts_key(name, version, hour, shard),
                    keys.counts_key(name, version, day, shard),
                    keys.windows_key(name, version, shard),
                    keys.claims_key(name, version, shard),
                ],
                args=[
                    keys.GROUP,
                    self.name,
                    joined or b",".join(raw),
                    hour,
                    hour_start,
                    day,
                    day_start,
                    fence,
                    *_increments(codec, batch),
                ],
            )
        except redis.ResponseError as exc:
            if "FENCE" not in str(exc):
                raise
            raise FenceBroken(str(exc)) from None
        if isinstance(reply, int):
            self.stats.counted += reply
            return reply, []
        return 0, list(reply)

    def _dead_letter(self, s: _Stream, delivery: _Delivery, bad: list[tuple[int, str]]) -> None:
        """Move bad entries to the dead-letter stream, acking each, in one script."""
        raws = list(delivery.raw())
        args: list[str | int | bytes] = [keys.GROUP, DEAD_MAXLEN]
        for i, reason in sorted(bad):
            args += [delivery.ids[i], reason, raws[i]]
        moved = int(self._dead(keys=[s.key, s.dead], args=args))
        self.stats.dead_lettered += moved
        if moved:
            log.warning(
                "%s: %d entries dead-lettered to %s (first reason: %.200s)",
                s.key,
                moved,
                s.dead,
                min(bad)[1],
            )

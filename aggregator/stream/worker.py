"""The stream worker: turns every report in the streams into support counts, exactly once.

One consumer group (:data:`ldp_store.keys.GROUP`) per metric-version stream; each worker
is a consumer with a *stable* name, so a restarted worker finds its own pending entries;
a batch's counts and its acknowledgement commit in one script (exactly once).

In full: ``docs/architecture/pipeline.md``.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, cast

import numpy as np
import redis
from redis.exceptions import RedisClusterException

from aggregator.stats.batch import Batch, Codec
from aggregator.stats.kinds import codec_for
from aggregator.stream.counts import tidy_window
from aggregator.stream.entries import (
    SEGMENT_COLUMN,
    Delivery,
    decode_json,
    entry_ms,
    parse_payloads,
    raw_reader,
    split_segments,
    stream_entries,
)
from client_sdk.errors import DefinitionError
from client_sdk.wire import MetricDefinition
from ldp_store import in_use, keys, schema, scripts, shuffle
from ldp_store.connection import is_cluster, stream_gone, unavailable
from ldp_store.registry import Registry, version_numbers
from ldp_store.retention import RetentionPolicy, expire_untimed
from ldp_store.schema import Increments

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_BLOCK_MS",
    "DEFAULT_CLAIM_IDLE_MS",
    "DEFAULT_NAME",
    "HEARTBEAT_SECONDS",
    "FenceBroken",
    "MAX_BATCH_SIZE",
    "MAX_DELIVERIES",
    "Worker",
    "WindowFull",
    "WorkerAborted",
    "WorkerStats",
    "ensure_group",
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

RELEASE_INTERVAL = 1.0
"""Seconds between two looks at the shuffle pools of every known version: a pool of
relayed reports below B is released by a worker once its bound has passed
(:func:`ldp_store.shuffle.release_due`), so it reaches its stream at most this much (plus
a round) after its bound, while any worker runs."""

POOL_SWEEP_INTERVAL = 60.0
"""Seconds between two reads of every shuffle pool's length (one call) on a single Redis:
the safety net for a pool whose ring was lost; rung pools are looked at every
``RELEASE_INTERVAL``. A pool waits an hour by default, so a minute more is small."""

POOL_SUFFIX = keys.pool_key("m", 1).rpartition("}")[2]
"""What a shuffle pool's key ends with (its ring names it, not a stream)."""

DISCOVER_INTERVAL = 5.0
"""Seconds between looks for new metrics or versions: new metrics start being counted
within seconds, at the cost of one read (:data:`ldp_store.keys.REGISTRY_CHANGES`) while
the registry has not changed."""

FULL_DISCOVER_INTERVAL = 60.0
"""Seconds between scans of every metric's versions while the registry's change counter
stays put: a safety net for a version written without it (an older ``ldp``), at the
cost of one pipelined read per metric a minute."""

FOLD_EVERY = 8
"""Delta commits to a stream between two looks at its windows' delta lists (three LLENs)."""

FOLD_SHARE = 0.5
"""A window's delta list is folded into its packed counts once its bytes (``MEMORY
USAGE``) reach this share of the packed string's 8·k: reads then sum at most about 1.5
strings' worth, and a window that never gets that many reports never allocates its string
at all (a string metric's hour of 10,000 reports keeps ~80 KB of blobs, not 2 MiB)."""

DEAD_MAXLEN = 100_000
"""Approximate cap of a dead-letter stream. It holds entries for an operator to inspect,
never reports still to be counted; the cap bounds the memory a systematic failure (a bug
dead-lettering everything) can take."""

RECONNECT_MAX_WAIT = 10.0
"""Longest pause between attempts while Redis is unreachable (the pause doubles from
0.1 s); nothing is lost meanwhile: uncommitted entries stay pending."""

ONCE_RECONNECT_ATTEMPTS = 5
"""In burst mode, give up after this many consecutive connection failures."""

HEARTBEAT_SECONDS = 1.0
"""Least time between two calls of a worker's ``heartbeat`` (the first completed round
calls it at once): a supervisor learns within a second that a worker works."""


# -- values --------------------------------------------------------------------------------


class FenceBroken(Exception):
    """A fresh batch's bulk commit found some entries acknowledged by someone else.

    The fast commit path acknowledges a fresh batch in bulk when the claim fence has not
    moved and this consumer's pending count is unchanged since the read. Workers (of any
    version) cannot get past both checks; a client that by hand acknowledges some of the
    batch's entries *and* claims as many others into this consumer can. The script then
    counts nothing and says so, and the entries it acknowledged stay uncounted.
    """


class WindowFull(Exception):
    """A batch would take a window past :data:`ldp_store.schema.MAX_WINDOW_REPORTS`.

    The commit script refused it before acknowledging anything, so the entries stay
    pending and nothing is lost; the worker stops rather than count a wrong number.
    (2⁶² reports: two centuries at a billion a second.)
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
class _Untidy:
    """A stream's delta commits and windows since the worker last tidied them."""

    definition: MetricDefinition
    shard: int
    commits: int
    windows: set[str] = field(default_factory=set)


@dataclass
class WorkerStats:
    """What a worker did since it started."""

    counted: int = 0
    """Reports whose support counts were committed."""
    dead_lettered: int = 0
    """Reports moved to a dead-letter stream."""
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
    folds: int = 0
    """Windows whose delta blobs this worker folded into their packed counts."""
    merges: int = 0
    """Windows whose delta blobs this worker merged into one blob."""
    rounds: int = 0
    """Rounds completed without an error: passes over every stream, each ending in a batch
    handled or a wait for new entries. A worker that completes rounds is working (``ldp
    serve``'s supervisor reads this as progress, see ``heartbeat``)."""

    def to_dict(self) -> dict[str, int]:
        """Plain dict, for JSON."""
        return dict(self.__dict__)


@dataclass
class _Stream:
    """One metric version's stream and where this worker stands on it."""

    definition: MetricDefinition
    codec: Codec[Any]
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
    claim_due: bool = False
    """The last length reading found entries here and a claim pass due: the next step
    starts one (a stream joined since waits for the next reading)."""
    claim_passes: int = 0
    quiet: bool = False
    """No new entries when last read, and no ring of the doorbell since (nor entries at the
    last sweep): the round skips this stream's read of new entries (an idle worker's cost
    does not grow with the streams it consumes; see ``Worker._wait_for_entries``)."""
    per_entry: int = 1
    """The most reports an entry held in the last read (at first: the most an entry may
    hold if the stream holds batch entries, else 1). A read asks for ``batch_size`` /
    this many entries, so it holds at most ``batch_size`` reports unless the stream's
    entries grew since the last read (a collector upgraded meanwhile: once, and at most
    :data:`ldp_store.keys.ENTRY_REPORTS` times as many)."""

    def count(self, batch_size: int) -> int:
        """Entries to read for about ``batch_size`` reports."""
        return max(1, batch_size // self.per_entry)

    def saw(self, delivery: Delivery) -> None:
        """Note how many reports the entries of a read held."""
        self.per_entry = max(1, min(keys.ENTRY_REPORTS, delivery.widest))


def ensure_group(client: redis.Redis, stream: str) -> bool:
    """Create the aggregators' consumer group (and the stream) if missing.

    Returns:
        True if created, False if it existed (``BUSYGROUP``).

    Raises:
        redis.OutOfMemoryError: Redis is out of memory and the group does not exist.
            Redis 6.2 refuses ``XGROUP CREATE`` at its memory limit before it looks for
            the group, so a worker (re)starting then checks for it instead: draining
            must work at the limit.
    """
    try:
        client.xgroup_create(stream, keys.GROUP, id="0", mkstream=True)
    except redis.OutOfMemoryError:
        if client.exists(stream) and any(
            g["name"] == keys.GROUP.encode() for g in client.xinfo_groups(stream)
        ):
            return False
        raise
    except redis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise
        return False
    return True


# -- the worker ----------------------------------------------------------------------------


def _without_segments(
    definition: MetricDefinition, codec: Codec[Any], batch: Batch
) -> tuple[Batch, list[tuple[int, Increments]]]:
    """A batch without its segment column, and what each segment's rows add (a metric
    with public dimensions counts per segment too, in the same commit).

    Raises:
        ValueError: a metric with dimensions, and a batch without segments.
    """
    if not definition.dimensions:
        return batch, []
    column = batch.columns.get(SEGMENT_COLUMN)
    if column is None:
        raise ValueError(f"metric {definition.name!r} has dimensions: the batch needs segments")
    batch = Batch(batch.n, {k: v for k, v in batch.columns.items() if k != SEGMENT_COLUMN})
    segments = [
        (segment, codec.increments(batch.take(np.flatnonzero(column == segment))))
        for segment in np.unique(column).tolist()
    ]
    return batch, segments


def _one_hour(ids: Sequence[bytes]) -> int:
    """The arrival time (ms) of the first of ``ids``, all of one hour window.

    Raises:
        ValueError: ids of different hours.
    """
    ms = entry_ms(ids[0])
    if entry_ms(ids[-1]) // schema.HOUR_MS != ms // schema.HOUR_MS:
        raise ValueError("a commit covers one hour window; split the batch")
    return ms


def _committed(client: redis.Redis, call: scripts.CommitBatch) -> int | list[bytes]:
    """:func:`ldp_store.scripts.commit_batch`, its refusals as :class:`WindowFull` and
    :class:`FenceBroken`."""
    try:
        return scripts.commit_batch(client, call)
    except redis.ResponseError as exc:
        if str(exc).startswith("FULL"):
            raise WindowFull(str(exc)) from None
        if "FENCE" not in str(exc):
            raise
        raise FenceBroken(str(exc)) from None


def _parsed(
    s: _Stream, delivery: Delivery, skip: dict[int, str]
) -> tuple[Batch | None, list[int], list[tuple[int, str]]]:
    """A delivery's reports parsed by the stream's codec, with their segments (a metric
    with dimensions): (the batch or None, each row's report index, the bad reports)."""
    payloads, index, bad = decode_json(delivery, skip)
    segments: list[int] = []
    if payloads and s.definition.dimensions:
        payloads, index, segments = split_segments(s.definition, payloads, index, bad)
    if not payloads:
        return None, index, bad
    batch, kept, rejected = parse_payloads(s.codec, payloads, index)
    if segments:
        rows = {i: row for row, i in enumerate(index)}
        batch.columns[SEGMENT_COLUMN] = np.asarray(
            [segments[rows[i]] for i in kept], dtype=np.int64
        )
    return batch, kept, bad + rejected


def _dead_inside(
    delivery: Delivery, index: list[int], bad: list[tuple[int, str]]
) -> tuple[list[tuple[int, str]], list[tuple[bytes, str, bytes]]]:
    """The bad reports of entries that hold counted ones too, split off ``bad``: the
    rest, and those as (entry id, reason, payload) for the commit to dead-letter."""
    counted = {delivery.ids[i] for i in index}
    inside = [(i, why) for i, why in bad if delivery.ids[i] in counted]
    if not inside:
        return bad, []
    raws = list(delivery.raw())
    rest = [(i, why) for i, why in bad if delivery.ids[i] not in counted]
    return rest, [(delivery.ids[i], why, raws[i]) for i, why in sorted(inside)]


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
        retention: how long hour and day windows are kept (default: from the
            environment, :meth:`ldp_store.retention.RetentionPolicy.from_environ`); a
            metric's own retention overrides it.
        heartbeat: called with the statistics after the first completed round, then at
            most every :data:`HEARTBEAT_SECONDS` (``ldp aggregate --progress-file``).
        on_counted: called after each round that counted reports, with the names of the
            metrics it counted (the alert rules' evaluation, :mod:`aggregator.alerts`); an
            exception it raises is logged, never stops the counting.

    Raises:
        ValueError: a parameter out of range (or a retention variable).
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
        retention: RetentionPolicy | None = None,
        heartbeat: Callable[[WorkerStats], None] | None = None,
        on_counted: Callable[[set[str]], object] | None = None,
    ) -> None:
        if not name or any(c.isspace() for c in name):
            raise ValueError(f"consumer name must be non-empty without spaces, got {name!r}")
        for what, value, ok, wanted in (
            (
                "batch_size",
                batch_size,
                1 <= batch_size <= MAX_BATCH_SIZE,
                f"in [1, {MAX_BATCH_SIZE}]",
            ),
            ("block_ms", block_ms, block_ms >= 1, "at least 1"),
            ("claim_idle_ms", claim_idle_ms, claim_idle_ms >= 0, "non-negative"),
            ("max_deliveries", max_deliveries, max_deliveries >= 1, "at least 1"),
        ):
            if not ok:
                raise ValueError(f"{what} must be {wanted}, got {value}")
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
        self.retention = RetentionPolicy.from_environ() if retention is None else retention
        self.stats = WorkerStats()
        self.heartbeat = heartbeat
        self.on_counted = on_counted
        self._counted: set[str] = set()
        """Metrics counted since ``on_counted`` was last called."""
        self._next_beat = 0.0
        self.registry = Registry(client)
        self._reader = raw_reader(client)
        self._unfolded: dict[str, _Untidy] = {}
        """Per stream: the delta commits and windows since this worker last tidied them."""
        self._streams: dict[str, _Stream] = {}
        self._marks = in_use.Marks(client)
        self._known: set[tuple[str, int]] = set()
        """Metric versions whose every shard is joined."""
        self._cluster = is_cluster(client)
        self._name_bytes = name.encode()
        self._reread_done = False
        self._idle_wait = 0.0
        """The cluster's idle poll interval, doubling up to block_ms (see
        :meth:`_wait_for_entries`); 0 after a round that handled entries."""
        self._next_discovery = 0.0
        self._next_full_discovery = 0.0
        self._registry_changes: bytes | None = None
        self._next_release = 0.0
        self._next_claim_check = 0.0
        self._claim_clock = 0.0  # when the streams' lengths were last read for claiming
        self._once = False
        self._stopping = False
        self._blocking = False
        self._rung: bytes | None = None
        """The doorbell's last ring this worker has seen (None: not read yet)."""
        self._pooled: set[str] = set()
        """Shuffle pools that may hold reports (rung, or found by the pools' sweep)."""
        self._next_pool_sweep = 0.0
        self._pools: dict[str, tuple[str, int, int]] | None = None
        """Every joined version's shuffle pools (kept while the streams are the same)."""

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
    def discover(self, full: bool = True) -> list[str]:
        """Find every version of every metric and join its stream's group.

        Args:
            full: scan every metric's versions; else only when the registry's change
                counter moved since the last scan (or :data:`FULL_DISCOVER_INTERVAL` passed).

        Returns:
            The stream keys newly joined.
        """
        now = time.monotonic()
        self._next_discovery = now + self.discover_interval
        changes = cast(bytes | None, self.redis.get(keys.REGISTRY_CHANGES))
        if not full and changes == self._registry_changes and now < self._next_full_discovery:
            return []
        added = []
        listed = self._all_versions()
        self._forget_deleted(set(listed))
        for name, version in listed:
            if (name, version) in self._known:
                continue
            try:
                definition = self.registry.get(name, version)
            except DefinitionError as exc:
                log.error("metric %s v%d: unreadable definition: %s", name, version, exc)
                continue
            if definition is None:
                continue
            codec = codec_for(definition.mechanism)
            policy = self.retention.for_metric(definition)
            for shard in range(definition.shards):  # each shard: its own stream and slot
                key = keys.stream_key(name, version, shard)
                if key in self._streams:  # joined before a failure on a later shard
                    continue
                ensure_group(self.redis, key)
                expire_untimed(self.redis, definition, policy, shard)
                batches = self.redis.exists(keys.batched_key(name, version, shard))
                self._streams[key] = _Stream(
                    definition=definition,
                    codec=codec,
                    key=key,
                    dead=keys.dead_key(name, version, shard),
                    windows=keys.windows_key(name, version, shard),
                    claims=keys.claims_key(name, version, shard),
                    shard=shard,
                    per_entry=keys.ENTRY_REPORTS if batches else 1,
                )
                added.append(key)
                log.info("consuming %s (%s)", key, definition.mechanism.name)
            self._known.add((name, version))
        self.stats.streams = len(self._streams)
        # As read before the scan (a change during it is seen next time), once it is done.
        self._registry_changes = changes
        self._next_full_discovery = now + FULL_DISCOVER_INTERVAL
        return added

    def _forget_deleted(self, listed: set[tuple[str, int]]) -> None:
        """Stop consuming the versions the registry no longer lists (``ldp metrics
        delete``): their streams are quiet and no ring names them, so no read of theirs
        would fail to say so."""
        for key, s in list(self._streams.items()):
            version = (s.definition.name, s.definition.version)
            if version not in listed:
                log.info("%s was deleted with its version; no longer consumed", key)
                del self._streams[key]
                self._pools = None
                self._known.discard(version)
                self._pooled.discard(keys.pool_key(*version, s.shard))

    def _all_versions(self) -> list[tuple[str, int]]:
        """Every (metric, version) of the registry, the versions of every metric read in
        one call (:func:`ldp_store.scripts.read_many`)."""
        names = self.registry.names()
        replies = scripts.read_many(self.redis, "HKEYS", [keys.metric_key(n) for n in names])
        found = []
        for name, fields in zip(names, replies, strict=True):
            found += [(name, version) for version in sorted(version_numbers(fields))]
        return found

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
        self._once = once
        try:
            while not self._stopping:
                try:
                    done = self._round(once)
                    self._completed_round()
                    if done:
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
                        s.quiet = False
                except _Wakeup:
                    break
        finally:
            restore()
        return self.stats

    def _completed_round(self) -> None:
        self.stats.rounds += 1
        now = time.monotonic()
        if self.heartbeat is not None and now >= self._next_beat:
            self._next_beat = now + HEARTBEAT_SECONDS
            self.heartbeat(self.stats)

    def _round(self, once: bool) -> bool:
        """One pass over every stream; returns True when burst mode is done."""
        self._bell_before_reads()
        if time.monotonic() >= self._next_discovery:
            self.discover(full=False)
        if time.monotonic() >= self._next_release:
            self._next_release = time.monotonic() + RELEASE_INTERVAL
            self._release_due_pools()
        if time.monotonic() >= self._next_claim_check:
            self._skip_empty_claims()
        handled = 0
        for stream in list(self._streams.values()):
            if self._stopping:
                return True
            try:
                handled += self._step(stream)
            except redis.ResponseError as exc:
                if not stream_gone(exc):
                    raise
                self._lost_group(stream)
        self._tell_counted()
        if handled:
            self._idle_wait = 0.0
            return False
        self._tidy_all()  # nothing new this round: leave no batch boundaries behind
        if once:
            return self._burst_done()
        self._wait_for_entries()
        return False

    def _tell_counted(self) -> None:
        """Hand the watcher (``on_counted``) the versions counted since it was last told."""
        if self._counted and self.on_counted is not None:
            counted, self._counted = self._counted, set()
            try:
                self.on_counted(counted)
            except Exception:  # a watcher's failure must not stop the counting
                log.exception("after counting %s", sorted(counted))

    def _burst_done(self) -> bool:
        """After a round that found nothing new: whether a burst is done (every stream's
        own pending entries and claim pass read, and nothing of ours pending since)."""
        if not all(s.pending_cursor is None and s.claim_passes for s in self._streams.values()):
            return False
        return not self._reread_own_pending()

    def _lost_group(self, stream: _Stream) -> None:
        """After a stream's group was found gone: forget the stream if its version was
        deleted (``ldp metrics delete``: its keys are not recreated), else recreate the
        group and read the stream from the start."""
        definition = stream.definition
        if not self.registry.exists(definition.name, definition.version):
            log.info("%s was deleted with its version; no longer consumed", stream.key)
            self._streams.pop(stream.key, None)
            self._pools = None
            self.stats.streams = len(self._streams)
            return
        log.warning("%s lost its group (stream deleted?); recreating it", stream.key)
        ensure_group(self.redis, stream.key)
        stream.pending_cursor, stream.claim_cursor = "0", "0-0"
        stream.quiet = False

    def _release_due_pools(self) -> None:
        """Release the shuffle pools whose bound has passed, of every version joined
        (superseded and retired ones too: their reports were acknowledged).

        On a single Redis only the pools that may hold reports are looked at: those the
        doorbell rang for (the append script rings when it pools reports), and those the
        sweep found, every :data:`POOL_SWEEP_INTERVAL`, with the length of every pool in
        one call. A cluster looks at each (the doorbell would be CROSSSLOT).
        """
        if self._pools is None or len(self._pools) != len(self._streams):
            self._pools = {
                keys.pool_key(s.definition.name, s.definition.version, s.shard): (
                    s.definition.name,
                    s.definition.version,
                    s.shard,
                )
                for s in self._streams.values()
            }
        members = self._pools
        if members and not self._cluster:
            now = time.monotonic()
            if now >= self._next_pool_sweep:
                self._next_pool_sweep = now + POOL_SWEEP_INTERVAL
                self._pooled |= self._holding(list(members))
            if not self._pooled:
                return
            self._pooled = self._holding(sorted(p for p in self._pooled if p in members))
            members = {p: members[p] for p in sorted(self._pooled)}
        released = shuffle.release_due(self.redis, list(members.values()))
        if released:
            log.info("released %d relayed reports from pools at their bound", released)

    def _holding(self, pools: list[str]) -> set[str]:
        """Which of ``pools`` hold reports: their lengths read in one call."""
        lengths = scripts.read_many(self.redis, "XLEN", pools)
        return {p for p, n in zip(pools, lengths, strict=True) if int(n)}

    def _claim_interval(self) -> float:
        """Seconds between two claim passes over a stream."""
        return max(MIN_CLAIM_INTERVAL, self.claim_idle_ms / 2000)

    def _skip_empty_claims(self) -> None:
        """Every claim interval, the length of every stream in one call
        (:func:`ldp_store.scripts.read_many`): an empty stream has no pending entry (the
        worker trims only what every group acknowledged), so its claim pass is counted
        as done without an ``XAUTOCLAIM``. An idle worker's claim duty is then this one
        call, not a script run per stream. A stream's next pass starts in :meth:`_step`
        only when this reading found it due and holding entries, however long the round
        then takes, and a stream joined since waits for the next reading."""
        now = time.monotonic()
        interval = self._claim_interval()
        self._claim_clock, self._next_claim_check = now, now + interval
        waiting = [s for s in self._streams.values() if s.claim_cursor == "0-0"]
        if not waiting:
            return
        lengths = scripts.read_many(self.redis, "XLEN", [s.key for s in waiting])
        for s, length in zip(waiting, lengths, strict=True):
            if int(length):
                s.quiet = False  # the sweep: entries a lost ring did not announce
                s.claim_due = s.claim_due or now >= s.next_claim
            elif now >= s.next_claim:
                s.claim_passes += 1
                s.next_claim = now + interval

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
                if not stream_gone(exc):
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
        if s.claim_cursor != "0-0" or s.claim_due:
            delivery = self._fetch(s, "claim", s.claim_cursor)
            s.claim_cursor = delivery.cursor or "0-0"
            if s.claim_cursor == "0-0":  # a full pass: rest until entries may be idle enough
                s.claim_passes, s.claim_due = s.claim_passes + 1, False
                # due at the next reading, which comes an interval after this one: timed
                # from this step, a round longer than the step's offset in it would put
                # the next pass off to the reading after
                s.next_claim = self._claim_clock + self._claim_interval()
            if delivery.ids:
                self.stats.claimed += len(delivery.ids)
                return self._handle(s, delivery)
        if s.quiet:
            return 0  # not rung since its last read found nothing new
        delivery = self._fetch(s, ">")
        if not delivery.ids:
            # Nothing new: until the doorbell rings for it (or the sweep finds entries),
            # not read again. Polled where there is no doorbell: a cluster, or a burst
            # that ends when nothing is left.
            s.quiet = not (self._cluster or self._once)
            return 0
        return self._handle(s, delivery)

    def _fetch(self, s: _Stream, mode: str, start: str = "0-0") -> Delivery:
        if mode == ">":
            return self._fetch_new(s)
        reply = scripts.read_batch(
            self.redis,
            stream=s.key,
            fence=s.claims,
            consumer=self.name,
            count=s.count(self.batch_size),
            mode=mode,
            min_idle_ms=self.claim_idle_ms,
            start=start,
        )
        delivery = Delivery.from_reply(reply)
        if delivery.ids:
            s.saw(delivery)
        return delivery

    def _fetch_new(self, s: _Stream) -> Delivery:
        """Read fresh entries with a plain XREADGROUP, between the fence and our pending count.

        Fresh entries skip the read script: Redis spends about a third less per entry
        when it need not turn them into Lua tables and back, and the worker has time to
        spare for redis-py's parsing. The claim fence, read first in the same round trip,
        and this consumer's pending count, read right after, make the fast-path token
        that lets the commit acknowledge the batch in bulk (see :data:`ldp_store.scripts.COMMIT`).
        """
        pipe = self._reader.pipeline(transaction=False)
        pipe.get(s.claims)
        pipe.xreadgroup(keys.GROUP, self.name, {s.key: ">"}, count=s.count(self.batch_size))
        pipe.xpending(s.key, keys.GROUP)
        fence, reply, summary = pipe.execute()
        entries = stream_entries(reply, s.key)
        if not entries:
            return Delivery([], [], b"", None)
        own = next((int(c["pending"]) for c in summary["consumers"] if self._is_me(c["name"])), 0)
        delivery = Delivery.from_entries(entries, b"%s:%d" % (fence or b"0", own))
        s.saw(delivery)
        return delivery

    def _wait_for_entries(self) -> None:
        """Block until a stream is rung (or ``block_ms`` passes); its next read is then due.

        The append and shuffle scripts ring the doorbell (:data:`ldp_store.keys.DOORBELL`)
        with the stream they added entries to, in the same script: one blocking ``XREAD``
        of that one key from the last ring seen, whatever the number of streams. Race-free:
        the ring seen last was read before the rounds that found its streams empty, so an
        entry added after those reads rings after it and the read returns at once. A ring
        lost (the doorbell trimmed past a busy worker, deleted, or an entry added without
        one) is found by the sweep: every claim interval the length of every stream is read
        in one call (:meth:`_skip_empty_claims`), and a quiet stream holding entries is read.

        On a Redis Cluster the doorbell would lie in another slot than the streams the
        scripts write (CROSSSLOT), so an idle worker polls: it sleeps, then the next round
        reads every stream once (one cheap script call each). The pause starts at
        ``CLUSTER_POLL_MIN`` and doubles while rounds find nothing, up to ``block_ms``: a
        new entry waits at most ``block_ms``, a burst after a quiet moment is picked up
        within milliseconds, and an idle worker costs the cluster about one call per
        stream per ``block_ms``.
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
                list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes]]]]] | None,
                self.redis.xread(
                    {keys.DOORBELL: self._rung or b"0-0"},  # not read yet: every ring
                    count=keys.DOORBELL_LENGTH,
                    block=self.block_ms,
                ),
            )
        finally:
            self._blocking = False
        for _, entries in reply or []:
            for entry_id, fields in entries:
                self._rung = entry_id
                key = fields.get(b"s", b"").decode()
                stream = self._streams.get(key)
                if stream is not None:
                    stream.quiet = False  # read its batch in the next round
                elif key.endswith(POOL_SUFFIX):
                    self._pooled.add(key)  # a shuffle pool that got reports
                else:  # a version not joined yet: look at the registry now
                    self._next_discovery = 0.0

    def _bell_before_reads(self) -> None:
        """The doorbell's newest ring, read before the round's reads (see
        :meth:`_wait_for_entries`)."""
        if self._rung is None and not self._cluster:
            newest = cast(list[tuple[bytes, Any]], self.redis.xrevrange(keys.DOORBELL, count=1))
            self._rung = newest[0][0] if newest else b"0-0"

    def _sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self._stopping and time.monotonic() < deadline:
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    # -- one batch ----------------------------------------------------------------------
    def _handle(self, s: _Stream, delivery: Delivery) -> int:
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
        batch, index, bad = _parsed(s, delivery, skip)
        if batch is not None and batch.n:
            if len(index) == len(delivery.ids):
                self._count(s, delivery.ids, batch, delivery.joined_ids, delivery.fence)
            else:
                # A bad report inside an entry that also holds good ones is
                # dead-lettered by the commit that acknowledges the entry.
                bad, dead = _dead_inside(delivery, index, bad)
                ids = [delivery.ids[i] for i in index]
                self._count(s, ids, batch, fence=delivery.fence, dead=dead)
        if bad:
            self._dead_letter(s, delivery, bad)
        return len(delivery.ids)

    def _count(
        self,
        s: _Stream,
        ids: list[bytes],
        batch: Batch,
        joined: bytes = b"",
        fence: bytes = b"",
        dead: Sequence[tuple[bytes, str, bytes]] = (),
    ) -> None:
        """Commit a parsed batch, one script call per hour window it spans (with the
        reports of its entries that go to the dead letters instead)."""
        first, last = entry_ms(ids[0]) // schema.HOUR_MS, entry_ms(ids[-1]) // schema.HOUR_MS
        if first == last:
            self._commit_all(s, ids, batch, joined, fence, dead)
            return
        runs: dict[int, list[int]] = {}
        for row, entry_id in enumerate(ids):
            runs.setdefault(entry_ms(entry_id) // schema.HOUR_MS, []).append(row)
        for hour, rows in runs.items():
            picked = np.asarray(rows, dtype=np.int64)
            mine = [d for d in dead if entry_ms(d[0]) // schema.HOUR_MS == hour]
            # No fast path: the first part's commit changes our pending count.
            self._commit_all(s, [ids[r] for r in rows], Batch.take(batch, picked), dead=mine)

    def _commit_all(
        self,
        s: _Stream,
        ids: list[bytes],
        batch: Batch,
        joined: bytes = b"",
        fence: bytes = b"",
        dead: Sequence[tuple[bytes, str, bytes]] = (),
    ) -> None:
        """Commit until done: recount exactly the subset still pending after a race."""
        while ids:
            try:
                counted, pending = self.commit(
                    s.definition, ids, batch, joined, s.shard, fence, dead
                )
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
            batch = Batch.take(batch, np.asarray(rows, dtype=np.int64))
            dead = [d for d in dead if d[0] in still]

    def commit(
        self,
        definition: MetricDefinition,
        ids: Sequence[bytes | str],
        batch: Batch,
        joined: bytes = b"",
        shard: int = 0,
        fence: bytes = b"",
        dead: Sequence[tuple[bytes, str, bytes]] = (),
    ) -> tuple[int, list[bytes]]:
        """Run the commit script once: count ``batch`` and ack ``ids`` if all are pending.

        Args:
            definition: the metric version of the stream.
            ids: each row's entry id, all of one hour, in the rows' order of ``batch`` (a
                batch entry's rows repeat its id).
            batch: their parsed payloads.
            joined: the entry ids comma-joined, each once, if at hand.
            shard: the shard of the stream the ids are from.
            fence: the fast-path token read with a fresh (``>``) delivery of ``ids``, or
                empty: then every id is checked one by one.
            dead: (entry id, reason, payload) of the reports of these entries that cannot
                be counted: dead-lettered by the same script. With them, ``ids`` must hold
                every report of each of its entries.

        Returns:
            ``(len(ids), [])`` when every id was pending and is now counted and acked;
            otherwise ``(0, still_pending)``: nothing changed, and ``still_pending`` (maybe
            empty) are the ids no other worker has acknowledged yet.

        Raises:
            ValueError: ids of different hours, or not one per row of ``batch``.
            FenceBroken: ``fence`` was given and some ids had been acknowledged by hand
                (see :class:`FenceBroken`); nothing was counted.
            WindowFull: a window would pass the most reports it may hold; nothing changed.
        """
        raw = [x.encode() if isinstance(x, str) else x for x in ids] if not joined else ids
        raw = cast(list[bytes], raw)
        if len(raw) != batch.n:
            raise ValueError(f"{len(raw)} ids for a batch of {batch.n}")
        if not raw:
            return 0, []
        ms = _one_hour(raw)
        stream = self._streams.get(keys.stream_key(definition.name, definition.version, shard))
        codec = stream.codec if stream is not None else codec_for(definition.mechanism)
        batch, segments = _without_segments(definition, codec, batch)
        hours = scripts.Hours.of(ms, self.retention.for_metric(definition).expires_at)
        increments = codec.increments(batch)
        call = scripts.CommitBatch(
            name=definition.name,
            version=definition.version,
            shard=shard,
            consumer=self.name,
            ids=joined or b",".join(dict.fromkeys(raw)),
            hours=hours,
            fence=fence,
            k=definition.k,
            seeds=codec.seed_increments(batch),
            increments=increments,
            segments=segments,
            reports=len(raw) + len(dead),
            dead=dead,
            dead_maxlen=DEAD_MAXLEN,
        )
        reply = _committed(self.redis, call)
        if isinstance(reply, int):
            self._marks.mark(definition.name, definition.version)  # for /metrics
            self._counted.add(definition.name)
            self.stats.counted += len(raw)
            self.stats.dead_lettered += len(dead)
            if increments.delta:
                self._after_delta(definition, shard, (schema.ALL, hours.hour, hours.day))
            return len(raw), []
        return 0, list(reply)

    def _after_delta(
        self, definition: MetricDefinition, shard: int, windows: tuple[str, ...]
    ) -> None:
        """Note a delta commit's windows; every :data:`FOLD_EVERY` delta commits to a
        stream (the first one of this process included), tidy them (:meth:`_tidy`)."""
        stream = keys.stream_key(definition.name, definition.version, shard)
        seen = self._unfolded.get(stream)
        if seen is None:  # a process's first delta commit on a stream looks at once
            seen = self._unfolded[stream] = _Untidy(definition, shard, FOLD_EVERY - 1)
        seen.windows.update(windows)
        seen.commits += 1
        if seen.commits >= FOLD_EVERY:
            self._tidy(stream)

    def _tidy(self, stream: str) -> None:
        """Tidy the delta lists of the windows a stream's delta commits wrote since the
        last look: fold a list into its packed string once its bytes reach
        :data:`FOLD_SHARE` of the string's, else merge its blobs into one (no batch
        boundaries or order kept; see Deltas in :mod:`ldp_store.schema`). A fold is an
        optimisation: an error (Redis out of memory, a lost connection, a corrupt list)
        is logged and the counts stay as they are, correct and readable."""
        seen = self._unfolded.get(stream)
        if seen is None or not seen.windows:
            return
        windows, seen.windows, seen.commits = sorted(seen.windows), set(), 0
        definition, shard = seen.definition, seen.shard
        enough = FOLD_SHARE * schema.SUPPORT_BYTES * definition.k
        for window in windows:
            try:
                mode, _ = tidy_window(self.redis, definition, window, shard, enough)
            except (ValueError, redis.RedisError, RedisClusterException) as exc:
                log.warning("%s %s: delta blobs not tidied: %s", stream, window, exc)
                continue
            if mode == "folded":
                self.stats.folds += 1
            elif mode == "merged":
                self.stats.merges += 1

    def _tidy_all(self) -> None:
        """Tidy every stream's windows written since the last look (an idle or last round)."""
        for stream in list(self._unfolded):
            self._tidy(stream)

    def _dead_letter(self, s: _Stream, delivery: Delivery, bad: list[tuple[int, str]]) -> None:
        """Move bad entries to the dead-letter stream, acking each, in one script."""
        raws = list(delivery.raw())
        moved = scripts.dead(
            self.redis,
            stream=s.key,
            dead_letters=s.dead,
            batched=keys.batched_key(s.definition.name, s.definition.version, s.shard),
            entries=[(delivery.ids[i], reason, raws[i]) for i, reason in sorted(bad)],
            maxlen=DEAD_MAXLEN,
        )
        self.stats.dead_lettered += moved
        if moved:
            self._marks.mark(s.definition.name, s.definition.version)  # for /metrics
            log.warning(
                "%s: %d entries dead-lettered to %s (first reason: %.200s)",
                s.key,
                moved,
                s.dead,
                min(bad)[1],
            )

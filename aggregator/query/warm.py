"""Expensive reads kept warm: each read process remembers the expensive reads it served
lately and, when their metric's counts change (a batch counted), reads them again on a
thread of its own, so that their statistics are kept (:mod:`aggregator.query.memo`)
before the next request asks. The reads are also recorded in Redis, per read lane, so
that a process that starts (or never served them) warms them before its first request.
In full: docs/architecture/read-side.md.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import redis
from redis.exceptions import RedisClusterException

from aggregator.query.estimators.base import Reader
from aggregator.query.window import reports_counted, reports_counted_many
from client_sdk.wire import MetricDefinition
from ldp_store import keys

__all__ = [
    "IDLE_SECONDS",
    "LOAD_SECONDS",
    "POLL_SECONDS",
    "RECORD_SECONDS",
    "WARM_READS",
    "WARM_SECONDS",
    "Later",
    "Replay",
    "Revive",
    "Warmer",
    "spec_text",
]

log = logging.getLogger(__name__)

WARM_SECONDS = 0.1
"""A read that took at least this long is kept warm: the goal of an answer (100 ms);
a cheaper one costs its next reader little, and its warm-up would cost every batch."""

WARM_READS = 32
"""Reads kept warm per process, the most lately read first: a few dashboards' heavy
tables; each warm-up costs up to a second or two of CPU per batch counted. A read lane's
record in Redis holds as many."""

IDLE_SECONDS = 900.0
"""A read no one has asked for in this long is no longer kept warm (a closed tab), nor
recorded."""

POLL_SECONDS = 1.0
"""How often the warmer reads the reports counted of the metrics it keeps warm (one
call for all): a batch is noticed within this long."""

RECORD_SECONDS = 60.0
"""A read kept warm is recorded in Redis when first kept, then at most once in this
long however often it is read: one write a minute per dashboard table, not per read."""

LOAD_SECONDS = 60.0
"""How often the warmer reads its lane's record (at its start, then this often): a read
another process of the lane served is warm here within this long."""

Replay = Callable[[Reader], object]
"""A read again, with the reader given (its answer is dropped: what counts is what it
leaves in the memo, or a string window's discovery in the read guard). Raises
:class:`Later` when it cannot run yet."""


class Later(Exception):
    """A replay that cannot run yet (a string window's discovery paced, or the process's
    discoveries all running): the next pass tries it again, whether or not the counts
    moved meanwhile."""


Revive = Callable[[Reader, Mapping[str, Any]], tuple[MetricDefinition, Replay] | None]
"""A recorded read's metric version and replay from its query (a read's ``spec``), or
None when its metric is gone (deleted, retired). Raises ValueError, KeyError or
TypeError on a query it cannot read."""


def spec_text(spec: Mapping[str, Any]) -> str:
    """The recorded form of a read's query (and what the warmer keys it by): its JSON,
    keys sorted, no spaces."""
    return json.dumps(spec, sort_keys=True, separators=(",", ":"))


@dataclass
class _Kept:
    definition: MetricDefinition
    replay: Replay
    read_at: float
    n: int | None
    """The metric version's reports counted when the read was last computed (None:
    never here, or unknown with Redis away; the next pass reads it again)."""
    recorded_at: float
    """When this process last recorded the read in Redis (-inf: not yet; a read loaded
    from the record is recorded at its first read here)."""


class Warmer:
    """One read process's expensive reads, read again when their counts change.

    Args:
        reader: what the replays read with (the app's Redis and registry).
        revive: a recorded read's replay from its query; None: reads are neither recorded
            in Redis nor loaded from it.
        clock: seconds, for :data:`IDLE_SECONDS` (injected by tests).
        wall: Unix seconds, the record's scores (shared by processes).
    """

    def __init__(
        self,
        reader: Reader,
        revive: Revive | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.reader = reader
        self.revive = revive
        self.clock = clock
        self.wall = wall
        self.replays = 0
        """Reads computed again by :meth:`step`, for tests and the benchmark."""
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, _Kept] = OrderedDict()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._stopped = threading.Event()

    def _own(self) -> None:
        """Forget what a parent process kept (under the lock)."""
        if os.getpid() != self._pid:  # a fork (gunicorn's workers): its own reads
            self._pid, self._thread = os.getpid(), None
            self._kept.clear()

    def _key(self) -> str | None:
        """This process's lane's record, or None when reads are not recorded."""
        if self.revive is None:
            return None
        # The worker's lane, set by collector/gunicorn_conf.py (unset: one lane).
        return keys.warm_reads_key(os.environ.get("LDP_READ_LANE", ""))

    def start(self) -> None:
        """Start this process's thread now (a worker ready to serve): it loads the
        lane's record and computes those reads before any request asks."""
        with self._lock:
            self._own()
            self._start(at_once=True)

    def _start(self, at_once: bool) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=_run,
                args=(weakref.ref(self), self._stopped, at_once),
                name="ldp-warm",
                daemon=True,
            )
            self._thread.start()

    def note(
        self,
        spec: Mapping[str, Any],
        definition: MetricDefinition,
        replay: Replay,
        seconds: float,
    ) -> None:
        """A read was served: keep it warm if it took at least :data:`WARM_SECONDS`,
        or was kept warm already, and record it (:data:`RECORD_SECONDS`); starts this
        process's thread at the first. ``spec`` is what it computes (its metric version
        and the query's parameters that change its statistics, JSON: a read of the same
        statistics in another form or with other rows has the same)."""
        key = spec_text(spec)
        now = self.clock()
        with self._lock:
            self._own()
            found = self._kept.get(key)
            if found is not None:
                found.read_at = now
                self._kept.move_to_end(key)
                if now - found.recorded_at < RECORD_SECONDS:
                    return
                found.recorded_at = now
        if found is not None:
            self._record(key)
            return
        if seconds < WARM_SECONDS:
            return
        try:  # what the read just computed (a batch counted since: one warm-up missed)
            n: int | None = reports_counted(self.reader.client, definition)
        except (redis.RedisError, RedisClusterException):  # the answer is served all the same
            n = None
        with self._lock:
            self._kept[key] = _Kept(definition, replay, now, n, now)
            while len(self._kept) > WARM_READS:
                self._kept.popitem(last=False)
            self._start(at_once=False)
        self._record(key)

    def _record(self, key: str) -> None:
        """Record the read ``key`` as read now in the lane's record, which keeps the
        newest :data:`WARM_READS` read within :data:`IDLE_SECONDS` (and vanishes when
        none is)."""
        shared = self._key()
        if shared is None:
            return
        now = self.wall()
        try:
            pipe = self.reader.client.pipeline(transaction=False)
            pipe.zadd(shared, {key: now})
            pipe.zremrangebyscore(shared, "-inf", now - IDLE_SECONDS)
            pipe.zremrangebyrank(shared, 0, -WARM_READS - 1)
            pipe.pexpire(shared, int(IDLE_SECONDS * 1000))
            pipe.execute()
        except (redis.RedisError, RedisClusterException) as exc:  # served; recorded later
            log.debug("recording a warm read failed (%s)", exc)

    def load(self) -> int:
        """Keep warm the reads of this lane's record not kept yet (computed at the next
        :meth:`step`), and refresh when the others were read; drop from the record what
        cannot be read again (a metric deleted or retired, a query not understood).
        Returns how many reads it added.

        Raises:
            redis.RedisError: Redis away.
        """
        shared = self._key()
        if shared is None or self.revive is None:
            return 0
        wall, now = self.wall(), self.clock()
        found = cast(
            list[tuple[bytes, float]],
            self.reader.client.zrangebyscore(shared, wall - IDLE_SECONDS, "+inf", withscores=True),
        )
        dropped: list[bytes] = []
        added = 0
        for member, score in found:  # oldest first: the newest end the process's order
            read_at = now - max(0.0, wall - float(score))
            try:
                key = member.decode()
                with self._lock:
                    self._own()
                    kept = self._kept.get(key)
                    if kept is not None:
                        kept.read_at = max(kept.read_at, read_at)
                        continue
                revived = self.revive(self.reader, json.loads(key))
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                log.debug("a warm read recorded cannot be read (%s); dropped", exc)
                dropped.append(member)
                continue
            if revived is None:  # its metric deleted or retired
                dropped.append(member)
                continue
            definition, replay = revived
            with self._lock:
                self._kept[key] = _Kept(definition, replay, read_at, None, -float("inf"))
                while len(self._kept) > WARM_READS:
                    self._kept.popitem(last=False)
            added += 1
        if dropped:
            self.reader.client.zrem(shared, *dropped)
        return added

    def step(self) -> int:
        """Read the reports counted of every metric kept warm (one call) and read again
        each read whose metric's count moved since it was computed (or never computed
        here); forget the reads idle for :data:`IDLE_SECONDS`. Returns how many reads it
        computed again."""
        now = self.clock()
        with self._lock:
            for key in [k for k, v in self._kept.items() if now - v.read_at > IDLE_SECONDS]:
                del self._kept[key]
            kept = list(self._kept.items())
        if not kept:
            return 0
        counted = reports_counted_many(self.reader.client, [v.definition for _, v in kept])
        done = 0
        for (key, read), n in zip(kept, counted, strict=True):
            if read.n == n:
                continue
            before, read.n = read.n, n
            try:
                read.replay(self.reader)
            except Later:
                read.n = before
                continue
            except Exception:  # noqa: BLE001  # retired, deleted, Redis away: the next read says
                log.debug("warm-up of %s failed; no longer kept warm", key, exc_info=True)
                self._forget(key)
                continue
            done += 1
        self.replays += done
        return done

    def _forget(self, key: str) -> None:
        """No longer keep ``key`` warm, here or (recorded) in the lane's other processes:
        its next read records it again."""
        with self._lock:
            self._kept.pop(key, None)
        shared = self._key()
        if shared is not None:
            try:
                self.reader.client.zrem(shared, key)
            except (redis.RedisError, RedisClusterException):
                pass

    def stop(self) -> None:
        """End this process's thread after its current pass (an app that is done with:
        the tests' apps; a worker's thread ends with the worker)."""
        self._stopped.set()

    def _pass(self, loaded: float) -> float:
        """One pass of the thread: the lane's record loaded when due, then :meth:`step`;
        a failure of any kind is logged and the next pass runs (a shard down raises a
        ``RedisClusterException``, which is no ``RedisError``). Returns when it last
        loaded."""
        try:
            if self.clock() - loaded >= LOAD_SECONDS:
                loaded = self.clock()
                self.load()
            self.step()
        except Exception as exc:  # noqa: BLE001  # Redis away, a bug: the next pass
            log.warning("warm-up pass failed (%s); next in %.0f s", exc, POLL_SECONDS)
        return loaded


def _run(ref: weakref.ref[Warmer], stopped: threading.Event, at_once: bool) -> None:
    """A warmer's thread: a pass every :data:`POLL_SECONDS` until :meth:`Warmer.stop` or
    until the warmer is gone. It holds the warmer weakly, so an app dropped (tests create
    many) takes its thread and Redis client with it."""
    warmer = ref()
    loaded = -float("inf") if at_once or warmer is None else warmer.clock()
    del warmer
    if not at_once and stopped.wait(POLL_SECONDS):
        return
    while (warmer := ref()) is not None:
        loaded = warmer._pass(loaded)
        del warmer
        if stopped.wait(POLL_SECONDS):
            return

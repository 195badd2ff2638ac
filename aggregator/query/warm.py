"""Expensive reads kept warm: each read process remembers the expensive reads it served
lately and, when their metric's counts change (a batch counted), reads them again on a
thread of its own, so that their statistics are kept (:mod:`aggregator.query.memo`)
before the next request asks. In full: docs/architecture/read-side.md.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass

import redis

from aggregator.query.estimators.base import Reader
from aggregator.query.window import reports_counted, reports_counted_many
from client_sdk.wire import MetricDefinition

__all__ = ["IDLE_SECONDS", "POLL_SECONDS", "WARM_READS", "WARM_SECONDS", "Warmer"]

log = logging.getLogger(__name__)

WARM_SECONDS = 0.1
"""A read that took at least this long is kept warm: the goal of an answer (100 ms);
a cheaper one costs its next reader little, and its warm-up would cost every batch."""

WARM_READS = 32
"""Reads kept warm per process, the most lately read first: a few dashboards' heavy
tables; each warm-up costs up to a second or two of CPU per batch counted."""

IDLE_SECONDS = 900.0
"""A read no one has asked for in this long is no longer kept warm (a closed tab)."""

POLL_SECONDS = 1.0
"""How often the warmer reads the reports counted of the metrics it keeps warm (one
call for all): a batch is noticed within this long."""

Replay = Callable[[Reader], object]
"""A read again, with the reader given (its answer is dropped: what counts is what it
leaves in the memo)."""


@dataclass
class _Kept:
    definition: MetricDefinition
    replay: Replay
    read_at: float
    n: int | None
    """The metric version's reports counted when the read was last computed (None:
    unknown, Redis away; the next pass reads it again)."""


class Warmer:
    """One read process's expensive reads, read again when their counts change.

    Args:
        reader: what the replays read with (the app's Redis and registry).
        clock: seconds, for :data:`IDLE_SECONDS` (injected by tests).
    """

    def __init__(self, reader: Reader, clock: Callable[[], float] = time.monotonic) -> None:
        self.reader = reader
        self.clock = clock
        self.replays = 0
        """Reads computed again by :meth:`step`, for tests and the benchmark."""
        self._lock = threading.Lock()
        self._kept: OrderedDict[Hashable, _Kept] = OrderedDict()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def note(
        self, key: Hashable, definition: MetricDefinition, replay: Replay, seconds: float
    ) -> None:
        """A read was served: keep it warm if it took at least :data:`WARM_SECONDS`
        (``key`` names what it computes: a read of the same statistics in another form
        or with other rows has the same), or was kept warm already; starts this
        process's thread at the first."""
        now = self.clock()
        with self._lock:
            if os.getpid() != self._pid:  # a fork (gunicorn's workers): its own reads
                self._pid, self._thread = os.getpid(), None
                self._kept.clear()
            found = self._kept.get(key)
            if found is not None:
                found.read_at = now
                self._kept.move_to_end(key)
                return
            if seconds < WARM_SECONDS:
                return
        try:  # what the read just computed (a batch counted since: one warm-up missed)
            n: int | None = reports_counted(self.reader.client, definition)
        except redis.RedisError:
            n = None
        with self._lock:
            self._kept[key] = _Kept(definition, replay, now, n)
            while len(self._kept) > WARM_READS:
                self._kept.popitem(last=False)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ldp-warm", daemon=True)
                self._thread.start()

    def step(self) -> int:
        """Read the reports counted of every metric kept warm (one call) and read again
        each read whose metric's count moved since it was computed; forget the reads
        idle for :data:`IDLE_SECONDS`. Returns how many reads it computed again."""
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
            read.n = n
            try:
                read.replay(self.reader)
            except Exception:  # noqa: BLE001  # retired, deleted, Redis away: the next read says
                log.debug("warm-up of %r failed; no longer kept warm", key, exc_info=True)
                with self._lock:
                    self._kept.pop(key, None)
                continue
            done += 1
        self.replays += done
        return done

    def _run(self) -> None:
        while True:
            time.sleep(POLL_SECONDS)
            try:
                self.step()
            except redis.RedisError as exc:
                log.warning("warm-up pass failed (%s); next in %.0f s", exc, POLL_SECONDS)

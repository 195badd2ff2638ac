"""Keeping ``ldp serve``'s children up: restart a crashed one with backoff, give up on one

that keeps crashing.

In full: ``docs/guides/operating.md``.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.mmap_dict import MmapedDict, mmap_key

__all__ = [
    "FAST_FAILURE_SECONDS",
    "GIVE_UP_FAILURES",
    "Backoff",
    "Child",
    "RestartCounter",
    "Supervisor",
    "describe_exit",
]

FAST_FAILURE_SECONDS = 60.0
"""A child that exits sooner than this after its start, without progress, failed fast;
one that ran longer (or made progress) was healthy, and its failure count starts again."""

GIVE_UP_FAILURES = 5
"""Fast failures in a row (none after progress) after which restarting stops: with the
default backoff that is
about 8 s of trying (0.5 + 1 + 2 + 4 s of waits), long enough for a port to free up or a
Redis to finish loading, short enough that a broken setup is reported at once."""

RESTARTS_METRIC = "ldp_supervisor_restarts"
RESTARTS_HELP = "Children of ldp serve restarted after they exited, by child."


@dataclass(frozen=True)
class Backoff:
    """Delay before the n-th restart in a row: ``first · factor^(n-1)``, at most ``cap``.

    Args:
        first: seconds before the first restart (a crash is rare; 0.5 s is a short
            outage and keeps a crash loop from spinning).
        factor: growth per further fast failure.
        cap: the longest delay.
    """

    first: float = 0.5
    factor: float = 2.0
    cap: float = 30.0

    def __post_init__(self) -> None:
        if not (0 <= self.first <= self.cap) or self.factor < 1:
            raise ValueError(f"need 0 <= first <= cap and factor >= 1, got {self}")

    def delay(self, failures: int) -> float:
        """Seconds to wait after ``failures`` (>= 1) fast failures in a row."""
        return float(min(self.cap, self.first * self.factor ** max(0, failures - 1)))


def describe_exit(status: int | None) -> str:
    """``killed by SIGKILL``, ``exit status 1``: how a child ended, from its returncode."""
    if status is None:
        return "did not start"
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exit status {status}"


@dataclass
class Child:
    """One supervised process: how to (re)start it, how to tell it ended.

    Args:
        name: the label in logs and ``/metrics`` (``redis``, ``web``, ``aggregator-1``).
        start: starts it again; raises if it cannot (counted as a fast failure).
        status: None while it runs, else its returncode.
        cleanup: called once after it ended, before the delay (e.g. stop the orphaned
            workers of a dead gunicorn master, which still hold the listening socket).
        progressed: whether it made progress since its latest start (None: it cannot
            tell; only staying up :data:`FAST_FAILURE_SECONDS` counts). A failure after
            progress is never a fast one.
    """

    name: str
    start: Callable[[], None]
    status: Callable[[], int | None]
    cleanup: Callable[[], None] | None = None
    progressed: Callable[[], bool] | None = None
    started: float = 0.0
    failures: int = 0
    restarts: int = 0
    restart_at: float | None = None


class RestartCounter:
    """``ldp_supervisor_restarts_total{child}`` in a prometheus-client multiprocess folder.

    The file is named ``counter_supervisor-<pid>.db``: the multiprocess collector reads
    every ``*.db`` in the folder and the part before the first ``_`` is the metric type.
    """

    def __init__(self, folder: str | os.PathLike[str], children: list[str]) -> None:
        self.path = Path(folder) / f"counter_supervisor-{os.getpid()}.db"
        os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))  # this user's only
        self._file = MmapedDict(str(self.path))
        self._counts = dict.fromkeys(children, 0.0)
        for child in children:  # zeros first: rate() works from the start
            self._write(child)

    def _write(self, child: str) -> None:
        key = mmap_key(
            RESTARTS_METRIC, RESTARTS_METRIC + "_total", ["child"], [child], RESTARTS_HELP
        )
        self._file.write_value(key, self._counts[child], 0.0)

    def inc(self, child: str) -> None:
        """Count one restart of ``child``."""
        self._counts[child] = self._counts.get(child, 0.0) + 1
        self._write(child)

    def close(self) -> None:
        """Release the mapping (the file stays: /metrics keeps reading the count)."""
        self._file.close()


def _progressed(child: Child) -> bool:
    """Whether ``child`` says it made progress since its start (False if it cannot tell,
    or if asking fails: a broken probe must not hide a crash loop)."""
    if child.progressed is None:
        return False
    try:
        return child.progressed()
    except OSError:
        return False


class Supervisor:
    """Restart children that exit; give up after repeated fast failures without progress.

    Call :meth:`poll` every fraction of a second (``Server`` does, from a thread).

    Args:
        children: what to watch; each was just started.
        say: where each event goes (one line, no trailing newline).
        counter: counts restarts for ``/metrics``; None: none.
        backoff: delays between a death and the restart.
        clock: monotonic seconds (tests may pass their own).
    """

    def __init__(
        self,
        children: list[Child],
        say: Callable[[str], None],
        counter: RestartCounter | None = None,
        backoff: Backoff | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.children = children
        self.say = say
        self.counter = counter
        self.backoff = backoff or Backoff()
        self.clock = clock
        self.gave_up: str | None = None
        """Why supervision stopped for good, once it did."""
        now = clock()
        for child in children:
            child.started = now

    def poll(self) -> None:
        """Notice children that ended; restart those whose delay has passed."""
        if self.gave_up:
            return
        for child in self.children:
            now = self.clock()
            if child.restart_at is None:
                status = child.status()
                if status is None:
                    if child.failures and (
                        now - child.started >= FAST_FAILURE_SECONDS or _progressed(child)
                    ):
                        child.failures = 0  # healthy again
                    continue
                self._failed(child, describe_exit(status), now)
            elif now >= child.restart_at:
                self._restart(child)
            if self.gave_up:
                return

    def _failed(self, child: Child, how: str, now: float) -> None:
        ran = now - child.started
        fast = ran < FAST_FAILURE_SECONDS and not _progressed(child)
        child.failures = child.failures + 1 if fast else 1
        if child.cleanup is not None:
            child.cleanup()
        if child.failures >= GIVE_UP_FAILURES:
            self.gave_up = (
                f"{child.name} failed {child.failures} times in a row, each within "
                f"{FAST_FAILURE_SECONDS:.0f} s of its start without progress (last: {how} "
                f"after {ran:.1f} s): giving up"
            )
            self.say(self.gave_up)
            return
        delay = self.backoff.delay(child.failures)
        child.restart_at = now + delay
        what = f"fast failure {child.failures}" if fast else "after a healthy run: failure 1"
        self.say(
            f"{child.name} {how} after {ran:.1f} s; restarting in {delay:.1f} s "
            f"({what}; giving up at {GIVE_UP_FAILURES} fast ones in a row)"
        )

    def _restart(self, child: Child) -> None:
        child.restart_at = None
        child.started = self.clock()
        try:
            child.start()
        except (OSError, RuntimeError) as exc:
            reason = " ".join(str(exc).split())
            if len(reason) > 300:  # a log's tail: its end says why
                reason = f"{reason[:80]} … {reason[-200:]}"
            self._failed(child, f"could not start ({reason})", self.clock())
            return
        child.restarts += 1
        if self.counter is not None:
            self.counter.inc(child.name)
        self.say(f"{child.name} restarted (restart {child.restarts})")

"""The uploader: one daemon thread that batches queued reports and delivers them.

Every outcome of an upload is classified in :func:`classify`: ``ok`` (2xx; a 503's
``retry`` positions aside, the rest is done), ``retry`` (no answer, 408, 429, 5xx but
501: kept, capped exponential backoff with full jitter, ``Retry-After`` honoured) or
``drop`` (any other status; a 413 halves the batch first). A report leaves the queue
(durable store included) only through ``ok`` or ``drop``. The thread starts on the first
report and the host app never sees its exceptions; a forked child gets a new uploader.
The outcomes, the answer's fields and the references: docs/protocol.md, section 1.
"""

from __future__ import annotations

import json
import logging
import random
import re
import threading
import time
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from datetime import UTC
from typing import Any, Literal

from client_sdk.mechanisms import default_rng
from client_sdk.options import ClientOptions
from client_sdk.queue import Entry, ReportQueue
from client_sdk.transport import Response, Transport

__all__ = [
    "COUNTERS",
    "DROP_REASONS",
    "FAILURES_PER_RUN",
    "REPORTS_PATH",
    "RETRY_AFTER_CAP",
    "RETRY_BASE",
    "RETRY_CAP",
    "Outcome",
    "Stats",
    "Uploader",
    "backoff_delay",
    "classify",
    "parse_retry_after",
]

logger = logging.getLogger("client_sdk")

REPORTS_PATH = "/v1/reports"

RETRY_BASE = 1.0
"""Ceiling of the first backoff, in seconds (Janus: 1 s)."""

RETRY_CAP = 30.0
"""Largest backoff ceiling, and the pause after a run of failures (Janus: 30 s)."""

RETRY_FACTOR = 2.0
"""Growth of the backoff ceiling per failure."""

FAILURES_PER_RUN = 3
"""Recoverable failures in a row before the uploader pauses for :data:`RETRY_CAP` (Glean
allows three recoverable failures per upload window)."""

RETRY_AFTER_CAP = 600.0
"""Longest ``Retry-After`` obeyed: a misconfigured header must not silence an app for its
whole session; 10 minutes is when Janus stops retrying an upload."""

LEASED_POLL = 1.0
"""Seconds between looks at a queue whose reports are all being sent by another process
(a durable store shared by several processes)."""

_MAX_EXPONENT = 16
"""The ceiling reaches :data:`RETRY_CAP` long before 2¹⁶; bounding it avoids overflow."""

Outcome = Literal["ok", "retry", "drop"]

DROP_REASONS: dict[str, str] = {
    "unknown_metric": "the collector has no such metric (a bug in the app)",
    "invalid_value": "the value is not one of the metric's (a bug in the app)",
    "invalid_dimensions": "missing, unknown or undeclared dimension values (a bug in the app)",
    "unreachable": (
        "the metric's definition could not be fetched (the collector is unreachable) and "
        "none is kept or shipped (definitions=)"
    ),
    "queue_full": "the queue reached max_queue or max_queue_bytes: the oldest reports went",
    "rejected": "the collector refused them as invalid",
    "too_large": "a single report was larger than the collector takes",
    "shutdown": "the client was shut down",
    "internal_error": "a bug in the SDK",
    "budget": "the metric's privacy budget for this period is spent",
    "device_budget": "the device-wide cap on the total ε of a day or a lifetime would be passed",
    "disabled": "the user opted out (disable())",
    "storage_error": "the durable store (storage_dir) failed or stayed busy",
    "retired": "an operator retired the metric",
    "bundle_mismatch": (
        "made with a definition the app ships that the collector does not have under that "
        "version with the same parameters (never sent: it would be misread)"
    ),
    "budget_not_shared_after_fork": (
        "this process is a fork of the one that made the client, whose privacy ledger is "
        "in memory (no storage_dir): it cannot share that budget, so it reports no metric "
        "with a budget (give the client a storage_dir)"
    ),
}
"""Why a report was dropped (``client.stats()["dropped"]`` counts each), and what that
means: the first drop of each reason is logged at WARNING with its meaning
(:class:`Stats`). ``device_budget`` is ``client_sdk.device``'s; ``retired`` counts
reports made after the retirement and those still queued; ``disabled`` also counts the
reports an opt-out wiped."""

COUNTERS = ("reported", "sent", "accepted", "duplicates", "batches", "retries")
"""reported: enqueued by ``report()``; sent: delivered in a 2xx (rejected ones excluded);
accepted / duplicates: as the collector counted them; batches: 2xx uploads; retries:
uploads that failed and will be retried."""


def classify(status: int | None, error: BaseException | None) -> Outcome:
    """Decide what an upload's outcome means for its batch: the one place that does.

    Args:
        status: the HTTP status, or None when no answer came.
        error: the exception raised instead of an answer, if any.

    Returns:
        ``"ok"`` (2xx), ``"retry"`` (no answer, 408, 429, 5xx except 501) or ``"drop"``.
    """
    if error is not None or status is None:
        return "retry"
    if 200 <= status < 300:
        return "ok"
    if status in (408, 429) or (500 <= status < 600 and status != 501):
        return "retry"
    return "drop"


_SECONDS = re.compile(r"[0-9]+")


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delay-seconds or an HTTP date).

    Args:
        value: the header's value, or None.
        now: the current Unix time, to turn a date into a delay.

    Returns:
        A non-negative delay, or None when the header is absent or malformed.
    """
    if value is None:
        return None
    value = value.strip()
    if _SECONDS.fullmatch(value):
        return float(int(value))
    import email.utils  # an HTTP date is rare: not worth ~8 ms of every app's start

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - now)


def backoff_delay(
    failures: int, retry_after: float | None, rng: random.Random
) -> tuple[float, bool]:
    """The wait before the next attempt after ``failures`` recoverable failures in a row.

    Full jitter: uniform in [0, min(cap, base·2^(failures−1))]; every
    :data:`FAILURES_PER_RUN`-th failure pauses for :data:`RETRY_CAP` instead. A
    ``Retry-After`` (at most :data:`RETRY_AFTER_CAP`) is a lower bound.

    Returns:
        (delay in seconds, whether this is a pause of at least :data:`RETRY_CAP`).
    """
    if failures % FAILURES_PER_RUN == 0:
        delay = RETRY_CAP
    else:
        exponent = min(failures - 1, _MAX_EXPONENT)
        delay = rng.random() * min(RETRY_CAP, RETRY_BASE * RETRY_FACTOR**exponent)
    if retry_after is not None:
        delay = max(delay, min(retry_after, RETRY_AFTER_CAP))
    return delay, delay >= RETRY_CAP


class Stats:
    """Thread-safe counters of what happened to reports.

    The first drop of each reason is logged at WARNING with what the reason means (see
    :data:`DROP_REASONS`), later ones at DEBUG: an app that configured no logging still
    sees it once, on stderr, through Python's last-resort handler.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(COUNTERS, 0)
        self._dropped = dict.fromkeys(DROP_REASONS, 0)
        self._warned: set[str] = set()
        self._last_error: str | None = None

    def add(self, name: str, n: int = 1) -> None:
        """Add ``n`` to a counter of :data:`COUNTERS`."""
        with self._lock:
            self._counts[name] += n

    def drop(self, reason: str, n: int = 1, detail: str = "", *, warn: bool = True) -> None:
        """Count ``n`` reports dropped for ``reason`` (one of :data:`DROP_REASONS`).

        Args:
            reason: why.
            n: how many (0 counts nothing and says nothing).
            detail: what happened, for the log line (a metric name, an error; never a
                value).
            warn: whether to log it (:meth:`tell`); False when the caller logs it in its
                own words.
        """
        if n <= 0:
            return
        with self._lock:
            self._dropped[reason] += n
        if warn:
            self.tell(reason, n, detail)

    def tell(self, reason: str, n: int, detail: str = "") -> None:
        """Log ``n`` reports dropped for ``reason``: the reason's first time at WARNING,
        with what it means, later ones at DEBUG."""
        with self._lock:
            first = reason not in self._warned
            self._warned.add(reason)
        if first:
            logger.warning(
                "ldp-telemetry: %d report(s) dropped (%s): %s%s. Said once per reason; "
                "client.stats()['dropped'] counts every drop.",
                n,
                reason,
                DROP_REASONS[reason],
                f" [{detail}]" if detail else "",
            )
        else:
            logger.debug("%d report(s) dropped (%s)%s", n, reason, f": {detail}" if detail else "")

    def warned(self, reason: str) -> None:
        """Record that ``reason`` was warned about in a caller's own words: its drops log
        at DEBUG from now on."""
        with self._lock:
            self._warned.add(reason)

    @property
    def dropped(self) -> int:
        """Reports dropped so far, for any reason (the queue's evictions are not here)."""
        with self._lock:
            return sum(self._dropped.values())

    def error(self, what: str) -> None:
        """Remember the last error: an exception class name or ``HTTP <status>``."""
        self._last_error = what

    def snapshot(self) -> dict[str, Any]:
        """The counters, the drops by reason and the last error."""
        with self._lock:
            return {**self._counts, "dropped": dict(self._dropped), "last_error": self._last_error}


class Uploader:
    """Sends queued reports in batches from a lazily started daemon thread.

    Args:
        queue: where the reports wait.
        transport: how they are sent.
        stats: where outcomes are counted.
        options: the client's options; the uploader reads ``flush_at``,
            ``flush_interval``, ``max_batch_reports``, ``max_batch_bytes``, ``sleep`` (each
            backoff delay; None: an interruptible wait), ``clock`` (the flush interval)
            and ``wallclock`` (``Retry-After`` dates).
        on_rejected: called with the names of metrics the collector rejected reports of
            (so their definitions are fetched again).
        on_retired: called with the names of metrics the collector says are retired,
            after the batch is acked (so the client stops reporting them and drops what
            it still queues of them).
        vet: called with each batch before it is sent; returns the entries to send
            (their data possibly rewritten) and those to drop as ``bundle_mismatch``, or
            raises when it cannot decide now (the batch is retried like a failed upload).
            None sends every batch as queued.
    """

    def __init__(
        self,
        queue: ReportQueue,
        transport: Transport,
        stats: Stats,
        options: ClientOptions,
        *,
        on_rejected: Callable[[set[str]], None],
        on_retired: Callable[[set[str]], None] = lambda names: None,
        vet: Callable[[list[Entry]], tuple[list[Entry], list[Entry]]] | None = None,
    ) -> None:
        self._queue = queue
        self._transport = transport
        self._stats = stats
        self._options = options
        self._flush_at = options.flush_at
        self._flush_interval = options.flush_interval
        self._batch_limit = options.max_batch_reports
        self._body_limit = options.max_batch_bytes - len(b'{"reports":[]}')
        self._on_rejected = on_rejected
        self._on_retired = on_retired
        self._vet = vet
        self._rng = default_rng()  # jitter needs no secrecy, but this generator is at hand
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._flush_requested = False
        self._pending_since: float | None = None
        self._failures = 0
        self._pauses = 0  # pauses begun so far
        self._paused = False  # waiting out a pause now

    # -- called from app threads ------------------------------------------------------
    def notify(self, queued: int) -> None:
        """Tell the uploader a report was queued (``queued`` = the queue's new length)."""
        if self._thread is None:
            self.ensure_started()
        if queued == 1 or queued >= self._flush_at:
            with self._cond:
                self._cond.notify_all()
        if queued >= self._flush_at:
            # A burst beyond flush_at: hand the GIL to the upload thread at once, instead
            # of after the interpreter's 5 ms switch interval, so a tight loop of reports
            # shares the process with the uploads rather than overflowing the queue.
            time.sleep(0)

    def ensure_started(self) -> None:
        """Start the thread unless it runs or the uploader was stopped."""
        if self._thread is not None:
            return
        with self._cond:
            if self._thread is None and not self._stopping:
                thread = threading.Thread(
                    target=self._run, name="ldp-telemetry-upload", daemon=True
                )
                thread.start()
                self._thread = thread

    @property
    def alive(self) -> bool:
        """Whether the thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def flush(self, timeout: float | None = None) -> bool:
        """Ask for everything queued to be sent now and wait for an empty queue.

        Args:
            timeout: seconds to wait at most; None waits until the queue is empty or the
                uploader pauses after a run of failures.

        Returns:
            Whether the queue is empty.
        """
        if not len(self._queue):
            return True
        self.ensure_started()
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        with self._cond:
            self._flush_requested = True
            pauses = self._pauses
            self._cond.notify_all()
            while len(self._queue):
                if not self.alive:
                    return False
                if timeout is None and (self._paused or self._pauses != pauses):
                    return False
                wait = 0.1  # re-check liveness now and then
                if deadline is not None:
                    wait = min(wait, deadline - time.monotonic())
                    if wait <= 0:
                        return False
                self._cond.wait(wait)
            return True

    def stop(self, timeout: float | None = None) -> None:
        """Stop the thread (after its current request) and wait for it at most ``timeout``."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    # -- the thread -------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._wait_until_due():
                    return
            try:
                self._drain()
            except Exception as exc:  # a bug must not kill uploads, nor reach the app
                logger.error("upload worker error (%s); pausing", type(exc).__name__)
                self._stats.error(type(exc).__name__)
                self._wait(RETRY_CAP)

    def _wait_until_due(self) -> bool:
        """With the condition held: wait until a batch is due; False when stopping."""
        while not self._stopping:
            queued = len(self._queue)
            if not queued:
                self._pending_since = None
                self._flush_requested = False
                self._cond.notify_all()
                self._cond.wait()
                continue
            now = self._options.clock()
            if self._pending_since is None:
                self._pending_since = now
            if queued >= self._flush_at or self._flush_requested:
                return True
            remaining = self._pending_since + self._flush_interval - now
            if remaining <= 0:
                return True
            self._cond.wait(remaining)
        return False

    def _drain(self) -> None:
        while not self._stopping:
            entries = self._queue.peek(self._batch_limit, self._body_limit)
            if not entries:
                if len(self._queue):  # leased by another process: look again later
                    with self._cond:
                        self._cond.wait_for(lambda: self._stopping, timeout=LEASED_POLL)
                return
            delay = self._attempt(entries)
            with self._cond:
                self._pending_since = None
                self._cond.notify_all()
            if delay is not None:
                self._wait(delay)
                with self._cond:
                    self._paused = False

    def _wait(self, delay: float) -> None:
        if self._options.sleep is not None:
            self._options.sleep(delay)
            return
        with self._cond:
            self._cond.wait_for(lambda: self._stopping, timeout=delay)

    def _attempt(self, entries: list[Entry]) -> float | None:
        """Send one batch and act on the outcome; return the delay before the next try."""
        response: Response | None = None
        error: Exception | None = None
        if self._vet is not None:
            try:
                entries = self._vetted(entries)
            except Exception as exc:  # e.g. the collector could not be asked
                return self._failed(entries, None, exc)
            if not entries:
                return None
        body = b'{"reports":[' + b",".join(e.data for e in entries) + b"]}"
        try:
            response = self._transport.post(REPORTS_PATH, body)
        except Exception as exc:
            error = exc
        outcome = classify(None if response is None else response.status, error)
        if outcome == "retry":
            return self._failed(self._partly_stored(entries, response), response, error)
        assert response is not None
        self._failures = 0
        if outcome == "ok":
            self._delivered(entries, response)
        else:
            self._dropped(entries, response)
        return None

    def _partly_stored(self, entries: list[Entry], response: Response | None) -> list[Entry]:
        """The entries of a batch to retry: all, unless the answer says storage took the
        rest (those leave the queue, and with progress made the backoff starts over;
        Retry-After still holds)."""
        later = _later(response, len(entries))
        if response is None or later is None or len(later) >= len(entries):
            return entries
        self._delivered(entries, response, later)
        self._failures = 0
        return [entries[i] for i in sorted(later)]

    def _vetted(self, entries: list[Entry]) -> list[Entry]:
        """The entries ``vet`` lets through; the ones it refuses are counted and acked."""
        assert self._vet is not None
        entries, refused = self._vet(entries)
        if refused:
            self._stats.drop("bundle_mismatch", len(refused), warn=False)  # _vet warned
            self._queue.ack(e.key for e in refused)
        return entries

    def _dropped(self, entries: list[Entry], response: Response) -> None:
        """A batch the collector refused for good: a 413 halves the batches (the reports
        stay queued, unless the batch was one report); otherwise its reports are dropped,
        but those of a retired metric, which are retired."""
        status = response.status
        self._stats.error(f"HTTP {status}")
        if status == 413 and len(entries) > 1:
            self._batch_limit = max(1, len(entries) // 2)
            logger.info(
                "collector refused a batch as too large; batches of %d now", len(entries) // 2
            )
            return
        retired = _retired(response.json())
        gone = [e for e in entries if _metric(e) in retired]
        reason = "too_large" if status == 413 else "rejected"
        detail = f"HTTP {status} for a batch of {len(entries)}"
        self._stats.drop(reason, len(entries) - len(gone), detail)
        if status != 413:
            self._on_rejected(_metrics(e for e in entries if _metric(e) not in retired))
        self._queue.ack(e.key for e in entries)
        self._retire(retired, len(gone))

    def _failed(
        self, entries: list[Entry], response: Response | None, error: Exception | None
    ) -> float:
        """Count a recoverable failure; return the backoff before the next try."""
        status = None if response is None else response.status
        what = type(error).__name__ if error is not None else f"HTTP {status}"
        self._failures += 1
        self._stats.add("retries")
        self._stats.error(what)
        retry_after = None
        if response is not None:
            retry_after = parse_retry_after(
                response.headers.get("retry-after"), self._options.wallclock()
            )
        delay, paused = backoff_delay(self._failures, retry_after, self._rng)
        if paused:
            with self._cond:
                self._pauses += 1
                self._paused = True
                self._cond.notify_all()
        logger.info(
            "upload of %d reports failed (%s); retry in %.1f s",
            len(entries),
            what,
            delay,
        )
        return delay

    def _delivered(
        self, entries: list[Entry], response: Response, later: AbstractSet[int] = frozenset()
    ) -> None:
        """A batch the collector answered: every report leaves the queue (those it
        rejected dropped) but the positions of ``later``, which it did not store now."""
        answer = response.json()
        if not isinstance(answer, dict):
            answer = {}
        retired = _retired(answer)
        rejected = _rejected(answer, len(entries)) - later
        delivered = len(entries) - len(rejected) - len(later)
        if not later:
            self._stats.add("batches")
        self._stats.add("sent", delivered)
        self._stats.add("accepted", _count(answer, "accepted", delivered))
        self._stats.add("duplicates", _count(answer, "duplicates", 0))
        gone = {i for i in rejected if _metric(entries[i]) in retired}
        if rejected - gone:
            detail = f"{len(rejected - gone)} of a batch of {len(entries)}"
            self._stats.drop("rejected", len(rejected - gone), detail)
            self._on_rejected(_metrics(entries[i] for i in rejected - gone))
        self._queue.ack(e.key for i, e in enumerate(entries) if i not in later)
        self._retire(retired, len(gone))

    def _retire(self, retired: set[str], dropped: int) -> None:
        """Count a batch's reports of retired metrics and tell the client about them."""
        self._stats.drop("retired", dropped, warn=False)  # on_retired warns, naming them
        if retired:
            self._on_retired(retired)


def _count(answer: dict[str, Any], field: str, default: int) -> int:
    """The count the collector's answer gives in ``field``, ``default`` when it gives
    none (or not an integer)."""
    value = answer.get(field)
    return value if type(value) is int else default


def _rejected(answer: dict[str, Any], size: int, field: str = "rejected") -> set[int]:
    """The positions the collector's answer lists in ``field`` (``rejected``: refused
    for good; ``retry``: not stored now) in a batch of ``size`` reports (any ``index``
    that is not one of them is passed over)."""
    rejected: set[int] = set()
    items = answer.get(field)
    for item in items if isinstance(items, list) else ():
        index = item.get("index") if isinstance(item, dict) else None
        if type(index) is int and 0 <= index < size:
            rejected.add(index)
    return rejected


def _later(response: Response | None, size: int) -> set[int] | None:
    """The positions a 503 asks to send again when it says storage took the others
    (its ``retry`` list); None when it does not: the whole batch is to be sent again."""
    if response is None or response.status != 503:
        return None
    answer = response.json()
    if not isinstance(answer, dict) or not isinstance(answer.get("retry"), list):
        return None
    return _rejected(answer, size, "retry") or None


def _metric(entry: Entry) -> str | None:
    try:
        name = json.loads(entry.data).get("metric")
    except (ValueError, AttributeError):
        return None
    return name if isinstance(name, str) else None


def _metrics(entries: Iterable[Entry]) -> set[str]:
    return {name for name in map(_metric, entries) if name is not None}


def _retired(answer: object) -> set[str]:
    """The metric names of an answer's ``retired`` list (``[{"metric": ...}, ...]``)."""
    items = answer.get("retired") if isinstance(answer, dict) else None
    if not isinstance(items, list):
        return set()
    found = (item.get("metric") if isinstance(item, dict) else None for item in items)
    return {name for name in found if isinstance(name, str)}

"""The SDK's facade: fetch definitions, perturb on the spot, enqueue — never raise at runtime.

>>> client = Client("http://127.0.0.1:8000")          # doctest: +SKIP
>>> client.report("app.theme", "dark")                 # doctest: +SKIP
True

``report()`` perturbs the value with the metric's mechanism before anything else happens:
only the perturbed report is queued, retried and sent; the true value never reaches the
queue, a log line or the network. It returns False instead of raising, and counts why
(``stats()["dropped"]``). Only configuration errors raise, at construction.

Uploads happen on a daemon thread started by the first report (``uploader.py``). After
``os.fork()`` the child starts with an empty queue, fresh locks and its own uploader; the
parent keeps delivering what it queued. A ``storage_dir`` is quiesced around a fork (no
SQLite state crosses it): the child uses it like a fresh process. Without one the child
reports no metric with a budget (``budget_not_shared_after_fork``): the ledger it would
charge is a copy of the parent's, and the budget cannot be spent twice.

With ``storage_dir`` every report is committed to a SQLite store (``store/``) before
``report()`` returns True, and reports made offline or before a crash are delivered after
the app restarts; the privacy ledger (``ledger.py``) and the opt-out live there too, and
survive restarts. Without it, the queue and the ledger are this process's memory.
"""

from __future__ import annotations

import atexit
import copy
import json
import logging
import math
import numbers
import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any, NoReturn, Unpack

from client_sdk import wire
from client_sdk.bundle import load_bundle
from client_sdk.device import DeviceCaps
from client_sdk.errors import (
    BudgetExhaustedError,
    BudgetNotSharedError,
    DefinitionError,
    DeviceBudgetExhaustedError,
    MetricsUnavailableError,
    QueueFullError,
    ReportingDisabledError,
    ReportRefused,
    StoreError,
    UnknownMetricError,
)
from client_sdk.ledger import (
    Charge,
    Charger,
    LedgerState,
    MemoryLedger,
    day_of,
    summarize,
    window_start,
)
from client_sdk.ohttp.transport import ObliviousTransport
from client_sdk.options import ClientOptions, ClientSettings
from client_sdk.queue import (
    Entry,
    MemoryQueue,
    ReportQueue,
)
from client_sdk.transport import HTTPTransport, Response, Transport
from client_sdk.uploader import (
    RETRY_AFTER_CAP,
    RETRY_BASE,
    RETRY_CAP,
    Stats,
    Uploader,
    classify,
    parse_retry_after,
)

if TYPE_CHECKING:
    from client_sdk.store import Store

__all__ = [
    "ATEXIT_TIMEOUT",
    "METRICS_PATH",
    "UNKNOWN_METRIC_TTL",
    "Client",
]

logger = logging.getLogger("client_sdk")
# No NullHandler: an app that configured no logging sees the SDK's warnings (each kind of
# dropped report once) on stderr, through Python's last-resort handler.

METRICS_PATH = "/v1/metrics/"

_ENCODER = json.JSONEncoder(separators=(",", ":"))
"""Compact JSON, built once: ``json.dumps`` with options builds an encoder per call."""

MAX_WARNED = 1000
"""(metric, reason) pairs a client warns about at most: an app that reports under ever new
unknown names must not grow memory without bound (later ones log at DEBUG)."""

UNKNOWN_METRIC_TTL = 60.0
"""Seconds an unknown metric stays unknown (at most ``metrics_ttl``): an app that reports
a metric before the operator creates it starts delivering within a minute, without a
request per ``report()`` meanwhile."""

ATEXIT_TIMEOUT = 2.0
"""Seconds a normal interpreter exit waits to deliver what is queued (sentry-python's
default): long enough for one upload, short enough not to hold an app's exit hostage."""


_QUEUE_REFUSALS: tuple[tuple[type[Exception], str, str], ...] = (
    (DeviceBudgetExhaustedError, "device_budget", "metric"),
    (BudgetNotSharedError, "budget_not_shared_after_fork", "metric"),
    (BudgetExhaustedError, "budget", "metric"),
    (ReportingDisabledError, "disabled", ""),
    (QueueFullError, "queue_full", "error"),
    (StoreError, "storage_error", "error"),
)
"""Why queueing a report refused it, first match first: the error, the drop's reason and
what its detail names (the metric, the error's message, or nothing)."""


@dataclass(frozen=True)
class _Cached:
    definition: wire.MetricDefinition | None  # None: the collector does not know the metric
    expires: float
    problem: str = ""  # why the definition is None


_live: weakref.WeakSet[Client] = weakref.WeakSet()


class Client:
    """Report metrics under local differential privacy to an ldp-telemetry collector.

    Args:
        url: the collector, ``http://host:port`` (with an optional path prefix).
        **settings: any setting of :class:`~client_sdk.options.ClientOptions` by name
            (``flush_at``, ``storage_dir``, ``definitions``, ``session``,
            ``device_budget``, …): that class declares each one, its default and its
            valid range; :class:`~client_sdk.options.ClientSettings` types them for
            mypy, so a misspelt setting fails there first.

    Raises:
        ValueError: an invalid URL or setting, the message giving the valid range (the
            only errors this class raises outside the explicit :meth:`definition` and
            :meth:`build_report`).
        TypeError: a setting :class:`~client_sdk.options.ClientOptions` does not have.
    """

    def __init__(self, url: str, **settings: Unpack[ClientSettings]) -> None:
        options = ClientOptions.from_settings(settings)
        self.url = url
        self._options = options
        self._transport: Transport = (
            options.transport
            if options.transport is not None
            else HTTPTransport(url, options.timeout, options.session, options.ingest_key)
            if options.relay is None
            else ObliviousTransport(
                url,
                options.relay,
                options.timeout,
                options.session,
                clock=options.clock,
                pinned=options.relay_keys,
                ingest_key=options.ingest_key,
            )
        )
        if isinstance(self._transport, ObliviousTransport):
            self._transport.prepare()  # its keys now, not just before a sealed upload
        self._bundle: dict[str, wire.MetricDefinition] = (
            {} if options.definitions is None else load_bundle(options.definitions)
        )
        """Definitions the app ships: used while a metric's was never fetched."""
        self._checked: dict[tuple[str, int], bool] = {}
        """(metric, version) of bundled reports → whether the collector has that version
        with the bundled parameters (asked once per process, by the uploader)."""
        self._durable: Store | None = None
        self._memory_ledger: MemoryLedger | None = None
        self._ledger: LedgerState
        if options.storage_dir is not None:
            from client_sdk.store import Store  # sqlite3 only for apps that use it

            self._durable = Store(
                options.storage_dir, options.max_queue, options.max_queue_bytes, options.wallclock
            )
            self._queue: ReportQueue = self._durable
            self._ledger = self._durable
        else:
            self._queue = (
                options.queue
                if options.queue is not None
                else MemoryQueue(options.max_queue, options.max_queue_bytes)
            )
            self._ledger = self._memory_ledger = MemoryLedger()
        self._charger = Charger()
        self._app_device_budget: DeviceCaps | None = options.device_budget  # type: ignore[assignment]
        self._charger.device = self._app_device_budget
        self._floor: float | None = None  # see _charge_time; read from the ledger lazily
        self._opted_out = False  # disable() was called but could not be persisted
        # Read on every report(): one attribute lookup each, not two.
        self._wallclock = options.wallclock
        self._clock = options.clock
        self._rng = options.rng
        self._ttl = options.metrics_ttl
        self._cache: dict[str, _Cached] = {}
        self._retired: dict[str, float] = {}
        """Metrics the collector retired → when this client learnt it (``clock``; −∞: from
        the store). report() drops them; a definition fetched after that instant without
        ``retired_at`` means an operator un-retired the metric (persisted with a store)."""
        if self._durable is not None:
            try:
                self._retired = dict.fromkeys(self._durable.retired_metrics(), -math.inf)
            except StoreError:
                pass  # learnt again from the collector's next answer
        self._fetch_lock = threading.Lock()
        self._warned: set[tuple[str, str]] = set()  # (metric, why) warned about: _misuse
        self._warn_lock = threading.Lock()
        self._fetch_failures = 0
        self._unreachable_until = float("-inf")
        self._closed = False
        self._privacy_at_shutdown: dict[str, Any] | None = None
        """What :meth:`privacy` answers once the client is shut down (see there)."""
        self._stats = Stats()
        self._evicted_seen = 0  # the queue's evictions already warned about
        self._drops_at_flush = 0  # drops (and evictions) when flush() last returned
        self._uploader = self._new_uploader()
        _live.add(self)
        if self._durable is not None:  # deliver what an earlier run left, even if the
            self._uploader.ensure_started()  # app reports nothing now (the thread opens it)

    def _charge_time(self) -> float:
        """The time a report is charged at: the wall clock, never earlier than a charge
        already made (this process's, or the latest day in the ledger).

        A device clock set back (by hand, or a bad NTP step) must not reopen a budget
        period already spent: that would let an honest device send more reports than the
        server's reports-per-device bound (``Budget.max_reports``) assumes, and a
        memoized metric's intervals would be too narrow. A clock set forward only delays
        the next period. Until the ledger could be read, nothing is charged: the floor
        fails closed.

        Raises:
            StoreError: the ledger could not be read (the floor is asked for again next
                time).
        """
        now = self._wallclock()
        floor = self._floor
        if floor is None:
            floor = self._floor = self._latest_charged()
        if now < floor:
            return floor
        self._floor = now
        return now

    def _latest_charged(self) -> float:
        """The start (Unix seconds) of the latest day the ledger holds a charge on.

        Raises:
            StoreError: the ledger could not be read.
        """
        rows, _ = self._ledger.ledger("")
        if not rows:
            return float("-inf")
        latest = date.fromisoformat(max(row[1] for row in rows))
        return datetime(latest.year, latest.month, latest.day, tzinfo=UTC).timestamp()

    def _new_uploader(self) -> Uploader:
        return Uploader(
            self._queue,
            self._transport,
            self._stats,
            self._options,
            on_rejected=self._invalidate,
            on_retired=self._retire,
            vet=self._vet if self._bundle else None,
        )

    # -- definitions ------------------------------------------------------------------
    def definition(self, metric: str) -> wire.MetricDefinition:
        """The current definition of ``metric``, fetched from the collector and cached.

        Fetched with ``GET /v1/metrics/<name>`` on first use, again after ``metrics_ttl``
        seconds or after the collector rejected a report of it (e.g. for an unknown
        version). While the collector is unreachable a stale definition is still used.

        Args:
            metric: the metric's name.

        Returns:
            The definition reports of ``metric`` are made with.

        Raises:
            UnknownMetricError: the collector does not know the metric (a ValueError).
            MetricsUnavailableError: it could not be asked (a ConnectionError).
        """
        if not isinstance(metric, str):
            raise UnknownMetricError(f"a metric name is a string, not {type(metric).__name__}")
        fresh = self._fresh(metric)
        return fresh if fresh is not None else self._fetch(metric)

    def _fresh(self, metric: str, now: float | None = None) -> wire.MetricDefinition | None:
        """The cached definition while it is fresh (None: none is); a fresh "no such
        metric" raises ``UnknownMetricError``. ``now``: the clock's, read if not given."""
        cached = self._cache.get(metric)
        if cached is None or (self._clock() if now is None else now) >= cached.expires:
            return None
        if cached.definition is None:
            raise UnknownMetricError(cached.problem)
        return cached.definition

    def _fetch(self, metric: str) -> wire.MetricDefinition:
        with self._fetch_lock:  # one fetch at a time: a cold start asks once per metric
            now = self._clock()
            fresh = self._fresh(metric, now)  # another thread just fetched it
            if fresh is not None:
                return fresh
            try:
                wire.check_name(metric)
            except ValueError as exc:
                raise UnknownMetricError(str(exc)) from None
            stale = self._stale(metric, now)
            if now < self._unreachable_until:
                if stale is not None:
                    return stale
                raise MetricsUnavailableError("the collector was unreachable a moment ago")
            try:
                response = self._transport.get(METRICS_PATH + metric)
            except Exception as exc:
                return self._unreachable(now, stale, type(exc).__name__, None)
            return self._answered(metric, response, now, stale)

    def _stale(self, metric: str, now: float) -> wire.MetricDefinition | None:
        """What to use if the collector does not answer: the cached definition, else the
        saved one, else the bundle's (cached stale at once, so it is fetched first)."""
        cached = self._cache.get(metric)
        stale = cached.definition if cached is not None else self._saved(metric, now)
        if cached is None and stale is None and metric in self._bundle:
            stale = self._bundle[metric]  # never fetched: the app's own, until it is
            self._cache[metric] = _Cached(stale, now)  # stale at once: fetched first
        return stale

    def _answered(
        self, metric: str, response: Response, now: float, stale: wire.MetricDefinition | None
    ) -> wire.MetricDefinition:
        """The definition the collector's answer gives, or what its refusal leaves."""
        status = response.status
        if 200 <= status < 300:
            return self._store(metric, response.json(), now)
        if status in (401, 403):  # the ingest key: missing, revoked, or not one
            self._unknown(metric, now, f"the collector refused the ingest key (HTTP {status})")
        if classify(status, None) == "drop":  # 404 and any other final answer
            self._unknown(metric, now, f"the collector has no metric {metric!r} (HTTP {status})")
        retry_after = parse_retry_after(response.headers.get("retry-after"), time.time())
        return self._unreachable(now, stale, f"HTTP {status}", retry_after)

    def _store(self, metric: str, data: Any, now: float) -> wire.MetricDefinition:
        try:
            if not isinstance(data, dict):
                raise DefinitionError(["the answer is not a JSON object"])
            definition = wire.MetricDefinition.from_dict(data)
            if definition.name != metric:
                raise DefinitionError([f"the answer defines {definition.name!r}"])
            self._learn_device_budget(data)
            if data.get("retired_at"):  # an operator retired it: stop before spending ε
                if metric not in self._retired:
                    self._retire({metric})
            elif self._retired.get(metric, math.inf) < now:  # asked after it was learnt
                self._unretire(metric)
        except DefinitionError as exc:
            logger.warning("definition of metric %r not usable by this SDK: %s", metric, exc)
            self._unknown(metric, now, f"unusable definition of {metric!r}: {exc}")
        self._fetch_failures = 0
        self._cache[metric] = _Cached(definition, now + self._ttl)
        if self._durable is not None:
            try:
                self._durable.save_definition(metric, json.dumps(data))
            except StoreError:
                pass  # only an offline start would miss it
        return definition

    def _learn_device_budget(self, data: Mapping[str, Any]) -> None:
        """Apply the collector's published device-wide caps (``device_budget`` beside a
        definition), the stricter of them and the app's (:mod:`client_sdk.device`).

        Raises:
            DefinitionError: caps that are not valid.
        """
        try:
            server = DeviceCaps.parse(data.get("device_budget"))
        except ValueError as exc:
            raise DefinitionError([str(exc)]) from None
        app = self._app_device_budget
        self._charger.device = server if app is None else app.stricter(server)

    def _saved(self, metric: str, now: float) -> wire.MetricDefinition | None:
        """The definition an earlier run kept in the store (so an offline start reports)."""
        if self._durable is None:
            return None
        try:
            text = self._durable.load_definition(metric)
            definition = None if text is None else wire.MetricDefinition.from_dict(json.loads(text))
        except (StoreError, ValueError):
            return None
        if definition is not None and definition.name == metric:
            self._cache[metric] = _Cached(definition, now)  # stale at once: fetched first
            try:  # the device-wide caps it was published with hold offline too
                self._learn_device_budget(json.loads(text))  # type: ignore[arg-type]
            except DefinitionError:
                pass
            return definition
        return None

    def _unknown(self, metric: str, now: float, problem: str) -> NoReturn:
        """Remember for a while that ``metric`` cannot be reported, and raise."""
        self._fetch_failures = 0  # the collector answered
        expires = now + min(self._ttl, UNKNOWN_METRIC_TTL)
        self._cache[metric] = _Cached(None, expires, problem)
        raise UnknownMetricError(problem)

    def _unreachable(
        self, now: float, stale: wire.MetricDefinition | None, what: str, retry_after: float | None
    ) -> wire.MetricDefinition:
        """Back off definition fetches; serve a stale definition if there is one."""
        self._fetch_failures += 1
        delay = min(RETRY_CAP, RETRY_BASE * 2.0 ** min(self._fetch_failures - 1, 16))
        if retry_after is not None:
            delay = max(delay, min(retry_after, RETRY_AFTER_CAP))
        self._unreachable_until = now + delay
        self._stats.error(what)
        logger.info("could not fetch a metric definition (%s); next try in %.0f s", what, delay)
        if stale is not None:
            return stale
        raise MetricsUnavailableError(f"could not fetch the metric definition ({what})")

    def _invalidate(self, metrics: set[str]) -> None:
        """Forget definitions the collector rejected reports of (e.g. an unknown version)."""
        for metric in metrics:
            self._cache.pop(metric, None)

    def _retire(self, metrics: set[str]) -> None:
        """The collector retired ``metrics``: stop reporting them, drop their queued
        reports (counted as ``retired``), and remember it across restarts."""
        new = sorted(metrics - set(self._retired))
        if new:
            logger.warning(
                "ldp-telemetry: the collector says an operator retired %s: its reports are "
                "dropped from now on (counted as 'retired')",
                ", ".join(map(repr, new)),
            )
            self._stats.warned("retired")
        learnt = self._clock()
        self._retired.update(dict.fromkeys(metrics, learnt))
        for metric in metrics:
            dropped = 0
            if self._durable is not None:
                try:
                    dropped = self._durable.retire_metric(metric)
                except StoreError as exc:
                    logger.warning("retirement of %r not persisted (%s)", metric, exc)
            else:
                discard = getattr(self._queue, "discard", None)
                if discard is not None:
                    needle = _ENCODER.encode(metric).encode()
                    dropped = discard(lambda data, n=needle: _names_metric(data, n))
            self._stats.drop("retired", dropped, warn=False)  # warned about above

    def _unretire(self, metric: str) -> None:
        """The collector takes ``metric``'s reports again (an operator un-retired it): report
        it again, here and after a restart."""
        self._retired.pop(metric, None)
        logger.info("metric %r is no longer retired; reporting it again", metric)
        if self._durable is not None:
            try:
                self._durable.unretire_metric(metric)
            except StoreError as exc:  # this process reports it; a restart learns it again
                logger.warning("un-retirement of %r not persisted (%s)", metric, exc)

    def _vet(self, entries: list[Entry]) -> tuple[list[Entry], list[Entry]]:
        """Check reports made with a bundled definition before they are sent.

        ``report()`` queues them with the version negated (``-N``): the collector would
        refuse them as they are, so none can be decoded with another version's
        parameters. Here, once per (metric, version) and process, the collector is asked
        for that version (``GET /v1/metrics/<name>?version=N``): if it has it with the
        bundled parameters, the reports go out as version N; if it does not (no such
        metric or version, or other parameters: the app ships an outdated file), they
        are dropped as ``bundle_mismatch`` and a warning names the metric. A version the
        app's current bundle no longer has (an app update while reports waited) is sent
        if the collector knows it: ``ldp serve --metrics`` checked the file's versions.

        Returns:
            (the entries to send, the entries to drop).

        Raises:
            OSError: the collector could not be asked (the batch is retried later).
        """
        send: list[Entry] = []
        refused: list[Entry] = []
        for entry in entries:
            if b'"version":-' not in entry.data:
                send.append(entry)
                continue
            report = json.loads(entry.data)
            metric, version = report.get("metric"), -int(report.get("version"))
            ok = self._checked.get((metric, version))
            if ok is None:
                ok = self._checked[(metric, version)] = self._has_bundled(metric, version)
            if ok:
                data = entry.data.replace(b'"version":-%d' % version, b'"version":%d' % version, 1)
                send.append(Entry(entry.key, data))
            else:
                refused.append(entry)
        return send, refused

    def _has_bundled(self, metric: str, version: int) -> bool:
        """Whether the collector has ``version`` of ``metric`` with the bundled parameters."""
        response = self._transport.get(f"{METRICS_PATH}{metric}?version={version}")
        status = response.status
        server: wire.MetricDefinition | None = None
        if 200 <= status < 300:
            try:
                server = wire.MetricDefinition.from_dict(response.json())
            except (DefinitionError, TypeError, AttributeError):
                server = None
        elif classify(status, None) != "drop":
            raise OSError(f"HTTP {status} for the definition of {metric!r} v{version}")
        bundled = self._bundle.get(metric)
        if server is not None and (
            bundled is None or bundled.version != version or bundled.same_parameters(server)
        ):
            return True
        logger.warning(
            "reports of %r made with the app's bundled definition (version %d) dropped: "
            "the collector has %s; update the app's definitions file",
            metric,
            version,
            "other parameters under that version" if server is not None else "no such version",
        )
        return False

    # -- reporting --------------------------------------------------------------------
    def build_report(
        self, metric: str, value: object, dimensions: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """Perturb ``value`` and return the exact JSON object that would be sent.

        Nothing is queued or charged to the ledger.

        Args:
            metric: the metric's name.
            value: a label of its domain, or its index; for a numeric metric, a number;
                for a joint metric, ``{attribute: label}`` naming every attribute.
            dimensions: the metric's public dimensions, ``{name: value}`` for each it
                declares (sent in the clear: NOT protected by ε).

        Raises:
            ValueError: unknown metric (:class:`~client_sdk.errors.UnknownMetricError`) or value.
            MetricsUnavailableError: the definition could not be fetched.
            ReportingDisabledError: a longitudinal metric after an opt-out (no device secret).
            StoreError: a longitudinal metric whose device secret could not be read.
        """
        definition = self.definition(metric)
        secret = self._ledger.device_secret() if definition.longitudinal else None
        return wire.build_report(definition, value, self._rng, secret, dimensions)

    def report(
        self, metric: str, value: object, dimensions: Mapping[str, str] | None = None
    ) -> bool:
        """Perturb ``value`` now and queue the perturbed report for upload.

        Never raises. The value itself is neither kept nor logged. The first report of a
        metric fetches its definition (one request of at most ``timeout`` seconds, on the
        calling thread); later ones only perturb, serialize and enqueue — with a
        ``storage_dir``, in one SQLite commit together with the ledger charge. All the
        store calls of one report wait at most :data:`~client_sdk.store.BUSY_TIMEOUT`
        (one second) together for a store another process holds: then the report is
        dropped (``storage_error``) rather than block the app longer.

        Args:
            metric: the metric's name.
            value: a label of its domain, or its index; for a numeric metric, a number
                in its range; for a joint metric, ``{attribute: label}`` naming every
                attribute (the whole tuple is one report, charged ε once). A
                longitudinal (memoized) metric uses the device secret.
            dimensions: for a metric that declares public dimensions, ``{name: value}``
                for each (e.g. ``{"platform": "ios"}``), checked here against the
                declared values. They travel in the clear beside the perturbed value
                and are NOT protected by ε.

        Returns:
            True when the report was queued (and charged to the privacy ledger); False
            when it was dropped, counted in ``stats()["dropped"]`` by reason (the
            reasons and what each means: :data:`~client_sdk.uploader.DROP_REASONS`):
            ``unknown_metric``, ``invalid_value``, ``invalid_dimensions`` (nothing is
            charged), ``retired`` (the collector said an operator retired it; its
            definition is still fetched every ``metrics_ttl``, and one without
            ``retired_at`` means it was un-retired: reported again), ``unreachable``
            (no definition could be had), ``budget`` (the metric's budget for this period
            is spent), ``device_budget``, ``budget_not_shared_after_fork`` (a forked child
            of a client without ``storage_dir``, for a metric with a budget),
            ``disabled`` (the user opted out), ``storage_error`` (the store failed or
            stayed busy; also while the ledger's latest day cannot be read, so that a
            clock set back cannot reopen a spent budget), ``queue_full`` or ``shutdown``.
            The first drop of each reason is logged at WARNING with what it means
            (visible on stderr without any logging set up), later ones at DEBUG; an
            unknown metric or an invalid value (not in the domain, out of range, of the
            wrong type), a bug in the app, is logged at WARNING once per metric and
            reason, naming both (never the value).
        """
        durable = self._durable
        if durable is None:
            return self._report(metric, value, dimensions)
        previous = durable.limit_waits()  # one bound for all of this call's store waits
        try:
            return self._report(metric, value, dimensions)
        finally:
            durable.limit_waits(previous)

    def _report(self, metric: str, value: object, dimensions: Mapping[str, str] | None) -> bool:
        """:meth:`report`, within its limit on store waits."""
        try:
            if self._closed:
                return self._drop("shutdown")
            if self._opted_out or self._ledger.is_disabled():
                return self._drop("disabled")
            try:
                definition = self._usable(metric, dimensions)
                try:
                    when = self._charge_time()
                except StoreError as exc:
                    why = f"the ledger could not be read: {exc}"
                    raise ReportRefused("storage_error", why) from None
                charge = self._charger.charge(definition, when)
                data = self._built(metric, definition, value, dimensions)
                queued = self._queued(metric, data, charge)
            except ReportRefused as refused:
                if refused.misuse:
                    return self._misuse(metric, refused.reason, refused.detail)
                return self._drop(refused.reason, refused.detail)
            self._stats.add("reported")
            if self._queue.evicted != self._evicted_seen:
                self._evictions()
            self._uploader.notify(queued)
            return True
        except Exception as exc:  # a bug here must not break the app
            self._stats.error(type(exc).__name__)
            return self._drop("internal_error", type(exc).__name__)

    def _usable(self, metric: str, dimensions: Mapping[str, str] | None) -> wire.MetricDefinition:
        """The metric's definition, if it may be reported now with these dimensions.

        Raises:
            ReportRefused: an unknown or retired metric, one that cannot be fetched, or
                dimensions that are not the metric's.
        """
        try:  # a retired metric's definition too (cached): it says if it still is
            definition = self.definition(metric)
        except UnknownMetricError:
            raise ReportRefused("unknown_metric", "no such metric", misuse=True) from None
        except MetricsUnavailableError as exc:
            if metric in self._retired:
                raise ReportRefused("retired", f"metric {metric!r}") from None
            raise ReportRefused("unreachable", f"metric {metric!r}: {exc}") from None
        if metric in self._retired:  # learnt before, or the fetch just said so
            raise ReportRefused("retired", f"metric {metric!r}")
        try:
            definition.segment(dimensions)
        except ValueError:
            names = [name for name, _ in definition.dimensions]
            why = f"dimensions must give a declared value of each of {names}"
            raise ReportRefused("invalid_dimensions", why, misuse=True) from None
        return definition

    def _built(
        self,
        metric: str,
        definition: wire.MetricDefinition,
        value: object,
        dimensions: Mapping[str, str] | None,
    ) -> bytes:
        """The report of ``value``, perturbed, as the bytes the queue keeps.

        Raises:
            ReportRefused: a value the metric cannot take, reporting disabled, or the store
                (holding the device secret) failing.
        """
        try:
            secret = self._ledger.device_secret() if definition.longitudinal else None
            report = wire.build_report(definition, value, self._rng, secret, dimensions)
        except ValueError:
            why = _invalid_why(definition, value)
            raise ReportRefused("invalid_value", why, misuse=True) from None
        except ReportingDisabledError:
            raise ReportRefused("disabled") from None
        except StoreError as exc:
            raise ReportRefused("storage_error", str(exc)) from None
        if definition is self._bundle.get(metric):
            report["version"] = -definition.version  # unconfirmed: see _vet
        return _ENCODER.encode(report).encode()

    def _queued(self, metric: str, data: bytes, charge: Charge) -> int:
        """Queue the report, charging the ledger; the reports now queued.

        Raises:
            ReportRefused: a budget spent, reporting disabled, the queue full or the store
                failing (:data:`_QUEUE_REFUSALS`).
        """
        try:
            return self._enqueue(data, charge)
        except Exception as exc:
            for kind, reason, detail in _QUEUE_REFUSALS:
                if isinstance(exc, kind):
                    said = {"metric": f"metric {metric!r}", "error": str(exc)}.get(detail, "")
                    raise ReportRefused(reason, said) from None
            raise

    def _enqueue(self, data: bytes, charge: Charge) -> int:
        """Queue a report and charge the ledger, atomically (raises why it could not)."""
        if self._durable is not None:
            return self._durable.put(data, charge)
        assert self._memory_ledger is not None
        return self._memory_ledger.enqueue(self._queue, data, charge)

    def _drop(self, reason: str, detail: str = "") -> bool:
        """Count a dropped report (warned about once per reason: see :class:`Stats`)."""
        self._stats.drop(reason, 1, detail)
        return False

    def _evictions(self) -> None:
        """Warn (once) that the queue's quotas dropped the oldest reports; the queue counts
        them itself (``stats()`` adds them to ``queue_full``)."""
        evicted = self._queue.evicted
        new, self._evicted_seen = evicted - self._evicted_seen, evicted
        if new > 0:
            self._stats.tell("queue_full", new, "the oldest reports were evicted")

    def _misuse(self, metric: object, reason: str, why: str) -> bool:
        """Drop a report the app got wrong (unknown metric, bad value), with a WARNING
        naming the metric and why, once per (metric, why): never the value."""
        self._stats.drop(reason, warn=False)  # warned about below, in these words
        try:  # a string that is no metric name may be a value passed in its place
            key = (repr(wire.check_name(metric)), why)
        except ValueError:
            key = ("(not a valid metric name)", why)
        with self._warn_lock:
            first = key not in self._warned and len(self._warned) < MAX_WARNED
            if first:
                self._warned.add(key)
        logger.log(
            logging.WARNING if first else logging.DEBUG,
            "ldp-telemetry: report of metric %s dropped (%s): %s%s",
            key[0],
            reason,
            why,
            " (said once per metric and reason; the value is never logged)" if first else "",
        )
        return False

    # -- delivery and state -----------------------------------------------------------
    def flush(self, timeout: float | None = None) -> bool:
        """Send everything queued now and wait until it is delivered or dropped.

        Args:
            timeout: seconds to wait at most. None waits until the queue is empty or the
                uploads pause after a run of failures (the reports stay queued).

        Returns:
            Whether everything was delivered: True when the queue is empty and no report
            was dropped, for any reason (``stats()["dropped"]``: a ``report()`` that
            returned False, one the collector refused, one the queue's quota evicted),
            since the previous ``flush()`` returned (or since the client was made).
            False otherwise, e.g. with the collector unreachable; ``stats()`` says why.
            With a ``storage_dir`` shared by several processes the queue is theirs too.
        """
        try:
            empty = self._uploader.flush(timeout)
        except Exception as exc:
            logger.error("flush failed: %s", type(exc).__name__)
            empty = False
        dropped = self._stats.dropped + self._queue.evicted
        clean = dropped == self._drops_at_flush
        self._drops_at_flush = dropped
        return empty and clean

    def stats(self) -> dict[str, Any]:
        """What happened to reports so far.

        Returns:
            ``queued`` and ``queued_bytes`` (waiting now), ``reported`` (queued by
            :meth:`report`), ``sent`` (delivered), ``accepted`` and ``duplicates`` (as the
            collector counted them), ``batches``, ``retries`` (failed uploads retried),
            ``dropped`` (by reason: :data:`~client_sdk.uploader.DROP_REASONS`),
            ``last_error`` (an exception class or ``HTTP <status>``, never a message) and
            ``worker_alive`` (whether the upload thread runs).
        """
        snapshot = self._stats.snapshot()
        snapshot["dropped"]["queue_full"] += self._queue.evicted
        return {
            "queued": len(self._queue),
            "queued_bytes": self._queue.nbytes,
            **snapshot,
            "worker_alive": self._uploader.alive,
        }

    # -- privacy --------------------------------------------------------------------------
    def privacy(self) -> dict[str, Any]:
        """The privacy ledger: ε spent per metric today, this period and over the lifetime.

        Never raises. Each number comes with the guarantee it stands for (sequential
        composition: m reports at ε each are together (m·ε)-LDP); reports still queued
        count as spent. See :func:`client_sdk.ledger.summarize` for the structure.

        After :meth:`shutdown` it returns the same structure, as the ledger stood when
        the client shut down (it spends nothing after; a ``storage_dir`` is closed then
        and never reopened: the app may remove it).

        Returns:
            ``enabled``, ``ledger``, ``accounting``, ``days``, ``today``, ``metrics``
            (per metric: ``epsilon_per_report``, ``bounds``, ``budget`` with
            ``remaining_reports``, and ``today``/``period``/``lifetime``, each with
            ``reports``, ``epsilon``, ``since`` and ``guarantee``) and ``total``; instead
            only ``enabled`` and ``error`` when the store could not be read.
        """
        if self._privacy_at_shutdown is not None:
            summary = copy.deepcopy(self._privacy_at_shutdown)  # the caller may change it
            # an opt-out after shutdown still shows (is_disabled never raises)
            summary["enabled"] = not self._opted_out and not self._ledger.is_disabled()
            return summary
        return self._privacy()

    def _privacy(self) -> dict[str, Any]:
        """:meth:`privacy` read from the ledger now (its store calls wait at most
        :data:`~client_sdk.store.BUSY_TIMEOUT` together, as :meth:`report`'s)."""
        durable = self._durable
        if durable is None:
            return self._read_privacy()
        previous = durable.limit_waits()
        try:
            return self._read_privacy()
        finally:
            durable.limit_waits(previous)

    def _read_privacy(self) -> dict[str, Any]:
        enabled = not self._opted_out
        try:
            enabled = enabled and not self._ledger.is_disabled()
            today = day_of(max(self._wallclock(), self._floor or 0.0))
            rows, lifetime = self._ledger.ledger(window_start(today).isoformat())
            definitions = {
                name: cached.definition
                for name, cached in list(self._cache.items())
                if cached.definition is not None
            }
            for metric in lifetime:
                if metric not in definitions:
                    saved = self._saved(metric, self._clock())
                    if saved is not None:
                        definitions[metric] = saved
            return summarize(
                rows,
                lifetime,
                definitions,
                today,
                enabled=enabled,
                persistent=self._ledger.persistent,
                device=self._charger.device,
            )
        except Exception as exc:
            logger.warning("privacy ledger unavailable (%s)", type(exc).__name__)
            return {"enabled": enabled, "error": f"the ledger could not be read ({exc})"}

    def disable(self) -> bool:
        """Opt out: stop reporting and wipe what is kept for reporting.

        Wipes the queued reports (refunding the ledger charges of those never sent: the
        ledger's pending state) and the device secret, so memoized responses cannot be
        derived again. With a ``storage_dir`` the opt-out is persisted: it survives
        restarts and applies to every process using the directory. Later reports return
        False (``disabled``). Never raises.

        Returns:
            Whether everything was wiped and persisted (reporting stops in this process
            even when not).
        """
        self._opted_out = True  # stop now; kept only if the opt-out cannot be persisted
        try:
            wiped = self._ledger.disable()
            if self._durable is None:
                wiped = self._queue.clear()
            self._stats.drop("disabled", wiped, warn=False)  # the app asked for it
            self._opted_out = False  # the ledger's flag rules (shared, persisted)
            return True
        except Exception as exc:
            logger.error("opt-out not persisted (%s)", type(exc).__name__)
            self._stats.error(type(exc).__name__)
            return False

    def enable(self) -> bool:
        """Opt back in after :meth:`disable`. Never raises.

        Returns:
            Whether reporting is on again (persisted with a ``storage_dir``).
        """
        try:
            self._ledger.enable()
        except Exception as exc:
            logger.error("opt-in not persisted (%s)", type(exc).__name__)
            self._stats.error(type(exc).__name__)
            return False
        self._opted_out = False
        return True

    def _device_secret(self) -> bytes:
        """The device secret of memoized responses (made on first use; wiped by disable).

        Raises:
            ReportingDisabledError: after an opt-out.
            StoreError: the store failed.
        """
        return self._ledger.device_secret()

    def shutdown(self, timeout: float | None = 5.0) -> bool:
        """Deliver what is queued (for at most ``timeout`` seconds), then stop.

        Later reports are dropped (``shutdown``); so are reports still queued in memory
        when the time is up (a durable store keeps them for the next run). :meth:`privacy`
        keeps answering, with the ledger as it stood at shutdown.

        Returns:
            Whether everything was delivered, as :meth:`flush` says it.
        """
        self._closed = True
        start = time.monotonic()
        delivered = self.flush(timeout)
        remaining = None if timeout is None else max(0.0, timeout - (time.monotonic() - start))
        self._uploader.stop(remaining)
        if not delivered and not self._queue.durable:
            self._stats.drop("shutdown", self._queue.clear())
        if self._privacy_at_shutdown is None:  # the first shutdown: the store is still open
            self._privacy_at_shutdown = self._privacy()
        if self._durable is not None:
            self._durable.close()
        try:
            self._transport.close()
        except Exception as exc:
            logger.debug("closing the transport failed: %s", type(exc).__name__)
        _live.discard(self)
        return delivered

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    def _before_fork(self) -> None:
        """Quiesce what must not cross a fork mid-change: the store (its SQLite state)."""
        if self._durable is not None:
            self._durable.before_fork()

    def _after_fork_in_parent(self) -> None:
        if self._durable is not None:
            self._durable.after_fork_in_parent()

    def _after_fork_in_child(self) -> None:
        """The child owns nothing queued, shares no lock and starts its own uploader lazily;
        a ledger in memory charges nothing under a budget there (see ``MemoryLedger``)."""
        self._fetch_lock = threading.Lock()
        self._warn_lock = threading.Lock()
        self._queue.after_fork_in_child()
        if self._memory_ledger is not None:
            self._memory_ledger.after_fork_in_child()
        self._stats = Stats()
        self._evicted_seen = self._drops_at_flush = self._queue.evicted
        self._uploader = self._new_uploader()


def _names_metric(data: bytes, needle: bytes) -> bool:
    """Whether a queued report (compact JSON) is of the metric whose JSON string is
    ``needle``: a quick byte test, then the parse that decides."""
    if b'"metric":' + needle not in data:
        return False
    try:
        return bool(json.loads(data).get("metric") == json.loads(needle))
    except (ValueError, AttributeError):
        return False


_forking: list[Client] = []
"""The clients :func:`_before_fork` quiesced, for the after-fork hooks to let go of."""


def _each_forking(step: Callable[[Client], None], what: str) -> None:
    for client in _forking:
        try:
            step(client)
        except Exception:  # pragma: no cover - nothing may disturb the app's fork
            logger.exception("ldp-telemetry: %s failed", what)


def _before_fork() -> None:
    _forking[:] = list(_live)
    _each_forking(Client._before_fork, "quiescing the client before a fork")


def _after_fork_in_parent() -> None:
    _each_forking(Client._after_fork_in_parent, "resuming the client after a fork")
    _forking.clear()


def _after_fork_in_child() -> None:
    _each_forking(Client._after_fork_in_child, "starting the client afresh after a fork")
    _forking.clear()


def _shutdown_at_exit() -> None:
    for client in list(_live):
        try:
            client.shutdown(ATEXIT_TIMEOUT)
        except Exception:  # pragma: no cover - nothing may disturb the app's exit
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_before_fork,
        after_in_parent=_after_fork_in_parent,
        after_in_child=_after_fork_in_child,
    )
atexit.register(_shutdown_at_exit)


def _invalid_why(definition: wire.MetricDefinition, value: object) -> str:
    """Why ``value`` is not one of the metric's, in words that do not contain it."""
    kind = type(value).__name__
    if definition.kind in ("numeric", "distribution"):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return f"wrong type: a numeric metric takes a number, got {kind}"
        return "value outside the metric's range (or not finite)"
    if definition.kind == "joint":
        names = [name for name, _ in definition.attributes]
        return f"a joint metric takes {{attribute: label}} for exactly {names}, each a known label"
    if definition.kind == "string":
        if not isinstance(value, str):
            return f"wrong type: a string metric takes a str, got {kind}"
        return "value holds NUL (the padding) or is not encodable as UTF-8"
    if isinstance(value, bool) or not isinstance(value, str | int):
        return f"wrong type: a categorical metric takes a label (str) or an index (int), got {kind}"
    if isinstance(value, str):
        return "not a label of the metric's domain"
    return "index outside the metric's domain"

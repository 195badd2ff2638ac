"""The collector's own Prometheus metrics, one registry per app.

Counters of reports accepted (by metric), rejected (by reason category) and replayed,
a latency histogram and counts of responses and of 503s. Labels never carry anything
about a client: metric names come from the registry, endpoints from the URL rules.

Under gunicorn each worker counts for itself; set ``PROMETHEUS_MULTIPROC_DIR`` (an empty
directory) to have ``/metrics`` add up all workers (prometheus-client's multiprocess mode).
Under ``ldp serve`` the supervisor writes one more file there, its
``ldp_supervisor_restarts_total{child}`` (:mod:`ldp_server.supervise` says why
there and not in Redis), and ``/metrics`` shows it with the rest.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING

from flask import Flask, Response, g, request
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ldp_store.lifecycle import MemoryReport

if TYPE_CHECKING:
    from collector.memory import GuardReading

__all__ = ["MEMORY_SERIES", "RATE_LIMITS", "REJECTION_CATEGORIES", "Telemetry"]

REJECTION_CATEGORIES = ("shape", "field", "unknown_metric", "payload", "implausible", "retired")
"""Why a report was rejected: not an object with exactly the report fields; a bad
metric, version or id field; a metric version the registry does not know; a payload
that does not fit the mechanism (wrong bit length, out-of-range index, ...); a payload
the mechanism produces only with negligible probability (all bits set, ...: counted by
metric and test in ``ldp_collector_reports_implausible_total`` too); a metric an
operator retired (``ldp metrics retire``)."""

RATE_LIMITS = ("requests", "reports")
"""The buckets of :mod:`ldp_edge.admission` whose emptiness answers 429."""

MEMORY_SERIES = 100
"""Metrics with a ``ldp_redis_memory_bytes`` series: the largest; the others are summed in
``ldp_redis_memory_other_metrics_bytes``. Memory matters where it is large, and a
scrape of ten thousand metrics stays a few hundred series."""

_UNMATCHED = "<unmatched>"
"""The endpoint label of requests that matched no route (404/405): any path a client
invents must not become a label value."""


class Telemetry:
    """Metrics of one app, in a registry of its own (tests create many apps)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        counter = partial(Counter, registry=self.registry)
        histogram = partial(Histogram, registry=self.registry)
        self.accepted = counter(
            "ldp_collector_reports_accepted", "Reports appended to a stream.", ["metric"]
        )
        self.duplicates = counter(
            "ldp_collector_reports_duplicate",
            "Reports discarded because their id was seen before (replays, client retries).",
            ["metric"],
        )
        self.rejected = counter(
            "ldp_collector_reports_rejected",
            "Reports that failed validation, by reason category.",
            ["reason"],
        )
        self.implausible = counter(
            "ldp_collector_reports_implausible",
            "Reports refused as implausible under their metric's mechanism, by the test "
            "they failed (too_few_ones, too_many_ones).",
            ["metric", "reason"],
        )
        self.rate_limited = counter(
            "ldp_collector_rate_limited",
            "429 answers: a source's request or report bucket was empty (sources are "
            "not recorded, here or anywhere).",
            ["limit"],
        )
        self.rate_limited_reports = counter(
            "ldp_collector_rate_limited_reports",
            "Reports in requests answered 429, by the bucket that refused them (0 for the "
            "request bucket: it refuses before the body is read). Rising while users are "
            "honest means devices share an address (NAT, proxy): raise the limits.",
            ["limit"],
        )
        self.unavailable = counter(
            "ldp_collector_unavailable",
            "503 answers: storage down, out of memory, backlog over MAX_BACKLOG, no replica "
            "confirmed in REPLICA_WAIT_MS, or a slot moving between cluster nodes.",
            ["reason"],
        )
        self.guard_shortened = counter(
            "ldp_replay_guard_shortened",
            "Times this collector ended a metric version's replay-guard epoch early "
            "because the version held its share of the budget (LDP_GUARD_BUDGET): the "
            "epoch before was dropped (every id in it at least 30 minutes old), so "
            "replays of those reports are no longer refused.",
        )
        self.slow_bodies = counter(
            "ldp_collector_slow_bodies",
            "Requests answered 408 because their body came slower than the floor "
            "or took longer than the deadline (ldp_edge.slow_bodies).",
        )
        self.responses = counter(
            "ldp_collector_responses",
            "HTTP responses by endpoint and status.",
            ["endpoint", "status"],
        )
        self.latency = histogram(
            "ldp_collector_request_duration_seconds",
            "Time from request start to response, by endpoint and method.",
            ["endpoint", "method"],
        )
        for reason in REJECTION_CATEGORIES:  # export zeros, so rate() works from the start
            self.rejected.labels(reason=reason)
        for limit in RATE_LIMITS:
            self.rate_limited.labels(limit=limit)
            self.rate_limited_reports.labels(limit=limit)
        self.extra: list[Collector] = []
        """Collectors computed at scrape time that an app composition adds (the read
        side's poisoning alarms): exported in multiprocess mode too."""

    def add_collector(self, collector: Collector) -> None:
        """Export ``collector`` (evaluated at each scrape) beside this app's metrics."""
        self.registry.register(collector)
        self.extra.append(collector)

    def install(self, app: Flask) -> None:
        """Time every request of ``app`` and count its responses."""
        app.before_request(self._start)
        app.after_request(self._finish)

    @staticmethod
    def _start() -> None:
        g.ldp_started = time.perf_counter()

    def _finish(self, response: Response) -> Response:
        started = g.pop("ldp_started", None)
        endpoint = request.url_rule.rule if request.url_rule is not None else _UNMATCHED
        if started is not None:
            self.latency.labels(endpoint=endpoint, method=request.method).observe(
                time.perf_counter() - started
            )
        self.responses.labels(endpoint=endpoint, status=str(response.status_code)).inc()
        return response

    def exposition(
        self, memory: MemoryReport | None = None, guard: GuardReading | None = None
    ) -> tuple[bytes, str]:
        """The text exposition format and its content type, with ``memory``'s and the
        replay guard's gauges."""
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            merged = CollectorRegistry()
            multiprocess.MultiProcessCollector(merged)
            for collector in self.extra:
                merged.register(collector)
            body = generate_latest(merged)
        else:
            body = generate_latest(self.registry)
        if memory is not None or guard is not None:
            gauges = CollectorRegistry(auto_describe=False)
            gauges.register(_MemoryGauges(memory, guard))
            body += generate_latest(gauges)
        return body, CONTENT_TYPE_LATEST


class _MemoryGauges(Collector):
    """Redis memory as gauges, from one (cached) reading: per metric, used, the limit.

    Read in the serving process, not counted per worker: every worker reports the same
    reading of the shared Redis, so no multiprocess merging is needed (or wanted).
    """

    def __init__(self, memory: MemoryReport | None, guard: GuardReading | None = None) -> None:
        self.memory = memory
        self.guard = guard

    def describe(self) -> Iterable[Metric]:
        """Nothing: registering the collector reads no Redis (without ``describe``,
        prometheus_client calls :meth:`collect` at registration, at app creation)."""
        return iter(())

    def collect(self) -> Iterable[Metric]:
        if self.guard is not None:
            yield from _guard_gauges(self.guard)
        m = self.memory
        if m is None:
            return
        yield GaugeMetricFamily(
            "ldp_replay_guard_measured_bytes",
            "Redis memory of every replay-guard key (MEMORY USAGE summed, with the "
            "per-metric figures; read at most once a minute).",
            value=m.guard,
        )
        per_metric = GaugeMetricFamily(
            "ldp_redis_memory_bytes",
            f"Redis memory of a metric's keys, the {MEMORY_SERIES} largest (MEMORY USAGE "
            "summed; read at most once a minute).",
            labels=["metric"],
        )
        largest = sorted(m.by_metric.items(), key=lambda item: (-item[1], item[0]))
        for name, size in sorted(largest[:MEMORY_SERIES]):
            per_metric.add_metric([name], size)
        yield per_metric
        yield GaugeMetricFamily(
            "ldp_redis_memory_other_metrics_bytes",
            "Redis memory of the metrics without a ldp_redis_memory_bytes series, summed.",
            value=sum(size for _, size in largest[MEMORY_SERIES:]),
        )
        yield GaugeMetricFamily(
            "ldp_redis_used_memory_bytes", "Redis used_memory (all primaries).", value=m.used
        )
        yield GaugeMetricFamily(
            "ldp_redis_maxmemory_bytes",
            "Redis maxmemory (all primaries; 0: no limit).",
            value=m.maxmemory,
        )
        yield GaugeMetricFamily(
            "ldp_redis_memory_scan_partial",
            "1 when the per-metric figures stopped at the scan's key limit.",
            value=int(m.partial),
        )


def _guard_gauges(g: GuardReading) -> Iterable[Metric]:
    """The replay guard as the collector weighs it against its budget."""
    ids = GaugeMetricFamily(
        "ldp_replay_guard_ids",
        "Report ids the replay guard holds, by UTC day (today, yesterday; every metric).",
        labels=["day"],
    )
    ids.add_metric(["today"], g.held_today)
    ids.add_metric(["yesterday"], g.held_yesterday)
    yield ids
    yield GaugeMetricFamily(
        "ldp_replay_guard_memory_bytes",
        "The replay guard's memory as ingest counts it: ids held times BYTES_PER_ID.",
        value=g.guard_bytes,
    )
    yield GaugeMetricFamily(
        "ldp_replay_guard_budget_bytes",
        "The replay guard's budget (LDP_GUARD_BUDGET of maxmemory; 0: no maxmemory): half "
        "reserved in equal parts for every metric version's shard, half a pool they share.",
        value=g.budget_bytes,
    )
    yield GaugeMetricFamily(
        "ldp_replay_guard_pool_used_ids",
        "Ids the replay guard's units hold beyond their reserves (of the pool's "
        "ldp_replay_guard_pool_ids). A unit that needs more while the pool is full ends "
        "its epoch early (a shorter replay window) or is refused (503) for a while.",
        value=g.pool_used(),
    )
    yield GaugeMetricFamily(
        "ldp_replay_guard_pool_ids", "The replay guard's pool, in ids.", value=g.pool
    )
    yield GaugeMetricFamily(
        "ldp_replay_guard_refused_units",
        "Metric versions' shards whose reports the replay guard's shares refuse now.",
        value=len(g.refusing(time.time())),
    )

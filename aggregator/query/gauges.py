"""The pipeline's own gauges for ``/metrics``: per metric n, lag and dead letters; alerts.

Read at scrape time from Redis: the counters of the current versions the writers marked
in use (:mod:`ldp_store.in_use`; :func:`~aggregator.query.window.counters`), read once
for the scrape's collectors (:class:`InUse`). A metric's series are shown while it has
anything to show (reports counted, waiting or dead-lettered): a deployment with ten
thousand metrics defined and a few hundred in use scrapes a few hundred label sets, and
``ldp_metrics_defined``/``ldp_metrics_active`` count the rest. What the shipped
Prometheus rules and Grafana dashboards (``deploy/prometheus/``, ``deploy/grafana/``) are
built on; guide: docs/guides/alerts.md; which series and why: docs/architecture/read-side.md.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator

import redis
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from aggregator.query.window import Counters, counters
from client_sdk.wire import MetricDefinition
from ldp_store import alerts as alert_store
from ldp_store import in_use, projects
from ldp_store.registry import Registry

__all__ = ["KEEP_SECONDS", "InUse", "PipelineGauges"]

log = logging.getLogger("ldp.aggregator.gauges")

KEEP_SECONDS = 1.0
"""Seconds a reading of the counters serves the next collector: a scrape's collectors
(the pipeline gauges, the poisoning alarms) run one after the other and share one pass."""


class InUse:
    """The current versions and the counters of those in use, read once per scrape.

    Only the versions in :data:`~ldp_store.keys.IN_USE` are read (a few calls whatever
    the number defined); while no full pass filled that set, every version is read once
    and what is in use recorded (:func:`ldp_store.in_use.record_sweep`).

    Args:
        client: Redis.
        registry: the metric registry.
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(
        self,
        client: redis.Redis,
        registry: Registry,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.registry = registry
        self.clock = clock
        self._lock = threading.Lock()
        self._kept: tuple[float, str | None, int, list[tuple[MetricDefinition, Counters]]] | None
        self._kept = None

    def read(self) -> tuple[int, list[tuple[MetricDefinition, Counters]]]:
        """How many metrics are defined, and each current version in use with its counters.

        Raises:
            redis.RedisError: Redis could not be read.
        """
        project, now = projects.CURRENT.get(), self.clock()
        with self._lock:
            kept = self._kept
        if kept is not None and kept[1] == project and now - kept[0] < KEEP_SECONDS:
            return kept[2], kept[3]
        marked = in_use.marked(self.client)
        if marked is None:  # the sweep: every current version
            maybe = self.registry.all_current()
            defined = len(maybe)
        else:  # the definitions of the current versions in use only
            current = self.registry.current_versions()
            defined = len(current)
            wanted = [(n, v) for n, v in current.items() if in_use.member(n, v) in marked]
            maybe = self.registry.definitions(wanted)
        rows = [
            (d, c) for d, c in zip(maybe, counters(self.client, maybe), strict=True) if c.active
        ]
        if marked is None:
            found = [(d.name, d.version) for d, _ in rows]
            in_use.record_sweep(self.client, found, every=project is None)
        with self._lock:
            self._kept = (now, project, defined, rows)
        return defined, rows


class PipelineGauges(Collector):
    """``ldp_reports_counted``, ``ldp_lag_reports``, ``ldp_dead_letters`` (per metric in
    use, current version), ``ldp_metrics_defined``, ``ldp_metrics_active`` and
    ``ldp_alerts_firing``, ``ldp_alert_dead_letters``, ``ldp_alert_outbox`` (the alert
    rules and their notifications).

    Args:
        client: Redis.
        registry: the metric registry.
        in_use: the scrape's shared reading of the counters (None: one of its own).
    """

    def __init__(
        self, client: redis.Redis, registry: Registry, in_use: InUse | None = None
    ) -> None:
        self.client = client
        self.registry = registry
        self.in_use = in_use or InUse(client, registry)

    def describe(self) -> Iterator[GaugeMetricFamily]:
        """Nothing: registering the collector reads no Redis (without ``describe``,
        prometheus_client calls :meth:`collect` at registration, at app creation)."""
        return iter(())

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """The gauges; none but ``ldp_pipeline_gauges_up`` 0 when Redis cannot be read."""
        counted = GaugeMetricFamily(
            "ldp_reports_counted",
            "Reports counted so far (n) of a metric's current version, all time.",
            labels=["metric"],
        )
        waiting = GaugeMetricFamily(
            "ldp_lag_reports",
            "Reports of a metric's current version in its streams, not yet counted "
            "(aggregator lag; pending ones included).",
            labels=["metric"],
        )
        dead = GaugeMetricFamily(
            "ldp_dead_letters",
            "Entries in a metric's current version's dead-letter streams (reports that "
            "could not be counted).",
            labels=["metric"],
        )
        up = GaugeMetricFamily(
            "ldp_pipeline_gauges_up", "1 if the pipeline gauges could read Redis, else 0."
        )
        try:
            defined, active = self.in_use.read()
            rows = [(d.name, c.n, c.lag, c.dead) for d, c in active]
            firing = len(alert_store.firings(self.client))
            dead_alerts = alert_store.dead_letter_count(self.client)
            outbox = alert_store.outbox_length(self.client)
        except (redis.RedisError, ValueError) as exc:
            log.warning("pipeline gauges for /metrics failed: %s", exc)
            up.add_metric([], 0.0)
            yield up
            return
        for name, n, behind, letters in rows:
            counted.add_metric([name], float(n))
            waiting.add_metric([name], float(behind))
            dead.add_metric([name], float(letters))
        up.add_metric([], 1.0)
        yield from (counted, waiting, dead, up)
        yield GaugeMetricFamily(
            "ldp_metrics_defined", "Metrics whose current version is defined.", value=defined
        )
        yield GaugeMetricFamily(
            "ldp_metrics_active",
            "Metrics with reports counted, waiting or dead-lettered: those with the series "
            "above (a metric never reported to has none).",
            value=len(rows),
        )
        yield GaugeMetricFamily("ldp_alerts_firing", "Alert rules firing now.", value=firing)
        yield GaugeMetricFamily(
            "ldp_alert_dead_letters",
            "Alert notifications that failed every attempt (kept, newest 1,000).",
            value=dead_alerts,
        )
        yield GaugeMetricFamily(
            "ldp_alert_outbox", "Alert notifications queued, not yet sent.", value=outbox
        )

"""The pipeline's own gauges for ``/metrics``: per metric n, lag and dead letters; alerts.

Read at scrape time from Redis, every metric's current version in one pipeline
(:func:`~aggregator.query.window.counters`). A metric's series are shown while it has
anything to show (reports counted, waiting or dead-lettered): a deployment with ten
thousand metrics defined and a few hundred in use scrapes a few hundred label sets, and
``ldp_metrics_defined``/``ldp_metrics_active`` count the rest. What the shipped
Prometheus rules and Grafana dashboards (``deploy/prometheus/``, ``deploy/grafana/``) are
built on; guide: docs/guides/alerts.md; which series and why: docs/architecture/read-side.md.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import redis
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from aggregator.query.window import counters
from ldp_store import alerts as alert_store
from ldp_store.registry import Registry

__all__ = ["PipelineGauges"]

log = logging.getLogger("ldp.aggregator.gauges")


class PipelineGauges(Collector):
    """``ldp_reports_counted``, ``ldp_lag_reports``, ``ldp_dead_letters`` (per metric in
    use, current version), ``ldp_metrics_defined``, ``ldp_metrics_active`` and
    ``ldp_alerts_firing``, ``ldp_alert_dead_letters``, ``ldp_alert_outbox`` (the alert
    rules and their notifications).

    Args:
        client: Redis.
        registry: the metric registry.
    """

    def __init__(self, client: redis.Redis, registry: Registry) -> None:
        self.client = client
        self.registry = registry

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
            every = self.registry.all_current()
            rows = [
                (d.name, c.n, c.lag, c.dead)
                for d, c in zip(every, counters(self.client, every), strict=True)
                if c.active
            ]
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
            "ldp_metrics_defined", "Metrics whose current version is defined.", value=len(every)
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

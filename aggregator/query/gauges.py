"""The pipeline's own gauges for ``/metrics``: per metric n, lag and dead letters; alerts.

Read at scrape time from Redis (a few commands per metric's current version), as
:class:`~aggregator.query.alarms.AlarmGauges` is. What the shipped Prometheus rules and
Grafana dashboards (``deploy/prometheus/``, ``deploy/grafana/``) are built on; guide:
docs/guides/alerts.md.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import cast

import redis
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from aggregator.query.window import lag, per_shard, reports_counted
from client_sdk.wire import MetricDefinition
from ldp_store import alerts as alert_store
from ldp_store import keys
from ldp_store.registry import Registry

__all__ = ["PipelineGauges"]

log = logging.getLogger("ldp.aggregator.gauges")


def _dead(client: redis.Redis, definition: MetricDefinition) -> int:
    """Entries in the version's dead-letter streams, all shards."""
    name, version = definition.name, definition.version
    lengths = per_shard(client, definition, lambda c, s: c.xlen(keys.dead_key(name, version, s)))
    return sum(cast(list[int], lengths))


class PipelineGauges(Collector):
    """``ldp_reports_counted``, ``ldp_lag_reports``, ``ldp_dead_letters`` (per metric,
    current version) and ``ldp_alerts_firing``, ``ldp_alert_dead_letters``,
    ``ldp_alert_outbox`` (the alert rules and their notifications).

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
            rows = []
            for d in self.registry.all_current():
                rows.append(
                    (
                        d.name,
                        reports_counted(self.client, d),
                        lag(self.client, d),
                        _dead(self.client, d),
                    )
                )
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
        yield GaugeMetricFamily("ldp_alerts_firing", "Alert rules firing now.", value=firing)
        yield GaugeMetricFamily(
            "ldp_alert_dead_letters",
            "Alert notifications that failed every attempt (kept, newest 1,000).",
            value=dead_alerts,
        )
        yield GaugeMetricFamily(
            "ldp_alert_outbox", "Alert notifications queued, not yet sent.", value=outbox
        )

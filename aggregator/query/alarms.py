"""Poisoning alarms on the read side: the windows' counts in, :mod:`aggregator.stats.detect` out.

An alarm is computed when it is read (the estimates API, the overview, ``/metrics``),
from what the worker committed: the window's counts, its trailing windows of the same
kind (:data:`~aggregator.stats.detect.TRAILING`) pooled, and for local hashing the
window's seed histogram. A window without a baseline (a fresh metric's first) and the
all-time window get the baseline-free tests instead (GRR's floor, the support total).
String metrics are tested where their discovery runs (:mod:`aggregator.query.estimators`).
Nothing is stored: a few more ``HGETALL`` per read.

The false-alarm rate per window is ``LDP_ALARM_RATE`` (config ``ALARM_RATE``, default
:data:`~aggregator.stats.detect.DEFAULT_ALARM_RATE`). ``/metrics`` shows
``ldp_poisoning_alarm{metric, kind, granularity}``: 1 while the newest hour (day) window,
or the all-time window (``granularity="all"``), of a metric's current version has an
alarm of that kind, else 0 — a label set per metric and test, never per value. The tests:
docs/security/poisoning.md and docs/statistics/poisoning-alarms.md.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator

import numpy as np
import redis
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from aggregator.query.answers import PoisoningAlarm
from aggregator.query.window import list_windows, read_counts, read_seeds
from aggregator.stats.detect import (
    ALARM_KINDS,
    TRAILING,
    Alarm,
    detect,
)
from client_sdk.mechanisms import LocalHashing
from client_sdk.wire import MetricDefinition
from ldp_store.registry import Registry

__all__ = [
    "AlarmGauges",
    "alarm_models",
    "checked_alarm_rate",
    "current_alarms",
    "window_alarms",
]

log = logging.getLogger("ldp.aggregator.alarms")

CATEGORICAL_KINDS = tuple(k for k in ALARM_KINDS if k not in ("groups", "rows"))
"""The kinds a categorical metric can raise (``groups`` and ``rows`` are the string
sketch's, which ``/metrics`` does not test: its discovery costs seconds)."""


def checked_alarm_rate(raw: object) -> float:
    """The false-alarm rate per window (``LDP_ALARM_RATE``), checked.

    Raises:
        ValueError: not a number in (0, 0.5).
    """
    try:
        rate = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        rate = math.nan
    if not 0.0 < rate < 0.5:
        raise ValueError(f"LDP_ALARM_RATE must be a number in (0, 0.5), got {raw!r}")
    return rate


def tested(definition: MetricDefinition) -> bool:
    """Whether a metric version is tested: categorical and not memoized (a device's
    reports share one permanent response, so its counts are not independent reports)."""
    return definition.kind == "categorical" and not definition.longitudinal


def window_alarms(
    client: redis.Redis,
    definition: MetricDefinition,
    window: str,
    alpha: float,
    windows: list[str] | None = None,
) -> list[Alarm]:
    """The alarms of one hour, day or the all-time window (none for an untested metric).

    Args:
        client: Redis.
        definition: the metric version.
        window: ``hour:…``, ``day:…`` or ``all`` (tested without a baseline).
        alpha: the false-alarm rate per window.
        windows: the version's windows, newest first, if already read.
    """
    granularity = window.partition(":")[0]
    if granularity not in (*TRAILING, "all") or not tested(definition):
        return []
    if granularity == "all":
        m = definition.oracle
        counts = read_counts(client, definition, window)
        return detect(m, window, (counts.n, counts.support), None, None, alpha, definition.domain)
    if windows is None:
        windows = list_windows(client, definition)
    older = sorted(
        (w for w in windows if w.startswith(granularity + ":") and w < window), reverse=True
    )[: TRAILING[granularity]]
    m = definition.oracle
    now = read_counts(client, definition, window)
    trailing = None
    if older:
        n, support = 0, np.zeros(m.domain_size, dtype=np.int64)
        for w in older:
            counts = read_counts(client, definition, w)
            n, support = n + counts.n, support + counts.support
        trailing = (n, support)
    seeds = read_seeds(client, definition, window) if isinstance(m, LocalHashing) else None
    if seeds is not None and not seeds.any():
        seeds = None  # counted before seeds were kept
    baseline = f"the {len(older)} previous {granularity}s"
    return detect(
        m, window, (now.n, now.support), trailing, seeds, alpha, definition.domain, baseline
    )


def current_alarms(client: redis.Redis, definition: MetricDefinition, alpha: float) -> list[Alarm]:
    """The alarms of the newest hour window, of the newest day window and of ``all``."""
    if not tested(definition):
        return []
    windows = list_windows(client, definition)
    found: list[Alarm] = []
    for granularity in ("hour", "day"):
        newest = next((w for w in windows if w.startswith(granularity + ":")), None)
        if newest is not None:
            found += window_alarms(client, definition, newest, alpha, windows)
    return found + window_alarms(client, definition, "all", alpha, windows)


def alarm_models(
    definition: MetricDefinition, alarms: list[Alarm], labels: list[str] | None = None
) -> list[PoisoningAlarm]:
    """The API's form of alarms: values by label (``labels``: a string metric's discovered
    values, which its alarms' indices point into)."""
    names = definition.domain if labels is None else labels
    return [
        PoisoningAlarm(
            kind=a.kind,
            window=a.window,
            statistic=a.statistic,
            threshold=a.threshold,
            p_value=a.p_value,
            alpha=a.alpha,
            evidence=a.evidence,
            values=[names[v] for v in a.values],
        )
        for a in alarms
    ]


class AlarmGauges(Collector):
    """``ldp_poisoning_alarm{metric, kind, granularity}`` for ``/metrics``, at scrape time.

    Args:
        client: Redis.
        registry: the metric registry.
        alpha: the false-alarm rate per window.
    """

    def __init__(self, client: redis.Redis, registry: Registry, alpha: float) -> None:
        self.client = client
        self.registry = registry
        self.alpha = alpha

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """One gauge per current metric version, test and window granularity."""
        gauge = GaugeMetricFamily(
            "ldp_poisoning_alarm",
            "1 while the newest hour/day window (or the all-time window) of a metric has a "
            "poisoning alarm of this kind (see GET /v1/estimates/<name>), else 0.",
            labels=["metric", "kind", "granularity"],
        )
        up = GaugeMetricFamily(
            "ldp_poisoning_checks_up", "1 if the poisoning checks could read Redis, else 0."
        )
        try:
            rows = []
            for definition in self.registry.all_current():
                if not tested(definition):
                    continue
                raised = {
                    (a.kind, a.window.partition(":")[0])
                    for a in current_alarms(self.client, definition, self.alpha)
                }
                for kind in CATEGORICAL_KINDS:
                    for granularity in (*TRAILING, "all"):
                        value = 1.0 if (kind, granularity) in raised else 0.0
                        rows.append(([definition.name, kind, granularity], value))
        except (redis.RedisError, ValueError) as exc:
            log.warning("poisoning checks for /metrics failed: %s", exc)
            up.add_metric([], 0.0)
            yield up
            return
        for labels, value in rows:
            gauge.add_metric(labels, value)
        up.add_metric([], 1.0)
        yield gauge
        yield up

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
``ldp_poisoning_alarm{metric, kind, granularity}`` = 1 while the newest hour (day) window,
or the all-time window (``granularity="all"``), of a metric's current version has an
alarm of that kind — a label set per alarm raised, never per value, none while there is
no alarm — and ``ldp_poisoning_metrics_tested``, the metrics with reports it tested. The
tests: docs/security/poisoning.md and docs/statistics/poisoning-alarms.md.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator

import numpy as np
import redis
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from aggregator.query.answers import PoisoningAlarm, PoisoningBaseline
from aggregator.query.gauges import InUse
from aggregator.query.window import list_windows, read_counts, read_seeds
from aggregator.stats.codecs import Counts
from aggregator.stats.detect import (
    ALARM_KINDS,
    MIN_REPORTS,
    TRAILING,
    Alarm,
    detect,
    tests_for,
)
from aggregator.stats.robustness import DEFAULT_FAKE_FRACTION, fake_count, max_gain
from client_sdk.mechanisms import LocalHashing
from client_sdk.wire import MetricDefinition
from ldp_store.registry import Registry

__all__ = [
    "AlarmGauges",
    "alarm_models",
    "baseline_of",
    "checked_alarm_rate",
    "current_alarms",
    "current_checks",
    "tested",
    "window_alarms",
    "window_checks",
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
    return window_checks(client, definition, window, alpha, windows)[0]


def window_checks(
    client: redis.Redis,
    definition: MetricDefinition,
    window: str,
    alpha: float,
    windows: list[str] | None = None,
) -> tuple[list[Alarm], int]:
    """:func:`window_alarms`, and the reports of the window's baseline (its previous
    windows of the same kind, pooled; 0 for the all-time window, which has none)."""
    granularity = window.partition(":")[0]
    if granularity not in (*TRAILING, "all") or not tested(definition):
        return [], 0
    m = definition.oracle
    if granularity == "all":
        counts = read_counts(client, definition, window)
        alarms = detect(m, window, (counts.n, counts.support), None, None, alpha, definition.domain)
        return alarms, 0
    if windows is None:
        windows = list_windows(client, definition)
    older = _previous(windows, window, granularity)
    now = read_counts(client, definition, window)
    trailing = _pooled(client, definition, older)
    seeds = _kept_seeds(client, definition, window)
    baseline = f"the {len(older)} previous {granularity}s"
    alarms = detect(
        m, window, (now.n, now.support), trailing, seeds, alpha, definition.domain, baseline
    )
    return alarms, trailing[0] if trailing is not None else 0


def _previous(windows: list[str], window: str, granularity: str) -> list[str]:
    """The windows of ``granularity`` before ``window``, newest first, as many as its
    baseline pools (:data:`TRAILING`)."""
    older = (w for w in windows if w.startswith(granularity + ":") and w < window)
    return sorted(older, reverse=True)[: TRAILING[granularity]]


def _kept_seeds(
    client: redis.Redis, definition: MetricDefinition, window: str
) -> np.ndarray | None:
    """The window's seed histogram (local hashing), None where none was kept (another
    mechanism, or counted before seeds were kept)."""
    if not isinstance(definition.oracle, LocalHashing):
        return None
    seeds = read_seeds(client, definition, window)
    return seeds if seeds.any() else None


def _pooled(
    client: redis.Redis, definition: MetricDefinition, windows: list[str]
) -> tuple[int, np.ndarray] | None:
    """(n, C) of ``windows`` pooled, the baseline of a window's shift test (None: none)."""
    if not windows:
        return None
    zero = Counts.zeros(definition.oracle.domain_size)
    pooled = sum((read_counts(client, definition, w) for w in windows), zero)
    return pooled.n, pooled.support


def current_alarms(
    client: redis.Redis,
    definition: MetricDefinition,
    alpha: float,
    windows: list[str] | None = None,
) -> list[Alarm]:
    """The alarms of the newest hour window, of the newest day window and of ``all``
    (``windows``: the version's windows, newest first, if already read)."""
    return current_checks(client, definition, alpha, windows)[0]


def current_checks(
    client: redis.Redis,
    definition: MetricDefinition,
    alpha: float,
    windows: list[str] | None = None,
) -> tuple[list[Alarm], int]:
    """:func:`current_alarms`, and the larger baseline of the newest hour and day."""
    if not tested(definition):
        return [], 0
    if windows is None:
        windows = list_windows(client, definition)
    found: list[Alarm] = []
    baseline = 0
    for granularity in ("hour", "day"):
        newest = next((w for w in windows if w.startswith(granularity + ":")), None)
        if newest is not None:
            alarms, reports = window_checks(client, definition, newest, alpha, windows)
            found += alarms
            baseline = max(baseline, reports)
    return found + window_alarms(client, definition, "all", alpha, windows), baseline


def baseline_of(definition: MetricDefinition, n: int, reports: int) -> PoisoningBaseline:
    """Whether a window of ``n`` reports has a baseline (``reports`` in its previous
    windows, pooled), and how far :data:`~aggregator.stats.robustness.DEFAULT_FAKE_FRACTION`
    of crafted reports could move one of its values' estimates at this ε and n
    (:func:`~aggregator.stats.robustness.max_gain`; docs/security/poisoning.md)."""
    m, beta = definition.oracle, DEFAULT_FAKE_FRACTION
    exists = reports >= MIN_REPORTS
    shift = max_gain(m, beta)
    fakes = fake_count(n, beta) if n else 0
    sigma = math.sqrt(float(np.max(np.asarray(m.variance(n), dtype=np.float64)))) if n else 0.0
    errors = shift / sigma if sigma > 0 else None
    free = tests_for(m, baseline=False)
    if exists:
        note = (
            f"The poisoning alarms compare this window with {reports:,} reports of the "
            f"previous ones (the shift test)."
        )
    else:
        runs = f"only {', '.join(free)} can alarm" if free else "no test can alarm"
        at = ""
        if errors is not None:
            at = f" ({fakes:,} fake reports at n = {n:,}: {errors:.0f} standard errors)"
        note = (
            f"No baseline yet: the shift test needs earlier windows with {MIN_REPORTS:,} "
            f"reports, so {runs}. Until then {beta:.0%} of crafted reports could move one "
            f"value's estimate by up to {100 * shift:.1f} percentage points{at} at "
            f"ε = {m.epsilon:g}, and no alarm would compare it with the past."
        )
    return PoisoningBaseline(
        exists=exists,
        fake_fraction=beta,
        fakes=fakes,
        max_shift=shift,
        std_errors=errors,
        note=note,
    )


def alarm_models(
    definition: MetricDefinition, alarms: list[Alarm], labels: list[str] | None = None
) -> list[PoisoningAlarm]:
    """The API's form of alarms: values by label (``labels``: a string metric's discovered
    values, which its alarms' indices point into)."""
    names = definition.domain if labels is None else labels
    return [PoisoningAlarm.copied(a, values=[names[v] for v in a.values]) for a in alarms]


class AlarmGauges(Collector):
    """``ldp_poisoning_alarm{metric, kind, granularity}`` for ``/metrics``, at scrape time:
    only the alarms raised (value 1), the metrics with reports tested (a metric without
    any has nothing to test), their number in ``ldp_poisoning_metrics_tested``.

    Args:
        client: Redis.
        registry: the metric registry.
        alpha: the false-alarm rate per window.
        in_use: the scrape's shared reading of the counters (None: one of its own).
    """

    def __init__(
        self, client: redis.Redis, registry: Registry, alpha: float, in_use: InUse | None = None
    ) -> None:
        self.client = client
        self.registry = registry
        self.alpha = alpha
        self.in_use = in_use or InUse(client, registry)

    def _raised(self, definition: MetricDefinition) -> list[tuple[list[str], float]]:
        """A series (labels, 1) per kind and granularity of alarm ``definition`` has."""
        raised = {
            (a.kind, a.window.partition(":")[0])
            for a in current_alarms(self.client, definition, self.alpha)
        }
        return [
            ([definition.name, kind, granularity], 1.0)
            for kind in CATEGORICAL_KINDS
            for granularity in (*TRAILING, "all")
            if (kind, granularity) in raised
        ]

    def describe(self) -> Iterator[GaugeMetricFamily]:
        """Nothing: registering the collector reads no Redis (without ``describe``,
        prometheus_client calls :meth:`collect` at registration, at app creation)."""
        return iter(())

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """A series per alarm raised, of the current versions with reports."""
        gauge = GaugeMetricFamily(
            "ldp_poisoning_alarm",
            "1 while the newest hour/day window (or the all-time window) of a metric has a "
            "poisoning alarm of this kind (see GET /v1/estimates/<name>); no series while "
            "it has none.",
            labels=["metric", "kind", "granularity"],
        )
        up = GaugeMetricFamily(
            "ldp_poisoning_checks_up", "1 if the poisoning checks could read Redis, else 0."
        )
        try:
            used = [d for d, c in self.in_use.read()[1] if c.n and tested(d)]
            rows = [row for definition in used for row in self._raised(definition)]
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
        yield GaugeMetricFamily(
            "ldp_poisoning_metrics_tested",
            "Metrics with reports whose newest windows the poisoning checks tested.",
            value=len(used),
        )

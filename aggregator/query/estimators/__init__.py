"""Estimating a window of any metric kind, through one estimator protocol.

As the write side sees every kind through one codec protocol
(:mod:`aggregator.stats.batch`), the read side sees it through one :class:`Estimator`:
``read`` a window's additive statistic (:mod:`aggregator.query.window`), then
``estimate`` the answer from it (:mod:`aggregator.query.answers`).
:func:`estimator_for` picks a metric version's; :func:`estimate_window` and
:func:`trend` are what ``GET /v1/estimates/<name>`` (and ``…/trend``), ``ldp export`` and
``ldp estimates`` call, so they all hold the same numbers. Flask-free: the web views
parse the request and render the answer. See docs/architecture/layout.md and
docs/reference/http.md for the answers' fields.
"""

from __future__ import annotations

from typing import Any

from aggregator.query.answers import (
    MAX_TREND_WINDOWS,
    Trend,
)
from aggregator.query.estimators.base import (
    Answer,
    Ask,
    Estimator,
    Reader,
    shuffled_epsilon,
)
from aggregator.query.estimators.distribution import (
    DistributionEstimator,
    distribution_trend,
)
from aggregator.query.estimators.frequency import (
    FrequencyEstimator,
    MemoizedEstimator,
    PramEstimator,
)
from aggregator.query.estimators.joint import JointEstimator
from aggregator.query.estimators.numeric import NumericEstimator
from aggregator.query.estimators.strings import StringEstimator
from aggregator.query.estimators.timeline import categorical_trend
from aggregator.query.relayed import relayed_waiting
from aggregator.query.window import list_windows, read_numeric_many
from client_sdk.mechanisms import Memoized, PostRandomization
from client_sdk.wire import MetricDefinition

__all__ = [
    "BY_KIND",
    "Ask",
    "DistributionEstimator",
    "Estimator",
    "FrequencyEstimator",
    "JointEstimator",
    "MemoizedEstimator",
    "NumericEstimator",
    "PramEstimator",
    "Reader",
    "StringEstimator",
    "estimate_groups",
    "estimate_window",
    "estimator_for",
    "shuffled_epsilon",
    "trend",
]


# -- one entry --------------------------------------------------------------------------------

_FREQUENCY = FrequencyEstimator()
_MEMOIZED = MemoizedEstimator()
_PRAM = PramEstimator()
_NUMERIC = NumericEstimator()
_STRING = StringEstimator()
_JOINT = JointEstimator()
_DISTRIBUTION = DistributionEstimator()


BY_KIND: dict[str, Estimator[Any]] = {
    "numeric": _NUMERIC,
    "string": _STRING,
    "joint": _JOINT,
    "distribution": _DISTRIBUTION,
}
"""The estimator of each kind of :data:`aggregator.stats.kinds.KINDS`; a frequency
oracle's is picked by its mechanism."""


def estimator_for(definition: MetricDefinition) -> Estimator[Any]:
    """The estimator of a metric version's kind and mechanism."""
    found = BY_KIND.get(definition.kind)
    if found is not None:
        return found
    m = definition.mechanism
    if isinstance(m, PostRandomization):
        return _PRAM
    if isinstance(m, Memoized):
        return _MEMOIZED
    return _FREQUENCY


def estimate_window(
    reader: Reader,
    definition: MetricDefinition,
    window: str,
    ask: Ask | None = None,
    stats: Any = None,
) -> Answer:
    """What ``GET /v1/estimates/<name>?window=…`` answers, as a model: the one function
    the API, ``ldp export`` and ``ldp estimates`` call, so an export holds the API's
    numbers.

    Args:
        reader: Redis, the registry, and how a discovery runs.
        definition: the metric version.
        window: ``all``, ``hour:…`` or ``day:…``.
        ask: the level, simultaneity, estimand, alarms and candidates asked for.
        stats: the window's statistic if the caller read it (its estimator's ``read``);
            read here otherwise.
    """
    found = _estimate(reader, definition, window, ask, stats)
    waiting = relayed_waiting(reader.client, definition)  # not in any window yet
    return found if waiting is None else found.model_copy(update={"relayed_waiting": waiting})


def estimate_groups(
    reader: Reader, definition: MetricDefinition, window: str, ask: Ask, stats: list[Any]
) -> list[Answer]:
    """:func:`estimate_window` of each of a breakdown's groups from its counts, the
    metric's relayed reports (the same for every group) read once."""
    found = [_estimate(reader, definition, window, ask, part) for part in stats]
    waiting = relayed_waiting(reader.client, definition)
    if waiting is None:
        return found
    return [one.model_copy(update={"relayed_waiting": waiting}) for one in found]


def _estimate(
    reader: Reader, definition: MetricDefinition, window: str, ask: Ask | None, stats: Any = None
) -> Answer:
    estimator = estimator_for(definition)
    if stats is None:
        stats = estimator.read(reader, definition, window)
    return estimator.estimate(reader, definition, window, stats, ask or Ask())


def trend(
    reader: Reader,
    definition: MetricDefinition,
    granularity: str,
    ask: Ask,
    max_windows: int = MAX_TREND_WINDOWS,
    fields: tuple[str, ...] | None = None,
) -> Trend:
    """One estimate per hour or day window (every one the retention keeps, at most the
    newest ``max_windows``), oldest first; no alarms.

    A categorical trend shows the values ``ask.rows`` asks for (default: every value of
    a domain of :data:`~aggregator.query.answers.TREND_VALUES`, else that many with the
    largest estimates over the trend's windows), each window's statistics computed for
    those values only (:func:`aggregator.stats.series.estimate_series`): the same
    numbers as each window's own answer, at a cost in proportion to what is sent. With
    ``fields`` (of :data:`~aggregator.query.answers.TREND_FIELDS`) it is compact: those
    statistics only, rounded to their standard errors (numeric and distribution trends
    are as without).

    Raises:
        ValueError: a string metric (its values are discovered per window) or a joint one
            (its marginals are asked per window): no trend; a value asked for that the
            metric does not have.
    """
    if definition.kind in ("string", "joint"):
        raise ValueError(f"a {definition.kind} metric has no trend")
    windows = [
        w for w in list_windows(reader.client, definition) if w.startswith(granularity + ":")
    ]
    windows = sorted(windows[:max_windows])
    head: dict[str, Any] = {
        "metric": definition.name,
        "version": definition.version,
        "granularity": granularity,
        "confidence": ask.confidence,
        "estimand": ask.estimand,
        "multiplicity": ask.mode,
    }
    if definition.kind == "distribution":
        return Trend(**head, windows=list(distribution_trend(reader, definition, windows, ask)))
    if definition.kind == "numeric":
        sums = read_numeric_many(reader.client, definition, windows)
        return Trend(**head, windows=list(_NUMERIC.trend(definition, windows, sums, ask)))
    sequence = estimator_for(definition).sequence
    return Trend(**head, **categorical_trend(reader, definition, windows, ask, sequence, fields))

"""A breakdown by a public dimension: each group of one window estimated through its
kind's :class:`~aggregator.query.estimators.Estimator`, as a whole metric is, with
the groups below the minimum count not shown (:mod:`aggregator.stats.segments`).

In full: ``docs/concepts/dimensions.md``.
"""

from __future__ import annotations

from aggregator.query.answers import Estimates, MeanEstimate, SegmentEstimates, SegmentGroup
from aggregator.query.estimators import Ask, Reader, estimate_window
from aggregator.query.window import read_segments
from aggregator.stats.segments import group_by, suppress
from client_sdk.wire import MetricDefinition

__all__ = ["NOT_PROTECTED", "segment_estimates"]

NOT_PROTECTED = (
    "Dimensions are public: each report carries them in the clear, beside its perturbed "
    "value. They are NOT protected by ε; only the value is."
)


def segment_estimates(
    reader: Reader,
    definition: MetricDefinition,
    window: str,
    dimension: str,
    ask: Ask,
    minimum: int,
) -> SegmentEstimates:
    """The breakdown of one window by ``dimension``.

    Args:
        reader: Redis and the registry.
        definition: the metric version (with public dimensions).
        window: ``all``, ``hour:…`` or ``day:…``.
        dimension: one of the metric's dimensions.
        ask: the level, simultaneity and estimand of each group's intervals (no alarms:
            they are tested on the whole metric).
        minimum: the least reports a shown group has.

    Raises:
        ValueError: ``dimension`` is not one the metric declares.
    """
    groups = group_by(definition, read_segments(reader.client, definition, window), dimension)
    values = dict(definition.dimensions)[dimension]
    decision = suppress({v: groups[v].n if v in groups else 0 for v in values}, minimum)
    plain = Ask(
        confidence=ask.confidence,
        simultaneous=ask.simultaneous,
        estimand=ask.estimand,
        alarm_rate=ask.alarm_rate,
    )
    out = []
    for value in values:
        if value in decision.shown:
            body = estimate_window(reader, definition, window, plain, stats=groups[value])
            assert isinstance(body, Estimates | MeanEstimate)  # no dimensions on the others
            out.append(SegmentGroup(value=value, shown=True, reason=None, estimates=body))
            continue
        if value in decision.primary:
            reason = f"fewer than {minimum} reports: too few to show without singling devices out"
        else:
            reason = (
                "held back with the small groups: otherwise the total minus the shown groups "
                "would give a small group's counts"
            )
        out.append(SegmentGroup(value=value, shown=False, reason=reason, estimates=None))
    return SegmentEstimates(
        kind="segments",
        metric=definition.name,
        version=definition.version,
        window=window,
        by=dimension,
        confidence=ask.confidence,
        min_segment_reports=minimum,
        not_protected=NOT_PROTECTED,
        released=(
            f"Each shown group's estimates, with its report count. A group with fewer than "
            f"{minimum} reports is not shown (nor its count); when any is not, enough of the "
            f"smallest other groups are held back that the hidden ones are at least two and "
            f"hold at least {minimum} reports together: the metric's total (published by "
            f"its plain estimates) minus the shown groups gives only their sum."
        ),
        groups=out,
    )

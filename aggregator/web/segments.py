"""``GET /v1/estimates/<name>?by=<dimension>``: a breakdown by a public dimension.

Each shown group is estimated exactly as a whole metric is
(:func:`aggregator.web.estimates.estimate_window` with the group's counts); groups below
the minimum count are not shown, and say why (:mod:`aggregator.stats.segments`).

In full: ``docs/concepts/dimensions.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis
from flask import Flask, current_app

from aggregator.stats.segments import DEFAULT_MIN_SEGMENT_REPORTS, group_by, suppress
from aggregator.stream.counts import read_segments
from aggregator.web.models import Estimates, MeanEstimate, SegmentEstimates, SegmentGroup
from client_sdk.wire import MetricDefinition
from ldp_store.registry import Registry

__all__ = ["NOT_PROTECTED", "min_segment_reports", "segment_estimates"]

NOT_PROTECTED = (
    "Dimensions are public: each report carries them in the clear, beside its perturbed "
    "value. They are NOT protected by ε; only the value is."
)


def min_segment_reports(app: Flask | None = None) -> int:
    """The configured least reports of a shown group (``LDP_MIN_SEGMENT_REPORTS``).

    Raises:
        ValueError: not an integer of at least 1.
    """
    raw: Any = (app or current_app).config.get("MIN_SEGMENT_REPORTS", DEFAULT_MIN_SEGMENT_REPORTS)
    try:
        value = int(raw)
    except (TypeError, ValueError):
        value = 0
    if value < 1:
        raise ValueError(f"LDP_MIN_SEGMENT_REPORTS must be an integer of at least 1, got {raw!r}")
    return value


def segment_estimates(
    client: redis.Redis,
    registry: Registry,
    definition: MetricDefinition,
    window: str,
    dimension: str,
    confidence: float,
    minimum: int,
    estimate_window: Callable[..., Estimates | MeanEstimate],
) -> SegmentEstimates:
    """The breakdown of one window by ``dimension``.

    Args:
        estimate_window: how a whole metric's window is estimated from given counts
            (:func:`aggregator.web.estimates.estimate_window`): each group the same way.

    Raises:
        ValueError: ``dimension`` is not one the metric declares.
    """
    groups = group_by(definition, read_segments(client, definition, window), dimension)
    values = dict(definition.dimensions)[dimension]
    decision = suppress({v: groups[v].n if v in groups else 0 for v in values}, minimum)
    out = []
    for value in values:
        if value in decision.shown:
            body = estimate_window(
                client, registry, definition, window, confidence, counts=groups[value]
            )
            out.append(SegmentGroup(value=value, shown=True, reason=None, estimates=body))
        elif value in decision.primary:
            reason = f"fewer than {minimum} reports: too few to show without singling devices out"
            out.append(SegmentGroup(value=value, shown=False, reason=reason, estimates=None))
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
        confidence=confidence,
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

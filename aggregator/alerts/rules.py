"""An alert rule: what an operator asks to be told, checked against the metric it names.

The request body (:class:`AlertSpec`, also the OpenAPI schema), the checks a rule must
pass against its metric's current definition (:func:`check_spec`), and what a report of
that metric contributes to the rule's test (:func:`observable_for`). No I/O.

In full: ``docs/guides/alerts.md``.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field

from aggregator.stats.alerting import Observable
from client_sdk.wire import MetricDefinition
from ldp_api.models import MetricName, Model

__all__ = [
    "DEFAULT_ALPHA",
    "KINDS",
    "MAX_EMAILS",
    "AlertSpec",
    "check_spec",
    "describe",
    "observable_for",
]

DEFAULT_ALPHA = 0.05
"""The chance a rule ever fires falsely, per arming, unless the rule says otherwise."""

MAX_EMAILS = 10
"""Recipients of one rule: a team's list belongs in a mailing list, not in every rule."""

Kind = Literal["share_above", "share_below", "mean_above", "mean_below", "change"]
KINDS: tuple[str, ...] = ("share_above", "share_below", "mean_above", "mean_below", "change")


class AlertSpec(Model):
    """An alert rule as an operator defines it (``POST /v1/alerts``)."""

    closed = True

    metric: MetricName
    """The metric watched (its current version; a new version re-arms the rule)."""
    kind: Kind
    """``share_above``/``share_below``: a value's share crosses ``level``;
    ``mean_above``/``mean_below``: a numeric metric's mean crosses ``level``; ``change``:
    the value's share (or the mean) moves from its baseline by more than ``min_change``."""
    value: Annotated[str, Field(max_length=200)] | None = None
    """The domain value whose share is watched (categorical metrics)."""
    level: float | None = None
    """The level: a share in [0, 1], or a mean inside the metric's range."""
    min_change: Annotated[float, Field(ge=0)] = 0.0
    """``change``: the least change worth an alert (share points, or metric units)."""
    baseline_days: Annotated[int, Field(ge=0, le=366)] = 0
    """``change``: the baseline is the last N complete UTC days before the rule was armed;
    0: every report counted before it was armed."""
    dimension: Annotated[str, Field(max_length=64)] | None = None
    """Watch one group only: a public dimension of the metric (with ``group``)."""
    group: Annotated[str, Field(max_length=200)] | None = None
    """The value of ``dimension`` whose reports are watched."""
    alpha: Annotated[float, Field(gt=0, le=0.2)] = DEFAULT_ALPHA
    """The most probability, per arming, that the rule ever fires while its hypothesis
    holds (however often it is evaluated)."""
    webhook: Annotated[str, Field(max_length=2000, pattern=r"^https?://\S+$")] | None = None
    """A URL the alert is POSTed to (JSON, signed)."""
    email: Annotated[
        list[Annotated[str, Field(max_length=254, pattern=r"^[^@\s]+@[^@\s]+$")]],
        Field(max_length=MAX_EMAILS),
    ] = []
    """Addresses the alert is mailed to."""
    description: Annotated[str, Field(max_length=500)] = ""
    """Free text shown with the alert."""


def check_spec(spec: AlertSpec, definition: MetricDefinition | None) -> list[str]:
    """Every problem of a rule against its metric's current definition (empty: valid)."""
    if definition is None:
        return [f"no metric named {spec.metric!r}"]
    if definition.kind not in ("categorical", "numeric"):
        return [
            f"metric {spec.metric!r} is {definition.kind}: alerts watch categorical "
            "or numeric metrics"
        ]
    return [
        *_kind_problems(spec, definition),
        *_value_problems(spec, definition),
        *_level_problems(spec, definition),
        *_group_problems(spec, definition),
    ]


def _kind_problems(spec: AlertSpec, definition: MetricDefinition) -> list[str]:
    """A memoized metric, or a rule kind that does not fit the metric's kind."""
    problems = []
    numeric = definition.kind == "numeric"
    if definition.longitudinal:
        problems.append(
            f"metric {spec.metric!r} is memoized: a device's reports repeat one answer, "
            "so its reports are not independent and no alert can keep its guarantee"
        )
    if spec.kind.startswith("share_") and numeric:
        problems.append(f"{spec.kind} needs a categorical metric; use mean_above/mean_below")
    if spec.kind.startswith("mean_") and not numeric:
        problems.append(f"{spec.kind} needs a numeric metric; use share_above/share_below")
    return problems


def _value_problems(spec: AlertSpec, definition: MetricDefinition) -> list[str]:
    """The watched domain value: required for a categorical metric, none for a numeric."""
    if definition.kind == "numeric":
        return [] if spec.value is None else ["value: a numeric metric has no domain values"]
    if spec.value is None:
        return ["value: the domain value whose share is watched is required"]
    if spec.value not in definition.domain:
        return [f"value {spec.value!r} is not in the domain of {spec.metric!r}"]
    return []


def _level_problems(spec: AlertSpec, definition: MetricDefinition) -> list[str]:
    """The level (none for a change rule), and the settings only a change rule has."""
    if spec.kind == "change":
        if spec.level is None:
            return []
        return ["level: a change rule compares with its baseline, not a level"]
    problems = []
    if spec.level is None or not math.isfinite(spec.level):
        problems.append("level: a finite number is required")
    else:
        lo, hi, inside = _level_range(definition)
        if not lo < spec.level < hi:
            problems.append(f"level must {inside}")
    if spec.min_change or spec.baseline_days:
        problems.append("min_change and baseline_days belong to change rules")
    return problems


def _level_range(definition: MetricDefinition) -> tuple[float, float, str]:
    """The open interval a level lies in, and its words: the metric's range, or (0, 1)."""
    if definition.kind != "numeric":
        return 0.0, 1.0, "be a share in (0, 1)"
    lo, hi = definition.value_range or (-1.0, 1.0)
    return lo, hi, f"lie inside the metric's range ({lo}, {hi})"


def _group_problems(spec: AlertSpec, definition: MetricDefinition) -> list[str]:
    """The watched group: a dimension of the metric and one of its values, or neither."""
    if (spec.dimension is None) != (spec.group is None):
        return ["dimension and group go together"]
    if spec.dimension is None:
        return []
    dims = dict(definition.dimensions)
    if spec.dimension not in dims:
        return [f"metric {spec.metric!r} has no dimension {spec.dimension!r}"]
    if spec.group not in dims[spec.dimension]:
        return [f"{spec.group!r} is not a value of dimension {spec.dimension!r}"]
    return []


def observable_for(definition: MetricDefinition) -> Observable:
    """What a report of this metric version contributes to a rule's test."""
    if definition.kind == "numeric":
        return Observable.of_mean(definition.numeric, definition.value_range)
    return Observable.of_share(definition.oracle)


def describe(spec: AlertSpec | dict[str, Any]) -> str:
    """The rule in words: ``share of 'dark' in app.theme above 10%``."""
    s = spec if isinstance(spec, AlertSpec) else AlertSpec.model_validate(spec)
    what = f"share of {s.value!r}" if s.value is not None else "mean"
    where = s.metric + (f" [{s.dimension}={s.group}]" if s.dimension else "")
    if s.kind == "change":
        base = f"the last {s.baseline_days} days" if s.baseline_days else "before arming"
        by = f" by more than {_fmt(s, s.min_change)}" if s.min_change else ""
        return f"{what} in {where} changes from its baseline ({base}){by}"
    side = "above" if s.kind.endswith("above") else "below"
    return f"{what} in {where} {side} {_fmt(s, s.level or 0.0)}"


def _fmt(spec: AlertSpec, x: float) -> str:
    return f"{100 * x:.3g}%" if spec.value is not None else f"{x:.4g}"

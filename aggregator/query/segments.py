"""A breakdown by a public dimension: each group of one window estimated through its
kind's :class:`~aggregator.query.estimators.Estimator`, as a whole metric is, with the
groups below the minimum count not shown, nor any group whose counts a sum or difference
of served figures would give (:mod:`aggregator.query.suppression`).

In full: ``docs/concepts/dimensions.md``.
"""

from __future__ import annotations

from typing import Any

from aggregator.query.answers import Estimates, MeanEstimate, SegmentEstimates, SegmentGroup
from aggregator.query.estimators import Ask, Reader, estimate_groups
from aggregator.query.memo import off_loop, remembered
from aggregator.query.paging import Rows
from aggregator.query.suppression import HiddenGroups, hidden_groups
from aggregator.query.window import parse_segments, segment_hashes
from aggregator.stats.multiplicity import EACH, FDR
from aggregator.stats.segments import group_by, values_of
from aggregator.stats.suppression import Why
from client_sdk.wire import MetricDefinition

__all__ = ["NOT_PROTECTED", "REASONS", "segment_estimates"]

NOT_PROTECTED = (
    "Dimensions are public: each report carries them in the clear, beside its perturbed "
    "value. They are NOT protected by ε; only the value is."
)


REASONS = {
    Why.SMALL: "fewer than {minimum} reports: too few to show without singling devices out",
    Why.WITH_SMALL: (
        "held back with the small groups: otherwise the total minus the shown groups "
        "would give a small group's counts"
    ),
    Why.ENCLOSING: (
        "held back because the {holder} holding this {self} hides it too: otherwise adding "
        "up its {self}s would give the {holder}'s hidden groups"
    ),
    Why.ACROSS: (
        "held back with the other {self}s that hide it: otherwise the {holder} minus the "
        "{self}s that show it would give a small group's counts"
    ),
    Why.INSIDE: (
        "held back because one {inner} of this {self} holds nearly all of its hidden "
        "reports: otherwise this {self} minus its other {inner}s would give that {inner}'s "
        "small groups"
    ),
}
"""Why a group is not shown, per :class:`~aggregator.stats.suppression.Why`."""


def _words(window: str, holder: str | None) -> dict[str, str]:
    """A window, what holds it and what it holds, in words (for :data:`REASONS`)."""
    kind = window.partition(":")[0]
    return {
        "self": {"hour": "hour", "day": "day"}.get(kind, "all-time window"),
        "holder": "day" if (holder or "").startswith("day:") else "all-time window",
        "inner": {"day": "hour", "all": "day"}.get(kind, "part"),
    }


def _common_level(groups: list[SegmentGroup], mode: str, confidence: float) -> float | None:
    """The level every shown group's intervals are read at, when it is one for all (None
    under fdr, whose level depends on each group's flags, or with no group shown)."""
    shown = [g.estimates for g in groups if g.estimates is not None]
    if mode == FDR or not shown:
        return None
    levels = {e.level for e in shown if isinstance(e, Estimates) and e.level is not None}
    if len(levels) > 1:
        return None
    return levels.pop() if levels else confidence if mode == EACH else None


NOTES = (
    "intervals_note",
    "flags_note",
    "anytime_note",
    "reports_per_device_note",
    "post_processing",
    "shuffled_epsilon.condition",
)
"""The notes of an estimate (a dot: a field's field) that a breakdown gives once when
every shown group has the same: about 1 kB a group, 30 % of a 64-group answer."""


def _note(body: Any, path: str) -> str | None:
    """The note at ``path`` of a group's estimates (None: it has none there)."""
    for name in path.split("."):
        body = getattr(body, name, None)
    return body if isinstance(body, str) else None


def _without(body: Any, path: str) -> Any:
    """``body`` with the note at ``path`` empty."""
    name, _, rest = path.partition(".")
    inner = getattr(body, name, None)
    if inner is None:
        return body
    return body.model_copy(update={name: _without(inner, rest) if rest else ""})


def shared_notes(groups: list[SegmentGroup]) -> dict[str, str]:
    """The :data:`NOTES` every shown group of ``groups`` has alike, by path; each is then
    emptied in those groups (in place: ``groups`` are this answer's own)."""
    bodies = [g.estimates for g in groups if g.estimates is not None]
    notes = {}
    for path in NOTES:
        found = {_note(body, path) for body in bodies}
        if len(found) == 1 and (text := found.pop()):
            notes[path] = text
    for i, group in enumerate(groups):
        body = group.estimates
        if body is None or not notes:
            continue
        for path in notes:
            body = _without(body, path)
        groups[i] = group.model_copy(update={"estimates": body})
    return notes


def _groups_key(
    reader: Reader, definition: MetricDefinition, window: str, dimension: str, sizes: list[int]
) -> tuple[Any, ...]:
    """What a window's groups' counts are a function of: the metric version (and when it
    was created: a version deleted and made again), the window and the reports counted in
    each segment, read just before (a batch counted changes some segment's n in the same
    transaction as its counts, which only grow)."""
    created = reader.registry.created(definition.name, definition.version)
    return ("segments", definition.name, definition.version, created, window, dimension, *sizes)


def _group_rows(ask: Ask, definition: MetricDefinition, groups: int) -> Rows | None:
    """The rows each of ``groups`` groups shows: as asked (a numeric metric's always), a
    frequency metric's default resolved over the groups, which share its budget."""
    if ask.rows is None or definition.kind == "numeric":
        return ask.rows
    return ask.rows.resolve(groups * definition.k, groups)


def segment_estimates(
    reader: Reader,
    definition: MetricDefinition,
    window: str,
    dimension: str,
    ask: Ask,
    minimum: int,
    hidden: HiddenGroups | None = None,
) -> SegmentEstimates:
    """The breakdown of one window by ``dimension``.

    Args:
        reader: Redis and the registry.
        definition: the metric version (with public dimensions).
        window: ``all``, ``hour:…`` or ``day:…``.
        dimension: one of the metric's dimensions.
        ask: the level, multiplicity and estimand of each group's intervals (no alarms:
            they are tested on the whole metric), and the rows each group shows (the
            default's budget shared by the groups).
        minimum: the least reports a shown group has.
        hidden: every window's hidden groups read at one moment (``ldp export`` reads
            them once for all its windows); None: read now.

    Raises:
        ValueError: ``dimension`` is not one the metric declares.
    """
    values = values_of(definition, dimension)
    if hidden is None or window not in hidden.sizes:  # read first: counts only grow, so a
        hidden = hidden_groups(reader.client, definition, minimum, [window])  # group shown

    def grouped() -> dict[str, Any]:
        hashes = segment_hashes(reader.client, definition, window)
        return off_loop(lambda: group_by(definition, parse_segments(definition, hashes), dimension))

    groups = remembered(
        _groups_key(reader, definition, window, dimension, hidden.sizes[window]), grouped
    )
    why = hidden.of(window, dimension)  # then holds at least the minimum in ``groups``
    plain = Ask(
        confidence=ask.confidence,
        simultaneous=ask.simultaneous,
        estimand=ask.estimand,
        multiplicity=ask.multiplicity,
        alarm_rate=ask.alarm_rate,
        rows=_group_rows(ask, definition, len(values)),
    )
    shown = [value for value in values if value not in why]
    bodies = dict(
        zip(
            shown,
            estimate_groups(reader, definition, window, plain, [groups[v] for v in shown]),
            strict=True,
        )
    )
    out = []
    for value in values:
        if value not in why:
            body = bodies[value]
            assert isinstance(body, Estimates | MeanEstimate)  # no dimensions on the others
            out.append(SegmentGroup(value=value, shown=True, reason=None, estimates=body))
            continue
        words = _words(window, hidden.holder(window))
        reason = REASONS[why[value]].format(minimum=minimum, **words)
        out.append(SegmentGroup(value=value, shown=False, reason=reason, estimates=None))
    notes = shared_notes(out)
    mode = EACH if definition.kind == "numeric" else ask.mode
    return SegmentEstimates(
        kind="segments",
        metric=definition.name,
        version=definition.version,
        window=window,
        by=dimension,
        confidence=ask.confidence,
        estimand=ask.estimand,
        multiplicity=mode,
        level=_common_level(out, mode, ask.confidence),
        min_segment_reports=minimum,
        not_protected=NOT_PROTECTED,
        released=(
            f"Each shown group's estimates, with its report count. A group with fewer than "
            f"{minimum} reports is not shown (nor its count); when any is not, enough of the "
            f"smallest other groups are held back that the hidden ones are at least two and "
            f"hold at least {minimum} reports together. Hours, days and all time are decided "
            f"together: a window hides what the window holding it hides, and hours (days) "
            f"that hide more hide nested sets, pooled until every small group is covered by "
            f"at least {minimum} other reports, so no sum or difference of served figures "
            f"(totals included) gives a hidden group's counts."
        ),
        notes=notes,
        groups=out,
    )

"""Breakdowns by a public dimension: segment counts grouped by one dimension's values, and
which groups are shown (a minimum count, with complementary suppression).

Pure: the counts come from :func:`aggregator.stream.counts.read_segments`; each group's
counts are estimated like a whole metric's. Dimensions are public (not protected by ε):
the minimum count keeps a small group from being singled out, and a suppressed group
cannot be recovered by subtracting the shown groups from the published total.

In full: ``docs/concepts/dimensions.md``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from aggregator.stats.codecs import Counts
from aggregator.stats.numeric import NumericStats
from client_sdk.wire import MetricDefinition, segment_labels

__all__ = [
    "DEFAULT_MIN_SEGMENT_REPORTS",
    "Suppression",
    "checked_min_segment_reports",
    "group_by",
    "suppress",
    "values_of",
]

DEFAULT_MIN_SEGMENT_REPORTS = 50
"""Reports a group needs to be shown (k-anonymity-style threshold). Below a few dozen
reports an LDP estimate is mostly noise anyway, and a group that small is close to
naming the few devices in it."""


def checked_min_segment_reports(raw: object) -> int:
    """``LDP_MIN_SEGMENT_REPORTS`` as configured (``raw``).

    Raises:
        ValueError: not an integer of at least 1.
    """
    try:
        value = int(raw)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        value = 0
    if value < 1:
        raise ValueError(f"LDP_MIN_SEGMENT_REPORTS must be an integer of at least 1, got {raw!r}")
    return value


Stats = Counts | NumericStats


def values_of(definition: MetricDefinition, dimension: str) -> tuple[str, ...]:
    """The declared values of one of the metric's dimensions.

    Raises:
        ValueError: ``dimension`` is not one the metric declares.
    """
    names = [name for name, _ in definition.dimensions]
    if dimension not in names:
        raise ValueError(
            f"metric {definition.name!r} has no dimension {dimension[:64]!r}; "
            + (f"its dimensions: {names}" if names else "it declares none")
        )
    return tuple(dict(definition.dimensions)[dimension])


def group_by(
    definition: MetricDefinition, segments: Mapping[int, Stats], dimension: str
) -> dict[str, Stats]:
    """The segments' counts summed per value of ``dimension`` (every declared value,
    with empty counts where no report has it; counts are additive).

    Raises:
        ValueError: ``dimension`` is not one the metric declares.
    """
    out: dict[str, Stats | None] = dict.fromkeys(values_of(definition, dimension))
    for segment, stats in segments.items():
        label = segment_labels(definition.dimensions, segment)[dimension]
        before = out[label]
        out[label] = stats if before is None else before + stats  # type: ignore[operator]  # one kind per metric
    return {label: stats for label, stats in out.items() if stats is not None}


@dataclass(frozen=True)
class Suppression:
    """Which groups of a breakdown are shown, and why the others are not."""

    shown: tuple[str, ...]
    primary: tuple[str, ...]
    """Groups with fewer reports than the minimum (including groups without any)."""
    complementary: tuple[str, ...]
    """Groups held back although large enough, so that subtracting the shown groups
    from the total gives only the sum of at least two groups holding together at least
    the minimum, never one small group."""
    forced: tuple[str, ...] = ()
    """Groups the caller asked to hide (large enough, not complementary): what the
    window holding this one hides (:mod:`aggregator.stats.suppression`)."""


def suppress(reports: Mapping[str, int], minimum: int, forced: Collection[str] = ()) -> Suppression:
    """Decide which groups of one window are shown.

    A group with fewer than ``minimum`` reports is suppressed (primary), and so is each
    group of ``forced``. If any is, the smallest shown groups are suppressed too
    (complementary) until the suppressed ones are at least two and hold together at
    least ``minimum`` reports, or none is shown: the total is published, so otherwise
    ``total − Σ shown`` would give the small group. Across windows (a day and its hours)
    this is not enough: :func:`aggregator.stats.suppression.hide_across_windows`.

    Args:
        reports: every group (declared value) and its reports (0 for none).
        minimum: the least reports a shown group has.
        forced: groups to hide whatever their size.
    """
    primary = [g for g, n in reports.items() if n < minimum]
    held = [g for g in reports if g in forced and g not in primary]
    shown = sorted(
        (g for g in reports if g not in primary and g not in held),
        key=lambda g: (reports[g], g),
    )
    complementary = _complementary(reports, minimum, primary + held, shown)
    order = list(reports)
    return Suppression(
        shown=tuple(sorted(shown, key=order.index)),
        primary=tuple(primary),
        complementary=tuple(complementary),
        forced=tuple(held),
    )


def _complementary(
    reports: Mapping[str, int], minimum: int, hidden: list[str], shown: list[str]
) -> list[str]:
    """The smallest of ``shown`` (sorted smallest first; those taken are removed) to hide
    beside ``hidden`` until at least two are hidden, holding at least ``minimum`` reports,
    or none is shown (none when nothing is hidden)."""
    complementary: list[str] = []
    if not hidden:
        return complementary
    while shown and (
        len(hidden) + len(complementary) < 2
        or sum(reports[g] for g in hidden + complementary) < minimum
    ):
        complementary.append(shown.pop(0))
    return complementary

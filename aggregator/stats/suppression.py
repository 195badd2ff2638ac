"""Which groups of a public dimension are hidden in every served window at once (all
time, its days, their hours), so that no sum or difference of served figures gives a
hidden group: a window hides what the window holding it hides, and the sub-windows of a
window that hide more than it does hide nested sets and are pooled until every hidden
group is covered by at least ``minimum`` reports of the others.

Pure: group sizes in, hidden groups with their reasons out (the sizes are read by
:mod:`aggregator.query.suppression`). The rule and why it holds, with its cost:
``docs/statistics/suppression.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from aggregator.stats.segments import suppress

__all__ = ["Why", "Window", "hide_across_windows"]


class Why(StrEnum):
    """Why a group of a window is hidden."""

    SMALL = "small"
    """Fewer reports than the minimum in this window."""
    WITH_SMALL = "with_small"
    """Held back with this window's small groups (the window's total minus the shown
    groups would give them)."""
    ENCLOSING = "enclosing"
    """Hidden in the window holding this one (its day, or all time): adding up that
    window's sub-windows would otherwise give its hidden groups."""
    ACROSS = "across"
    """Held back with the other hours (days) that hide it: the enclosing window minus the
    ones that show it would give a small group."""
    INSIDE = "inside"
    """Held back because one hour (day) inside this window holds nearly all of the hidden
    reports: this window minus the others would give that hour's small groups."""


@dataclass(frozen=True)
class Window:
    """One served window: its reports per group of one dimension (every declared value,
    0 for none), and the served windows directly inside it (a day's hours; all time's
    days, and any hour whose day is no longer served)."""

    name: str
    sizes: Mapping[str, int]
    inside: Sequence[Window] = ()


class _Escalate(Exception):
    """A window must hide ``values`` itself: its sub-windows cannot cover them."""

    def __init__(self, window: str, values: frozenset[str]) -> None:
        super().__init__(window)
        self.window, self.values = window, values


def _mass(sizes: Mapping[str, int], groups: frozenset[str]) -> int:
    return sum(sizes.get(g, 0) for g in groups)


def _hidden(sizes: Mapping[str, int], minimum: int, forced: frozenset[str]) -> frozenset[str]:
    """A window's own rule (:func:`~aggregator.stats.segments.suppress`) with ``forced``
    groups hidden as well."""
    found = suppress(sizes, minimum, forced)
    return frozenset(sizes) - frozenset(found.shown)


def _count(window: Window) -> int:
    """``window`` and the windows inside it: a group it hides is hidden in all of them."""
    return 1 + sum(_count(inner) for inner in window.inside)


def _short(
    members: list[Mapping[str, int]],
    columns: list[Mapping[str, int]],
    rows: list[frozenset[str]],
    minimum: int,
) -> tuple[frozenset[str], int] | None:
    """What a tier's block lacks: the groups a lifted sub-window should hold, and how many
    of their reports are missing; None if each row holds ``minimum`` reports of the block
    and no member holding a small group holds all but fewer than ``min(minimum, its
    hidden reports)`` of it (nor any member all of it)."""
    for row in rows:
        held = sum(_mass(c, row) for c in columns)
        if held < minimum:
            return row, minimum - held
    block = frozenset().union(*rows)
    total = sum(_mass(c, block) for c in columns)
    for sizes in members:
        held = _mass(sizes, block)
        small = any(sizes.get(g, 0) < minimum for g in block)
        wanted = min(minimum, held) if small else 1
        if total - held < wanted:
            return block, wanted - (total - held)
    return None


def _split(
    parent: Window, above: frozenset[str], minimum: int, extra: Mapping[str, frozenset[str]]
) -> dict[str, frozenset[str]]:
    """The hidden groups of each window directly inside ``parent`` (which hides ``above``).

    Every sub-window hides ``above``. The other groups are ranked by their size in the
    parent (smallest first); a sub-window hides the shortest prefix of that ranking (its
    *tier*) holding whatever its own rule hides, so hidden sets are nested. Then, tier by
    tier, the tier's sub-windows (each a column) and those of higher tiers with the
    parent's remainder (one column) make a block of hidden cells whose rows are the
    tier's new groups (each) and the lower tiers' (together); while the block lacks
    anything :func:`_short` asks for, a sub-window of a lower tier is lifted into the
    tier: one that covers the lack alone if any, then the one whose lift hides the fewest
    more cells (groups, in it and the windows inside it), then the one holding the most
    of what is lacking.

    Raises:
        _Escalate: nothing is left to lift: the parent must hide the tier's groups.
    """
    groups = frozenset(parent.sizes)
    empty = {w.name: groups for w in parent.inside if not any(w.sizes.values())}
    if above == groups:
        return {w.name: groups for w in parent.inside}
    # an empty window hides everything and needs no cover: its total (0) tells it all
    inside = {w.name: w.sizes for w in parent.inside if w.name not in empty}
    order = sorted(groups - above, key=lambda g: (parent.sizes[g], g))
    prefix = [above | frozenset(order[:i]) for i in range(len(order) + 1)]
    tier = _tiers(inside, order, above, minimum, extra)
    rest = _remainder(parent, inside)
    while level := _next_short(inside, rest, tier, prefix, minimum):
        lower = [name for name in sorted(inside) if tier[name] < level[0]]
        if not lower:
            lacking = prefix[level[0]] - above if level[0] < len(order) else groups
            raise _Escalate(parent.name, lacking)
        tier[_lifted(parent, inside, tier, lower, level)] = level[0]
    return {**empty, **{name: prefix[tier[name]] for name in inside}}


def _remainder(parent: Window, inside: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """Each group's reports in ``parent`` beyond those of the windows ``inside`` it."""
    return {
        g: max(0, n - sum(sizes.get(g, 0) for sizes in inside.values()))
        for g, n in parent.sizes.items()
    }


def _tiers(
    inside: Mapping[str, Mapping[str, int]],
    order: list[str],
    above: frozenset[str],
    minimum: int,
    extra: Mapping[str, frozenset[str]],
) -> dict[str, int]:
    """Each sub-window's tier: the shortest prefix of ``order`` holding what its own rule
    hides beyond ``above``."""
    rank = {g: i + 1 for i, g in enumerate(order)}
    tier = {}
    for name, sizes in inside.items():
        own = _hidden(sizes, minimum, above | extra.get(name, frozenset()))
        tier[name] = max([0] + [rank[g] for g in own - above])
    return tier


def _next_short(
    inside: Mapping[str, Mapping[str, int]],
    rest: Mapping[str, int],
    tier: Mapping[str, int],
    prefix: list[frozenset[str]],
    minimum: int,
) -> tuple[int, frozenset[str], int] | None:
    """The lowest tier whose block lacks something (:func:`_short`), with what it lacks;
    None when no block does."""
    below = 0
    while levels := sorted({t for t in tier.values() if t > below}):
        level = levels[0]
        new = [frozenset([g]) for g in sorted(prefix[level] - prefix[below])]
        short = _short(
            [sizes for name, sizes in sorted(inside.items()) if tier[name] == level],
            [sizes for name, sizes in inside.items() if tier[name] >= level] + [rest],
            new + ([prefix[below]] if prefix[below] else []),
            minimum,
        )
        if short is not None:
            return level, *short
        below = level
    return None


def _lifted(
    parent: Window,
    inside: Mapping[str, Mapping[str, int]],
    tier: Mapping[str, int],
    lower: list[str],
    short: tuple[int, frozenset[str], int],
) -> str:
    """The sub-window of a lower tier to lift into the tier ``short`` names: enough alone
    first, then the fewest cells newly hidden, then the most reports."""
    level, need, missing = short
    cells = {w.name: _count(w) for w in parent.inside}  # windows a lifted one hides groups in
    held = {name: _mass(inside[name], need) for name in lower}
    cost = {name: (level - tier[name]) * cells[name] for name in lower}
    return max(lower, key=lambda n: (held[n] >= missing, -cost[n], held[n], n))


def hide_across_windows(root: Window, minimum: int) -> dict[str, dict[str, Why]]:
    """The hidden groups of every window of ``root`` (all time and what it holds), each
    with why it is hidden; a window absent from the answer's keys is not in ``root``.

    Args:
        root: the outermost served window (all time) and every served window inside it.
        minimum: the least reports a shown group has (``LDP_MIN_SEGMENT_REPORTS``).
    """
    extra: dict[str, frozenset[str]] = {}
    while True:
        try:
            hidden = {root.name: _hidden(root.sizes, minimum, extra.get(root.name, frozenset()))}
            todo = [root]
            while todo:
                window = todo.pop()
                hidden.update(_split(window, hidden[window.name], minimum, extra))
                todo.extend(window.inside)
            break
        except _Escalate as more:
            extra[more.window] = extra.get(more.window, frozenset()) | more.values
    return _reasons(root, None, hidden, extra, minimum)


def _reasons(
    window: Window,
    parent: frozenset[str] | None,
    hidden: Mapping[str, frozenset[str]],
    extra: Mapping[str, frozenset[str]],
    minimum: int,
) -> dict[str, dict[str, Why]]:
    """Why each hidden group of ``window`` and of the windows inside it is hidden."""
    above = parent or frozenset()
    more = extra.get(window.name, frozenset())
    own: frozenset[str] | None = None
    why: dict[str, Why] = {}
    for group in sorted(hidden[window.name]):
        if window.sizes.get(group, 0) < minimum:
            why[group] = Why.SMALL
        elif group in more:
            why[group] = Why.INSIDE
        elif group in above:
            why[group] = Why.ENCLOSING
        else:
            own = own or _hidden(window.sizes, minimum, above | more)
            why[group] = Why.WITH_SMALL if group in own else Why.ACROSS
    out = {window.name: why}
    for inner in window.inside:
        out.update(_reasons(inner, hidden[window.name], hidden, extra, minimum))
    return out

"""Which groups of a breakdown are shown: the minimum count and complementary suppression
in one window, and across windows (all time ⊃ days ⊃ hours) no hidden group solved for
from every served figure (docs/statistics/suppression.md)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from disclosure_helpers import Unknowns

from aggregator.stats.segments import suppress
from aggregator.stats.suppression import Why, Window, hide_across_windows


def test_groups_at_the_minimum_are_shown_and_nothing_is_held_back() -> None:
    found = suppress({"ios": 50, "android": 51, "web": 400}, 50)
    assert found.shown == ("ios", "android", "web")
    assert found.primary == found.complementary == ()


def test_one_small_group_takes_the_smallest_other_with_it() -> None:
    found = suppress({"ios": 400, "android": 60, "web": 3}, 50)
    assert found.primary == ("web",) and found.complementary == ("android",)
    assert found.shown == ("ios",)


def test_small_groups_that_together_stay_below_the_minimum_take_more() -> None:
    found = suppress({"a": 10, "b": 0, "c": 70, "d": 500}, 50)
    assert set(found.primary) == {"a", "b"} and found.complementary == ("c",)


@pytest.mark.parametrize("minimum", [1, 5, 50])
def test_no_hidden_group_is_ever_recoverable_from_the_total(minimum: int) -> None:
    """Exhaustively over small tables: hidden groups are never exactly one, and hold at
    least the minimum together unless nothing is shown."""
    for sizes in itertools.product([0, 3, minimum - 1, minimum, 200], repeat=4):
        table = dict(zip("abcd", sizes, strict=True))
        found = suppress(table, minimum)
        hidden = [*found.primary, *found.complementary]
        assert sorted(hidden + list(found.shown)) == sorted(table)
        assert all(table[g] >= minimum for g in found.shown)
        if hidden and found.shown:
            assert len(hidden) >= 2 and sum(table[g] for g in hidden) >= minimum


def test_forced_groups_are_hidden_and_covered_like_small_ones() -> None:
    found = suppress({"a": 400, "b": 300, "c": 200}, 50, forced=("c",))
    assert found.forced == ("c",) and found.primary == ()
    assert found.complementary == ("b",)  # c alone: the total minus a and b
    assert found.shown == ("a",)


# -- across windows: all time ⊃ days ⊃ hours ------------------------------------------------


def _leaves(window: Window) -> list[str]:
    """The cells a window sums: its hours, and what none of its sub-windows holds."""
    if not window.inside:
        return [window.name]
    return [leaf for inner in window.inside for leaf in _leaves(inner)] + [f"rest:{window.name}"]


def _windows(root: Window) -> list[Window]:
    return [root, *(w for inner in root.inside for w in _windows(inner))]


def attack(root: Window, hidden: dict[str, dict[str, Why]]) -> dict[tuple[str, str], float]:
    """Each hidden group's range width, solved from everything served: every window's total
    and every shown group (one dimension suffices: relabelling a report's value of this
    dimension changes no other dimension's figure, docs/statistics/suppression.md)."""
    unknowns = Unknowns()
    for window in _windows(root):
        leaves = _leaves(window)
        unknowns.known(
            [(g, leaf) for g in window.sizes for leaf in leaves], sum(window.sizes.values())
        )
        for group, n in window.sizes.items():
            if group not in hidden[window.name]:
                unknowns.known([(group, leaf) for leaf in leaves], n)
    widths = {}
    for window in _windows(root):
        for group in hidden[window.name]:
            low, high = unknowns.span([(group, leaf) for leaf in _leaves(window)])
            widths[window.name, group] = high - low
    return widths


def _day(name: str, hours: list[dict[str, int]]) -> Window:
    inner = tuple(Window(f"{name}T{i:02d}", h) for i, h in enumerate(hours))
    return Window(name, {g: sum(h[g] for h in hours) for g in hours[0]}, inner)


def test_the_day_minus_the_other_hour_no_longer_gives_a_hidden_group() -> None:
    """The issue's numbers: web has 10 reports in one hour, 55 in the next; the day shows
    65 and, alone, the second hour would show 55: 65 − 55 = the first hour's 10."""
    hours = [{"ios": 400, "android": 300, "web": 10}, {"ios": 400, "android": 300, "web": 55}]
    day = _day("d1", hours)
    root = Window("all", day.sizes, (day,))
    alone = suppress(hours[1], 50)
    assert "web" in alone.shown  # the second hour alone shows web: 65 − 55 = 10
    hidden = hide_across_windows(root, 50)
    assert hidden["d1T00"] == {"web": Why.SMALL, "android": Why.WITH_SMALL}
    assert hidden["d1T01"] == {"web": Why.ACROSS, "android": Why.ACROSS}
    assert hidden["d1"] == hidden["all"] == {}  # the day and all time still show web
    assert min(attack(root, hidden).values()) >= 50  # every hidden group open by ≥ 50


def test_a_window_hides_what_the_window_holding_it_hides() -> None:
    day = _day(
        "d1", [{"ios": 400, "android": 300, "web": 10}, {"ios": 500, "android": 400, "web": 20}]
    )
    root = Window("all", day.sizes, (day,))
    hidden = hide_across_windows(root, 50)
    assert hidden["all"] == {"web": Why.SMALL, "android": Why.WITH_SMALL}
    for window in ("d1", "d1T00", "d1T01"):  # android is large in each, yet hidden
        assert hidden[window] == {"web": Why.SMALL, "android": Why.ENCLOSING}
    assert min(attack(root, hidden).values()) >= 50


def test_a_window_one_hour_of_which_holds_nearly_everything_hides_it_too() -> None:
    """The first hour holds a small group (b: 40) and all but 25 of the day: whatever it
    hid, the day minus the quiet second hour would give it within 25 reports."""
    d1 = _day("d1", [{"a": 500, "b": 40, "c": 200}, {"a": 5, "b": 20, "c": 0}])
    d2 = _day("d2", [{"a": 1000, "b": 300, "c": 500}])
    root = Window("all", {g: d1.sizes[g] + d2.sizes[g] for g in "abc"}, (d1, d2))
    hidden = hide_across_windows(root, 50)
    assert hidden["d1"] == dict.fromkeys("abc", Why.INSIDE)
    assert hidden["d2"] == dict.fromkeys("abc", Why.ACROSS)  # held back with d1
    assert hidden["all"] == {}
    widths = attack(root, hidden)
    assert widths["d1T00", "b"] >= 50 and min(widths.values()) >= 25  # the quiet hour: 25


def test_an_empty_window_needs_no_cover() -> None:
    """A window without reports hides everything and its total (0) says so: nothing
    else is held back for it."""
    day = _day("d1", [{"ios": 400, "android": 300, "web": 60}, {"ios": 0, "android": 0, "web": 0}])
    hidden = hide_across_windows(Window("all", day.sizes, (day,)), 50)
    assert hidden["d1T01"] == dict.fromkeys(["ios", "android", "web"], Why.SMALL)
    assert hidden["d1T00"] == hidden["d1"] == {}


def _random_root(seed: int) -> Window:
    """All time over 1–3 days of 1–5 hours, 2–4 groups with skewed shares, each hour's
    groups scaled by 0, 0.1, 1 or 3 (empty, small and large groups side by side); a day
    (or all time) sometimes holds reports none of its hours holds (expired hours)."""
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 5))
    shares = rng.dirichlet(np.full(k, 0.7))
    rate = float(rng.choice([10, 40, 100, 300]))
    days = []
    for d in range(int(rng.integers(1, 4))):
        hours = [
            {
                f"g{i}": int(rng.poisson(rate * shares[i] * rng.choice([0, 0.1, 1, 1, 3])))
                for i in range(k)
            }
            for _ in range(int(rng.integers(1, 6)))
        ]
        day = _day(f"d{d}", hours)
        if rng.random() < 0.2:
            day = Window(
                day.name,
                {g: n + int(rng.poisson(rate / 3)) for g, n in day.sizes.items()},
                day.inside,
            )
        days.append(day)
    sizes = {g: sum(d.sizes[g] for d in days) for g in days[0].sizes}
    if rng.random() < 0.2:
        sizes = {g: n + int(rng.poisson(rate / 2)) for g, n in sizes.items()}
    return Window("all", sizes, tuple(days))


@pytest.mark.parametrize("seed", range(32))
def test_no_hidden_group_is_pinned_by_any_combination_of_windows(seed: int) -> None:
    """Random windows, every total and shown group served: solving for a hidden group
    never pins it, and a small group (fewer than the minimum in its window) stays open
    by at least the minimum, or by its whole window's reports when those are fewer."""
    root = _random_root(seed)
    hidden = hide_across_windows(root, 50)
    totals = {w.name: sum(w.sizes.values()) for w in _windows(root)}
    sizes = {w.name: w.sizes for w in _windows(root)}
    for (window, group), width in attack(root, hidden).items():
        if totals[window]:
            assert width >= 1, (window, group, width)
        if sizes[window][group] < 50:
            assert width >= min(50, totals[window]) - 1e-6, (window, group, width)

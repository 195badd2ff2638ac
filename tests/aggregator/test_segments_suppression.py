"""Which groups of a breakdown are shown: the minimum count and complementary suppression."""

from __future__ import annotations

import itertools

import pytest

from aggregator.stats.segments import suppress


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

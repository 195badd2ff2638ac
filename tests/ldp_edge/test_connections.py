"""The per-source connection cap's count (:class:`ldp_edge.connections.SourceConnections`):
each source apart, refused past the cap and only then, forgotten with its last
connection and with the key."""

from __future__ import annotations

import pytest

from ldp_edge.admission import KEY_LIFETIME
from ldp_edge.connections import SourceConnections


def test_a_source_is_refused_past_its_cap_and_others_are_not() -> None:
    count = SourceConnections(2)
    first, second = count.enter("203.0.113.1"), count.enter("203.0.113.1")
    assert first is not None and first == second
    assert count.enter("203.0.113.1") is None  # the third: refused, not counted
    assert count.enter("203.0.113.2") is not None
    count.leave(first)
    assert count.enter("203.0.113.1") == first  # room again


def test_a_source_is_forgotten_with_its_last_connection() -> None:
    count = SourceConnections(1)
    name = count.enter("203.0.113.1")
    assert name is not None and len(count) == 1
    count.leave(name)
    assert len(count) == 0


def test_an_added_connection_counts_without_being_refused() -> None:
    count = SourceConnections(1)
    name = count.enter("203.0.113.1")
    assert name is not None
    count.add(name)  # a kept-alive connection's next request: already in
    count.leave(name)
    assert count.enter("203.0.113.1") is None  # one still counted
    count.leave(name)
    assert count.enter("203.0.113.1") == name


def test_no_cap_counts_without_refusing_and_the_key_rotates() -> None:
    now = [0.0]
    count = SourceConnections(0, clock=lambda: now[0])
    names = [count.enter("203.0.113.1") for _ in range(1000)]
    assert len(set(names)) == 1 and names[0] is not None
    now[0] = KEY_LIFETIME
    renamed = count.enter("203.0.113.1")
    assert renamed is not None and renamed != names[0]  # a new key: a new name
    assert len(count) == 1  # the old name's connections are no longer counted
    count.leave(names[0])  # harmless
    assert len(count) == 1


def test_a_negative_cap_is_refused() -> None:
    with pytest.raises(ValueError, match="per_source"):
        SourceConnections(-1)

"""The read guard serves a window's last discovery and makes the next one behind it
(:mod:`aggregator.web.read_guard`): only a window's first read waits for a discovery;
what it keeps is bounded in bytes."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import pytest
from prometheus_client import CollectorRegistry
from werkzeug.exceptions import ServiceUnavailable

from aggregator.analysis.string_simulation import simulate_counts
from aggregator.analysis.vocabulary import synthetic_vocabulary, zipf_shares
from aggregator.query.memo import held_bytes
from aggregator.stats.discovery import discover
from aggregator.stats.kinds import codec_for
from aggregator.stats.strings import SketchEstimator
from aggregator.web import read_guard
from aggregator.web.read_guard import REDISCOVER_SECONDS, ReadGuard
from client_sdk.mechanisms.strings import StringSketch

KEY = ("app.words", 1, "all")
WAIT = 30.0
"""Seconds a test waits for a rediscovery it released (a bound, not a measurement)."""


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def never() -> str:
    raise AssertionError("a discovery ran where the kept one should have been served")


def until_kept(guard: ReadGuard, want: str, n: int, compute: Callable[[], str]) -> bool:
    """Read KEY at ``n`` until the guard keeps ``want`` (a rediscovery started by one of
    the reads finished); each read is answered from what is kept."""
    pause = threading.Event()
    for _ in range(int(WAIT / 0.01)):
        guard.get(KEY, n, compute)
        if guard.peek(KEY) == want:
            return True
        pause.wait(0.01)
    return False


def discoveries(registry: CollectorRegistry) -> float:
    return registry.get_sample_value("ldp_read_discoveries_total") or 0.0


def test_a_window_with_a_discovery_is_answered_from_it_while_a_newer_one_runs() -> None:
    clock, registry = Clock(), CollectorRegistry()
    guard = ReadGuard(limit=1, registry=registry, clock=clock)
    assert guard.get(KEY, 10, lambda: "at 10") == "at 10"  # the first read waits for it
    clock.now += REDISCOVER_SECONDS
    release, started = threading.Event(), threading.Event()

    def slow() -> str:
        started.set()
        assert release.wait(WAIT)
        return "at 20"

    # Due (n changed, the discovery as old as REDISCOVER_SECONDS): the kept one answers
    # while the newer one is blocked, and further reads neither wait nor start another.
    assert guard.get(KEY, 20, slow) == "at 10"
    assert started.wait(WAIT)
    assert guard.get(KEY, 20, never) == "at 10"
    assert guard.get(KEY, 30, never) == "at 10"
    release.set()
    assert until_kept(guard, "at 20", 20, never)
    assert guard.get(KEY, 20, never) == "at 20"  # served from what was made behind
    assert discoveries(registry) == 2


def test_no_rediscovery_before_it_is_due() -> None:
    clock = Clock()
    guard = ReadGuard(limit=1, clock=clock)
    guard.get(KEY, 10, lambda: "at 10")
    clock.now += REDISCOVER_SECONDS - 1
    assert guard.get(KEY, 20, never) == "at 10"  # n changed, but not long enough ago
    clock.now += 10 * REDISCOVER_SECONDS
    assert guard.get(KEY, 10, never) == "at 10"  # long ago, but the same counts


def test_a_failed_rediscovery_keeps_the_last_one_and_the_next_read_tries_again() -> None:
    clock = Clock()
    guard = ReadGuard(limit=1, clock=clock)
    guard.get(KEY, 10, lambda: "at 10")
    clock.now += REDISCOVER_SECONDS

    def broken() -> str:
        raise RuntimeError("discovery failed")

    assert guard.get(KEY, 20, broken) == "at 10"
    assert until_kept(guard, "at 20", 20, lambda: "at 20")


def test_a_rediscovery_beyond_the_bound_waits_for_a_later_read() -> None:
    """With ``limit`` discoveries running, a window that has one is answered from it (no
    503, nothing started); a window without one is refused as before."""
    clock = Clock()
    guard = ReadGuard(limit=1, clock=clock)
    guard.get(KEY, 10, lambda: "at 10")
    clock.now += REDISCOVER_SECONDS
    release = threading.Event()
    other = ("app.other", 1, "all")
    guard.get(other, 5, lambda: "other at 5")
    clock.now += REDISCOVER_SECONDS
    assert guard.get(other, 6, lambda: "other at 6" if release.wait(WAIT) else "") == "other at 5"
    assert guard.get(KEY, 20, never) == "at 10"
    with pytest.raises(ServiceUnavailable):
        guard.get(("app.new", 1, "all"), 1, never)
    release.set()
    assert until_kept(guard, "at 20", 20, lambda: "at 20")


def test_the_kept_discoveries_are_bounded_by_the_bytes_they_hold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The oldest windows are dropped once the kept results' arrays pass CACHED_BYTES;
    the newest is kept whatever its size."""
    monkeypatch.setattr(read_guard, "CACHED_BYTES", 3_000)
    guard = ReadGuard(limit=1, clock=Clock())
    keys = [("app.words", 1, f"w{i}") for i in range(4)]
    for key in keys:
        guard.get(key, 1, lambda: np.zeros(125))  # 1,000 bytes each
    assert [guard.peek(key) is not None for key in keys] == [False, True, True, True]
    big = ("app.big", 1, "all")
    guard.get(big, 1, lambda: np.zeros(1_000))
    assert [guard.peek(key) is not None for key in [*keys, big]] == [False] * 4 + [True]


def test_a_kept_discovery_weighs_its_levels_tables_and_its_counts() -> None:
    """What the guard keeps for a string window, (discovery, estimator), is weighed down to
    each level's table of what is known (KEPT_DEPTH), not only its top-level arrays."""
    sketch = StringSketch(epsilon=4.0, max_length=8, salt="5eed")
    vocab = synthetic_vocabulary(500, 8, seed=1)
    counts, _ = simulate_counts(
        sketch, vocab, zipf_shares(500, 1.2), 50_000, np.random.default_rng(1)
    )
    est = SketchEstimator(codec_for(sketch), counts)
    found = discover(est)
    tables = sketch.levels * sketch.rows * sketch.cells * 8  # one float64 table a level
    assert len(found.known) == sketch.levels
    weight = held_bytes((found, est), read_guard.KEPT_DEPTH)
    assert weight >= tables + est.cell_freq.nbytes + counts.support.nbytes

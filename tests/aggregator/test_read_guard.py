"""The read guard serves a window's last discovery and makes the next one behind it
(:mod:`aggregator.web.read_guard`): only a window's first read waits for a discovery."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from prometheus_client import CollectorRegistry
from werkzeug.exceptions import ServiceUnavailable

from aggregator.web.read_guard import REDISCOVER_SECONDS, ReadGuard

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

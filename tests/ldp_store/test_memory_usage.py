"""The Redis memory reading behind ``/metrics`` and the overview is measured off the
reader's path (issue 43): a stale reading is answered at once while the next is taken in
the background; before the first, a reader waits a bounded time, then gets the totals."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import redis

from ldp_store import lifecycle
from ldp_store.lifecycle import MemoryReport, MemoryUsage
from tests.test_lifecycle_retire_delete import Ticks


def test_a_stale_reading_is_answered_while_the_next_is_measured(
    redis_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate, started, taken = threading.Event(), threading.Event(), []

    def measure(client: Any) -> MemoryReport:
        started.set()
        if taken:  # the second measurement waits until the test lets it go
            assert gate.wait(10)
        taken.append(len(taken) + 1)
        return MemoryReport(by_metric={"m": len(taken)}, measured_at=float(len(taken)))

    monkeypatch.setattr(lifecycle, "measure_memory", measure)
    clock = Ticks()
    memory = MemoryUsage(redis_db.client(), ttl=60.0, clock=clock, wait=5.0)
    assert memory.read().by_metric == {"m": 1}  # the first: waited for
    clock.now += 61.0
    started.clear()
    # Stale: answered at once with the reading it has, while a thread takes the next
    assert memory.read().by_metric == {"m": 1}
    assert started.wait(5)
    gate.set()
    for _ in range(100):
        if memory.read().by_metric == {"m": 2}:
            break
        threading.Event().wait(0.05)
    assert memory.read().by_metric == {"m": 2}
    assert taken == [1, 2]  # one measurement per stale reading, not one per reader


def test_before_the_first_reading_a_reader_gets_the_totals(
    redis_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = threading.Event()

    def measure(client: Any) -> MemoryReport:
        assert gate.wait(10)
        return MemoryReport(by_metric={"m": 7}, used=1)

    monkeypatch.setattr(lifecycle, "measure_memory", measure)
    memory = MemoryUsage(redis_db.client(), wait=0.05)
    first = memory.read()
    assert first.partial and first.by_metric == {} and first.used > 0  # INFO memory's
    gate.set()
    for _ in range(100):
        if memory.read().by_metric:
            break
        threading.Event().wait(0.05)
    assert memory.read().by_metric == {"m": 7}


def test_a_measurement_that_fails_is_said_to_the_reader(
    redis_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def measure(client: Any) -> MemoryReport:
        raise redis.ResponseError("unknown command 'MEMORY'")

    monkeypatch.setattr(lifecycle, "measure_memory", measure)
    with pytest.raises(redis.ResponseError):
        MemoryUsage(redis_db.client(), wait=5.0).read()

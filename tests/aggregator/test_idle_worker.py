"""An idle aggregator worker's Redis commands do not grow with the metrics it consumes
(issue 43): counted with ``INFO commandstats`` (and the keys they name with ``MONITOR``)
over a few idle rounds at 3 and at 300 metrics, on a real Redis. And a report that
arrives while it idles is still counted: rung by the collector's append, by a shuffle
pool's release, for a new version, or with no ring at all (found by the sweep).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
import redis

from aggregator.query.window import reports_counted
from aggregator.stream.worker import Worker
from client_sdk.wire import MetricDefinition
from collector.ingest import Appender
from ldp_store import keys, scripts, shuffle
from ldp_store.registry import Registry
from tests.aggregator.test_worker import append, perturbed

SPEC = {"domain": ["a", "b", "c", "d"], "epsilon": 1.0}


def calls(client: redis.Redis) -> dict[str, int]:
    stats = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}


def idle_commands(
    client: redis.Redis, metrics: int, claim_idle_ms: int = 600_000
) -> tuple[float, dict[str, int]]:
    """Commands per idle round of a worker consuming ``metrics`` metrics, and by command.

    Claim passes (every ``claim_idle_ms / 2``) are set far apart by default: what this
    counts is the rest of a round.
    """
    registry = Registry(client)
    for i in range(metrics):
        registry.put(f"idle.m{i:03d}", SPEC)
    worker = Worker(client, handle_signals=False, block_ms=100, claim_idle_ms=claim_idle_ms)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while worker.stats.rounds < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        rounds, before = worker.stats.rounds, calls(client)
        while worker.stats.rounds < rounds + 10 and time.monotonic() < deadline:
            time.sleep(0.05)
        after, done = calls(client), worker.stats.rounds - rounds
    finally:
        worker.stop()
        thread.join(10)
    spent = {c: after[c] - before.get(c, 0) for c in after if after[c] > before.get(c, 0)}
    spent.pop("info", None)
    return sum(spent.values()) / done, spent


def test_an_idle_worker_does_not_poll_each_metric(redis_db: Any) -> None:
    client = redis_db.client()
    few, by_few = idle_commands(client, 3)
    client.flushdb()
    many, by_many = idle_commands(client, 300)
    # One blocking read a round, a pool check a second, a registry look every 5 s: the
    # same at 300 metrics as at 3 (the old worker read every stream each round, 900+).
    assert many <= few + 1.0, (by_few, by_many)
    assert by_many.get("xreadgroup", 0) <= 12, by_many


def test_a_stream_joined_between_readings_waits_for_the_next_one(redis_db: Any) -> None:
    """A version found by discovery after the claim check read the lengths is not
    claimed at once: an empty new stream gets no ``XAUTOCLAIM`` before a reading says
    whether it holds entries."""
    client = redis_db.client()
    registry = Registry(client)
    for i in range(3):
        registry.put(f"join.m{i}", SPEC)
    with idle_worker(client) as worker:  # length readings 5 min apart
        deadline = time.monotonic() + 60
        before = calls(client).get("xautoclaim", 0)
        later = registry.put("join.new", SPEC).definition
        worker._next_discovery = 0.0  # the next round looks (no 5 s wait in a test)
        key = keys.stream_key(later.name, later.version)
        while key not in worker._streams and time.monotonic() < deadline:
            time.sleep(0.05)
        rounds = worker.stats.rounds
        while worker.stats.rounds < rounds + 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert key in worker._streams
        assert calls(client).get("xautoclaim", 0) == before


def test_a_report_arriving_while_idle_is_counted(redis_db: Any) -> None:
    client = redis_db.client()
    registry = Registry(client)
    definitions = [registry.put(f"idle.r{i}", SPEC).definition for i in range(3)]
    worker = Worker(client, handle_signals=False, block_ms=100)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        while worker.stats.rounds < 5:
            time.sleep(0.05)
        for count, d in enumerate(definitions, start=1):
            append(client, d, perturbed(d, [1] * count, seed=count))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if [reports_counted(client, d) for d in definitions] == [1, 2, 3]:
                break
            time.sleep(0.05)
        assert [reports_counted(client, d) for d in definitions] == [1, 2, 3]
        # A new version after the worker went idle: found through the change counter.
        later = registry.put("idle.new", SPEC).definition
        worker._next_discovery = 0.0  # the next round looks (no 5 s wait in a test)
        append(client, later, perturbed(later, [2], seed=9))
        while time.monotonic() < deadline and reports_counted(client, later) != 1:
            time.sleep(0.05)
        assert reports_counted(client, later) == 1
    finally:
        worker.stop()
        thread.join(10)


def test_an_idle_worker_claims_only_where_a_stream_holds_entries(redis_db: Any) -> None:
    client = redis_db.client()
    _, few = idle_commands(client, 3, claim_idle_ms=100)  # a claim pass due every 50 ms
    client.flushdb()
    _, many = idle_commands(client, 300, claim_idle_ms=100)
    # Every claim interval one read of every stream's length, in one call; no XAUTOCLAIM
    # of an empty stream (a script run per stream and interval, whatever its length).
    assert "xautoclaim" not in many, many
    client_sent = ("evalsha", "eval", "xreadgroup", "get", "exists")
    spent_few = sum(few.get(c, 0) for c in client_sent)
    spent_many = sum(many.get(c, 0) for c in client_sent)
    assert spent_many <= spent_few + 5, (few, many)


def test_a_slow_round_starts_no_claim_pass_on_an_empty_stream(
    redis_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A round that outlasts the claim interval (a loaded machine) does not turn the
    streams the length reading found empty into ``XAUTOCLAIM`` runs."""
    real = scripts.read_many

    def slow_read(*args: Any, **kwargs: Any) -> Any:
        lengths = real(*args, **kwargs)
        time.sleep(0.08)  # longer than the 50 ms claim interval of claim_idle_ms=100
        return lengths

    monkeypatch.setattr(scripts, "read_many", slow_read)
    _, spent = idle_commands(redis_db.client(), 30, claim_idle_ms=100)
    assert "xautoclaim" not in spent, spent


def test_a_dead_workers_entries_are_still_claimed(redis_db: Any) -> None:
    client = redis_db.client()
    registry = Registry(client)
    quiet = [registry.put(f"claim.q{i}", SPEC).definition for i in range(20)]
    d = registry.put("claim.busy", SPEC).definition
    Worker(client, handle_signals=False).discover()  # the groups
    append(client, d, perturbed(d, [1, 2, 3], seed=4))
    client.xreadgroup(keys.GROUP, "dead-worker", {keys.stream_key(d.name, d.version): ">"})
    worker = Worker(client, handle_signals=False, block_ms=100, claim_idle_ms=100)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while reports_counted(client, d) != 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        worker.stop()
        thread.join(10)
    assert reports_counted(client, d) == 3 and worker.stats.claimed == 3
    assert all(reports_counted(client, q) == 0 for q in quiet)


def keys_named(client: redis.Redis, metrics: int) -> float:
    """Keys (``ldp:`` arguments) named per idle round of a worker consuming ``metrics``
    metrics, read with ``MONITOR``."""
    registry = Registry(client)
    for i in range(metrics):
        registry.put(f"named.m{i:03d}", SPEC)
    worker = Worker(client, handle_signals=False, block_ms=100, claim_idle_ms=600_000)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    named = 0
    try:
        deadline = time.monotonic() + 60
        while worker.stats.rounds < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        with client.monitor() as monitor:
            rounds = worker.stats.rounds
            while worker.stats.rounds < rounds + 10 and time.monotonic() < deadline:
                command = monitor.next_command()["command"]
                named += sum(word.startswith("ldp:") for word in command.split())
            done = worker.stats.rounds - rounds
    finally:
        worker.stop()
        thread.join(10)
    return named / done


def test_an_idle_worker_names_as_few_keys_at_300_metrics_as_at_3(redis_db: Any) -> None:
    client = redis_db.client()
    few = keys_named(client, 3)
    client.flushdb()
    many = keys_named(client, 300)
    # The doorbell and the registry's change counter, not every stream (600 a round).
    assert many <= few + 1.0, (few, many)
    assert many < 10, many


@contextmanager
def idle_worker(client: redis.Redis, claim_idle_ms: int = 600_000) -> Iterator[Worker]:
    worker = Worker(client, handle_signals=False, block_ms=100, claim_idle_ms=claim_idle_ms)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        while worker.stats.rounds < 5:
            time.sleep(0.05)
        yield worker
    finally:
        worker.stop()
        thread.join(10)


def counted_soon(client: redis.Redis, d: MetricDefinition, n: int) -> int:
    deadline = time.monotonic() + 30
    while reports_counted(client, d) != n and time.monotonic() < deadline:
        time.sleep(0.05)
    return reports_counted(client, d)


def test_reports_rung_by_the_collector_and_a_pool_release_are_counted(any_redis: Any) -> None:
    client = any_redis.client()
    registry = Registry(client)
    direct, relayed = (registry.put(f"bell.{m}", SPEC).definition for m in ("direct", "relayed"))
    with idle_worker(client) as worker:
        items = [(os.urandom(16), p) for p in perturbed(direct, [1, 2], seed=3)]
        Appender(client, max_backlog=1000).append(
            direct.name, direct.version, items, datetime.now(UTC)
        )
        assert counted_soon(client, direct, 2) == 2
        pool = keys.pool_key(relayed.name, relayed.version, 0)
        for payload in perturbed(relayed, [0, 3, 3], seed=4):
            client.xadd(pool, {"p": payload})  # as the append script pools relayed reports
        # idle rounds (a pool below B is not the worker's to release yet): the release's
        # ring must wake a worker that is blocked on the doorbell
        rounds, deadline = worker.stats.rounds, time.monotonic() + 30
        while worker.stats.rounds < rounds + 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert worker.stats.rounds >= rounds + 3
        assert shuffle.release(client, relayed.name, relayed.version, 0, min_batch=3) == 3
        assert counted_soon(client, relayed, 3) == 3


def test_entries_without_a_ring_are_found_by_the_sweep(any_redis: Any) -> None:
    client = any_redis.client()
    d = Registry(client).put("bell.lost", SPEC).definition
    with idle_worker(client, claim_idle_ms=200):  # a sweep every 100 ms
        append(client, d, perturbed(d, [1], seed=5), ring=False)  # a ring lost
        assert counted_soon(client, d, 1) == 1
        client.delete(keys.DOORBELL)  # the doorbell itself lost
        append(client, d, perturbed(d, [2, 2], seed=6))
        assert counted_soon(client, d, 3) == 3


def test_a_stream_holding_entries_is_claimed_at_every_reading_of_a_slow_round(
    redis_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream that holds entries (here kept by a second group that never reads) gets
    its claim pass every claim interval, at each length reading, however long the round
    (a loaded machine): not at every other one, which doubles a dead worker's wait."""
    client = redis_db.client()
    d = Registry(client).put("claim.held", SPEC).definition
    worker = Worker(client, handle_signals=False, block_ms=10, claim_idle_ms=100)
    worker.discover()
    stream = keys.stream_key(d.name, d.version)
    client.xgroup_create(stream, "never-reads", id="0")  # the entries stay in the stream
    append(client, d, perturbed(d, [1, 2, 3], seed=5))
    real, readings = scripts.read_many, []

    def slow_read(client: Any, command: str, names: list[str], *args: Any) -> Any:
        lengths = real(client, command, names, *args)
        if stream in names:  # the streams' length reading (not the pools' or registry's)
            readings.append(True)
            time.sleep(0.08)  # longer than the 50 ms claim interval of claim_idle_ms=100
        return lengths

    monkeypatch.setattr(scripts, "read_many", slow_read)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while len(readings) < 12 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        worker.stop()
        thread.join(10)
    passes = next(s.claim_passes for s in worker._streams.values() if s.key == stream)
    assert client.xlen(stream) == 3 and reports_counted(client, d) == 3
    assert passes >= len(readings) - 1, (passes, len(readings))

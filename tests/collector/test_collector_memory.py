"""Memory: ingest answers 503 at a high-water mark before Redis refuses writes, the
aggregator drains at the mark and past Redis's own limit, and ingest then resumes."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from collector_helpers import define, make_app, reports

from aggregator.stream.worker import Worker
from collector.context import services
from collector.memory import MemoryGuard, fullest
from ldp_store import keys, streams
from ldp_store.connection import connect
from ldp_store.embedded import EmbeddedRedis

RETRY_AFTER = 7

WIDE_SPEC = {"domain": [f"v{i}" for i in range(1000)], "epsilon": 1.0, "mechanism": "oue"}
"""Reports of about 170 bytes: the backlog, not the replay guard (about 10 bytes per id,
with a budget of its own), is most of what ingest adds, so draining it brings memory
down."""


def limit_memory(server: EmbeddedRedis, fill: float) -> int:
    """Set maxmemory so that Redis is ``fill`` full now; returns it (a few MB)."""
    r = server.client()
    info = r.info("memory")
    used = int(info["used_memory"]) - int(info.get("mem_not_counted_for_evict", 0))
    limit = int(used / fill)
    r.config_set("maxmemory", limit)
    return limit


def fill_until_503(client: Any, definition: Any, batch: int = 100) -> tuple[int, Any, list[Any]]:
    """POST fresh batches until one is refused; returns (accepted, that response, batch).

    The mark comes before Redis's own refusal as long as one request (its arguments in
    Redis while the script runs, plus what it adds) is smaller than the room above the
    mark: 10 % of maxmemory. Here maxmemory is about 2 MB, so batches stay near 1 % of it
    (a 500-report batch is about 5 %, and with its arguments could cross); in production
    the room is 10 % of GBs and a request is at most a few MB.
    """
    accepted = 0
    for seed in range(1, 1000):
        sent = reports(definition, batch, seed=seed)
        response = client.post("/v1/reports", json={"reports": sent})
        if response.status_code == 503:
            return accepted, response, sent
        assert response.status_code == 202, response.json
        assert response.json["accepted"] == batch
        accepted += batch
    raise AssertionError("never refused")


def test_ingest_answers_503_at_the_high_water_mark_and_resumes_after_draining(
    own_any_redis: EmbeddedRedis,
) -> None:
    app = make_app(
        own_any_redis.url,
        RETRY_AFTER=RETRY_AFTER,
        MEMORY_HIGH_WATER=90,
        SOURCE_REQUESTS_PER_SECOND=0,  # one test client stands for many devices
    )
    guard = services(app).appender.memory
    guard.interval = guard.near_interval = 0.0  # read INFO on every request: exact here
    client = app.test_client()
    pages = define(client, "app.wide", WIDE_SPEC)
    r = own_any_redis.client()
    worker = Worker(r, handle_signals=False)
    worker.run(once=True)  # the aggregator is up: its consumer group exists
    limit = limit_memory(own_any_redis, 0.5)

    accepted, refused, batch = fill_until_503(client, pages)
    assert accepted > 0
    assert refused.headers["Retry-After"] == str(RETRY_AFTER)
    assert "memory" in refused.json["error"] and "90%" in refused.json["error"]
    info = r.info("memory")
    # The mark is 90 % of what the replay guard's budget leaves (20 % of maxmemory);
    # the guard's ids are not counted against it.
    assert guard.last is not None and 0.9 <= (guard.last.fill() or 0)
    assert fullest(info) < 1.0  # the mark came first: Redis never refused a write
    assert int(info["used_memory"]) < limit
    stream = keys.stream_key(pages.name, pages.version)
    assert streams.length(r, stream) == accepted  # every report answered 202 is there
    metrics = client.get("/metrics").data.decode()
    assert 'ldp_collector_unavailable_total{reason="memory"} 1.0' in metrics

    stats = Worker(r, handle_signals=False).run(once=True)  # the real worker drains
    assert stats.counted == accepted and streams.length(r, stream) == 0
    counts = keys.counts_key(pages.name, pages.version)
    assert int(r.hget(counts, "n") or 0) == accepted
    retry = client.post("/v1/reports", json={"reports": batch})
    assert retry.status_code == 202, retry.json
    assert retry.json["accepted"] == len(batch)  # the refused batch was never appended


def test_the_aggregator_drains_even_when_redis_refuses_writes(own_any_redis: EmbeddedRedis) -> None:
    """Past the mark (a collector without it, say), Redis itself refuses ingest with OOM;
    the worker's reads, XACK and trims are not refused, and its count increments follow a
    write inside one script, which Redis allows: the backlog still drains."""
    app = make_app(own_any_redis.url, RETRY_AFTER=RETRY_AFTER, SOURCE_REQUESTS_PER_SECOND=0)
    services(app).appender.memory.high_water = float("inf")  # no mark
    client = app.test_client()
    pages = define(client, "app.wide", WIDE_SPEC)
    r = own_any_redis.client()
    Worker(r, handle_signals=False).run(once=True)
    limit_memory(own_any_redis, 0.5)

    accepted, refused, batch = fill_until_503(client, pages)
    assert "out of memory" in refused.json["error"]
    stream = keys.stream_key(pages.name, pages.version)
    assert streams.length(r, stream) == accepted
    stats = Worker(r, handle_signals=False).run(once=True)
    assert stats.counted == accepted and streams.length(r, stream) == 0
    assert int(r.hget(keys.counts_key(pages.name, pages.version), "n") or 0) == accepted
    assert client.post("/v1/reports", json={"reports": batch}).status_code == 202


def test_readings_are_reused_far_from_the_mark_and_refreshed_near_it(redis_db: Any) -> None:
    r = redis_db.client()
    now = [0.0]
    guard = MemoryGuard(r, 0.9, interval=1.0, near_interval=0.1, clock=lambda: now[0])

    def info_calls() -> int:
        return int(r.info("commandstats").get("cmdstat_info", {}).get("calls", 0))

    try:
        r.config_set("maxmemory", 0)
        r.config_resetstat()
        assert guard.fill() is None  # no maxmemory: no mark
        now[0] = 0.5
        guard.check()
        assert info_calls() == 1  # reused within the interval (this count's INFO is not in it)
        used = int(r.info("memory")["used_memory"])
        r.config_set("maxmemory", int(used / 0.85))  # 85 %: within NEAR of the mark
        now[0] = 1.0
        assert 0.8 < (guard.fill() or 0) < 0.9
        r.config_set("maxmemory", int(used / 0.95))
        now[0] = 1.05
        guard.check()  # still the 85 % reading
        now[0] = 1.11  # near the mark, a reading lasts 0.1 s
        with pytest.raises(Exception, match="memory"):
            guard.check()
    finally:
        r.config_set("maxmemory", 0)


def test_the_fullest_node_of_a_cluster_decides(cluster_db: Any) -> None:
    client = connect(cluster_db.url)
    guard = MemoryGuard(client, 0.9, interval=0.0)
    client.config_set("maxmemory", 0, target_nodes=client.ALL_NODES)
    assert guard.fill() is None  # no node has a limit
    nodes = client.get_primaries()
    try:
        for i, node in enumerate(nodes):
            used = int(client.info("memory", target_nodes=node)["used_memory"])
            client.config_set("maxmemory", int(used / (0.3 + 0.2 * i)), target_nodes=node)
        assert 0.6 < (guard.fill() or 0) < 0.8  # three nodes at about 30, 50 and 70 %
    finally:
        client.config_set("maxmemory", 0, target_nodes=client.ALL_NODES)


def test_a_node_that_cannot_be_read_leaves_the_last_reading_for_an_interval(
    own_redis: EmbeddedRedis,
) -> None:
    """A dead node (a cluster primary failing over) does not refuse every request: the
    last reading stands, and the nodes are read again an interval later (no reading yet:
    the error is the answer)."""
    now = [0.0]
    client = own_redis.client()
    guard = MemoryGuard(client, 0.9, interval=1.0, near_interval=0.1, clock=lambda: now[0])
    fresh = MemoryGuard(own_redis.client(), 0.9, clock=lambda: now[0])
    before = guard.check()
    own_redis.kill()
    now[0] = 5.0
    assert guard.check() is before
    with pytest.raises(redis.ConnectionError):
        fresh.check()
    own_redis.start()
    now[0] = 5.5
    assert guard.check() is before  # within an interval of the failure: not read again
    now[0] = 6.0
    assert guard.check() is not before

"""The replay guard has a memory budget of its own, so it cannot pin ingest at 503.

Issue 29: a million valid junk reports left ~10 MB of guard sets with the stream drained;
above 90 % of ``maxmemory`` ingest answered 503 for every metric, with nothing for the
aggregator to drain, for up to two days. Now the mark counts only what the guard's budget
leaves, and at the budget the guard drops yesterday's ids (logged, counted); when today's
ids alone fill it, reports get 503 (reason ``guard``) until the UTC day ends.
"""

from __future__ import annotations

import logging
import random
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from collector_helpers import THEME_SPEC, define, make_app, reports

from collector.context import services
from collector.ingest import Appender
from ldp_store import guard, keys
from ldp_store.embedded import EmbeddedRedis
from ldp_store.lifecycle import guard_day_keys

BATCH = 1000


def used(r: Any) -> int:
    info = r.info("memory")
    return int(info["used_memory"]) - int(info.get("mem_not_counted_for_evict", 0))


def fill_guard(r: Any, appender: Appender, definition: Any, when: datetime, stop: Any) -> int:
    """Append batches of fresh ids on ``when``'s day, draining the stream after each (as
    the aggregator would), until ``stop(ids so far)``; returns the ids appended."""
    rng = random.Random(29)
    stream = keys.stream_key(definition.name, definition.version)
    held = 0
    while not stop(held):
        # Smaller batches near the limit: one call's arguments and stream entries take
        # Redis memory for a moment (a 1,000-id call about 10 % of these few MB).
        size = BATCH if used(r) < 0.8 * int(r.config_get("maxmemory")["maxmemory"]) else 200
        items = [(rng.randbytes(16), b"{}") for _ in range(size)]
        added, _ = appender.append(definition.name, definition.version, items, when)
        assert added == size
        r.xtrim(stream, maxlen=0)  # drained: only the guard stays
        held += added
    return held


def test_a_full_guard_with_a_drained_stream_does_not_stop_ingest(
    own_any_redis: EmbeddedRedis, caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app(own_any_redis.url, SOURCE_REQUESTS_PER_SECOND=0)
    ext = services(app)
    ext.appender.memory.interval = ext.appender.memory.near_interval = 0.0
    client = app.test_client()
    theme = define(client, "app.theme", THEME_SPEC)
    r = own_any_redis.client()
    limit = used(r) + 3_000_000
    r.config_set("maxmemory", limit)
    yesterday = datetime.now(UTC) - timedelta(days=1)
    day = guard.day_pair(yesterday)[0]

    before = used(r)
    held = fill_guard(r, ext.appender, theme, yesterday, lambda _: used(r) >= 0.91 * limit)
    grown = (used(r) - before) / held
    guard_keys = guard_day_keys(r, day)
    measured = sum(int(r.memory_usage(k) or 0) for k in guard_keys)
    per_id = measured / held
    print(
        f"guard: {held:,} ids, MEMORY USAGE {per_id:.1f} B/id, used_memory {grown:.1f} B/id; "
        f"limit {limit:,}"
    )
    assert per_id <= guard.BYTES_PER_ID  # the budget's weighing does not undercount
    assert used(r) >= 0.9 * limit  # above the old mark, with nothing to drain

    caplog.set_level(logging.WARNING, logger="collector.memory")
    batch = reports(theme, 10)
    full = used(r)
    response = client.post("/v1/reports", json={"reports": batch})
    assert response.status_code == 202, response.json  # was 503 "memory" for two days
    assert guard_day_keys(r, day) == []  # yesterday's ids dropped: the window shortened
    print(f"used {full / limit:.0%} of maxmemory before the POST, {used(r) / limit:.0%} after")
    assert used(r) < 0.5 * limit
    alarms = [rec.getMessage() for rec in caplog.records if "replay guard" in rec.getMessage()]
    assert len(alarms) == 1 and "dropped yesterday's ids" in alarms[0]
    again = client.post("/v1/reports", json={"reports": batch})
    assert again.json["duplicates"] == 10  # today's replays are still refused
    metrics = client.get("/metrics").data.decode()
    assert "ldp_replay_guard_shortened_total 1.0" in metrics
    assert 'ldp_replay_guard_ids{day="yesterday"} 0.0' in metrics
    assert 'ldp_replay_guard_ids{day="today"} 10.0' in metrics
    assert f"ldp_replay_guard_budget_bytes {int(0.2 * limit)}.0" in metrics
    assert "ldp_replay_guard_measured_bytes" in metrics


def test_todays_ids_alone_at_the_budget_answer_503_until_the_day_ends(
    own_any_redis: EmbeddedRedis,
) -> None:
    app = make_app(own_any_redis.url, SOURCE_REQUESTS_PER_SECOND=0, GUARD_BUDGET=5)
    ext = services(app)
    ext.appender.memory.interval = ext.appender.memory.near_interval = 0.0
    client = app.test_client()
    theme = define(client, "app.theme", THEME_SPEC)
    r = own_any_redis.client()
    limit = used(r) + 3_000_000
    r.config_set("maxmemory", limit)
    budget_ids = 0.05 * limit / guard.BYTES_PER_ID
    now = datetime.now(UTC)
    fill_guard(r, ext.appender, theme, now, lambda held: held >= budget_ids)

    response = client.post("/v1/reports", json={"reports": reports(theme, 10)})
    assert response.status_code == 503, response.json
    assert "replay guard" in response.json["error"] and "00:00 UTC" in response.json["error"]
    assert response.headers["Retry-After"]
    metrics = client.get("/metrics").data.decode()
    assert 'ldp_collector_unavailable_total{reason="guard"} 1.0' in metrics
    # The next UTC day, those ids are yesterday's: the guard drops them and ingest resumes.
    assert ext.appender.memory.check(now + timedelta(days=1)) == guard.day_pair(now)[0]


def test_a_days_guard_expires_when_no_lookup_can_read_it(redis_db: Any) -> None:
    """Ids of day D are looked up during D and D+1 only: their keys expire at the end of
    D+1 (+ slack), not two days after the last write (a third day nobody read)."""
    app = make_app(redis_db.url)
    client = app.test_client()
    theme = define(client, "app.theme", THEME_SPEC)
    assert client.post("/v1/reports", json={"reports": reports(theme, 5)}).status_code == 202
    r = redis_db.client()
    today = guard.day_pair(datetime.now(UTC))[0]
    found = guard_day_keys(r, today)
    assert len(found) == 3  # the day's hash, its one bucket and the bucket's expiry bitmap
    for key in [*found, keys.guard_held_key(today).encode()]:
        assert abs(time.time() + r.ttl(key) - guard.expires_at(today)) <= 5, key


def test_on_a_cluster_the_guard_is_counted_and_shortened_across_nodes(cluster_db: Any) -> None:
    from ldp_store.connection import connect

    client = connect(cluster_db.url)
    appender = Appender(client, 1_000_000, high_water=0.9, guard_share=1e-7)
    memory = appender.memory
    memory.interval = memory.near_interval = 0.0
    now = datetime.now(UTC)
    yesterday = now - timedelta(days=1)
    rng = random.Random(7)
    for name in ("a.one", "b.two", "c.three"):  # spread over the nodes' slots
        items = [(rng.randbytes(16), b"{}") for _ in range(50)]
        assert appender.append(name, 1, items, yesterday) == (50, 0)
    day = guard.day_pair(yesterday)[0]
    assert len(guard_day_keys(client, day)) == 3 * 3  # a hash, a bucket and its bitmap each
    client.config_set("maxmemory", 1 << 30, target_nodes=client.ALL_NODES)
    try:
        reading = memory.reading(now)
        assert (reading.held_today, reading.held_yesterday) == (0, 150)
        assert len(reading.nodes) == 3 and (reading.guard_fill() or 0) >= 1
        assert memory.check(now) == day  # dropped on every node
        assert guard_day_keys(client, day) == []
        assert memory.reading(now).held_yesterday == 0
    finally:
        client.config_set("maxmemory", 0, target_nodes=client.ALL_NODES)


def test_the_days_count_of_guard_ids_is_sent_at_most_once_an_interval(
    redis_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Appends within the memory guard's ``near_interval`` of the last count add theirs
    up in the process (no second round trip each); the first one after it sends the sum;
    a count Redis failed to take is sent with the next one, not lost."""
    r = redis_db.client()
    appender = Appender(r, 1_000_000)
    appender.memory.near_interval = 3600.0
    now = datetime.now(UTC)
    held = keys.guard_held_key(guard.day_pair(now)[0])
    rng = random.Random(3)

    def batch(n: int) -> list[tuple[bytes, bytes]]:
        return [(rng.randbytes(16), b'{"v":1}') for _ in range(n)]

    calls = []
    incrby = r.incrby
    monkeypatch.setattr(r, "incrby", lambda *args: calls.append(args) or incrby(*args))

    def incrbys() -> int:  # round trips for the count (the script's own INCRBYs aside)
        return len(calls)

    assert appender.append("a.one", 1, batch(30), now) == (30, 0)  # the first: sent
    sent = incrbys()
    assert int(r.get(held) or 0) == 30
    assert abs(time.time() + r.ttl(held) - guard.expires_at(guard.day_pair(now)[0])) <= 5
    assert appender.append("a.one", 1, batch(20), now) == (20, 0)
    assert appender.append("b.two", 1, batch(5), now) == (5, 0)
    assert incrbys() == sent and int(r.get(held) or 0) == 30  # added up, not sent
    appender.memory.near_interval = 0.0
    with monkeypatch.context() as patched:
        patched.setattr(r, "incrby", lambda *args: (_ for _ in ()).throw(ConnectionError("down")))
        with pytest.raises(ConnectionError):
            appender.append("a.one", 1, batch(7), now)
    assert int(r.get(held) or 0) == 30
    assert appender.append("a.one", 1, batch(1), now) == (1, 0)
    assert int(r.get(held) or 0) == 30 + 20 + 5 + 7 + 1

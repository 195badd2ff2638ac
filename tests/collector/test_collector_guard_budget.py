"""The replay guard's budget: shared fairly between metric versions, never stopping ingest
for long, never overshot by more than its margin, and visible on ``/readyz``.

Issue 29 gave the guard a budget of its own. Issue 35: ~50k valid fake reports to one
metric filled it; then every metric answered 503 "frees at 00:00 UTC" (about 20 h away)
while ``/readyz`` said 200, and the guard held 149-232 % of its budget before it refused.
Now half the budget is reserved in equal parts for every version's shard and half is a
pool; a version at its share ends its guard's epoch early (never forgetting an id younger
than ``guard.MIN_WINDOW``) or is refused until it may, and only it.

Time is injected (``ingest(..., now=)`` and the memory guard's clock): no test sleeps.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from collector_helpers import THEME_SPEC, define, make_app, reports

from collector.context import services
from collector.errors import Unavailable
from collector.ingest import Appender, ingest
from ldp_store import guard, keys, streams
from ldp_store.embedded import EmbeddedRedis
from ldp_store.lifecycle import guard_day_keys
from tests.clock import Clock

MAXMEMORY = 16_000_000
"""Far above what the tests store: the mark never answers, only the guard's budget."""

BUDGET_IDS = MAXMEMORY // 100 // guard.BYTES_PER_ID
"""The guard's budget at ``GUARD_BUDGET=1`` (1 %): 8,000 ids."""

MONDAY = datetime(2030, 1, 7, 6, tzinfo=UTC)
WINDOW = timedelta(seconds=guard.MIN_WINDOW)


@pytest.fixture
def limited(any_redis: EmbeddedRedis) -> Iterator[EmbeddedRedis]:
    """The session's Redis of either version, with :data:`MAXMEMORY` for the test and no
    limit again after it (other tests share the server)."""
    r = any_redis.client()
    r.config_set("maxmemory", MAXMEMORY)
    try:
        yield any_redis
    finally:
        r.config_set("maxmemory", 0)


def collector_process(r: Any, clock: Clock, units: int) -> Appender:
    """One collector process's appender on ``r`` (a :func:`limited` server), with a budget
    of :data:`BUDGET_IDS` ids split among ``units``, on the test's clock."""
    appender = Appender(r, 10**9, guard_share=0.01, units=lambda: units)
    appender.memory.clock = clock
    return appender


def app_with_two_metrics(server: EmbeddedRedis) -> tuple[Any, Any, Any, Clock]:
    """A collector on ``server`` with a budget of :data:`BUDGET_IDS` ids, metrics
    ``a.flood`` and ``b.quiet`` (two units: each reserves a quarter, the pool is half)."""
    server.client().config_set("maxmemory", MAXMEMORY)
    app = make_app(
        server.url, SOURCE_REQUESTS_PER_SECOND=0, SOURCE_REPORTS_PER_MINUTE=0, GUARD_BUDGET=1
    )
    client = app.test_client()
    flood = define(client, "a.flood", THEME_SPEC)
    quiet = define(client, "b.quiet", THEME_SPEC)
    clock = Clock()
    memory = services(app).appender.memory
    memory.clock = clock
    return app, flood, quiet, clock


def post(app: Any, definition: Any, n: int, seed: int, when: datetime) -> tuple[int, Any]:
    """Ingest ``n`` fresh reports at ``when``: (accepted, the 503 if any)."""
    body = {"reports": reports(definition, n, seed=seed)}
    ctx = services(app)
    try:
        return ingest(body, ctx, 1000, now=when).accepted, None
    except Unavailable as exc:
        return -1, exc


def held(r: Any, name: str, day: str, yesterday: str) -> int:
    """Ids the guard of ``name`` v1 holds in its two epochs, as its state says."""
    state = r.hgetall(keys.guard_key(name, 1, day))
    if b"p" in state:
        return int(state.get(b"n", 0)) + int(state.get(b"pn", 0))
    before = int(r.hget(keys.guard_key(name, 1, yesterday), "n") or 0)
    return int(state.get(b"n", 0)) + before


def flood_until_refused(app: Any, definition: Any, when: datetime, seed: int) -> tuple[int, Any]:
    """Batches of 500 at ``when``, 5 a second of the memory guard's clock (the stream
    drained after each, as the aggregator would), until one gets a 503."""
    r = services(app).redis
    clock = services(app).appender.memory.clock
    accepted = 0
    for n in range(200):
        clock.now += 0.2  # type: ignore[attr-defined]
        got, refused = post(app, definition, 500, seed + n, when)
        r.xtrim(keys.stream_key(definition.name, definition.version), maxlen=0)
        if refused is not None:
            return accepted, refused
        accepted += got
    raise AssertionError("never refused")


def test_a_flood_on_one_metric_leaves_the_others_their_share(own_any_redis: EmbeddedRedis) -> None:
    """Fails on the old code: the flood filled the one budget of every metric and
    ``b.quiet`` got 503 "frees at 00:00 UTC" too."""
    app, flood, quiet, _ = app_with_two_metrics(own_any_redis)
    accepted, refused = flood_until_refused(app, flood, MONDAY, seed=1)
    for n in range(4):  # b.quiet's reserve is still whole
        assert post(app, quiet, 500, 900 + n, MONDAY)[0] == 500
    assert refused.reason == "guard" and "'a.flood'" in refused.error
    reserve, pool = BUDGET_IDS // 4, BUDGET_IDS // 2
    assert accepted <= reserve + pool  # its reserve and the whole pool, no more
    r = own_any_redis.client()
    day, yesterday = guard.day_pair(MONDAY)
    total = held(r, "a.flood", day, yesterday) + held(r, "b.quiet", day, yesterday)
    assert total <= BUDGET_IDS  # one process: not one id over


def test_a_full_share_takes_reports_again_within_the_window(own_any_redis: EmbeddedRedis) -> None:
    """Fails on the old code: ``a.flood`` stayed refused until 00:00 UTC, 18 h later."""
    app, flood, _, clock = app_with_two_metrics(own_any_redis)
    _, refused = flood_until_refused(app, flood, MONDAY, seed=1)
    wait = getattr(refused, "retry_after", None) or guard.MIN_WINDOW
    clock.now += 60
    later = MONDAY + timedelta(seconds=wait)
    assert post(app, flood, 500, 500, later)[0] == 500  # its guard forgot older ids
    assert 0 < wait <= guard.MIN_WINDOW and "00:00 UTC" not in refused.error


@pytest.mark.parametrize("minutes_before_midnight", [200, 95, 61, 59, 31, 29, 1])
def test_recovery_takes_at_most_three_windows_even_at_the_days_end(
    limited: EmbeddedRedis, minutes_before_midnight: int
) -> None:
    """Refused at any time of day, a version takes reports again within
    ``3 × MIN_WINDOW`` (the epoch may end once it is the window old, but not within the
    window of midnight, and the day's first epoch is young for the window after it);
    retried as its Retry-After says, it gets in. A sustained flood: 100 reports a second."""
    r = limited.client()
    clock = Clock()
    appender = collector_process(r, clock, units=2)
    midnight = datetime(2030, 1, 8, tzinfo=UTC)
    when = midnight - timedelta(minutes=minutes_before_midnight)
    rng = random.Random(minutes_before_midnight)
    refused_at: datetime | None = None
    worst = timedelta(0)
    end = midnight + 4 * WINDOW
    while when < end:
        batch = [(rng.randbytes(16), b"{}") for _ in range(100)]
        try:
            appender.append("a.flood", 1, batch, when)
            if refused_at is not None:
                worst = max(worst, when - refused_at)
                refused_at = None
            step = timedelta(seconds=1)
        except Unavailable as exc:
            assert exc.reason == "guard" and exc.retry_after
            refused_at = refused_at or when
            step = timedelta(seconds=exc.retry_after)  # as the client is told
        r.xtrim(keys.stream_key("a.flood", 1), maxlen=0)
        when += step
        clock.now += step.total_seconds()
    assert refused_at is None or when - refused_at <= 3 * WINDOW
    assert worst <= 3 * WINDOW
    print(f"refused {minutes_before_midnight} min before midnight: worst wait {worst}")


def test_every_accepted_id_is_a_replay_for_at_least_the_window(limited: EmbeddedRedis) -> None:
    """Exactly once within the window: through a flood that ends epochs early and a day's
    end, every id accepted less than ``MIN_WINDOW`` ago is found as a replay, and none is
    appended twice then. (Older ones may be forgotten: what the docs say remains.)"""
    r = limited.client()
    clock = Clock()
    appender = collector_process(r, clock, units=2)
    rng = random.Random(35)
    when = datetime(2030, 1, 7, 21, tzinfo=UTC)
    accepted: list[tuple[datetime, bytes]] = []
    stream = keys.stream_key("a.flood", 1)
    replays = 0
    while when < datetime(2030, 1, 8, 3, tzinfo=UTC):
        fresh = [rng.randbytes(16) for _ in range(200)]
        young = [rid for at, rid in accepted if when - at < WINDOW]
        again = rng.sample(young, min(100, len(young)))
        before = streams.length(r, stream)
        try:
            got, duplicates = appender.append("a.flood", 1, [(x, b"{}") for x in again], when)
            assert (got, duplicates) == (0, len(again))
        except Unavailable as exc:  # refused before the lookups found them: none appended
            assert exc.appended == 0  # type: ignore[attr-defined]
        replays += len(again)
        assert streams.length(r, stream) == before
        try:
            appender.append("a.flood", 1, [(x, b"{}") for x in fresh], when)
            accepted += [(when, x) for x in fresh]
        except Unavailable as exc:
            appended = exc.appended  # type: ignore[attr-defined]
            accepted += [(when, x) for x in fresh[:appended]]  # the first ones get in
        when += timedelta(seconds=20)
        clock.now += 20
    assert streams.length(r, stream) == len(accepted)  # each accepted id appended once
    ended = int(r.hget(keys.guard_key("a.flood", 1, "2030-01-07"), "c").split(b".")[1])
    assert ended >= 2 and replays > 10_000  # epochs did end early, across midnight
    print(f"{len(accepted):,} accepted, {replays:,} replays within the window refused")


def test_the_budget_is_overshot_by_at_most_the_margin(limited: EmbeddedRedis) -> None:
    """Several collector processes (appenders with their own readings) flood three
    versions; the ids the guards hold never pass the budget by more than the margin the
    docs state: what the others append while a process's reading of the guard's counts
    may be old (``near_interval``) and their own counts unsent (``near_interval``). One
    process alone never passes it at all."""
    r = limited.client()
    clock = Clock()
    processes = [collector_process(r, clock, units=3) for _ in range(3)]
    names = ["a.one", "b.two", "c.three"]
    rng = random.Random(7)
    batch, step = 100, 0.05
    when = MONDAY
    day, yesterday = guard.day_pair(when)
    worst = 0
    for n in range(600):
        appender = processes[n % 3]
        name = names[(n // 3) % 3]
        try:
            appender.append(name, 1, [(rng.randbytes(16), b"{}") for _ in range(batch)], when)
        except Unavailable:
            pass
        r.xtrim(keys.stream_key(name, 1), maxlen=0)
        total = sum(held(r, x, day, yesterday) for x in names)
        worst = max(worst, total - BUDGET_IDS)
        clock.now += step
        when += timedelta(seconds=step)
    memory = processes[0].memory
    margin = round(2 * memory.near_interval / step + 1) * batch
    print(f"worst overshoot {worst} ids ({worst / BUDGET_IDS:.1%}), margin {margin}")
    assert worst <= margin

    r.flushall()
    alone = collector_process(r, clock, units=3)
    for n in range(300):
        try:
            alone.append(names[n % 3], 1, [(rng.randbytes(16), b"{}") for _ in range(batch)], when)
        except Unavailable:
            pass
        assert sum(held(r, x, day, yesterday) for x in names) <= BUDGET_IDS
        clock.now += step


def test_readyz_lists_refused_metrics_and_answers_503_at_the_mark(
    own_any_redis: EmbeddedRedis,
) -> None:
    """Fails on the old code, whose ``/readyz`` said 200 ``{"status": "ready"}`` while
    every report got a 503."""
    app, flood, _, clock = app_with_two_metrics(own_any_redis)
    client = app.test_client()
    for seed in range(100):  # the real clock: whatever the time of day, the share fills
        clock.now += 0.2
        response = client.post("/v1/reports", json={"reports": reports(flood, 500, seed=seed)})
        own_any_redis.client().xtrim(keys.stream_key("a.flood", 1), maxlen=0)
        if response.status_code == 503:
            break
    assert response.status_code == 503 and "replay guard" in response.json["error"]
    assert 0 < int(response.headers["Retry-After"]) <= 3 * guard.MIN_WINDOW
    clock.now += 2  # a fresh reading
    ready = client.get("/readyz")
    assert ready.status_code == 200
    refused = ready.json["refused"]
    assert [(x["metric"], x["version"], x["shard"]) for x in refused] == [("a.flood", 1, 0)]
    until = datetime.fromisoformat(refused[0]["until"].replace("Z", "+00:00"))
    assert 0 < (until - datetime.now(UTC)).total_seconds() <= 3 * guard.MIN_WINDOW
    metrics = client.get("/metrics").data.decode()
    assert "ldp_replay_guard_refused_units 1.0" in metrics
    assert 'ldp_collector_unavailable_total{reason="guard"} 1.0' in metrics

    r = own_any_redis.client()
    r.set("backlog", b"x" * 4_000_000)  # what the aggregator has not drained yet
    info = r.info("memory")
    drainable = int(info["used_memory"]) - services(app).appender.memory.reading().guard_bytes
    r.config_set("maxmemory", int(drainable / (0.95 * 0.99)))  # past the mark (90 %)
    clock.now += 2
    at_the_mark = client.get("/readyz")
    assert at_the_mark.status_code == 503 and "memory" in at_the_mark.json["error"]
    assert at_the_mark.headers["Retry-After"]


def test_an_epoch_dropped_early_takes_its_keys_with_it(own_any_redis: EmbeddedRedis) -> None:
    """The memory a flood took is given back when the epoch that holds it is dropped: its
    keys are unlinked at once, its ids taken off the count, and the state lists nothing
    left to delete."""
    app, flood, _, clock = app_with_two_metrics(own_any_redis)
    r = own_any_redis.client()
    flood_until_refused(app, flood, MONDAY, seed=1)  # ends today's first epoch early
    day = guard.day_pair(MONDAY)[0]
    first = [k for k in guard_day_keys(r, day) if k.count(b":guard:" + day.encode() + b":")]
    assert first  # the day's first epoch's buckets, now the previous epoch
    clock.now += guard.MIN_WINDOW
    later = MONDAY + WINDOW
    post(app, flood, 500, 700, later)  # ends the next one: the first is dropped
    assert not any(r.exists(k) for k in first)
    state = r.hgetall(keys.guard_key("a.flood", 1, day))
    assert b"x" not in state and state[b"c"] == f"{day}.2".encode()
    services(app).appender.memory.flush()
    counted = int(r.hget(keys.guard_ids_key(day), keys.guard_unit("a.flood", 1)) or 0)
    assert counted == int(state[b"n"]) + int(state[b"pn"])


def test_a_pressure_epoch_of_yesterday_still_finds_its_replays(limited: EmbeddedRedis) -> None:
    """At midnight the previous epoch is yesterday's last one, whatever it is named: its
    ids are replays the next day. An epoch dropped early is not looked up any more: its
    ids, all older than the window, would be counted again (what the docs say remains)."""
    r = limited.client()
    clock = Clock()
    appender = collector_process(r, clock, units=2)
    rng = random.Random(8)
    evening = datetime(2030, 1, 7, 20, tzinfo=UTC)
    first = [(rng.randbytes(16), b"{}") for _ in range(6000)]
    for i in range(0, len(first), 500):  # its reserve and the pool, in the day's epoch
        appender.append("a.flood", 1, first[i : i + 500], evening)
    late = [(rng.randbytes(16), b"{}") for _ in range(500)]
    with pytest.raises(Unavailable):  # the epoch ends; the new one is young and full
        appender.append("a.flood", 1, late, evening)
    clock.now += guard.MIN_WINDOW
    later = evening + WINDOW  # the young epoch ends: the day's first is dropped
    assert appender.append("a.flood", 1, late, later) == (500, 0)
    assert r.hget(keys.guard_key("a.flood", 1, "2030-01-07"), "c") == b"2030-01-07.2"
    clock.now += 4 * 3600
    night = datetime(2030, 1, 8, 0, 10, tzinfo=UTC)
    assert appender.append("a.flood", 1, late, night) == (0, 500)
    assert appender.append("a.flood", 1, first[:10], night) == (10, 0)


def test_on_a_cluster_the_guard_is_counted_across_nodes(cluster_db: Any) -> None:
    from ldp_store.connection import connect

    client = connect(cluster_db.url)
    client.config_set("maxmemory", MAXMEMORY, target_nodes=client.ALL_NODES)
    try:
        clock = Clock()
        appender = Appender(client, 1_000_000, guard_share=0.01, units=lambda: 3)
        appender.memory.clock = clock
        appender.memory.interval = appender.memory.near_interval = 0.0
        rng = random.Random(7)
        day = guard.day_pair(MONDAY)[0]
        for name in ("a.one", "b.two", "c.three"):  # spread over the nodes' slots
            items = [(rng.randbytes(16), b"{}") for _ in range(50)]
            assert appender.append(name, 1, items, MONDAY) == (50, 0)
        clock.now += 1
        reading = appender.memory.reading(MONDAY)
        assert len(reading.nodes) == 3 and reading.units == 3
        assert reading.held_today == 150 and reading.budget_bytes == 3 * MAXMEMORY // 100
        assert len(guard_day_keys(client, day)) == 3 * 3  # a hash, a bucket and its bitmap each
        refused = None
        for _ in range(100):  # a flood on one version: refused alone, on its node
            items = [(rng.randbytes(16), b"{}") for _ in range(500)]
            try:
                appender.append("a.one", 1, items, MONDAY)
            except Unavailable as exc:
                refused = exc
                break
            clock.now += 1
        assert refused is not None and refused.reason == "guard"
        assert appender.append("b.two", 1, [(rng.randbytes(16), b"{}")], MONDAY) == (1, 0)
    finally:
        client.config_set("maxmemory", 0, target_nodes=client.ALL_NODES)


def test_a_days_guard_expires_when_no_lookup_can_read_it(redis_db: Any) -> None:
    """Ids of day D are looked up during D and D+1 only: their keys (and the day's count)
    expire at the end of D+1 (+ slack), not two days after the last write."""
    app = make_app(redis_db.url)
    client = app.test_client()
    theme = define(client, "app.theme", THEME_SPEC)
    assert client.post("/v1/reports", json={"reports": reports(theme, 5)}).status_code == 202
    services(app).appender.memory.flush()
    r = redis_db.client()
    today = guard.day_pair(datetime.now(UTC))[0]
    found = guard_day_keys(r, today)
    assert len(found) == 3  # the day's hash, its one bucket and the bucket's expiry bitmap
    for key in [*found, keys.guard_ids_key(today).encode()]:
        assert abs(time.time() + r.ttl(key) - guard.expires_at(today)) <= 5, key


def test_the_guards_counts_are_sent_with_the_next_reading(
    redis_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Appends within the memory guard's ``near_interval`` of the last reading of the
    counts add theirs up in the process (no round trip of their own); the reading after it
    sends the sum in its own round trip, before it reads (a reading holds every id its
    process appended); a count Redis failed to take is sent with the next one, not lost."""
    r = redis_db.client()
    clock = Clock()
    appender = Appender(r, 1_000_000)
    appender.memory.clock = clock
    now = MONDAY
    day = guard.day_pair(now)[0]
    rng = random.Random(3)

    def batch(n: int) -> list[tuple[bytes, bytes]]:
        return [(rng.randbytes(16), b'{"v":1}') for _ in range(n)]

    def counted(name: str) -> int:
        return int(r.hget(keys.guard_ids_key(day), keys.guard_unit(name, 1)) or 0)

    def readings() -> int:  # (the script's own HINCRBY of its state is no round trip)
        return int(r.info("commandstats").get("cmdstat_hgetall", {}).get("calls", 0))

    assert appender.append("a.one", 1, batch(30), now) == (30, 0)
    assert counted("a.one") == 0  # the first reading came before the append
    r.config_resetstat()
    assert appender.append("a.one", 1, batch(20), now) == (20, 0)
    assert appender.append("b.two", 1, batch(5), now) == (5, 0)
    assert readings() == 0 and counted("a.one") == 0  # added up, not sent
    clock.now += appender.memory.near_interval
    assert appender.append("a.one", 1, batch(1), now) == (1, 0)  # sends the sum first
    assert (counted("a.one"), counted("b.two")) == (30 + 20, 5)
    assert abs(time.time() + r.ttl(keys.guard_ids_key(day)) - guard.expires_at(day)) <= 5
    clock.now += appender.memory.near_interval
    with monkeypatch.context() as patched:  # the reading fails: nothing appended, nor lost
        patched.setattr(r, "pipeline", lambda **_: (_ for _ in ()).throw(ConnectionError("down")))
        with pytest.raises(ConnectionError):
            appender.append("a.one", 1, batch(7), now)
    assert counted("a.one") == 50
    assert appender.append("b.two", 1, batch(2), now) == (2, 0)
    assert (counted("a.one"), counted("b.two")) == (51, 5)
    appender.memory.flush()
    assert (counted("a.one"), counted("b.two")) == (51, 7)

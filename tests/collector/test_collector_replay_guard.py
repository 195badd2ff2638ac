"""The replay guard: exact over today and yesterday (UTC), across its epochs and the
legacy sets of earlier releases, at a quarter of the old memory per report id or less."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import Any

from collector.ingest import Appender
from ldp_store import keys, scripts

NAME, VERSION = "app.theme", 1
MONDAY = datetime(2030, 1, 7, 12, 0, tzinfo=UTC)


def ids(n: int) -> list[tuple[bytes, str]]:
    return [(os.urandom(16), '{"v":1}') for _ in range(n)]


def test_ids_are_caught_across_epochs_and_the_next_day_and_then_forgotten(
    redis_db: Any,
) -> None:
    appender = Appender(redis_db.client(), max_backlog=10**9)
    r = redis_db.client()
    first = ids(scripts.GUARD_FILL + 300)  # past one bucket's fill: a second epoch
    assert appender.append(NAME, VERSION, first, MONDAY) == (len(first), 0)
    monday = keys.guard_key(NAME, VERSION, "2030-01-07")
    assert r.hget(monday, "bits") == f"0,{scripts.GUARD_STEP}".encode()
    # Replays in every epoch, alone and among new reports, later the same day.
    more = ids(50)
    batch = first[::7] + more + first[::-11]
    added, replayed = appender.append(NAME, VERSION, batch, MONDAY + timedelta(hours=11))
    assert (added, replayed) == (50, len(batch) - 50)
    # Tuesday: yesterday's ids are caught; today starts as fine as Monday ended.
    tuesday = MONDAY + timedelta(days=1)
    assert appender.append(NAME, VERSION, first + more, tuesday) == (0, len(first) + 50)
    assert appender.append(NAME, VERSION, ids(5), tuesday) == (5, 0)
    assert r.hget(keys.guard_key(NAME, VERSION, "2030-01-08"), "bits") == b"4"
    # Wednesday: Monday is out of the window (today and yesterday only).
    assert appender.append(NAME, VERSION, first[:10], tuesday + timedelta(days=1)) == (10, 0)


def test_the_legacy_sets_of_earlier_releases_still_catch_replays(redis_db: Any) -> None:
    appender = Appender(redis_db.client(), max_backlog=10**9)
    r = redis_db.client()
    old_today, old_yesterday, new = ids(3), ids(3), ids(2)
    r.sadd(keys.seen_key(NAME, VERSION, "2030-01-07"), *[i for i, _ in old_today])
    r.sadd(keys.seen_key(NAME, VERSION, "2030-01-06"), *[i for i, _ in old_yesterday])
    got = appender.append(NAME, VERSION, old_today + old_yesterday + new, MONDAY)
    assert got == (2, 6)
    assert r.scard(keys.seen_key(NAME, VERSION, "2030-01-07")) == 3  # read, never written


def test_an_id_costs_a_quarter_of_the_old_memory_or_less(any_redis: Any) -> None:
    """MEMORY USAGE of the guard's keys against a SET of the same 100,000 ids (the old
    guard), on Redis 7 and 6.2: bytes, not time."""
    r = any_redis.client()
    appender = Appender(r, max_backlog=10**9)
    batch = ids(100_000)
    for i in range(0, len(batch), 1000):
        assert appender.append(NAME, VERSION, batch[i : i + 1000], MONDAY)[0] == 1000
    guard = keys.guard_key(NAME, VERSION, "2030-01-07")
    new = sum(r.memory_usage(k, samples=0) or 0 for k in r.scan_iter(guard + "*", count=1000))
    old_key = keys.seen_key(NAME, VERSION, "2030-01-07")
    for i in range(0, len(batch), 1000):
        r.sadd(old_key, *[x for x, _ in batch[i : i + 1000]])
    old = r.memory_usage(old_key, samples=0) or 0
    per_new, per_old = new / len(batch), old / len(batch)
    assert per_new * 4 <= per_old, (per_new, per_old)
    assert per_new < 18

"""The bucketed replay guard: ids as 64-bit integers in small sets, generations that grow
within a day, sizing from the day before, the legacy raw-id sets, and stale layouts."""

from __future__ import annotations

import os
import random
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from collector.ingest import Appender
from ldp_store import guard, keys, streams

NAME, VERSION = "app.guard", 1
MONDAY = datetime(2030, 1, 7, 12, tzinfo=UTC)
PAYLOAD = '{"v":1}'


def ids(n: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(16) for _ in range(n)]


def append(appender: Appender, batch: list[bytes], when: datetime) -> tuple[int, int]:
    """Append ``batch`` in requests of 500 (the SDK's largest batch)."""
    added = duplicates = 0
    for i in range(0, len(batch), 500):
        got = appender.append(NAME, VERSION, [(x, PAYLOAD) for x in batch[i : i + 500]], when)
        added, duplicates = added + got[0], duplicates + got[1]
    return added, duplicates


def guard_sets(r: Any, day: str) -> list[bytes]:
    """The day's buckets (not the bitmaps of which have their expiry)."""
    found = r.scan_iter(keys.guard_key(NAME, VERSION, day) + ":*", count=1000)
    return [k for k in found if not k.endswith(b":made")]


def test_member_and_bucket_split_the_id_in_disjoint_halves() -> None:
    rid = bytes.fromhex("80000000000000010123456789abcdef")
    assert guard.member_of(rid) == str(-(2**63) + 1)  # signed: Redis's int64 range
    assert guard.bucket_of(rid, 0) == 0
    assert guard.bucket_of(rid, 4) == 0x0
    assert guard.bucket_of(rid, 8) == 0x01
    assert guard.bucket_of(rid, 16) == 0x0123
    for rid in ids(1000, 1):
        assert int(guard.member_of(rid)) == int.from_bytes(rid[:8], "big", signed=True)
        assert 0 <= guard.bucket_of(rid, 12) < 2**12
    assert guard.parse_generations(b"0,4,8") == (0, 4, 8) and guard.parse_generations("") == ()


def test_a_day_grows_generations_and_every_replay_is_still_found(redis_db: Any) -> None:
    r = redis_db.client()
    appender = Appender(r, max_backlog=10**9)
    day = MONDAY.date().isoformat()
    first = ids(5000, 2)
    assert append(appender, first, MONDAY) == (5000, 0)
    # 1 bucket holds 256, then 16 more hold 4,096: 5,000 ids need a third generation.
    assert r.hgetall(keys.guard_key(NAME, VERSION, day)) == {b"n": b"5000", b"g": b"0,4,8"}
    sets = guard_sets(r, day)
    assert sum(r.scard(k) for k in sets) == 5000
    assert {r.object("encoding", k) for k in sets} == {b"intset"}  # 8 bytes an id
    assert max(r.scard(k) for k in sets) <= 512  # set-max-intset-entries
    # A retry of everything, in another order, mixed with new reports: only those count.
    more = ids(700, 3)
    mixed = first + more
    random.Random(4).shuffle(mixed)
    assert append(appender, mixed, MONDAY) == (700, 5000)
    assert streams.length(r, keys.stream_key(NAME, VERSION)) == 5700


def test_the_next_day_is_sized_from_the_day_before_and_still_finds_its_replays(
    redis_db: Any,
) -> None:
    r = redis_db.client()
    appender = Appender(r, max_backlog=10**9)
    monday = ids(5000, 5)
    append(appender, monday, MONDAY)
    tuesday = MONDAY + timedelta(days=1)
    # 5,000 ids at 128 a bucket: 64 buckets (2**6), one generation.
    assert append(appender, ids(100, 6), tuesday) == (100, 0)
    g = r.hget(keys.guard_key(NAME, VERSION, tuesday.date().isoformat()), "g")
    assert g == b"6"
    assert append(appender, monday, tuesday) == (0, 5000)  # yesterday's 3 generations
    wednesday = MONDAY + timedelta(days=2)  # beyond the horizon: new again
    assert append(appender, monday[:10], wednesday) == (10, 0)


def test_a_stale_layout_in_another_process_still_finds_replays(redis_db: Any) -> None:
    """Two collectors: one starts a generation; the other, caching the older layout,
    is told the new one by the script and finds a replay that went there."""
    r = redis_db.client()
    one, two = Appender(r, max_backlog=10**9), Appender(r, max_backlog=10**9)
    append(two, ids(10, 7), MONDAY)  # two caches layout "0"
    late = ids(400, 8)
    append(one, ids(300, 9) + late, MONDAY)  # one starts generation 4 on the way
    assert r.hget(keys.guard_key(NAME, VERSION, MONDAY.date().isoformat()), "g") == b"0,4"
    assert append(two, late, MONDAY) == (0, 400)


def test_ids_in_the_legacy_raw_id_sets_are_replays_for_their_two_days(redis_db: Any) -> None:
    """A retry that spans an upgrade: the old collector kept raw ids in ``seen:<day>``."""
    r = redis_db.client()
    old = ids(20, 10)
    yesterday = (MONDAY - timedelta(days=1)).date().isoformat()
    r.sadd(keys.seen_key(NAME, VERSION, yesterday), *old[:10])
    r.sadd(keys.seen_key(NAME, VERSION, MONDAY.date().isoformat()), *old[10:])
    appender = Appender(r, max_backlog=10**9)
    assert append(appender, [*old, *ids(5, 11)], MONDAY) == (5, 20)


def test_a_refused_batch_leaves_the_guard_as_it_was(redis_db: Any) -> None:
    r = redis_db.client()
    appender = Appender(r, max_backlog=100)
    assert append(appender, ids(90, 12), MONDAY) == (90, 0)
    day = keys.guard_key(NAME, VERSION, MONDAY.date().isoformat())
    before = {k: r.smembers(k) for k in guard_sets(r, MONDAY.date().isoformat())}
    with pytest.raises(Exception, match="backlog"):
        append(appender, ids(20, 13), MONDAY)
    assert {k: r.smembers(k) for k in guard_sets(r, MONDAY.date().isoformat())} == before
    assert r.hget(day, "n") == b"90"


def test_what_the_split_costs_two_ids_sharing_member_and_bucket_are_one(
    redis_db: Any,
) -> None:
    """The documented price of 8 bytes an id (probability < 4e-16 for CSPRNG ids)."""
    appender = Appender(redis_db.client(), max_backlog=10**9)
    head = os.urandom(8)
    a, b = head + bytes(8), head + bytes(7) + b"\x01"  # same member, same bucket in gen 0
    assert append(appender, [a], MONDAY) == (1, 0)
    assert append(appender, [b], MONDAY) == (0, 1)


def test_the_guard_on_both_redis_versions(any_redis: Any) -> None:
    r = any_redis.client()
    appender = Appender(r, max_backlog=10**9)
    batch = ids(3000, 14)
    assert append(appender, batch, MONDAY) == (3000, 0)
    assert append(appender, batch[::7], MONDAY) == (0, len(batch[::7]))
    sets = guard_sets(r, MONDAY.date().isoformat())
    assert {r.object("encoding", k) for k in sets} == {b"intset"}
    for key in sets:  # every bucket expires with its day, on 6.2 (EXPIREAT) and 7 (NX)
        assert abs(time.time() + r.ttl(key) - guard.expires_at(MONDAY.date())) <= 2


def test_the_packed_arguments_name_each_ids_member_and_buckets() -> None:
    """The append script's guard arguments say what :func:`guard.member_of` and
    :func:`guard.bucket_of` say of each id, generation by generation: the newest one of
    today an id at a time, the others grouped by bucket (each run one bucket, every id in
    exactly one run); the made bitmap's numbers are the newest generation's buckets."""
    layout = guard.Layout(NAME, VERSION, 2, ("2030-01-07", "2030-01-06"), (0, 4, 8), (12,))
    batch = ids(700, 15)
    packed = layout.packed_args(batch)
    script_keys = packed.keys
    assert packed.members == [guard.member_of(i) for i in batch]

    def named(index: int) -> str:
        return script_keys[index - 2]  # KEYS[1] is the stream

    def bucket(day: str, j: int, rid: bytes) -> str:
        return keys.guard_bucket_key(NAME, VERSION, day, j, guard.bucket_of(rid, j), 2)

    assert [named(k) for k in packed.home] == [bucket("2030-01-07", 8, i) for i in batch]
    assert named(6) == keys.guard_made_key(NAME, VERSION, "2030-01-07", 8, 2)
    first, numbers = packed.made[0], packed.made[1:]
    for k in packed.home:
        assert named(k).endswith(f":{numbers[k - first]}")
    others = [("2030-01-07", 0), ("2030-01-07", 4), ("2030-01-06", 12)]
    assert len(packed.lookups) == len(others)
    for (day, j), (runs, order, members) in zip(others, packed.lookups, strict=True):
        assert sorted(order) == list(range(1, len(batch) + 1))
        assert members == [guard.member_of(batch[p - 1]) for p in order]
        x = 0
        for key_index, count in zip(runs[0::2], runs[1::2], strict=True):
            assert count > 0
            assert {bucket(day, j, batch[p - 1]) for p in order[x : x + count]} == {
                named(key_index)
            }
            x += count
        assert x == len(batch)
    assert len(script_keys) == len(set(script_keys))  # each bucket once


@pytest.mark.parametrize("backlog", [10**9, 4])
def test_a_replay_within_one_batch_is_appended_once_on_either_path(
    redis_db: Any, backlog: int
) -> None:
    """With room for the whole batch the newest generation's SADD is the lookup; near the
    backlog (5 reports, room for 4) the script looks first: both append a repeated id once."""
    r = redis_db.client()
    appender = Appender(r, max_backlog=backlog)
    a, b, c, d = ids(4, 16)
    assert append(appender, [a, b, a, c], MONDAY) == (3, 1)
    assert streams.length(r, keys.stream_key(NAME, VERSION)) == 3
    assert append(appender, [a, d, b, d, c], MONDAY) == (1, 4)  # 3 + 1 fits within 4
    assert streams.length(r, keys.stream_key(NAME, VERSION)) == 4


def test_ids_guarded_by_the_previous_script_are_replays_after_the_upgrade(redis_db: Any) -> None:
    """Issue 27 changed the append script's arguments, not what it stores: a guard as the
    previous script left it (members from :func:`guard.member_of` in the buckets of
    :func:`guard.bucket_of`, the day's generations and count in its hash) still refuses
    those ids, so a retry that spans a rolling upgrade is a replay."""
    r = redis_db.client()
    day = MONDAY.date().isoformat()
    old = ids(300, 17)
    r.hset(keys.guard_key(NAME, VERSION, day), mapping={"g": "0,4", "n": len(old)})
    for n, rid in enumerate(old):
        j = 0 if n < 256 else 4  # the first 256 went to generation 0, the rest to 4
        bucket = keys.guard_bucket_key(NAME, VERSION, day, j, guard.bucket_of(rid, j))
        r.sadd(bucket, guard.member_of(rid))
    appender = Appender(r, max_backlog=10**9)
    assert append(appender, [*old[::3], *ids(7, 18)], MONDAY) == (7, 100)
    assert r.hget(keys.guard_key(NAME, VERSION, day), "n") == b"307"


def _expireat_calls(r: Any) -> int:
    return int(r.info("commandstats").get("cmdstat_expireat", {}).get("calls", 0))


def test_a_buckets_expiry_is_set_once_then_its_bit_says_so(any_redis: Any) -> None:
    """The first write to a bucket sets its expiry and its bit in the generation's made
    bitmap; later writes to it set no expiry (one ``EXPIREAT``: the day's hash), on
    Redis 7 and 6.2 (which has no ``EXPIREAT NX``, so used to rewrite it every time)."""
    r = any_redis.client()
    appender = Appender(r, max_backlog=10**9)
    day = MONDAY.date().isoformat()
    first = ids(200, 21)
    assert append(appender, first, MONDAY) == (200, 0)  # generation 0: one bucket
    bucket = keys.guard_bucket_key(NAME, VERSION, day, 0, 0)
    made = keys.guard_made_key(NAME, VERSION, day, 0)
    assert r.getbit(made, 0) == 1
    for key in (bucket, made):
        assert abs(time.time() + r.ttl(key) - guard.expires_at(day)) <= 2, key
    r.expire(bucket, 10**6)  # were its expiry set again, this would change
    before = _expireat_calls(r)
    assert append(appender, ids(50, 22), MONDAY) == (50, 0)
    assert _expireat_calls(r) - before == 1  # the day's hash, not the bucket
    assert 10**6 - 5 <= r.ttl(bucket) <= 10**6


@pytest.mark.parametrize("j", [8, 11, guard.MADE_READ_WHOLE, guard.MADE_READ_WHOLE + 5])
def test_only_buckets_without_their_bit_get_an_expiry_whichever_way_it_is_read(
    any_redis: Any, j: int
) -> None:
    """Generations up to ``MADE_READ_WHOLE`` have their bitmap read whole and its bits
    tested in Lua; larger ones ask ``BITFIELD``. Either way a later batch sets the expiry
    of exactly the buckets it makes (their bits then set) and of no bucket made before."""
    r = any_redis.client()
    day = MONDAY.date().isoformat()
    r.hset(keys.guard_key(NAME, VERSION, day), mapping={"g": str(j), "n": 0})
    appender = Appender(r, max_backlog=10**9)
    made = keys.guard_made_key(NAME, VERSION, day, j)

    def bucket(rid: bytes) -> str:
        return keys.guard_bucket_key(NAME, VERSION, day, j, guard.bucket_of(rid, j))

    first = ids(300, 31)
    assert append(appender, first, MONDAY) == (300, 0)
    old = {bucket(rid) for rid in first}
    for key in old:
        assert abs(time.time() + r.ttl(key) - guard.expires_at(day)) <= 2, key
        r.expire(key, 10**6)  # were its expiry set again, this would change
    assert r.bitcount(made) == len(old)
    # The second batch: ids in the first batch's buckets, and ids in buckets not made yet.
    # (an id keeps its bucket with another member: its last 8 bytes pick the bucket)
    second = [os.urandom(8) + rid[8:] for rid in first[:150]] + ids(450, 32)
    new = {bucket(rid) for rid in second} - old
    assert new and len(new) < len({bucket(rid) for rid in second})  # both kinds
    assert append(appender, second, MONDAY) == (600, 0)
    for key in old:
        assert 10**6 - 5 <= r.ttl(key) <= 10**6, key
    for key in new:
        assert abs(time.time() + r.ttl(key) - guard.expires_at(day)) <= 2, key
    assert r.bitcount(made) == len(old | new)
    assert abs(time.time() + r.ttl(made) - guard.expires_at(day)) <= 2


def test_a_bucket_deleted_and_made_again_gets_its_expiry(redis_db: Any) -> None:
    """``delete_keys`` takes a bucket and its made bitmap in one step, so a bucket an
    append makes again is not believed to have its expiry (it would never expire)."""
    from ldp_store.lifecycle import delete_keys, guard_day_keys

    r = redis_db.client()
    appender = Appender(r, max_backlog=10**9)
    day = MONDAY.date().isoformat()
    assert append(appender, ids(100, 23), MONDAY) == (100, 0)
    bucket = keys.guard_bucket_key(NAME, VERSION, day, 0, 0)
    buckets_only = [k for k in guard_day_keys(r, day) if k == bucket.encode()]
    assert buckets_only and delete_keys(r, buckets_only) == 2  # the bucket and its bitmap
    assert not r.exists(keys.guard_made_key(NAME, VERSION, day, 0))
    assert append(appender, ids(10, 24), MONDAY) == (10, 0)
    assert abs(time.time() + r.ttl(bucket) - guard.expires_at(day)) <= 2


def test_above_the_bitmaps_largest_generation_every_write_sets_the_expiry(
    redis_db: Any,
) -> None:
    """A generation of more than 2**32 buckets has no made bitmap (Redis's largest
    string): its buckets get their expiry at every write, as before the bitmap."""
    r = redis_db.client()
    day = MONDAY.date().isoformat()
    j = guard.MADE_BITS + 4
    r.hset(keys.guard_key(NAME, VERSION, day), mapping={"g": str(j), "n": 0})
    appender = Appender(r, max_backlog=10**9)
    batch = ids(20, 25)
    assert append(appender, batch, MONDAY) == (20, 0)
    assert not r.exists(keys.guard_made_key(NAME, VERSION, day, j))
    for rid in batch:
        key = keys.guard_bucket_key(NAME, VERSION, day, j, guard.bucket_of(rid, j))
        assert abs(time.time() + r.ttl(key) - guard.expires_at(day)) <= 2
    assert append(appender, batch, MONDAY) == (0, 20)

"""The worker's fast commit path: fresh batches acknowledged in bulk behind the claim fence.

A fresh (``>``) batch is acknowledged by the thousand when no claim or history read
happened since the fence was read; otherwise every id is checked one by one. These tests
race a fresh batch in flight against each way its entries can change hands, and check the
counts stay exact (each offline count computed from the very payloads appended).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from aggregator.query.window import lag_details, read_counts
from aggregator.stream.worker import FenceBroken, Worker, ensure_group
from ldp_store import keys
from tests.aggregator.test_worker import (
    GROUP,
    append,
    append_ids,
    appended,
    assert_counts,
    assert_drained,
    make_metric,
    offline,
    perturbed,
    pooled,
    stream,
    worker,
)


def xack_calls(client: redis.Redis) -> int:
    stats = client.info("commandstats").get("cmdstat_xack", {"calls": 0})
    return int(stats["calls"])


def fresh(w: Worker, client: redis.Redis, key: str) -> Any:
    """A fresh batch read by ``w`` and held in flight (not yet committed)."""
    w.discover()
    s = w._streams[key]
    delivery = w._fetch(s, ">")
    assert delivery.ids and delivery.fence
    return s, delivery


def test_a_fresh_batch_is_acked_in_bulk(any_redis: Any) -> None:
    client = any_redis.client()
    d, payloads = appended(client, "app.fast", "grr", 8, 2500, seed=11, pool=400)
    client.config_resetstat()
    stats = worker(client, name="w", batch_size=2500).run(once=True)
    assert stats.counted == 2500
    # 2,500 ids in chunks of 1,000: three XACK calls, not 2,500.
    assert xack_calls(client) == 3
    assert_counts(client, d, offline(d, payloads))
    assert_drained(client, d)


def test_a_claim_while_a_fresh_batch_is_in_flight_counts_each_once(any_redis: Any) -> None:
    client = any_redis.client()
    d, payloads = appended(client, "app.race", "oue", 16, 600, seed=12, pool=200)
    slow = worker(client, name="slow", batch_size=1000)
    s, delivery = fresh(slow, client, stream(d))
    # The slow worker is presumed dead: another claims and counts its whole batch.
    thief = worker(client, name="thief", claim_idle_ms=0).run(once=True)
    assert thief.claimed == 600 and thief.counted == 600
    # The slow worker wakes up and commits: the fence moved, every id is checked.
    slow._handle(s, delivery)
    assert slow.stats.counted == 0
    assert slow.stats.already_counted == 600
    assert_counts(client, d, offline(d, payloads))
    assert_drained(client, d)


def test_a_partial_claim_recounts_exactly_the_rest(any_redis: Any) -> None:
    client = any_redis.client()
    d = make_metric(client, "app.partial", "olh", k=32)
    payloads = perturbed(d, [i % 32 for i in range(300)], seed=13)
    ids = append_ids(client, d, payloads)
    slow = worker(client, name="slow", batch_size=1000)
    s, delivery = fresh(slow, client, stream(d))
    # Another consumer takes the first 100 over and counts them.
    client.xclaim(stream(d), GROUP, "thief", 0, ids[:100])
    client.incr(keys.claims_key(d.name, d.version))  # what the worker's claim read does
    thief = worker(client, name="thief")
    thief.run(once=True)
    assert thief.stats.counted == 100
    slow._handle(s, delivery)
    assert slow.stats.counted == 200
    assert slow.stats.already_counted == 100
    assert_counts(client, d, offline(d, payloads))
    assert_drained(client, d)


def test_two_processes_under_one_name_count_each_entry_once(any_redis: Any) -> None:
    client = any_redis.client()
    d, payloads = appended(client, "app.twin", "sue", 8, 500, seed=14, pool=100)
    first = worker(client, name="same", batch_size=1000)
    s, delivery = fresh(first, client, stream(d))
    # A second process with the same consumer name starts: its history read finds the
    # batch the first one holds, and counts it.
    twin = worker(client, name="same").run(once=True)
    assert twin.counted == 500
    first._handle(s, delivery)
    assert first.stats.counted == 0 and first.stats.already_counted == 500
    assert_counts(client, d, offline(d, payloads))
    assert_drained(client, d)


def test_a_worker_that_does_not_bump_the_fence_is_caught_by_the_pending_count(
    any_redis: Any,
) -> None:
    """A worker of an older version claims and counts part of a batch in flight, leaving
    the fence alone (a rolling upgrade): the pending count has moved, so every id is
    checked and the rest is counted, nothing twice, nothing lost."""
    client = any_redis.client()
    d = make_metric(client, "app.mixed", "grr", k=4)
    payloads = perturbed(d, [0, 1, 2, 3] * 10, seed=15)
    ids = append_ids(client, d, payloads)
    w = worker(client, name="w")
    s, delivery = fresh(w, client, stream(d))
    client.xclaim(stream(d), GROUP, "old", 0, ids[:7])  # no fence bump, as before
    old = worker(client, name="old")
    old.discover()
    assert old.commit(d, ids[:7], s.codec.parse([json.loads(p) for p in payloads[:7]])) == (7, [])
    client.xack(stream(d), GROUP, ids[7])  # and an ack by hand, for good measure
    w._handle(s, delivery)
    assert w.stats.counted == 32 and w.stats.already_counted == 8 and w.stats.fence_broken == 0
    assert read_counts(client, d).n == 39
    assert lag_details(client, d).pending == 0


def test_a_retried_commit_after_a_lost_reply_counts_nothing_more(any_redis: Any) -> None:
    """redis-py resends a script whose reply was lost (cluster clients always do): the
    second run finds every id acknowledged by the first, and says so without alarm."""
    client = any_redis.client()
    d = make_metric(client, "app.retry", "oue", k=8)
    payloads = perturbed(d, list(range(8)) * 5, seed=18)
    append(client, d, payloads)
    w = worker(client, name="w")
    s, delivery = fresh(w, client, stream(d))
    batch = s.codec.parse([json.loads(p) for p in payloads])
    assert w.commit(d, delivery.ids, batch, fence=delivery.fence) == (40, [])
    assert w.commit(d, delivery.ids, batch, fence=delivery.fence) == (0, [])
    assert_counts(client, d, offline(d, payloads))


def test_only_compensating_tampering_breaks_the_fence_and_it_says_so(any_redis: Any) -> None:
    """By hand, one entry of the batch is acknowledged and another entry claimed into the
    worker's name: fence and count both look untouched. The bulk check catches it."""
    client = any_redis.client()
    d = make_metric(client, "app.tamper", "grr", k=4)
    first = perturbed(d, [0, 1, 2], seed=17)
    first_ids = append_ids(client, d, first)
    client.xgroup_create(stream(d), GROUP, id="0", mkstream=True)
    client.xreadgroup(GROUP, "someone", {stream(d): ">"}, count=3)
    more = perturbed(d, [3, 2, 1], seed=19)
    more_ids = append_ids(client, d, more)
    w = worker(client, name="w")
    s, delivery = fresh(w, client, stream(d))
    assert delivery.ids == more_ids
    client.xack(stream(d), GROUP, more_ids[0])
    client.xclaim(stream(d), GROUP, "w", 0, first_ids[:1])
    batch = s.codec.parse([json.loads(p) for p in more])
    with pytest.raises(FenceBroken, match="1 of 3"):
        w.commit(d, delivery.ids, batch, fence=delivery.fence)
    assert read_counts(client, d).n == 0
    # Through the worker's own path it is logged and counted in the stats, not raised.
    again = perturbed(d, [1, 1], seed=20)
    again_ids = append_ids(client, d, again)
    s, delivery = fresh(w, client, stream(d))
    client.xack(stream(d), GROUP, again_ids[0])
    client.xclaim(stream(d), GROUP, "w", 0, first_ids[1:2])
    w._handle(s, delivery)
    assert w.stats.fence_broken == 2 and w.stats.counted == 0


def test_a_ring_of_the_doorbell_makes_its_quiet_streams_read_due(redis_db: Any) -> None:
    client = redis_db.client()
    d = make_metric(client, "app.block", "grr", k=4)
    ensure_group(client, stream(d))
    w = worker(client, name="w", block_ms=50)
    w.discover()
    w._round(once=False)  # read, found empty: quiet; then an idle wait
    (s,) = w._streams.values()
    assert s.quiet
    payloads = perturbed(d, [1, 2], seed=16)
    append(client, d, payloads)  # rings
    w._wait_for_entries()
    assert not s.quiet and w.stats.counted == 0  # the ring reads nothing itself
    w.run(once=True)
    assert_counts(client, d, offline(d, payloads))


def test_a_stream_deleted_under_the_blocking_read_is_recreated(redis_db: Any) -> None:
    client = redis_db.client()
    d = make_metric(client, "app.gone", "grr", k=4)
    w = worker(client, name="w", block_ms=50)
    w.discover()
    client.delete(stream(d))  # an operator deletes the stream: its group goes with it
    w._wait_for_entries()  # the doorbell: nothing; the next round finds NOGROUP, recreates
    payloads = perturbed(d, [0, 3], seed=21)
    w.run(once=True)
    append(client, d, payloads)
    w.run(once=True)
    assert_counts(client, d, offline(d, payloads))


def test_a_burst_rereads_entries_left_pending_under_its_name(any_redis: Any) -> None:
    """A fresh read whose reply was lost (and which redis-py retried) leaves entries
    pending under the worker's name: the burst rereads them before it ends."""
    client = any_redis.client()
    d = make_metric(client, "app.lost", "oue", k=16)
    w = worker(client, name="w")
    w.run(once=True)  # joined, nothing to do
    payloads = pooled(d, 300, seed=22, pool=100)
    append(client, d, payloads)
    fresh(w, client, stream(d))  # delivered, then the reply is "lost"
    assert lag_details(client, d).pending == 300
    w.run(once=True)
    assert_counts(client, d, offline(d, payloads))
    assert_drained(client, d)


def test_another_tools_consumer_name_need_not_be_utf8(any_redis: Any) -> None:
    client = any_redis.client()
    d = make_metric(client, "app.bytes", "grr", k=4)
    payloads = perturbed(d, [0, 1, 2, 3] * 5, seed=23)
    append(client, d, payloads)
    ensure_group(client, stream(d))
    client.xreadgroup(GROUP, b"\xff\xfe", {stream(d): ">"}, count=5)  # by another tool
    w = worker(client, name="w", claim_idle_ms=0)
    w.run(once=True)
    assert_counts(client, d, offline(d, payloads))

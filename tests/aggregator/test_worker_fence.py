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

from aggregator.worker import FenceBroken, Worker, ensure_group
from collector import keys
from tests.aggregator.test_worker import (
    GROUP,
    append,
    append_ids,
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
    d = make_metric(client, "app.fast", "grr", k=8)
    payloads = pooled(d, 2500, seed=11, pool=400)
    append(client, d, payloads)
    client.config_resetstat()
    stats = worker(client, name="w", batch_size=2500).run(once=True)
    assert stats.counted == 2500
    # 2,500 ids in chunks of 1,000: three XACK calls, not 2,500.
    assert xack_calls(client) == 3
    assert_counts(client, d, offline(d, payloads))
    assert_drained(client, d)


def test_a_claim_while_a_fresh_batch_is_in_flight_counts_each_once(any_redis: Any) -> None:
    client = any_redis.client()
    d = make_metric(client, "app.race", "oue", k=16)
    payloads = pooled(d, 600, seed=12, pool=200)
    append(client, d, payloads)
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
    d = make_metric(client, "app.twin", "sue", k=8)
    payloads = pooled(d, 500, seed=14, pool=100)
    append(client, d, payloads)
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


def test_an_ack_from_outside_the_workers_is_refused_loudly(any_redis: Any) -> None:
    client = any_redis.client()
    d = make_metric(client, "app.tamper", "grr", k=4)
    payloads = perturbed(d, [0, 1, 2, 3] * 10, seed=15)
    ids = append_ids(client, d, payloads)
    w = worker(client, name="w")
    s, delivery = fresh(w, client, stream(d))
    client.xack(stream(d), GROUP, ids[7])  # by hand: no worker would do this
    w._handle(s, delivery)
    assert w.stats.counted == 0
    assert w.stats.fence_broken == 40
    assert int(client.hget(keys.counts_key(d.name, d.version), "n") or 0) == 0  # type: ignore[arg-type]
    # The commit itself raises, and changes no count.
    more = perturbed(d, [3, 2, 1], seed=17)
    more_ids = append_ids(client, d, more)
    s, delivery = fresh(w, client, stream(d))
    client.xack(stream(d), GROUP, more_ids[0])
    batch = s.codec.parse([json.loads(p) for p in more])
    with pytest.raises(FenceBroken, match="1 of 3"):
        w.commit(d, delivery.ids, batch, fence=delivery.fence)
    assert int(client.hget(keys.counts_key(d.name, d.version), "n") or 0) == 0  # type: ignore[arg-type]


def test_the_blocking_read_commits_one_by_one(redis_db: Any) -> None:
    client = redis_db.client()
    d = make_metric(client, "app.block", "grr", k=4)
    ensure_group(client, stream(d))
    w = worker(client, name="w", block_ms=50)
    w.discover()
    payloads = perturbed(d, [1, 2], seed=16)
    append(client, d, payloads)
    w._wait_for_entries()
    assert w.stats.counted == 1  # the blocking read takes one entry
    w.run(once=True)
    assert_counts(client, d, offline(d, payloads))

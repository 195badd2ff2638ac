"""Batch entries (``s`` sizes, ``b`` payloads): many reports in one stream entry.

The collector appends up to ``keys.ENTRY_REPORTS`` reports an entry; entries written
before (one ``p`` each) still drain. Each report is counted or dead-lettered exactly
once, whatever the entry around it holds, and the stream's batched count (what the
backlog limit adds to ``XLEN``) returns to nothing.
"""

from __future__ import annotations

import json
import secrets
from datetime import UTC, datetime
from typing import Any

import redis

from aggregator.stream.entries import BAD_BATCH, Delivery
from client_sdk.wire import MetricDefinition
from collector.ingest import Appender
from ldp_store import keys, streams
from tests.aggregator.test_worker import (
    GROUP,
    append,
    assert_counts,
    assert_drained,
    make_metric,
    offline,
    pooled,
    stream,
    worker,
)
from tests.aggregator.test_worker_fence import fresh


def collect(client: redis.Redis, d: MetricDefinition, payloads: list[str]) -> None:
    """Append through the collector's own append script, 100 reports a call."""
    appender = Appender(client, max_backlog=10**9)
    now = datetime.now(UTC)
    for i in range(0, len(payloads), 100):
        items = [(secrets.token_bytes(16), p) for p in payloads[i : i + 100]]
        assert appender.append(d.name, d.version, items, now, d.shards) == (len(items), 0)


def by_hand(client: redis.Redis, d: MetricDefinition, payloads: list[str]) -> bytes:
    """One batch entry as the append script writes it (and its batched count)."""
    encoded = [p.encode() for p in payloads]
    sizes = b",".join(b"%d" % len(p) for p in encoded)
    entry = client.xadd(stream(d), {"s": sizes, "b": b",".join(encoded)})
    client.incrby(keys.batched_key(d.name, d.version), len(payloads) - 1)
    return bytes(entry)


def dead(client: redis.Redis, d: MetricDefinition) -> list[tuple[str, str]]:
    """(payload, reason) of every dead letter."""
    found = client.xrange(keys.dead_key(d.name, d.version))
    return [(f[b"p"].decode(), f[b"reason"].decode()) for _, f in found]


def test_batch_entries_drain_exactly_once_beside_entries_of_earlier_collectors(
    any_redis: Any,
) -> None:
    client = any_redis.client()
    d = make_metric(client, "app.mixed", "oue", k=16)
    legacy, batched, later = (pooled(d, n, seed=s) for n, s in ((150, 1), (1000, 2), (70, 3)))
    append(client, d, legacy)  # what a collector before batch entries wrote
    collect(client, d, batched)
    append(client, d, later)
    # 100 reports a call: entries of 32, 32, 32 and 4 reports.
    assert client.xlen(stream(d)) == 150 + 10 * 4 + 70
    assert streams.held(client, d.name, d.version) == 1220
    assert [p.decode() for _, p in streams.reports(client, stream(d))] == legacy + batched + later
    stats = worker(client, name="w", batch_size=500).run(once=True)
    assert stats.counted == 1220 and stats.dead_lettered == 0
    assert_counts(client, d, offline(d, legacy + batched + later))
    assert_drained(client, d)


def test_a_read_asks_for_about_batch_size_reports(any_redis: Any) -> None:
    """Entries are read by the count of reports they hold, not one report each: a read of
    ``batch_size`` entries of 32 reports would hold 32 times the batch."""
    client = any_redis.client()
    d = make_metric(client, "app.sized", "grr", k=8)
    collect(client, d, pooled(d, 2000, seed=4))
    w = worker(client, name="w", batch_size=256)
    s, delivery = fresh(w, client, stream(d))
    assert 200 <= len(delivery.ids) <= 256
    w._handle(s, delivery)
    assert w.stats.counted == len(delivery.ids)


def test_a_bad_report_inside_a_batch_entry_is_dead_lettered_once_and_its_neighbours_counted(
    any_redis: Any,
) -> None:
    client = any_redis.client()
    d = make_metric(client, "app.inside", "grr", k=8)
    good = pooled(d, 40, seed=5)
    bad = ['{"v":8}', "not json", '{"v":1,"x":2}']
    entry = good[:10] + [bad[0]] + good[10:25] + [bad[1], bad[2]] + good[25:]
    by_hand(client, d, entry)
    collect(client, d, pooled(d, 64, seed=6))
    stats = worker(client, name="w").run(once=True)
    assert stats.counted == 40 + 64 and stats.dead_lettered == 3
    assert [p for p, _ in dead(client, d)] == bad
    assert all(reason for _, reason in dead(client, d))
    assert client.xpending(stream(d), GROUP)["pending"] == 0
    assert client.xlen(stream(d)) == 0 and not client.exists(keys.batched_key(d.name, d.version))


def test_a_mixed_entry_raced_by_a_claim_is_counted_and_dead_lettered_once(any_redis: Any) -> None:
    """A worker holds a fresh batch with a mixed entry; another claims and commits it
    (good reports counted, the bad one dead-lettered by the same commit); the first then
    commits: nothing twice, neither count nor dead letter."""
    client = any_redis.client()
    d = make_metric(client, "app.race", "grr", k=8)
    good = pooled(d, 30, seed=7)
    by_hand(client, d, good[:12] + ['{"v":99}'] + good[12:])
    slow = worker(client, name="slow")
    s, delivery = fresh(slow, client, stream(d))
    assert len(delivery.ids) == 31 and len(set(delivery.ids)) == 1
    thief = worker(client, name="thief", claim_idle_ms=0).run(once=True)
    assert thief.claimed == 31 and thief.counted == 30 and thief.dead_lettered == 1
    slow._handle(s, delivery)
    assert slow.stats.counted == 0 and slow.stats.dead_lettered == 0
    assert slow.stats.already_counted == 30
    assert_counts(client, d, offline(d, good))
    assert dead(client, d) == [('{"v":99}', dead(client, d)[0][1])]
    assert not client.exists(keys.batched_key(d.name, d.version))


def test_a_wholly_bad_entry_goes_to_the_dead_letters_report_by_report(any_redis: Any) -> None:
    client = any_redis.client()
    d = make_metric(client, "app.allbad", "grr", k=8)
    by_hand(client, d, ['{"v":-1}', '{"v":8}', "[]"])
    collect(client, d, pooled(d, 50, seed=8))
    stats = worker(client, name="w").run(once=True)
    assert stats.counted == 50 and stats.dead_lettered == 3
    assert [p for p, _ in dead(client, d)] == ['{"v":-1}', '{"v":8}', "[]"]
    assert client.xlen(stream(d)) == 0 and not client.exists(keys.batched_key(d.name, d.version))


def test_a_batch_entry_whose_sizes_do_not_add_up_is_dead_lettered_whole(any_redis: Any) -> None:
    client = any_redis.client()
    d = make_metric(client, "app.sizes", "grr", k=8)
    client.xadd(stream(d), {"s": b"7,7", "b": b'{"v":1},{"v":22}'})  # 15 bytes, not 7+1+7
    client.xadd(stream(d), {"s": b"7,x", "b": b'{"v":1},{"v":2}'})
    good = pooled(d, 20, seed=9)
    append(client, d, good)
    stats = worker(client, name="w").run(once=True)
    assert stats.counted == 20 and stats.dead_lettered == 2
    reasons = [reason for _, reason in dead(client, d)]
    assert reasons == ["batch entry whose sizes do not add up to its payloads"] * 2
    assert_counts(client, d, offline(d, good))


def test_history_and_claim_reads_expand_batch_entries(any_redis: Any) -> None:
    """The read script (a restarted worker's history, a claim) gives a row per report,
    with its entry's id and delivery count; an entry delivered too often is dead-lettered
    with every report it holds."""
    client = any_redis.client()
    d = make_metric(client, "app.claims", "sue", k=8)
    payloads = pooled(d, 100, seed=10)
    collect(client, d, payloads)  # entries of 32, 32, 32 and 4 reports
    w = worker(client, name="w", max_deliveries=2, claim_idle_ms=0)
    w.discover()
    s = w._streams[stream(d)]
    first = w._fetch(s, ">")
    assert len(first.ids) == 100 and len(set(first.ids)) == 4
    again = w._fetch(s, "0-0")  # the history read a restart makes
    assert again.ids == first.ids and again.sizes == first.sizes and again.blob == first.blob
    assert again.deliveries == [2] * 100
    assert [bytes(x) for x in again.raw()] == [p.encode() for p in payloads]
    claimed = w._fetch(s, "claim", "0-0")  # the third delivery: past max_deliveries
    assert claimed.deliveries == [3] * 100
    w._handle(s, claimed)
    assert w.stats.dead_lettered == 100 and w.stats.counted == 0
    assert [p for p, _ in dead(client, d)] == payloads
    assert client.xlen(stream(d)) == 0 and not client.exists(keys.batched_key(d.name, d.version))


def test_the_read_script_marks_a_batch_entry_that_does_not_add_up(any_redis: Any) -> None:
    client = any_redis.client()
    d = make_metric(client, "app.marked", "grr", k=8)
    client.xadd(stream(d), {"s": b"7,7,", "b": b'{"v":1},{"v":2},'})
    client.xadd(stream(d), {"s": b"7", "b": b'{"v":1}'})
    w = worker(client, name="w")
    w.discover()
    s = w._streams[stream(d)]
    w._fetch(s, ">")
    again = w._fetch(s, "0-0")
    assert again.sizes == [BAD_BATCH, 7] and list(again.raw()) == [b"", b'{"v":1}']


def test_a_fresh_read_of_a_deleted_or_odd_entry_keeps_one_row() -> None:
    delivery = Delivery.from_entries(
        [
            [b"1-0", [b"s", b"1,2", b"b", b"1,22"]],
            [b"2-0", None],
            [b"3-0", [b"x", b"y"]],
            [b"4-0", {b"s": b"3", b"b": b"333"}],
            [b"5-0", [b"s", b"2", b"b", b"1"]],
        ]
    )
    assert delivery.ids == [b"1-0", b"1-0", b"2-0", b"3-0", b"4-0", b"5-0"]
    assert delivery.sizes == [1, 2, -1, -2, 3, BAD_BATCH]
    assert list(delivery.raw()) == [b"1", b"22", b"", b"", b"333", b""]
    assert delivery.joined_ids == b"1-0,2-0,3-0,4-0,5-0"
    assert json.loads(b"[" + Delivery.from_entries([[b"9-0", [b"p", b"7"]]]).blob + b"]") == [7]


def test_replays_among_new_reports_leave_the_new_ones_in_order_in_full_entries(
    any_redis: Any,
) -> None:
    """A call whose replays sit between new reports: the new ones, in order, in entries
    of at most ENTRY_REPORTS (built report by report, not from one stretch of the
    arguments), and the batched count says how many reports the stream holds."""
    client = any_redis.client()
    d = make_metric(client, "app.gaps", "grr", k=8)
    appender = Appender(client, max_backlog=10**9)
    now = datetime.now(UTC)
    old = [(secrets.token_bytes(16), p) for p in pooled(d, 40, seed=11)]
    assert appender.append(d.name, d.version, old, now, d.shards) == (40, 0)
    fresh_items = [(secrets.token_bytes(16), p) for p in pooled(d, 60, seed=12)]
    mixed = [x for pair in zip(old, fresh_items, strict=False) for x in pair] + fresh_items[40:]
    assert appender.append(d.name, d.version, mixed, now, d.shards) == (60, 40)
    want = [p for _, p in old] + [p for _, p in fresh_items]
    assert [p.decode() for _, p in streams.reports(client, stream(d))] == want
    sizes = [len(f[b"s"].split(b",")) if b"s" in f else 1 for _, f in client.xrange(stream(d))]
    assert sizes == [32, 8, 32, 28] and streams.held(client, d.name, d.version) == 100
    assert worker(client, name="w").run(once=True).counted == 100
    assert_counts(client, d, offline(d, want))
    assert_drained(client, d)

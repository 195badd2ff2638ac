"""Compact support counts against real Redis servers: the same estimates, bit for bit.

The same seeded reports are stored twice: once as the commit script stored them before
compact counts (``HINCRBY`` of the codec's ``n``/``c:<v>`` pairs into the counts hashes
of all, hour and day), once drained by the worker into packed strings. The estimates API
must answer the very same bytes for both. Also: a window written across the upgrade sums
both formats; the string has its exact layout; an overflow is refused before anything is
acknowledged, and a corrupt counter is never read as a count.
"""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np
import pytest
import redis

from aggregator.query.window import read_counts
from aggregator.stats.kinds import codec_for
from aggregator.stream.worker import WindowFull, Worker
from client_sdk.wire import MetricDefinition
from ldp_server.app import create_server_app
from ldp_store import keys, schema
from ldp_store.registry import Registry
from tests.aggregator.test_worker import assert_counts, offline, pooled

MECHANISMS = [("grr", 16), ("oue", 1024), ("olh", 200), ("hr", 64), ("ss", 32), ("sue", 8)]


def worker(client: redis.Redis, **kwargs: Any) -> Worker:
    return Worker(client, handle_signals=False, **kwargs)


def metric(client: redis.Redis, name: str, mechanism: str, k: int) -> MetricDefinition:
    spec = {"domain": [f"v{i}" for i in range(k)], "epsilon": 1.0, "mechanism": mechanism}
    return Registry(client).put(name, spec).definition


def store_as_before(client: redis.Redis, d: MetricDefinition, payloads: list[str], ms: int) -> None:
    """What the commit script did before compact counts: HINCRBY of the codec's pairs into
    the counts hashes of all, the hour and the day, and the windows set."""
    codec = codec_for(d.mechanism)
    batch = codec.parse([json.loads(p) for p in payloads])
    support = codec.count(batch)
    nonzero = np.flatnonzero(support).tolist()
    pairs = schema.frequency_increments(batch.n, ((v, int(support[v])) for v in nonzero))
    hour, hour_start, day, day_start = schema.window_names(ms)
    pipe = client.pipeline(transaction=False)
    for window in ("all", hour, day):
        for field, increment in zip(pairs[::2], pairs[1::2], strict=True):
            pipe.hincrby(keys.counts_key(d.name, d.version, window), str(field), int(increment))
    pipe.zadd(keys.windows_key(d.name, d.version), {"all": 0, hour: hour_start, day: day_start})
    pipe.execute()


def store_now(client: redis.Redis, d: MetricDefinition, payloads: list[str]) -> int:
    """XADD and drain with the worker; returns the arrival time (ms) of the first entry."""
    stream = keys.stream_key(d.name, d.version)
    pipe = client.pipeline(transaction=False)
    for payload in payloads:
        pipe.xadd(stream, {"p": payload})
    ids = pipe.execute()
    worker(client, batch_size=700).run(once=True)  # several commits
    return int(ids[0].split(b"-")[0])


def estimates(url: str, name: str, window: str) -> bytes:
    app = create_server_app({"REDIS_URL": url, "TESTING": True})
    body = app.test_client().get(f"/v1/estimates/{name}?window={window}").get_data()
    # The poisoning alarms read the OLH seed histograms, kept beside the counts only by
    # the new worker (and these reports reuse a pool of seeds): everything else must match.
    answer = json.loads(body.replace(name.encode(), b"<metric>"))
    answer.pop("alarms")
    return json.dumps(answer).encode()


@pytest.mark.parametrize(("mechanism", "k"), MECHANISMS)
def test_compact_counts_give_the_same_estimates_bit_for_bit(
    redis_db: Any, mechanism: str, k: int
) -> None:
    client = redis_db.client()
    old = metric(client, f"old.{mechanism}", mechanism, k)
    new = metric(client, f"new.{mechanism}", mechanism, k)
    payloads = pooled(old, 3000, seed=11)
    ms = store_now(client, new, payloads)
    if schema.window_names(ms)[0] != schema.window_names(int(time.time() * 1000))[0]:
        pytest.skip("the drain crossed an hour boundary")  # one window each, to compare
    store_as_before(client, old, payloads, ms)
    hour, _, day, _ = schema.window_names(ms)

    assert not client.hexists(keys.counts_key(new.name, new.version), "c:0")
    if k < schema.DELTA_MIN_K:
        packed = client.get(keys.support_key(new.name, new.version))
        assert packed is not None and len(packed) == schema.SUPPORT_BYTES * k
    else:  # delta blobs, tidied at the burst's end: folded or merged, one blob at most
        assert client.llen(keys.delta_key(new.name, new.version)) <= 1
    for window in ("all", hour, day):
        before = estimates(redis_db.url, old.name, window)
        assert json.loads(before)["n"] == 3000
        assert estimates(redis_db.url, new.name, window) == before
        assert read_counts(client, new, window).support.tolist() == (
            offline(new, payloads).support.tolist()
        )


def test_a_window_written_across_the_upgrade_sums_both_formats(any_redis: Any) -> None:
    client = any_redis.client()
    d = metric(client, "app.upgrade", "oue", 300)
    payloads = pooled(d, 4000, seed=12)
    store_as_before(client, d, payloads[:1500], int(time.time() * 1000))
    store_now(client, d, payloads[1500:])
    assert client.hexists(keys.counts_key(d.name, d.version), "c:0")  # the old part stays
    assert_counts(client, d, offline(d, payloads))


@pytest.mark.parametrize("shards", [1, 3])
def test_shards_sum(redis_db: Any, shards: int) -> None:
    client = redis_db.client()
    spec = {"domain": [f"v{i}" for i in range(50)], "epsilon": 1.0, "mechanism": "olh"}
    d = Registry(client).put("app.sharded", {**spec, "shards": shards}).definition
    payloads = pooled(d, 3000, seed=13)
    pipe = client.pipeline(transaction=False)
    for i, payload in enumerate(payloads):
        pipe.xadd(keys.stream_key(d.name, d.version, i % shards), {"p": payload})
    pipe.execute()
    worker(client).run(once=True)
    assert_counts(client, d, offline(d, payloads))


def test_an_overflow_is_refused_before_anything_is_acknowledged(any_redis: Any) -> None:
    client = any_redis.client()
    d = metric(client, "app.full", "grr", 8)
    payloads = pooled(d, 50, seed=14)
    first = store_now(client, d, payloads[:10])
    hour = schema.window_names(first)[0]
    counts = keys.counts_key(d.name, d.version, hour)
    client.hset(counts, "n", schema.MAX_WINDOW_REPORTS - 5)  # 40 more would pass the limit
    support_before = client.get(keys.support_key(d.name, d.version))
    stream = keys.stream_key(d.name, d.version)
    for payload in payloads[10:]:
        client.xadd(stream, {"p": payload})
    with pytest.raises(WindowFull, match="FULL .* holds 4611686018427387899 reports"):
        worker(client).run(once=True)
    assert client.xpending(stream, keys.GROUP)["pending"] == 40  # nothing acknowledged
    assert client.get(keys.support_key(d.name, d.version)) == support_before
    assert int(client.hget(counts, "n") or 0) == schema.MAX_WINDOW_REPORTS - 5
    assert read_counts(client, d).n == 10  # the all-time window: untouched too


def test_a_counter_never_wraps_and_a_corrupt_one_is_not_read(any_redis: Any) -> None:
    client = any_redis.client()
    d = metric(client, "app.wrap", "grr", 4)
    payloads = pooled(d, 200, seed=15)
    store_now(client, d, payloads[:100])
    support = keys.support_key(d.name, d.version)
    top = (1 << 63) - 1
    client.execute_command("BITFIELD", support, "SET", "i64", "#0", top)  # corrupt: C(0) > n
    with pytest.raises(ValueError, match="a support count outside"):
        read_counts(client, d)
    store_now(client, d, payloads[100:])  # OVERFLOW FAIL: C(0) stays, never wraps negative
    raw = client.get(support)
    assert raw is not None
    counters = np.frombuffer(raw, dtype=schema.SUPPORT_DTYPE)
    assert counters[0] == top
    assert counters[1:].tolist() == offline(d, payloads).support[1:].tolist()

"""Delta blobs against real Redis servers: wide metrics commit one blob a window, folded later.

A metric with k ≥ DELTA_MIN_K (a string metric's sketch, a wide domain) sends each batch's
support counts as one blob that the commit script appends to each window's delta list
(see Deltas in :mod:`ldp_store.schema`); workers fold the lists into the packed strings.
Checked here: the counts read are exact before, during and after folds, on one shard and
several; a fold that lost a race changes nothing; a bad blob is refused before anything
is acknowledged, and a corrupt one is never read as counts; a fold onto a window whose
packed string is gone keeps the window's expiry.
"""

from __future__ import annotations

import hashlib
from typing import Any, cast

import numpy as np
import pytest
import redis

from aggregator.stream.counts import add_deltas, fold_window, read_counts
from aggregator.stream.worker import FOLD_EVERY, FOLD_SHARE, Worker
from client_sdk.wire import MetricDefinition
from ldp_store import keys, schema, scripts
from ldp_store.registry import Registry
from tests.aggregator.test_worker import offline, pooled

K = schema.DELTA_MIN_K


def wide(
    client: redis.Redis, name: str, shards: int = 1, mechanism: str = "grr"
) -> MetricDefinition:
    spec = {"domain": [f"v{i}" for i in range(K)], "epsilon": 2.0, "mechanism": mechanism}
    return Registry(client).put(name, {**spec, "shards": shards}).definition


def enqueue(client: redis.Redis, d: MetricDefinition, payloads: list[str]) -> None:
    pipe = client.pipeline(transaction=False)
    for i, payload in enumerate(payloads):
        pipe.xadd(keys.stream_key(d.name, d.version, i % d.shards), {"p": payload})
    pipe.execute()


def drain(client: redis.Redis, batch_size: int) -> Worker:
    w = Worker(client, handle_signals=False, batch_size=batch_size)
    w.run(once=True)
    return w


def test_counts_are_exact_before_during_and_after_folds(any_redis: Any) -> None:
    client = any_redis.client()
    d = wide(client, "app.wide")
    payloads = pooled(d, 6000, seed=21)
    batches = 6000 // 100
    enqueue(client, d, payloads)
    w = drain(client, batch_size=100)
    # Every FOLD_EVERY delta commits the worker looks, and folds each window whose list
    # reached FOLD_SHARE of the packed string's bytes: folded blobs are always the first.
    assert w.stats.folds >= 3
    left = client.llen(keys.delta_key(d.name, d.version))
    assert 0 < left < batches
    folded = batches - left
    bytes_a_blob = 8 * 97 + 16  # ~97 of 1024 values a batch of 100, and the tag
    assert left * bytes_a_blob < (FOLD_SHARE * schema.SUPPORT_BYTES * K + FOLD_EVERY * 1100)
    packed = client.get(keys.support_key(d.name, d.version))
    assert packed is not None and len(packed) == schema.SUPPORT_BYTES * K
    want = offline(d, payloads)
    for window in ["all", *(x for x in read_windows(client, d) if x != "all")]:
        got = read_counts(client, d, window)
        assert got.n == want.n and got.support.tolist() == want.support.tolist()
    # The packed string alone holds exactly the folded batches' counts.
    in_string = offline(d, payloads[: 100 * folded]).support
    assert np.frombuffer(packed, dtype=schema.SUPPORT_DTYPE).tolist() == in_string.tolist()
    # A fold by hand takes the rest, and the counts read do not move.
    assert fold_window(client, d, "all", 0) == left
    assert client.llen(keys.delta_key(d.name, d.version)) == 0
    assert read_counts(client, d).support.tolist() == want.support.tolist()
    assert fold_window(client, d, "all", 0) == 0  # nothing left: nothing written


def read_windows(client: redis.Redis, d: MetricDefinition) -> list[str]:
    return [m.decode() for m in client.zrange(keys.windows_key(d.name, d.version), 0, -1)]


def test_shards_sum_their_deltas(redis_db: Any) -> None:
    client = redis_db.client()
    d = wide(client, "app.wide.sharded", shards=3, mechanism="olh")
    payloads = pooled(d, 3000, seed=22)
    enqueue(client, d, payloads)
    drain(client, batch_size=50)
    want = offline(d, payloads)
    got = read_counts(client, d)
    assert got.n == want.n and got.support.tolist() == want.support.tolist()


def test_a_fold_that_lost_the_race_changes_nothing(
    redis_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = redis_db.client()
    d = wide(client, "app.race")
    payloads = pooled(d, 1000, seed=23)
    enqueue(client, d, payloads)
    monkeypatch.setattr("aggregator.stream.worker.FOLD_SHARE", float("inf"))  # no fold yet
    drain(client, batch_size=100)  # 10 blobs
    counts, support, deltas = keys.window_keys(d.name, d.version, "all")
    window = client.register_script(scripts.WINDOW)
    _, packed, blobs = cast(list[Any], window(keys=[counts, support, deltas]))
    assert packed is None and len(blobs) == 10
    stale = np.zeros(K, dtype=np.int64)
    add_deltas(stale, blobs, deltas)
    assert fold_window(client, d, "all", 0) == 10  # another worker folds first
    fold = client.register_script(scripts.FOLD)
    # The stale fold's write would count the 10 blobs twice: the string is no longer the
    # (absent) one it read, so it writes nothing.
    done = fold(
        keys=[support, deltas],
        args=[
            10,
            hashlib.sha1(b"").hexdigest(),
            (2 * stale).astype(schema.SUPPORT_DTYPE).tobytes(),
        ],
    )
    assert done == 0
    assert read_counts(client, d).support.tolist() == offline(d, payloads).support.tolist()


def test_a_bad_blob_is_refused_before_anything_is_acknowledged(redis_db: Any) -> None:
    client = redis_db.client()
    d = wide(client, "app.badblob")
    enqueue(client, d, pooled(d, 5, seed=24))
    stream = keys.stream_key(d.name, d.version)
    client.xgroup_create(stream, keys.GROUP, id="0")
    ids = [entry[0] for entry in client.xreadgroup(keys.GROUP, "w", {stream: ">"})[0][1]]
    hour, hour_start, day, day_start = schema.window_names(int(ids[0].split(b"-")[0]))
    commit = client.register_script(scripts.COMMIT)
    with pytest.raises(redis.ResponseError, match="DELTA blob of 7 bytes"):
        commit(
            keys=[
                stream,
                *(keys.counts_key(d.name, d.version, w) for w in ("all", hour, day)),
                keys.windows_key(d.name, d.version),
                keys.claims_key(d.name, d.version),
                *(keys.support_key(d.name, d.version, w) for w in ("all", hour, day)),
                keys.expiries_key(d.name, d.version),
                keys.seeds_key(d.name, d.version, hour),
                keys.seeds_key(d.name, d.version, day),
                *(keys.delta_key(d.name, d.version, w) for w in ("all", hour, day)),
            ],
            args=[
                keys.GROUP,
                "w",
                b",".join(ids),
                hour,
                hour_start,
                day,
                day_start,
                "",
                0,
                0,
                K,
                "",
                schema.N,
                len(ids),
                schema.DELTA_FIELD,
                b"\x00" * 7,
            ],
        )
    assert client.xpending(stream, keys.GROUP)["pending"] == 5  # nothing acknowledged
    assert not client.exists(keys.counts_key(d.name, d.version))


def test_a_corrupt_blob_is_never_read_as_counts(redis_db: Any) -> None:
    client = redis_db.client()
    d = wide(client, "app.corrupt")
    enqueue(client, d, pooled(d, 300, seed=25))
    drain(client, batch_size=100)
    deltas = keys.delta_key(d.name, d.version)
    outside = np.array([[K, 1]], dtype=schema.DELTA_DTYPE).tobytes()
    client.rpush(deltas, outside)
    with pytest.raises(ValueError, match=f"names value {K}, k = {K}"):
        read_counts(client, d)
    with pytest.raises(ValueError, match=f"names value {K}"):
        fold_window(client, d, "all", 0)
    client.lrem(deltas, 1, outside)
    client.rpush(deltas, b"13 bytes long")
    with pytest.raises(ValueError, match="13 bytes is not whole pairs"):
        read_counts(client, d)


def test_a_fold_keeps_the_windows_expiry(any_redis: Any) -> None:
    client = any_redis.client()
    d = wide(client, "app.fold.expiry")
    payloads = pooled(d, 500, seed=26)
    enqueue(client, d, payloads)
    drain(client, batch_size=100)
    hour = next(w for w in read_windows(client, d) if w.startswith("hour:"))
    counts, support, deltas = keys.window_keys(d.name, d.version, hour)
    ttl = client.pttl(deltas)
    assert ttl > 0 and not client.exists(support)
    assert fold_window(client, d, hour, 0) == 5
    assert 0 < client.pttl(support) <= ttl
    assert read_counts(client, d, hour).support.tolist() == offline(d, payloads).support.tolist()
    # Folding again onto an existing string keeps its expiry too (SETRANGE).
    enqueue(client, d, pooled(d, 100, seed=27))
    before = client.pttl(support)
    drain(client, batch_size=100)
    if client.llen(deltas):  # the same hour (not across an hour boundary)
        fold_window(client, d, hour, 0)
        assert 0 < client.pttl(support) <= before
    assert read_counts(client, d).n == 600

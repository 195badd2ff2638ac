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
from typing import Any

import numpy as np
import pytest
import redis

from aggregator.query.window import add_deltas, read_counts
from aggregator.stream.counts import fold_window
from aggregator.stream.worker import Worker
from client_sdk.wire import MetricDefinition
from ldp_store import keys, schema, scripts
from ldp_store.registry import Registry
from ldp_store.retention import RetentionPolicy
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


@pytest.fixture
def untidy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers that never tidy their delta lists: the blobs stay one a batch."""
    monkeypatch.setattr(Worker, "_tidy", lambda self, stream: None)


def test_counts_are_exact_before_during_and_after_folds(any_redis: Any) -> None:
    client = any_redis.client()
    d = wide(client, "app.wide")
    payloads = pooled(d, 6000, seed=21)
    enqueue(client, d, payloads)
    w = drain(client, batch_size=100)
    # Every FOLD_EVERY delta commits (and when a round finds nothing new) the worker folds
    # a window's list once it holds FOLD_SHARE of the packed string's bytes, else merges
    # its blobs into one: a burst ends with at most one blob a window.
    assert w.stats.folds >= 3 and w.stats.merges >= 3
    packed = client.get(keys.support_key(d.name, d.version))
    assert packed is not None and len(packed) == schema.SUPPORT_BYTES * K
    want = offline(d, payloads)
    for window in ["all", *(x for x in read_windows(client, d) if x != "all")]:
        assert client.llen(keys.delta_key(d.name, d.version, window)) <= 1
        got = read_counts(client, d, window)
        assert got.n == want.n and got.support.tolist() == want.support.tolist()
    (rest,) = client.lrange(keys.delta_key(d.name, d.version), 0, -1)
    pairs = np.frombuffer(rest, dtype=schema.DELTA_DTYPE).reshape(-1, 2)
    assert np.all(np.diff(pairs[:, 0].astype(np.int64)) > 0)  # merged: sorted, distinct
    in_string = np.frombuffer(packed, dtype=schema.SUPPORT_DTYPE).astype(np.int64)
    in_string[pairs[:, 0]] += pairs[:, 1]
    assert in_string.tolist() == want.support.tolist()
    # A fold by hand takes the rest, and the counts read do not move.
    assert fold_window(client, d, "all", 0) == 1
    assert client.llen(keys.delta_key(d.name, d.version)) == 0
    assert read_counts(client, d).support.tolist() == want.support.tolist()
    assert fold_window(client, d, "all", 0) == 0  # nothing left: nothing written


def test_short_bursts_keep_one_blob_a_window_and_fold_once_it_is_big(redis_db: Any) -> None:
    """Thirty burst runs of seven commits each (fewer than FOLD_EVERY): each run's first
    delta commit and its idle end tidy the lists, so no list grows past one blob, and the
    counts reach the packed string once they are worth it."""
    client = redis_db.client()
    d = wide(client, "app.bursts")
    payloads = pooled(d, 30 * 700, seed=28)
    folds = 0
    for run in range(30):
        enqueue(client, d, payloads[700 * run : 700 * (run + 1)])
        folds += drain(client, batch_size=100).stats.folds
        assert client.llen(keys.delta_key(d.name, d.version)) <= 1
    assert folds >= 1 and client.exists(keys.support_key(d.name, d.version))
    assert read_counts(client, d).support.tolist() == offline(d, payloads).support.tolist()


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


def snapshot(client: redis.Redis, d: MetricDefinition) -> tuple[bytes | None, list[bytes]]:
    _, packed, blobs = scripts.read_window(client, name=d.name, version=d.version, window="all")
    return packed, blobs


def stale_fold(
    client: redis.Redis, d: MetricDefinition, packed: bytes | None, blobs: list[bytes]
) -> int:
    """The FOLD a worker would send after reading ``packed`` and ``blobs``: their sum."""
    deltas = keys.delta_key(d.name, d.version)
    total = np.zeros(K, dtype=np.int64)
    add_deltas(total, blobs, deltas)
    if packed is not None:
        total += np.frombuffer(packed, dtype=schema.SUPPORT_DTYPE)
    done = scripts.fold_window(
        client,
        name=d.name,
        version=d.version,
        window="all",
        shard=0,
        blobs=len(blobs),
        blobs_sha1=hashlib.sha1(b"".join(blobs)).hexdigest(),
        packed_sha1=hashlib.sha1(packed or b"").hexdigest(),
        mode="fold",
        payload=total.astype(schema.SUPPORT_DTYPE).tobytes(),
    )
    return int(done)


@pytest.mark.usefixtures("untidy")
def test_a_fold_that_lost_the_race_changes_nothing(redis_db: Any) -> None:
    client = redis_db.client()
    d = wide(client, "app.race")
    payloads = pooled(d, 1000, seed=23)
    enqueue(client, d, payloads)
    drain(client, batch_size=100)  # 10 blobs
    packed, blobs = snapshot(client, d)
    assert packed is None and len(blobs) == 10
    assert fold_window(client, d, "all", 0) == 10  # another worker folds first
    # The stale fold's write would count the 10 blobs twice: the list no longer holds
    # them and the string is no longer the (absent) one it read, so it writes nothing.
    assert stale_fold(client, d, packed, blobs) == 0
    assert read_counts(client, d).support.tolist() == offline(d, payloads).support.tolist()


@pytest.mark.usefixtures("untidy")
def test_a_fold_checks_the_blobs_it_trims_not_only_the_string(redis_db: Any) -> None:
    """A failover can put back a state where the string is unchanged but the list's head
    is not what a fold read (a commit lost with the old primary, recounted as another
    batch): the fold must not trim the new blob in place of the one it summed."""
    client = redis_db.client()
    d = wide(client, "app.aba")
    payloads = pooled(d, 300, seed=29)
    enqueue(client, d, payloads)
    drain(client, batch_size=100)  # 3 blobs, no string
    packed, blobs = snapshot(client, d)
    deltas = keys.delta_key(d.name, d.version)
    other = np.array([[5, 1]], dtype=schema.DELTA_DTYPE).tobytes()
    client.lset(deltas, 2, other)  # the third blob is now another batch's
    assert stale_fold(client, d, packed, blobs) == 0
    assert client.lrange(deltas, 0, -1) == [*blobs[:2], other]


def test_a_bad_blob_is_refused_before_anything_is_acknowledged(redis_db: Any) -> None:
    client = redis_db.client()
    d = wide(client, "app.badblob")
    enqueue(client, d, pooled(d, 5, seed=24))
    stream = keys.stream_key(d.name, d.version)
    client.xgroup_create(stream, keys.GROUP, id="0")
    ids = [entry[0] for entry in client.xreadgroup(keys.GROUP, "w", {stream: ">"})[0][1]]
    hour, hour_start, day, day_start = schema.window_names(int(ids[0].split(b"-")[0]))
    with pytest.raises(redis.ResponseError, match="DELTA blob of 7 bytes"):
        scripts.commit_batch(
            client,
            scripts.CommitBatch(
                name=d.name,
                version=d.version,
                shard=0,
                consumer="w",
                ids=b",".join(ids),
                hours=scripts.Hours(hour, hour_start, day, day_start, 0, 0),
                fence=b"",
                k=K,
                seeds=[],
                increments=schema.Increments(len(ids), delta=b"\x00" * 7),
            ),
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
    assert fold_window(client, d, hour, 0) == 1  # the burst's end merged its 5 blobs
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


def test_a_list_made_again_by_a_worker_of_another_policy_keeps_the_windows_expiry(
    redis_db: Any,
) -> None:
    """A fold empties (deletes) a window's list; the next commit makes it again. Under a
    worker with another retention policy (a metric's retention changed, a deploy), the
    list must still expire with its window's counts hash, not with that worker's policy:
    else the window's counts would vanish while its n stays."""
    client = redis_db.client()
    d = wide(client, "app.policy")
    enqueue(client, d, pooled(d, 200, seed=30))
    Worker(client, handle_signals=False, retention=RetentionPolicy(hour=14 * 86400)).run(once=True)
    hour = next(w for w in read_windows(client, d) if w.startswith("hour:"))
    counts, support, deltas = keys.window_keys(d.name, d.version, hour)
    fold_window(client, d, hour, 0)
    assert not client.exists(deltas) and client.pttl(support) > 13 * 86400 * 1000
    enqueue(client, d, pooled(d, 100, seed=31))
    short = Worker(client, handle_signals=False, retention=RetentionPolicy(hour=2 * 86400))
    short.run(once=True)
    if client.exists(deltas):  # the same hour (not across an hour boundary)
        assert abs(client.pttl(deltas) - client.pttl(counts)) < 5000


@pytest.mark.parametrize("own_any_redis", ["redis-7"], indirect=True)
def test_a_worker_keeps_counting_at_redis_maxmemory(own_any_redis: Any) -> None:
    """At Redis's memory limit the commit still runs (its first write is the XACK) but a
    fold's SET is refused: the fold is an optimisation, logged and skipped, and every
    report is counted."""
    client = own_any_redis.client()
    d = wide(client, "app.full.memory")
    payloads = pooled(d, 2000, seed=32)
    w = Worker(client, handle_signals=False, batch_size=100)
    enqueue(client, d, payloads[:100])
    w.run(once=True)  # joined: its group and windows exist (XGROUP CREATE is refused)
    enqueue(client, d, payloads[100:])
    used = int(client.info("memory")["used_memory"])
    client.config_set("maxmemory", str(used - 1024))
    client.config_set("maxmemory-policy", "noeviction")
    stats = w.run(once=True)
    client.config_set("maxmemory", "0")
    assert stats.counted == 2000 and stats.folds == 0  # every fold refused, logged
    assert read_counts(client, d).support.tolist() == offline(d, payloads).support.tolist()

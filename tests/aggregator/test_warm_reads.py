"""Expensive reads kept warm (issue 43 item 2): the first read after a batch counted finds
the statistics the process's warmer computed meanwhile, equal to a fresh computation's;
a batch counted since is computed afresh. A process that never served a read (started
since, another worker) warms its lane's reads recorded in Redis before a request asks."""

from __future__ import annotations

import gc
import json
import random
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from redis.exceptions import SlotNotCoveredError

from aggregator.query import memo, warm
from aggregator.query.estimators.base import Reader
from aggregator.stream.worker import Worker
from aggregator.web.estimates import WARMER
from client_sdk.wire import build_report
from ldp_api.context import worker_started
from ldp_server.app import create_ingest_app, create_server_app
from ldp_store import keys
from ldp_store.registry import Registry
from tests.aggregator.test_answer_rows import BIG
from tests.aggregator.test_answer_rows import SPECS as ROWS_SPECS

SPECS = {name: ROWS_SPECS[name] for name in ("rows.big", "rows.joint", "rows.groups")}
READS = (
    "/v1/estimates/rows.big",
    "/v1/estimates/rows.big?format=columns",
    "/v1/estimates/rows.joint?marginal=x,y",
    "/v1/estimates/rows.groups?by=region",
)


Served = tuple[Any, Any, Callable[[int], None]]
"""The app, its test client, and what sends a batch to each metric and counts it."""


@pytest.fixture
def served(redis_server: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """An app over fresh metrics, every read kept warm, the warmer stepped by the test."""
    monkeypatch.setattr(warm, "WARM_SECONDS", 0.0)
    monkeypatch.setattr(warm, "POLL_SECONDS", 3600.0)  # the thread waits; the test steps
    redis_server.client().flushall()
    registry = Registry(redis_server.client())
    defs = {name: registry.put(name, spec).definition for name, spec in SPECS.items()}
    app = create_server_app({"REDIS_URL": redis_server.url, "TESTING": True})
    client = app.test_client()
    rng = random.Random(11)

    def send(count: int) -> None:
        reports = []
        for _ in range(count):
            value = BIG[min(int(rng.expovariate(0.05)), 299)]
            reports.append(build_report(defs["rows.big"], value, rng=rng))
            reports.append(build_report(defs["rows.joint"], [rng.randrange(20)] * 3, rng=rng))
            region = {"region": rng.choice(["north", "south"])}
            reports.append(build_report(defs["rows.groups"], value, rng=rng, dimensions=region))
        for start in range(0, len(reports), 500):
            chunk = {"reports": reports[start : start + 500]}
            assert client.post("/v1/reports", json=chunk).status_code == 202
        Worker(redis_server.client(), handle_signals=False).run(once=True)

    memo.clear()
    APPS.append(app)
    return app, client, send


APPS: list[Any] = []
"""The apps a test made, whose warmers' threads end with it."""


@pytest.fixture(autouse=True)
def _stop_warmers() -> Iterator[None]:
    yield
    while APPS:
        WARMER.get(APPS.pop()).stop()


def replayed(warmer: warm.Warmer, count: int) -> bool:
    """Whether ``warmer``'s thread has computed ``count`` reads again (within a minute)."""
    deadline = time.monotonic() + 60
    while warmer.replays < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return warmer.replays == count


def get(client: Any, path: str) -> Any:
    reply = client.get(path)
    assert reply.status_code == 200, reply.get_json()
    return reply.get_json()


@pytest.mark.parametrize("path", READS)
def test_the_first_read_after_a_batch_is_served_from_the_warm_up(served: Served, path: str) -> None:
    app, client, send = served
    send(300)
    get(client, path)  # read once: kept warm from now on
    send(100)
    assert WARMER.get(app).step() == 1  # the batch noticed, the read computed again
    computed = memo.stats().computed
    warmed = get(client, path)
    assert memo.stats().computed == computed  # nothing computed on the request's path
    memo.clear()
    fresh = get(client, path)
    assert memo.stats().computed > computed
    assert json.dumps(warmed) == json.dumps(fresh)  # equal to the last decimal
    assert WARMER.get(app).step() == 0  # no batch since: nothing to compute again


def test_a_batch_counted_after_the_warm_up_is_computed_afresh(
    served: Served,
) -> None:
    app, client, send = served
    send(200)
    get(client, READS[0])
    send(50)
    WARMER.get(app).step()
    send(50)  # not noticed yet: the warm statistics are of the counts before
    computed = memo.stats().computed
    body = get(client, READS[0])
    assert body["n"] == 300 and memo.stats().computed == computed + 1


def test_a_cheap_read_is_not_kept_warm(served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    app, client, send = served
    monkeypatch.setattr(warm, "WARM_SECONDS", 3600.0)
    send(100)
    get(client, READS[0])
    send(50)
    assert WARMER.get(app).step() == 0


def test_the_warmer_thread_notices_a_batch(served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    app, client, send = served
    monkeypatch.setattr(warm, "POLL_SECONDS", 0.05)
    send(200)
    get(client, READS[2])  # starts the thread
    warmer = WARMER.get(app)

    send(50)
    assert replayed(warmer, 1)  # the batch noticed
    computed = memo.stats().computed
    assert get(client, READS[2])["n"] == 250
    assert memo.stats().computed == computed


ANY = keys.warm_reads_key("")


def fresh_process(redis_server: Any) -> tuple[Any, Any]:
    """A new app on the same Redis, and no statistics kept: what a read worker that just
    started (or never served the reads) has."""
    memo.clear()
    app = create_server_app({"REDIS_URL": redis_server.url, "TESTING": True})
    APPS.append(app)
    return app, app.test_client()


@pytest.mark.parametrize("path", READS)
def test_a_fresh_process_serves_its_first_heavy_read_warm(
    served: Served, redis_server: Any, path: str
) -> None:
    _, client, send = served
    send(300)
    get(client, path)  # served by another process: recorded
    app, client = fresh_process(redis_server)
    warmer = WARMER.get(app)
    assert warmer.load() == 1 and warmer.step() == 1  # warmed before any request
    computed = memo.stats().computed
    asked = time.time()
    warmed = get(client, path)
    assert memo.stats().computed == computed  # its first read computes nothing
    (_, score), *_ = redis_server.client().zrange(ANY, 0, -1, withscores=True)
    assert score >= asked  # and is recorded: the record keeps what is read
    memo.clear()
    fresh = get(client, path)
    assert memo.stats().computed > computed
    assert json.dumps(warmed) == json.dumps(fresh)
    assert warmer.load() == 0  # kept already


def test_a_worker_warms_its_lane_at_start(
    served: Served,
    redis_server: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, client, send = served
    send(200)
    monkeypatch.setenv("LDP_READ_LANE", "heavy")
    get(client, READS[3])  # a heavy-lane read
    monkeypatch.setenv("LDP_READ_LANE", "light")
    get(client, READS[2])  # a light-lane read
    app, client = fresh_process(redis_server)
    warmer = WARMER.get(app)
    worker_started(app)  # gunicorn's post_worker_init: the thread loads and warms at once
    assert replayed(warmer, 1)  # the light lane's read only
    computed = memo.stats().computed
    get(client, READS[2])
    assert memo.stats().computed == computed
    assert warmer.load() == 0 and warmer.step() == 0  # the heavy lane's is not this one's


def test_the_record_is_bounded_and_written_once_a_minute(
    served: Served,
    redis_server: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app, client, send = served
    monkeypatch.setattr(warm, "WARM_READS", 2)
    send(100)
    redis = redis_server.client()
    warmer = WARMER.get(app)
    now = [1000.0]
    monkeypatch.setattr(warmer, "clock", lambda: now[0])
    monkeypatch.setattr(warmer, "wall", lambda: now[0] + 2e9)
    for path in (READS[0], READS[2], READS[3]):
        get(client, path)
        now[0] += 1
    assert redis.zcard(ANY) == 2  # the newest two
    assert 0 < redis.pttl(ANY) <= warm.IDLE_SECONDS * 1000  # gone when none is read
    scores = dict(redis.zrange(ANY, 0, -1, withscores=True))
    now[0] += warm.RECORD_SECONDS - 10
    get(client, READS[3])
    assert dict(redis.zrange(ANY, 0, -1, withscores=True)) == scores  # no write yet
    now[0] += 10
    get(client, READS[3])
    assert max(redis.zrange(ANY, 0, -1, withscores=True), key=lambda m: m[1])[1] == now[0] + 2e9


def test_a_read_not_read_for_15_minutes_is_not_warmed(served: Served, redis_server: Any) -> None:
    _, client, send = served
    send(100)
    get(client, READS[0])
    redis = redis_server.client()
    (member,) = redis.zrange(ANY, 0, -1)
    redis.zadd(ANY, {member: time.time() - warm.IDLE_SECONDS - 1})
    app, _ = fresh_process(redis_server)
    assert WARMER.get(app).load() == 0


@pytest.mark.parametrize("gone", ["deleted", "retired"])
def test_a_metric_gone_is_not_warmed_and_dropped_from_the_record(
    served: Served, redis_server: Any, gone: str
) -> None:
    _, client, send = served
    send(100)
    get(client, READS[0])
    get(client, READS[2])
    registry = Registry(redis_server.client())
    if gone == "deleted":
        registry.forget("rows.big", [1])
    else:
        registry.retire("rows.big")
    app, _ = fresh_process(redis_server)
    warmer = WARMER.get(app)
    assert warmer.load() == 1  # the joint metric's
    assert warmer.step() == 1
    (left,) = redis_server.client().zrange(ANY, 0, -1)
    assert json.loads(left)["metric"] == "rows.joint"


def test_a_bad_entry_is_ignored_and_dropped(served: Served, redis_server: Any) -> None:
    _, client, send = served
    send(100)
    get(client, READS[0])
    (good,) = redis_server.client().zrange(ANY, 0, -1)
    spec = json.loads(good)
    bad = [
        "not json",
        "[1, 2]",
        json.dumps({"metric": "rows.big"}),
        json.dumps({**spec, "read": "trend"}),
        json.dumps({**spec, "window": "../../x"}),
        json.dumps({**spec, "confidence": 7}),
        json.dumps({**spec, "multiplicity": "none"}),
        json.dumps({**spec, "version": 9}),
        json.dumps({**spec, "metric": "NO SUCH{}"}),
        json.dumps({**spec, "read": "segments", "by": "nowhere", "minimum": 1}),
    ]
    redis_server.client().zadd(ANY, {member: time.time() for member in bad})
    app, _ = fresh_process(redis_server)
    warmer = WARMER.get(app)
    assert warmer.load() == 1 and warmer.step() == 1
    assert redis_server.client().zrange(ANY, 0, -1) == [good]


def test_the_ingest_workers_warm_nothing(served: Served, redis_server: Any) -> None:
    _, client, send = served
    send(100)
    get(client, READS[0])
    app = create_ingest_app({"REDIS_URL": redis_server.url, "TESTING": True}, "127.0.0.1:9")
    assert WARMER.get(app).load() == 0  # ldp serve's read workers do


@pytest.mark.parametrize("cluster", ["redis_cluster", "redis62_cluster"])
def test_the_record_on_a_redis_cluster(cluster: str, request: pytest.FixtureRequest) -> None:
    nodes = request.getfixturevalue(cluster)
    nodes.flushall()
    client = nodes.client()
    registry = Registry(client)
    definition = registry.put("rows.big", SPECS["rows.big"]).definition
    spec = {"metric": "rows.big", "version": definition.version, "read": "window"}
    computed: list[str] = []

    def replay(reader: Any) -> None:
        computed.append("rows.big")

    def revive(reader: Any, found: Any) -> Any:
        return (reader.registry.get(found["metric"], found["version"]), replay)

    served = warm.Warmer(Reader(client, registry), revive)
    try:
        served.note(spec, definition, replay, 1.0)  # kept and recorded (its thread waits)
    finally:
        served.stop()
    client.zadd(ANY, {"not json": time.time()})
    fresh = warm.Warmer(Reader(client, Registry(client)), revive)
    assert fresh.load() == 1 and fresh.step() == 1 and computed == ["rows.big"]
    assert client.zrange(ANY, 0, -1) == [warm.spec_text(spec).encode()]


def waited(done: Callable[[], bool], seconds: float = 30.0) -> bool:
    """Whether ``done()`` holds within ``seconds`` (a thread's work, polled)."""
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        time.sleep(0.05)
    return done()


def test_a_cluster_error_does_not_end_the_warm_thread(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass that fails with what a cluster client raises when a shard is down (a
    RedisClusterException, which is no RedisError) is retried: the thread goes on."""
    app, client, send = served
    monkeypatch.setattr(warm, "POLL_SECONDS", 0.05)
    real = warm.reports_counted_many
    failed: list[bool] = []

    def shard_down_once(*args: Any) -> list[int]:
        if not failed:
            failed.append(True)
            raise SlotNotCoveredError("slot 1234 is not covered by the cluster")
        return real(*args)

    monkeypatch.setattr(warm, "reports_counted_many", shard_down_once)
    send(200)
    get(client, READS[0])  # starts the thread, whose first pass fails
    warmer = WARMER.get(app)
    assert waited(lambda: bool(failed))
    send(50)
    assert waited(lambda: warmer.replays == 1)  # the batch still noticed


def test_an_apps_warm_thread_ends_with_the_app(
    served: Served, redis_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test suite creates many apps: each one's warm thread (and the Redis client it
    reads with) goes when its app does, not at the end of the process."""
    _, _, send = served
    monkeypatch.setattr(warm, "POLL_SECONDS", 0.05)
    send(100)
    app = create_server_app({"REDIS_URL": redis_server.url, "TESTING": True})
    get(app.test_client(), READS[0])
    thread = WARMER.get(app)._thread
    assert thread is not None and thread.is_alive()
    del app
    gc.collect()
    thread.join(30)  # the thread polls every POLL_SECONDS
    assert not thread.is_alive()


def test_a_read_served_is_answered_when_keeping_it_warm_fails(
    served: tuple[Any, Any, Callable[[int], None]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The count a read newly kept warm starts from is read after its answer was made:
    a cluster error there (a shard just went down) leaves the read unwarmed, not a 500."""
    _, client, send = served
    send(100)

    def shard_down(*args: Any) -> int:
        raise SlotNotCoveredError("slot 1234 is not covered by the cluster")

    monkeypatch.setattr(warm, "reports_counted", shard_down)
    assert get(client, READS[0])["n"] == 100

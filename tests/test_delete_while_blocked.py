"""Issue 28 item 0: deleting metrics never stops a worker, even one blocked on their streams.

A newcomer created six metrics, sent a report to each, then retired and deleted each.
Redis 7 answers a worker's ``XREADGROUP … BLOCK`` on a stream that is deleted with
``UNBLOCKED the stream key no longer exists`` (Redis 6.2 keeps it waiting); the worker
tolerated only ``NOGROUP``, exited, and after five such exits ``ldp serve`` gave up and
stopped everything. Both Redis versions, with workers waiting on the deleted streams
(seen in ``CLIENT LIST``) at each delete: a worker in a thread, and the real ``ldp serve``
driven by the ``ldp`` CLI as the newcomer did.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from aggregator.query.window import read_counts
from aggregator.stream.worker import Worker
from client_sdk.wire import MetricDefinition, build_report
from collector import create_app
from ldp_server.serve import Server
from ldp_store import keys, streams
from tests.cli_helpers import ldp
from tests.http_helpers import status_call

TOKEN = "test-admin-token-delete-blocked"
SPEC = {"domain": ["light", "dark", "auto"], "epsilon": 1.0, "mechanism": "grr"}
NAMES = [f"app.m{i}" for i in range(6)]


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 120) -> None:
    """Poll ``condition`` until true; a generous deadline (a loaded machine is slow)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout:.0f} s: {what}")


def blocked_readers(client: redis.Redis) -> int:
    """Clients waiting in a worker's blocking read right now (``CLIENT LIST`` flag ``b``):
    an ``XREAD`` of the doorbell (an ``XREADGROUP`` of every stream before it)."""
    return sum(
        1
        for c in client.client_list()
        if c.get("cmd") in ("xread", "xreadgroup") and "b" in str(c.get("flags", ""))
    )


def reports(d: MetricDefinition, n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [build_report(d, rng.randrange(d.k), rng) for _ in range(n)]


def test_a_worker_blocked_on_streams_that_are_deleted_goes_on(any_redis: Any) -> None:
    """Six metrics deleted one by one under a worker blocked on their streams: it stays up,
    forgets each, and counts a metric created afterwards. On Redis 7 the old worker died
    at the first delete (``ResponseError: UNBLOCKED the stream key no longer exists``)."""
    client = any_redis.client()
    web = create_app({"REDIS_URL": any_redis.url, "ADMIN_TOKEN": TOKEN}).test_client()
    admin = {"Authorization": f"Bearer {TOKEN}"}
    definitions = []
    for i, name in enumerate(NAMES):
        response = web.put(f"/v1/metrics/{name}", json=SPEC, headers=admin)
        assert response.status_code == 201, response.json
        definitions.append(d := MetricDefinition.from_dict(response.json))
        assert web.post("/v1/reports", json={"reports": reports(d, 1, i)}).status_code == 202

    # block_ms long: the worker is surely inside the blocking read at each delete
    worker = Worker(client, handle_signals=False, block_ms=2_000, discover_interval=0.2)
    failed: list[BaseException] = []

    def run() -> None:
        try:
            worker.run()
        except BaseException as exc:  # noqa: BLE001  # the test reports it
            failed.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: worker.stats.counted == len(NAMES), "every report counted")
        for name in NAMES:
            wait_for(lambda: blocked_readers(client) >= 1 or not thread.is_alive(), "blocked")
            assert web.post(f"/v1/metrics/{name}/retire", headers=admin).status_code == 200
            response = web.delete(f"/v1/metrics/{name}", headers=admin)
            assert response.status_code == 200, response.json
            assert thread.is_alive(), f"the worker stopped at the delete of {name}: {failed}"
        rounds = worker.stats.rounds
        wait_for(lambda: not worker._streams or not thread.is_alive(), "every stream forgotten")
        # at once, not at the next full discovery a minute later (the streams it had found
        # quiet were not read again: Redis 7 spun on the failing blocking read meanwhile)
        assert worker.stats.rounds - rounds <= 10, worker.stats.rounds - rounds
        assert not failed and thread.is_alive()
        assert not [k for k in client.scan_iter(match="ldp:{m:app.m*")]  # nothing recreated

        # and it still counts: a metric created after the deletes
        response = web.put("/v1/metrics/app.after", json=SPEC, headers=admin)
        after = MetricDefinition.from_dict(response.json)
        assert web.post("/v1/reports", json={"reports": reports(after, 5, 9)}).status_code == 202
        wait_for(lambda: read_counts(client, after).n == 5 or not thread.is_alive(), "counted")
        assert read_counts(client, after).n == 5, failed
    finally:
        worker.stop()
        thread.join(30)
    assert not failed, failed


# -- the newcomer's sequence on the real `ldp serve` ----------------------------------------


def http(url: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    return status_call(url, method, body, timeout=60)


def test_ldp_serve_survives_the_newcomers_retire_and_delete_of_six_metrics(
    own_any_redis: Any, tmp_path: Path
) -> None:
    """`ldp metrics create` ×6, a report to each, then `ldp metrics retire M --yes; ldp
    metrics delete M --yes` for each, against `ldp serve` with two aggregator workers
    blocked on the streams: no child exits, /healthz answers, new metrics are counted.
    On Redis 7 the old `ldp serve` restarted its workers at each delete, then gave up."""
    client = own_any_redis.client()
    with Server(
        port=0,
        redis_url=own_any_redis.url,
        data_dir=tmp_path / "data",
        web_workers=2,
        aggregators=2,
        admin_token=TOKEN,
        quiet=True,
    ) as server:
        url, auth = server.url, ("--url", server.url, "--token", TOKEN)
        pids = [w.pid for w in server.workers]
        for i, name in enumerate(NAMES):
            code, out = ldp("metrics", "create", name, *auth, "-d", "x,y,z", "-e", "1", "-m", "grr")
            assert code == 0, out
            d = MetricDefinition.from_dict(http(f"{url}/v1/metrics/{name}")[1])
            assert http(f"{url}/v1/reports", "POST", {"reports": reports(d, 1, i)})[0] == 202
        stream = keys.stream_key(NAMES[-1], 1)
        wait_for(
            lambda: streams.length(client, stream) == 0,
            "the workers counted and trimmed the reports",
        )
        for name in NAMES:
            wait_for(lambda: blocked_readers(client) >= 2, "both workers blocked on the streams")
            code, out = ldp("metrics", "retire", name, *auth, "--yes")
            assert code == 0, out
            code, out = ldp("metrics", "delete", name, *auth, "--yes")
            assert code == 0, out
        assert [w.pid for w in server.workers] == pids  # the same processes, never restarted
        assert all(w.poll() is None for w in server.workers)
        assert server.check() is None
        assert http(f"{url}/healthz")[0] == 200
        for i in (1, 2):  # what tells the supervisor that a worker works
            progress = json.loads((tmp_path / "data" / f"aggregator-{i}.progress").read_text())
            assert progress["rounds"] >= 1

        assert ldp("metrics", "create", "app.after", *auth, "-d", "x,y,z", "-e", "1")[0] == 0
        after = MetricDefinition.from_dict(http(f"{url}/v1/metrics/app.after")[1])
        assert http(f"{url}/v1/reports", "POST", {"reports": reports(after, 7, 7)})[0] == 202
        wait_for(lambda: read_counts(client, after).n == 7, "a new metric counted")
        assert [w.pid for w in server.workers] == pids
        assert server.restarts() == {"web": 0, "read": 0, "aggregator-1": 0, "aggregator-2": 0}

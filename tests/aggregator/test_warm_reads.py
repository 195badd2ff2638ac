"""Expensive reads kept warm (issue 43 item 2): the first read after a batch counted finds
the statistics the process's warmer computed meanwhile, equal to a fresh computation's;
a batch counted since is computed afresh."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from typing import Any

import pytest

from aggregator.query import memo, warm
from aggregator.stream.worker import Worker
from aggregator.web.estimates import WARMER
from client_sdk.wire import build_report
from ldp_server.app import create_server_app
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
    return app, client, send


def get(client: Any, path: str) -> Any:
    reply = client.get(path)
    assert reply.status_code == 200, reply.get_json()
    return reply.get_json()


@pytest.mark.parametrize("path", READS)
def test_the_first_read_after_a_batch_is_served_from_the_warm_up(
    served: tuple[Any, Any, Callable[[int], None]], path: str
) -> None:
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
    served: tuple[Any, Any, Callable[[int], None]],
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


def test_a_cheap_read_is_not_kept_warm(
    served: tuple[Any, Any, Callable[[int], None]], monkeypatch: pytest.MonkeyPatch
) -> None:
    app, client, send = served
    monkeypatch.setattr(warm, "WARM_SECONDS", 3600.0)
    send(100)
    get(client, READS[0])
    send(50)
    assert WARMER.get(app).step() == 0


def test_the_warmer_thread_notices_a_batch(
    served: tuple[Any, Any, Callable[[int], None]], monkeypatch: pytest.MonkeyPatch
) -> None:
    app, client, send = served
    monkeypatch.setattr(warm, "POLL_SECONDS", 0.05)
    send(200)
    get(client, READS[2])  # starts the thread
    warmer = WARMER.get(app)

    def replayed(count: int) -> bool:
        deadline = time.monotonic() + 60
        while warmer.replays < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return warmer.replays == count

    send(50)
    assert replayed(1)  # the batch noticed
    computed = memo.stats().computed
    assert get(client, READS[2])["n"] == 250
    assert memo.stats().computed == computed

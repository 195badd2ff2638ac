"""Relayed reports below the batch size, through the real pipeline (issue 36, item 8; issue
35, item 4): ``ldp serve`` (gunicorn collector, embedded Redis, one aggregator process),
a real ``ldp relay``, and the Python SDK reporting through it.

Before, 30 reports through the relay left n at 0 and the lag at 0, and nothing said they
waited, nor until when (and with the default bound of 0 they waited for ever). Now the
overview (``/v1/overview`` and its page), the estimates answer and ``ldp estimates`` say
how many wait for a shuffled batch and by when they are counted at the latest; once the
pool's bound has passed (its reports are made to look an hour old: the bound is an hour)
the aggregator's worker releases them and they are counted.
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from relay_helpers import ROOT, age_pool, run_relay

from client_sdk import Client
from client_sdk.ohttp.keys import GATEWAY_PATH
from ldp_server.serve import Server
from ldp_store import keys
from tests.http_helpers import call
from tests.serve_helpers import defined_server

THEME = {"domain": ["light", "dark", "auto"], "epsilon": 1.0, "mechanism": "grr"}
SENT = 30
"""Reports sent: fewer than B (100, the default), so the pool waits for its bound."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("relay-pools")
    env = {"LDP_SHUFFLE_MIN_BATCH": None, "LDP_SHUFFLE_MAX_DELAY": None}
    with defined_server(data, {"app.theme": THEME}, env) as s:
        yield s


@pytest.fixture(scope="module")
def relay(server: Server) -> Iterator[str]:
    yield from run_relay(f"{server.url}{GATEWAY_PATH}")


def row(server: Server) -> dict[str, Any]:
    [found] = [m for m in call(f"{server.url}/v1/overview")["metrics"] if m["name"] == "app.theme"]
    return dict(found)


def unix(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def test_relayed_reports_below_the_batch_size_are_shown_waiting_then_counted(
    server: Server, relay: str
) -> None:
    sent_at = time.time()
    client = Client(server.url, relay=relay, flush_at=1000)
    try:
        for i in range(SENT):
            assert client.report("app.theme", THEME["domain"][i % 3])
        assert client.flush(timeout=30)
    finally:
        client.shutdown()
    flushed_at = time.time()

    overview = row(server)
    assert overview["n"] == 0 and overview["lag"]["length"] == 0
    waiting = overview["relayed_waiting"]
    assert waiting["reports"] == SENT
    bound = keys.SHUFFLE_MAX_DELAY
    assert sent_at + bound - 2 <= unix(waiting["released_by"]) <= flushed_at + bound + 2
    answer = call(f"{server.url}/v1/estimates/app.theme")
    assert answer["n"] == 0 and answer["relayed_waiting"] == waiting
    assert f"{SENT} reports sent through a relay wait" in waiting["note"]
    page = urllib.request.urlopen(server.url + "/", timeout=10).read().decode()
    assert f"+ {SENT} relayed, waiting for a shuffled batch until" in page
    assert server.redis is not None
    cli = subprocess.run(
        [sys.executable, "-m", "ldp_server", "estimates", "app.theme"]
        + ["--redis-url", server.redis.url],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert cli.returncode == 0, cli.stderr
    assert waiting["note"] in " ".join(cli.stdout.split())

    # An hour later (the pool made to look it): released by the aggregator, counted.
    assert age_pool(server.redis.client(), "app.theme", 1, bound + 1) == SENT
    deadline = time.monotonic() + 60
    while (found := row(server))["n"] != SENT:
        assert time.monotonic() < deadline, found
        time.sleep(0.3)
    assert found.get("relayed_waiting") is None
    assert call(f"{server.url}/v1/estimates/app.theme").get("relayed_waiting") is None

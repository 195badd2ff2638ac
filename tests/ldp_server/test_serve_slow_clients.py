"""``ldp serve`` stays up while hundreds of clients send their headers slowly.

A slowloris client opens a connection, sends part of a request and then one byte now
and then, never finishing. With gunicorn's ``sync`` workers each such connection held a
whole worker: two of them stopped ``/healthz`` and ingest. Here 200 of them drip header
bytes while the real server (gunicorn with ``collector/gunicorn_conf.py``, an embedded
Redis) must keep answering health checks and storing reports.
"""

from __future__ import annotations

import socket
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from client_sdk.wire import MetricDefinition, build_report
from ldp_server.serve import Server
from tests.http_helpers import status_call
from tests.socket_helpers import open_many

SLOW_CLIENTS = 200
"""The issue's bar: at least 200 slow connections held at once."""

DRIPS = 3
"""Rounds of one header byte per slow connection, each followed by the checks."""

ANSWER_TIMEOUT = 5.0
"""Seconds a health check or an upload may take while the slow clients wait: far more
than either needs (milliseconds), far less than forever (the old sync workers)."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("serve-slow")
    mp = pytest.MonkeyPatch()
    mp.delenv("LDP_WORKER_CLASS", raising=False)  # the default setup, as `ldp serve` runs it
    try:
        with Server(port=0, data_dir=data, web_workers=2, aggregators=0, quiet=True) as s:
            yield s
    finally:
        mp.undo()


def _call(url: str, method: str = "GET", body: Any = None, token: str = "") -> tuple[int, Any]:
    return status_call(url, method, body, token, timeout=ANSWER_TIMEOUT)


def _slow_sockets(server: Server, count: int) -> list[socket.socket]:
    """``count`` connections, each holding the start of an unfinished POST."""

    def one(_: int) -> socket.socket:
        s = socket.create_connection((server.host, server.port), timeout=ANSWER_TIMEOUT)
        s.sendall(b"POST /v1/reports HTTP/1.1\r\nHost: slow\r\nX-Slow: ")
        return s

    return open_many(count, one)


def test_health_and_ingest_answer_while_200_clients_dribble_headers(server: Server) -> None:
    status, created = _call(
        server.url + "/v1/metrics/slow.theme",
        "PUT",
        {"domain": ["light", "dark"], "epsilon": 1.0, "mechanism": "grr"},
        server.admin_token,
    )
    assert status in (200, 201)
    definition = MetricDefinition.from_dict(created)
    slow = _slow_sockets(server, SLOW_CLIENTS)
    try:
        for drip in range(DRIPS):
            for s in slow:
                s.sendall(b"x")  # one more header byte each: never a complete request
            assert _call(server.url + "/healthz") == (200, {"status": "ok"})
            report = build_report(definition, "dark")
            status, result = _call(server.url + "/v1/reports", "POST", {"reports": [report]})
            assert (status, result["accepted"]) == (202, 1), f"drip {drip}: {result}"
        # Held, not dropped to make room: no slow connection was closed or answered.
        for s in slow:
            s.setblocking(False)
            with pytest.raises(BlockingIOError):
                s.recv(1)
    finally:
        for s in slow:
            s.close()
    assert _call(server.url + "/readyz") == (200, {"status": "ready", "refused": []})
    with urllib.request.urlopen(server.url + "/healthz", timeout=ANSWER_TIMEOUT) as r:
        assert r.headers["X-Content-Type-Options"] == "nosniff"  # through gunicorn too
        assert r.headers["Cache-Control"] == "no-store"

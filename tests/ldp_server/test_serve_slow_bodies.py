"""``ldp serve`` cuts request bodies that come too slowly (issue 29, item 2).

Headers were cut at 5 s, but a POST that declared ``Content-Length: 1000000`` and sent a
byte a second stayed open for as long as the client liked. Here 150 such connections
(a few of them chunked) drip a byte a second into the real server (gunicorn's gevent
worker, one process, an embedded Redis): health checks and uploads keep being answered,
and every slow connection is closed by the server, none later than the deadline of
:mod:`ldp_edge.slow_bodies` (plus a generous margin for a shared machine). How long they
were held is measured in benchmarks/bench_read_isolation.py.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from test_pipeline_e2e import put_metric

from client_sdk.wire import MetricDefinition, build_report
from ldp_edge.slow_bodies import MAX_SECONDS
from ldp_server.serve import Server
from tests.socket_helpers import open_many

SLOW = 150
CHUNKED = 10
"""Of the slow connections, these send a chunked body instead of a declared length."""

MARGIN = 30.0
"""Seconds past the deadline before the test gives up on a connection being closed (the
machine is shared); before the fix they stayed open indefinitely."""

TIMEOUT = 10.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    mp = pytest.MonkeyPatch()
    mp.delenv("LDP_WORKER_CLASS", raising=False)
    mp.setenv("LDP_SOURCE_REQUESTS_PER_SECOND", "0")
    data = tmp_path_factory.mktemp("slow-bodies")
    try:
        with Server(port=0, data_dir=data, web_workers=1, aggregators=0, quiet=True) as s:
            yield s
    finally:
        mp.undo()


def call(url: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
        return r.status, json.loads(r.read())


def open_slow(server: Server, count: int, chunked: int) -> list[socket.socket]:
    def one(i: int) -> socket.socket:
        s = socket.create_connection((server.host, server.port), timeout=TIMEOUT)
        framing = (
            b"Transfer-Encoding: chunked\r\n\r\nf4240\r\n{"
            if i < chunked
            else b"Content-Length: 1000000\r\n\r\n{"
        )
        s.sendall(
            b"POST /v1/reports HTTP/1.1\r\nHost: slow\r\n"
            b"Content-Type: application/json\r\n" + framing
        )
        return s

    return open_many(count, one)


def closed_by_server(s: socket.socket) -> bool:
    """Whether the server closed ``s`` (a byte more is sent: this is the drip)."""
    try:
        s.sendall(b" ")
        s.setblocking(False)
        try:
            got = s.recv(4096)
        except BlockingIOError:
            return False
        finally:
            s.setblocking(True)
        return True if not got else got.startswith(b"HTTP/1.1 408")
    except OSError:  # reset or broken pipe: closed
        return True


def test_slow_bodies_are_cut_while_health_and_ingest_answer(server: Server) -> None:
    created = put_metric(
        server, "slow.body", {"domain": ["a", "b"], "epsilon": 1.0, "mechanism": "grr"}
    )
    definition = MetricDefinition.from_dict(created)
    slow = open_slow(server, SLOW, CHUNKED)
    started = time.monotonic()
    open_ = list(slow)
    try:
        checked = False
        while open_ and time.monotonic() < started + MAX_SECONDS + MARGIN:
            open_ = [s for s in open_ if not closed_by_server(s)]
            if not checked:  # with all of them open (none is cut in its first seconds)
                assert call(server.url + "/healthz") == (200, {"status": "ok"})
                report = build_report(definition, "a")
                status, body = call(server.url + "/v1/reports", {"reports": [report]})
                assert (status, body["accepted"]) == (202, 1)
                checked = True
            time.sleep(1.0)
        assert not open_, f"{len(open_)} of {SLOW} slow bodies still open after the deadline"
    finally:
        for s in slow:
            s.close()
    assert call(server.url + "/healthz") == (200, {"status": "ok"})

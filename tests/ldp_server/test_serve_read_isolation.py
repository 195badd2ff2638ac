"""Reads cannot starve ingest in ``ldp serve`` (issue 29, item 1).

A string metric's estimate runs a discovery (about a second of CPU). Before, any
well-formed window ran one — before the metric existed, in the future, with no reports —
uncached for each new window name, inside the gevent worker that takes reports. Here,
against the real server (gunicorn, embedded Redis, an aggregator) with no read token (the
estimates API open to anyone): a window without reports answers n = 0 with no discovery,
a window already discovered runs none the second time, discoveries beyond the bound are
refused with 503 + Retry-After, and reports sent meanwhile are accepted. Discoveries are
counted by the server itself (``ldp_read_discoveries_total`` in ``/metrics``); latency is
measured in benchmarks/bench_read_isolation.py, not asserted here.
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families
from test_pipeline_e2e import put_metric

from aggregator.query.window import read_counts
from client_sdk.wire import MetricDefinition, build_report
from ldp_server.serve import Server
from ldp_store.registry import Registry

SPEC = {"kind": "string", "max_length": 16, "epsilon": 4.0}
"""The default sketch size: a discovery costs about 0.7 s of CPU even on no reports."""

METRICS = ("iso.a", "iso.b")
REPORTS = 400
"""Enough that discovery runs on a real sketch (at 40 reports about 1 window in 30 hits a
NaN in discovery.salt_null: IndexError, a 500, found here and reported separately)."""
TIMEOUT = 120.0
"""Seconds any one request may take: generous (the machine is shared), never asserted."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    mp = pytest.MonkeyPatch()
    for name in ("LDP_READ_TOKEN", "LDP_WORKER_CLASS"):
        mp.delenv(name, raising=False)  # open reads, the default worker: as the attacker saw it
    mp.setenv("LDP_READ_DISCOVERIES", "1")
    mp.setenv("LDP_SOURCE_REQUESTS_PER_SECOND", "0")
    mp.setenv("LDP_SOURCE_REPORTS_PER_MINUTE", "0")
    data = tmp_path_factory.mktemp("read-isolation")
    try:
        with Server(port=0, data_dir=data, web_workers=1, aggregators=1, quiet=True) as s:
            for name in METRICS:
                put_metric(s, name, SPEC)
            yield s
    finally:
        mp.undo()


def call(url: str, body: Any = None, timeout: float = TIMEOUT) -> tuple[int, dict[str, str], Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read())


def discoveries(server: Server) -> float:
    """Discoveries the server ran so far, all processes (the counter must be there)."""
    with urllib.request.urlopen(server.url + "/metrics", timeout=TIMEOUT) as r:
        text = r.read().decode()
    found = [
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "ldp_read_discoveries"
        for sample in family.samples
        if sample.name == "ldp_read_discoveries_total"
    ]
    assert found, "/metrics has no ldp_read_discoveries_total"
    return sum(found)


def definition(server: Server, name: str) -> MetricDefinition:
    found = Registry(redis.Redis.from_url(server.redis_url or "")).get(name)
    assert found is not None
    return found


def send_reports(server: Server, name: str, count: int) -> None:
    d = definition(server, name)
    reports = [build_report(d, f"term{i % 4}") for i in range(count)]
    status, _, body = call(server.url + "/v1/reports", {"reports": reports})
    assert (status, body["accepted"]) == (202, count)


def wait_counted(server: Server, name: str, n: int) -> None:
    client = redis.Redis.from_url(server.redis_url or "")
    d = definition(server, name)
    deadline = time.monotonic() + TIMEOUT
    while read_counts(client, d, "all").n < n:
        assert time.monotonic() < deadline, f"{name}: {n} reports not counted"
        time.sleep(0.2)


def estimate(server: Server, name: str, window: str) -> tuple[int, dict[str, str], Any]:
    return call(f"{server.url}/v1/estimates/{name}?window={window}")


def test_windows_without_reports_answer_at_once_without_discovery(server: Server) -> None:
    before = discoveries(server)
    now = datetime.now(UTC)
    for window in (
        "hour:2001-01-01T00",  # long before the metric existed
        f"hour:{now.year + 1}-01-01T00",  # still to come
        f"day:{now.year + 50}-06-30",
        "all",  # in its life, but no reports yet (iso.b gets none until later)
    ):
        status, _, body = estimate(server, "iso.b", window)
        assert status == 200, body
        assert (body["n"], body["estimates"], body["tested"]) == (0, [], 0), window
    status, _, body = call(f"{server.url}/v1/estimates/iso.b?window=all&candidates=a,b")
    assert status == 200 and [row["value"] for row in body["candidates"]] == ["a", "b"]
    assert discoveries(server) == before  # was one discovery (0.7-2 s of CPU) per request


def test_a_window_already_discovered_runs_no_discovery(server: Server) -> None:
    send_reports(server, "iso.a", REPORTS)
    wait_counted(server, "iso.a", REPORTS)
    before = discoveries(server)
    first = estimate(server, "iso.a", "all")
    assert first[0] == 200 and first[2]["n"] == REPORTS
    assert discoveries(server) == before + 1
    for _ in range(3):
        again = estimate(server, "iso.a", "all")
        assert again[0] == 200 and again[2] == first[2]
    assert discoveries(server) == before + 1  # the counts did not change: the same answer


def test_discoveries_beyond_the_bound_get_503_while_ingest_goes_on(server: Server) -> None:
    send_reports(server, "iso.b", REPORTS)
    wait_counted(server, "iso.b", REPORTS)
    send_reports(server, "iso.a", REPORTS)  # new counts: iso.a's windows are stale too
    wait_counted(server, "iso.a", 2 * REPORTS)
    now = datetime.now(UTC)
    windows = ["all", f"day:{now:%Y-%m-%d}", f"hour:{now:%Y-%m-%dT%H}"]
    asks = [(name, w) for name in METRICS for w in windows]
    before = discoveries(server)
    with ThreadPoolExecutor(len(asks) + 1) as pool:
        reads = [pool.submit(estimate, server, name, w) for name, w in asks]
        # Reports sent while the discoveries run are accepted (served by the ingest
        # workers; the reads run in the read service).
        for _ in range(5):
            send_reports(server, "iso.a", 1)
        answers = [r.result() for r in reads]
    statuses = [status for status, _, _ in answers]
    assert set(statuses) <= {200, 503}, answers
    refused = [(headers, body) for status, headers, body in answers if status == 503]
    assert refused, "LDP_READ_DISCOVERIES=1: concurrent discoveries must be refused"
    for headers, body in refused:
        assert int(headers["Retry-After"]) > 0
        assert "retry after" in body["error"] and body["details"] == []
    # Every 200 with reports ran at most one discovery; those refused ran none.
    ran = discoveries(server) - before
    answered = sum(1 for status, _, body in answers if status == 200 and body["n"] > 0)
    assert 1 <= ran <= answered


def test_the_dashboard_and_health_come_through_the_ingest_port(server: Server) -> None:
    with urllib.request.urlopen(server.url + "/", timeout=TIMEOUT) as r:
        assert r.status == 200 and r.headers["Content-Type"].startswith("text/html")
        assert r.headers["Content-Security-Policy"]  # the read service's own headers
    assert call(server.url + "/healthz")[0] == 200
    assert call(server.url + "/v1/estimates/no.such")[0] == 404
    assert set(server.restarts()) >= {"web", "read"}
    assert Path(server.data_dir / "read.log").exists()


def lowest_priority_read_workers(server: Server) -> list[int]:
    """The read service's worker processes at its lowest CPU priority (highest nice)."""
    assert server.read is not None
    found: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == server.read.pid:  # ppid; nice is the 19th field of stat
            found[int(entry.name)] = int(fields[16])
    assert found, "the read service has no workers"
    return [pid for pid, nice in found.items() if nice == max(found.values())]


def test_a_cheap_read_is_answered_while_the_expensive_ones_wait(server: Server) -> None:
    """Issue 43 item 1: the expensive reads (here a string metric's discovery) run in a
    lane of their own; with every process of that lane stopped, a small estimate and the
    overview are still answered. Before, the one read worker served both: stopped, every
    read waited."""
    put_metric(server, "iso.small", {"domain": ["yes", "no"], "epsilon": 1.0})
    stopped = lowest_priority_read_workers(server)
    with ThreadPoolExecutor(1) as pool:
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        try:
            pending = pool.submit(estimate, server, "iso.a", "hour:2002-02-02T02")
            status, _, body = call(f"{server.url}/v1/estimates/iso.small", timeout=30)
            assert status == 200 and [r["value"] for r in body["estimates"]] == ["yes", "no"]
            assert call(f"{server.url}/v1/overview", timeout=30)[0] == 200
            assert not pending.done()  # the expensive read waits for its lane
        finally:
            for pid in stopped:
                os.kill(pid, signal.SIGCONT)
        assert pending.result()[0] == 200

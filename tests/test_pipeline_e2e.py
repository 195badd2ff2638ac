"""The whole system as `ldp serve` runs it: gunicorn, aggregator workers, embedded Redis.

Real processes, real HTTP, a real redis-server; the SDK's own Client uploads. Support
counts on the server are compared with those computed offline from exactly the reports
the clients sent (Janus's rule: any excess proves double counting, any shortfall loss).
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families
from supervisor_helpers import held_down

from aggregator.query.window import read_counts
from aggregator.stats.frequency import estimate_from_counts
from client_sdk import Client
from client_sdk.transport import CallableTransport, HTTPTransport, Response
from client_sdk.wire import MetricDefinition
from ldp_server.serve import Server
from ldp_server.supervise import Backoff
from ldp_store.registry import UNKNOWN_TTL, Registry

METRICS = {
    "app.theme": {"domain": ["light", "dark", "auto"], "epsilon": 1.0},  # grr
    "app.screen": {
        "domain": [f"screen-{i}" for i in range(64)],
        "epsilon": 1.0,
        "mechanism": "oue",
    },
    "search.topic": {"domain": [f"t{i}" for i in range(200)], "epsilon": 2.0, "mechanism": "olh"},
}


class Recorder:
    """A transport that records every report it uploads (and can send each batch twice)."""

    def __init__(self, url: str, twice: bool = False) -> None:
        self.http = HTTPTransport(url, timeout=10)
        self.twice = twice
        self.sent: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.statuses: list[int] = []
        _OPEN.append(self)

    def __call__(self, method: str, path: str, body: bytes | None) -> Response:
        if method == "GET":
            return self.http.get(path)
        assert body is not None
        response = self.http.post(path, body)
        with self.lock:
            self.statuses.append(response.status)
            if 200 <= response.status < 300:
                rejected = {r["index"] for r in response.json().get("rejected", [])}
                for i, report in enumerate(json.loads(body)["reports"]):
                    if i not in rejected:
                        self.sent[report["id"]] = report
        if self.twice and 200 <= response.status < 300:
            again = self.http.post(path, body)  # a retry after a lost response
            assert again.status == 202 and again.json()["accepted"] == 0
        return response


_OPEN: list[Recorder] = []


def close_recorders() -> None:
    """Close the connections of every :class:`Recorder` made so far. Each server fixture
    calls it before its server stops: an idle keep-alive connection holds the web
    service's graceful stop for up to gunicorn's keepalive (5 s), once per test."""
    while _OPEN:
        _OPEN.pop().http.close()


def offline_counts(definition: MetricDefinition, reports: list[dict[str, Any]]) -> np.ndarray:
    counts = np.zeros(definition.k, dtype=np.int64)
    for r in reports:
        for u in definition.mechanism.support(r["payload"]):
            counts[u] += 1
    return counts


def put_metric(server: Server, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(
        f"{server.url}/v1/metrics/{name}",
        data=json.dumps(spec).encode(),
        method="PUT",
        headers={
            "Content-Type": "application/json",
            "Authorization": f"Bearer {server.admin_token}",
        },
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def get(server: Server, path: str, timeout: float = 10) -> Any:
    """The JSON answer of a GET of ``path``."""
    with urllib.request.urlopen(f"{server.url}{path}", timeout=timeout) as response:
        return json.loads(response.read())


@contextmanager
def pipeline(
    data: Path, metrics: dict[str, dict[str, Any]], aggregators: int = 2
) -> Iterator[Server]:
    """``ldp serve`` (2 web workers) with ``metrics`` defined; the recorders' connections
    are closed before it stops."""
    with Server(port=0, data_dir=data, web_workers=2, aggregators=aggregators, quiet=True) as s:
        for name, spec in metrics.items():
            put_metric(s, name, spec)
        yield s
        close_recorders()


def recorded_client(url: str, seed: int) -> tuple[Recorder, Client]:
    """A client (batches of 500, seeded) whose uploads a :class:`Recorder` keeps."""
    recorder = Recorder(url)
    client = Client(
        url, transport=CallableTransport(recorder), flush_at=500, rng=random.Random(seed)
    )
    return recorder, client


RESTART_DELAY = 3.0
"""Seconds the supervisor waits before restarting a crashed child (a test that must see
the outage holds the restart instead: ``supervisor_helpers.held_down``)."""


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    # One SDK client stands for thousands of devices here: no per-source limits.
    monkeypatch.setenv("LDP_SOURCE_REQUESTS_PER_SECOND", "0")
    monkeypatch.setenv("LDP_SOURCE_REPORTS_PER_MINUTE", "0")
    with Server(
        port=0,
        data_dir=tmp_path / "data",
        web_workers=2,
        aggregators=2,
        quiet=True,
        backoff=Backoff(first=RESTART_DELAY),
    ) as s:
        for name, spec in METRICS.items():
            put_metric(s, name, spec)
        # A web worker that looked a name up before it existed says "unknown" for up to
        # UNKNOWN_TTL (a device then retries a minute later): let every worker know them.
        time.sleep(UNKNOWN_TTL + 0.5)
        yield s
        close_recorders()


def wait_counted(
    client: redis.Redis,
    definitions: list[MetricDefinition],
    expected: dict[str, int],
    timeout: float = 120,
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(read_counts(client, d).n >= expected[d.name] for d in definitions):
            return
        time.sleep(0.2)
    got = {d.name: read_counts(client, d).n for d in definitions}
    raise AssertionError(f"not all counted: {got} vs {expected}")


def simulate(
    url: str, users: int, seed: int, twice: bool = False
) -> tuple[Recorder, dict[str, np.ndarray], Client]:
    recorder, client = recorded_client(url, seed)
    recorder.twice = twice
    picker = random.Random(seed + 1)
    truth = {name: np.zeros(len(spec["domain"]), dtype=np.int64) for name, spec in METRICS.items()}
    shares = {
        name: [1 / (i + 1) for i in range(len(spec["domain"]))] for name, spec in METRICS.items()
    }
    for _ in range(users):
        for name, spec in METRICS.items():
            i = picker.choices(range(len(spec["domain"])), shares[name])[0]
            assert client.report(name, spec["domain"][i])
            truth[name][i] += 1
    assert client.flush(timeout=120)
    return recorder, truth, client


def check_exact(
    server: Server, recorder: Recorder, truth: dict[str, np.ndarray]
) -> list[MetricDefinition]:
    r = redis.Redis.from_url(server.redis_url or "")
    registry = Registry(r)
    definitions = [d for d in (registry.get(name) for name in METRICS) if d is not None]
    by_metric: dict[str, list[dict[str, Any]]] = {name: [] for name in METRICS}
    for report in recorder.sent.values():
        by_metric[report["metric"]].append(report)
    wait_counted(r, definitions, {name: len(v) for name, v in by_metric.items()})
    time.sleep(0.5)  # anything counted twice would show up now
    for d in definitions:
        counts = read_counts(r, d)
        assert counts.n == len(by_metric[d.name]) == int(truth[d.name].sum())
        np.testing.assert_array_equal(counts.support, offline_counts(d, by_metric[d.name]))
    return definitions


def test_end_to_end_20000_reports_exact_counts_and_nominal_coverage(server: Server) -> None:
    recorder, truth, client = simulate(server.url, users=20_000 // len(METRICS) + 1, seed=5)
    assert client.stats()["dropped"] == {} or sum(client.stats()["dropped"].values()) == 0
    definitions = check_exact(server, recorder, truth)
    assert len(recorder.sent) >= 20_000
    r = redis.Redis.from_url(server.redis_url or "")
    covered = total = 0
    for d in definitions:
        est = estimate_from_counts(d.mechanism, read_counts(r, d), labels=d.domain)
        share = truth[d.name] / truth[d.name].sum()
        covered += int(np.sum((est.ci_low <= share) & (share <= est.ci_high)))
        total += d.k
    # 267 intervals at 95 %: Bin(267, 0.95) has sd 3.6; 5 sd below the mean is 235.
    assert covered >= 0.95 * total - 5 * np.sqrt(total * 0.95 * 0.05)
    # The estimates API answers the same numbers.
    with urllib.request.urlopen(f"{server.url}/v1/estimates/app.theme", timeout=10) as resp:
        body = json.loads(resp.read())
    assert body["n"] == int(truth["app.theme"].sum()) and body["mechanism"] == "grr"
    assert [e["value"] for e in body["estimates"]] == METRICS["app.theme"]["domain"]


def test_every_upload_sent_twice_counts_once(server: Server) -> None:
    recorder, truth, _ = simulate(server.url, users=1500, seed=9, twice=True)
    check_exact(server, recorder, truth)
    # /metrics adds up both gunicorn workers: every scrape, whichever worker answers it,
    # gives the reports accepted and the replays refused in all.
    by_metric = Counter(report["metric"] for report in recorder.sent.values())
    for _ in range(6):
        with urllib.request.urlopen(f"{server.url}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        found = {
            (s.name, s.labels.get("metric")): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }
        for metric, sent in by_metric.items():
            assert found[("ldp_collector_reports_accepted_total", metric)] == sent
            assert found[("ldp_collector_reports_duplicate_total", metric)] == sent


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 120) -> None:
    """Until ``condition()`` holds (a bound against a hang, not a speed limit)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.05)


def test_redis_down_during_ingest_nothing_lost(server: Server) -> None:
    """kill -9 of the embedded Redis: the collector answers 503 while it is away, the
    supervisor starts it again on the same port and data (AOF), the SDK's retries land.

    Conditions, not timing: on a loaded machine ``flush(timeout=1)`` returned before the
    upload was answered (the statuses held only the first flush's two 202s: ``assert 503
    in [202, 202]``), and Redis came back after the fixture's 3 s anyway, so a late upload
    could get a 202. Now Redis stays down until the test has seen the 503."""
    assert server.redis is not None and server.redis.process is not None
    recorder = Recorder(server.url)
    client = Client(
        server.url, transport=CallableTransport(recorder), flush_at=10_000, rng=random.Random(3)
    )
    truth = {name: np.zeros(len(spec["domain"]), dtype=np.int64) for name, spec in METRICS.items()}
    picker = random.Random(4)

    def report(users: int) -> None:
        for _ in range(users):
            for name, spec in METRICS.items():
                i = picker.randrange(len(spec["domain"]))
                assert client.report(name, spec["domain"][i]), client.stats()
                truth[name][i] += 1

    report(300)
    assert client.flush(timeout=30)  # definitions fetched, first reports delivered
    with held_down(server, "redis") as release:
        os.kill(server.redis.process.pid, signal.SIGKILL)
        before = len(recorder.statuses)
        report(300)
        assert not client.flush(timeout=1)  # the reports stay queued
        wait_for(lambda: 503 in recorder.statuses[before:], "the collector's 503")
        assert 202 not in recorder.statuses[before:]  # nothing taken while Redis was away
        assert client.stats()["queued"] == 900
        release()
        assert client.flush(timeout=60)  # back, same port and data; the SDK honoured Retry-After
    assert server.restarts()["redis"] == 1
    assert client.stats()["queued"] == 0
    check_exact(server, recorder, truth)
    assert server.check() is None  # workers rode out the outage

"""Admission limits through the real pipeline: gunicorn (gevent), a real Redis, the real SDK.

The collector runs as deployed (``collector/gunicorn_conf.py``), one worker so that one
process holds the buckets (with several, each worker has its own: see
``ldp_edge/admission.py``), with limits a loaded test machine still meets at once: 5
requests a second, 600 reports a minute in requests of at most 100. Whether a bucket is
met must not depend on how fast the machine is: the flood goes on until it has been
refused, the other source sends only as often as its own bucket refills, and the SDK's
seven batches exceed the report bucket unless they take over ten seconds. Clients
connect from distinct loopback addresses (127.0.0.2, 127.0.0.3; the SDK from
127.0.0.1), so the peer address is the source, as without a proxy.

* a flood from one source gets 429 with ``Retry-After`` after its bucket, while another
  source keeps getting 202 meanwhile;
* the SDK, whose batches the report bucket refuses, waits ``Retry-After`` and delivers
  every report later, exactly once;
* no address reaches Redis, the logs or ``/metrics``.
"""

from __future__ import annotations

import http.client
import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gunicorn_helpers import collector_env, start_gunicorn

from client_sdk import Client
from client_sdk.wire import MetricDefinition, build_report
from ldp_store import keys, streams
from ldp_store.embedded import free_port
from tests.process_helpers import stop

TOKEN = "admission-test-token"
FLOODER, OTHER = "127.0.0.2", "127.0.0.3"
MAX_REPORTS = 100
REPORTS_PER_MINUTE = 600
"""600 at once, then 10 a second: of seven batches of 100 the seventh is refused unless
the first six took ten seconds, and waits at most ten seconds."""

REQUESTS_PER_SECOND = 5
"""5 at once, then 5 a second: a flood faster than that is refused (any machine sends
back-to-back requests faster), and a source sending one request per 0.2 s never is."""

FLOOD_REFUSED = 10
"""The flood goes on until this many of its requests were refused (429)."""

FLOOD_MAX = 20_000
"""At most this many flood requests: a bound on the loop, never reached in practice."""

OTHERS = 5
"""Requests of the other source during the flood, one per 1/REQUESTS_PER_SECOND at least."""


class Connection:
    """One kept-alive HTTP connection from a given loopback address."""

    def __init__(self, port: int, source: str) -> None:
        self.http = http.client.HTTPConnection(
            "127.0.0.1", port, timeout=60, source_address=(source, 0)
        )

    def call(
        self, method: str, path: str, body: Any = None, token: str = ""
    ) -> tuple[int, dict[str, str], Any]:
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = None if body is None else json.dumps(body).encode()
        self.http.request(method, path, body=data, headers=headers)
        response = self.http.getresponse()
        raw = response.read()
        parsed = (
            json.loads(raw) if response.headers.get_content_type() == "application/json" else raw
        )
        return response.status, dict(response.headers), parsed

    def close(self) -> None:
        self.http.close()


@pytest.fixture
def collector(redis_db: Any, tmp_path: Path) -> Iterator[int]:
    """The collector under gunicorn on a free port, its logs in tmp_path; its port."""
    port = free_port()
    env = collector_env(
        redis_db.url,
        port,
        TOKEN,
        tmp_path,
        MAX_REPORTS=str(MAX_REPORTS),
        SOURCE_REPORTS_PER_MINUTE=str(REPORTS_PER_MINUTE),
        SOURCE_REQUESTS_PER_SECOND=str(REQUESTS_PER_SECOND),
    )
    with open(tmp_path / "output.log", "wb") as output:
        process = start_gunicorn(env, output)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, (tmp_path / "output.log").read_text()
            try:
                probe = Connection(port, OTHER)
                if probe.call("GET", "/readyz")[0] == 200:
                    probe.close()
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "gunicorn did not become ready"
            time.sleep(0.1)
        yield port
    finally:
        stop(process, signal.SIGTERM, 30)


def _define(port: int) -> MetricDefinition:
    admin = Connection(port, "127.0.0.1")
    status, _, body = admin.call(
        "PUT", "/v1/metrics/app.theme", {"domain": ["a", "b", "c"], "epsilon": 1.0}, TOKEN
    )
    admin.close()
    assert status == 201, body
    return MetricDefinition.from_dict(body)


def test_a_flood_gets_429_after_its_bucket_while_another_source_gets_202(
    collector: int, redis_db: Any, tmp_path: Path
) -> None:
    theme = _define(collector)
    flooder, other = Connection(collector, FLOODER), Connection(collector, OTHER)
    statuses: list[int] = []
    other_statuses: list[int] = []
    retry_after: set[str] = set()
    other_due = time.monotonic()
    while statuses.count(429) < FLOOD_REFUSED or len(other_statuses) < OTHERS:
        assert len(statuses) < FLOOD_MAX, "the flood was never refused"
        status, headers, body = flooder.call(
            "POST", "/v1/reports", {"reports": [build_report(theme, "a")]}
        )
        statuses.append(status)
        if status == 429:
            retry_after.add(headers["Retry-After"])
            assert body["error"] == "too many requests from this source"
        if time.monotonic() >= other_due:  # the other source, meanwhile, at its own pace
            other_due = time.monotonic() + 1 / REQUESTS_PER_SECOND
            other_statuses.append(
                other.call("POST", "/v1/reports", {"reports": [build_report(theme, "b")]})[0]
            )
    flooder.close()
    other.close()
    assert set(statuses) == {202, 429}
    assert statuses[:REQUESTS_PER_SECOND] == [202] * REQUESTS_PER_SECOND  # the bucket at once
    assert retry_after == {"1"}
    assert other_statuses == [202] * len(other_statuses)
    accepted = statuses.count(202)
    stream = keys.stream_key(theme.name, theme.version)
    assert streams.length(redis_db.client(), stream) == accepted + len(other_statuses)
    _assert_no_address_anywhere(collector, redis_db, tmp_path)


def test_the_sdk_honours_429_and_delivers_everything_once(
    collector: int, redis_db: Any, tmp_path: Path
) -> None:
    theme = _define(collector)
    total = REPORTS_PER_MINUTE + MAX_REPORTS  # one batch past the bucket
    client = Client(
        f"http://127.0.0.1:{collector}", flush_at=MAX_REPORTS, max_batch_reports=MAX_REPORTS
    )
    try:
        for i in range(total):
            assert client.report("app.theme", "abc"[i % 3])
        assert client.flush(timeout=300)
        stats = client.stats()
    finally:
        client.shutdown()
    assert (stats["accepted"], stats["duplicates"], stats["sent"]) == (total, 0, total)
    assert sum(stats["dropped"].values()) == 0
    assert stats["retries"] >= 1 and stats["last_error"] == "HTTP 429"
    stream = keys.stream_key(theme.name, theme.version)
    assert streams.length(redis_db.client(), stream) == total
    metrics = Connection(collector, OTHER)
    text = metrics.call("GET", "/metrics")[2].decode()
    metrics.close()
    assert 'ldp_collector_rate_limited_total{limit="reports"}' in text
    _assert_no_address_anywhere(collector, redis_db, tmp_path)


def _stored(r: Any) -> bytes:
    """Every key of Redis and every value in it, whatever its type, as one byte string."""
    found: list[bytes] = []
    for key in r.scan_iter(count=1000):
        kind = r.type(key)
        found.append(key)
        if kind == b"string":
            found.append(r.get(key) or b"")
        elif kind == b"hash":
            found += [x for pair in r.hgetall(key).items() for x in pair]
        elif kind == b"set":
            found += list(r.smembers(key))
        elif kind == b"stream":
            found += [x for _, fields in r.xrange(key) for pair in fields.items() for x in pair]
        else:
            raise AssertionError(f"unexpected key type {kind!r} of {key!r}")
    return b"\n".join(found)


def _assert_no_address_anywhere(port: int, redis_db: Any, logs: Path) -> None:
    """Neither test client's address is in Redis, a log of gunicorn or ``/metrics``."""
    probe = Connection(port, OTHER)
    metrics = probe.call("GET", "/metrics")[2]
    probe.close()
    stored = _stored(redis_db.client())
    assert b":reports" in stored  # the scan saw the stream
    text = "".join(p.read_text() for p in logs.glob("*.log"))
    assert '"POST /v1/reports" 429' in text  # the access log saw the refusals
    for address in (FLOODER, OTHER):
        assert address.encode() not in metrics
        assert address.encode() not in stored
        assert address not in text

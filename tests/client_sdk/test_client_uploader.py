"""The SDK's upload rules in isolation: outcome classification, backoff, Retry-After,
configuration errors, and the client embedded through a callable transport."""

from __future__ import annotations

import email.utils
import json
import random
import threading
from typing import Any

import pytest

from client_sdk import Client, wire
from client_sdk.queue import MemoryQueue
from client_sdk.transport import CallableTransport, HTTPTransport, Response
from client_sdk.uploader import (
    FAILURES_PER_RUN,
    RETRY_AFTER_CAP,
    RETRY_CAP,
    backoff_delay,
    classify,
    parse_retry_after,
)

THEME = wire.parse_spec(
    "app.theme", {"domain": ["a", "b", "c"], "epsilon": 1.0, "mechanism": "grr"}
)

# -- classify: the one place outcomes are decided ----------------------------------------------


@pytest.mark.parametrize("status", [200, 201, 202, 204])
def test_2xx_is_ok(status: int) -> None:
    assert classify(status, None) == "ok"


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504, 599])
def test_408_429_and_5xx_but_501_are_retried(status: int) -> None:
    assert classify(status, None) == "retry"


@pytest.mark.parametrize(
    "error", [ConnectionRefusedError(), TimeoutError(), OSError(), ValueError()]
)
def test_no_answer_is_retried(error: Exception) -> None:
    assert classify(None, error) == "retry"


@pytest.mark.parametrize("status", [301, 400, 401, 403, 404, 409, 413, 422, 451, 501])
def test_other_answers_are_dropped(status: int) -> None:
    assert classify(status, None) == "drop"


# -- Retry-After and backoff -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "delay"),
    [
        ("120", 120.0),
        (" 5 ", 5.0),
        ("0", 0.0),
        (None, None),
        ("soon", None),
        ("-5", None),
        ("1.5", None),
        ("", None),
    ],
)
def test_retry_after_in_seconds(header: str | None, delay: float | None) -> None:
    assert parse_retry_after(header, now=0.0) == delay


def test_retry_after_as_an_http_date() -> None:
    now = 1_700_000_000.0
    assert parse_retry_after(email.utils.formatdate(now + 90, usegmt=True), now) == 90.0
    assert parse_retry_after(email.utils.formatdate(now - 90, usegmt=True), now) == 0.0


def test_backoff_is_full_jitter_doubling_from_1_to_30_seconds() -> None:
    rng = random.Random(7)
    for failures in range(1, 40):
        if failures % FAILURES_PER_RUN == 0:
            continue
        ceiling = min(RETRY_CAP, 2.0 ** (failures - 1))
        delays = [backoff_delay(failures, None, rng)[0] for _ in range(200)]
        assert all(0.0 <= d <= ceiling for d in delays)
        assert max(delays) > 0.8 * ceiling  # the whole range is used


def test_every_third_failure_in_a_row_pauses() -> None:
    rng = random.Random(1)
    for failures in (3, 6, 9, 300):
        assert backoff_delay(failures, None, rng) == (RETRY_CAP, True)
    assert backoff_delay(1, None, rng)[1] is False


def test_backoff_honours_retry_after_up_to_a_cap() -> None:
    rng = random.Random(1)
    assert backoff_delay(1, 12.0, rng) == (12.0, False)
    assert backoff_delay(1, 45.0, rng) == (45.0, True)
    assert backoff_delay(2, 1e9, rng) == (RETRY_AFTER_CAP, True)


def test_backoff_survives_very_long_runs() -> None:
    delay, _ = backoff_delay(10**6 + 1, None, random.Random(1))
    assert 0.0 <= delay <= RETRY_CAP


# -- configuration errors raise at construction, and only they ---------------------------------


@pytest.mark.parametrize(
    ("url", "options"),
    [
        ("ftp://example.org", {}),
        ("http://", {}),
        ("example.org:8000", {}),
        ("http://example.org:99999", {}),
        ("http://example.org/?q=1", {}),
        ("http://user:pw@example.org", {}),
        ("http://example.org", {"flush_at": 0}),
        ("http://example.org", {"flush_at": True}),
        ("http://example.org", {"max_queue": 0}),
        ("http://example.org", {"max_batch_reports": 0}),
        ("http://example.org", {"max_batch_bytes": 64}),
        ("http://example.org", {"flush_interval": 0}),
        ("http://example.org", {"flush_interval": float("nan")}),
        ("http://example.org", {"metrics_ttl": -1}),
        ("http://example.org", {"timeout": 0}),
        ("http://example.org", {"clock": 3}),
    ],
)
def test_configuration_errors_raise_at_construction(url: str, options: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Client(url, **options)


def test_construction_makes_no_request_and_starts_no_thread() -> None:
    calls: list[str] = []
    before = threading.active_count()
    client = Client("embedded", transport=CallableTransport(lambda m, p, b: calls.append(p)))  # type: ignore[arg-type, func-returns-value]
    assert calls == [] and threading.active_count() == before
    assert client.stats()["worker_alive"] is False
    client.shutdown(0)


def test_http_transport_keeps_a_path_prefix() -> None:
    transport = HTTPTransport("https://collector.example.org:8443/ldp/", timeout=3)
    assert transport.base_url == "https://collector.example.org:8443/ldp"
    assert HTTPTransport("http://[::1]:8000").base_url == "http://[::1]:8000"
    # the scheme's default port is left out, as a browser's URL does (issue 35)
    assert (
        HTTPTransport("https://Collector.Example:443/x").base_url == "https://collector.example/x"
    )
    assert HTTPTransport("http://collector.example:80").base_url == "http://collector.example"
    assert HTTPTransport("http://collector.example:443").base_url == "http://collector.example:443"


# -- the client embedded through a callable transport ------------------------------------------


class InProcessCollector:
    """A collector as a function: definitions by GET, reports by POST (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reports: list[dict[str, Any]] = []
        self.fail_posts = 0

    def __call__(self, method: str, path: str, body: bytes | None) -> Response:
        if method == "GET":
            if path == "/v1/metrics/app.theme":
                return Response(200, {}, json.dumps(THEME.to_dict()).encode())
            return Response(404, {}, b'{"error": "unknown metric"}')
        assert body is not None
        with self.lock:
            if self.fail_posts:
                self.fail_posts -= 1
                raise ConnectionResetError("scripted")
            reports = json.loads(body)["reports"]
            for report in reports:
                wire.check_report(report, lambda n, v: THEME)
            self.reports.extend(reports)
        return Response(202, {}, json.dumps({"accepted": len(reports)}).encode())


def test_callable_transport_embeds_the_client() -> None:
    backend = InProcessCollector()
    backend.fail_posts = 1
    sleeps: list[float] = []
    client = Client("embedded", transport=CallableTransport(backend), sleep=sleeps.append)
    assert client.report("app.theme", "b") and client.report("app.theme", 0)
    assert not client.report("app.other", 0)
    assert client.flush(timeout=5) is False  # app.other was dropped
    assert len(backend.reports) == 2 and len(sleeps) == 1
    stats = client.stats()
    assert stats["sent"] == 2 and stats["retries"] == 1
    assert stats["last_error"] == "ConnectionResetError"
    client.shutdown(1)


def test_concurrent_reports_are_each_delivered_once() -> None:
    backend = InProcessCollector()
    client = Client("embedded", transport=CallableTransport(backend), flush_at=50)
    threads = [
        threading.Thread(target=lambda: [client.report("app.theme", i % 3) for i in range(300)])
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert client.flush(timeout=10)
    assert len(backend.reports) == 2400 == len({r["id"] for r in backend.reports})
    assert client.stats()["sent"] == 2400 and client.stats()["reported"] == 2400
    client.shutdown(1)


def test_a_transport_that_raises_anything_never_reaches_the_app() -> None:
    def broken(method: str, path: str, body: bytes | None) -> Response:
        raise RuntimeError("bug in the host's HTTP stack")

    client = Client("embedded", transport=CallableTransport(broken))
    assert client.report("app.theme", 0) is False
    assert client.stats()["dropped"]["unreachable"] == 1
    assert client.stats()["last_error"] == "RuntimeError"
    client.shutdown(0)


def test_an_internal_error_is_counted_not_raised() -> None:
    class BrokenQueue(MemoryQueue):
        def put(self, item: bytes) -> int:
            raise RuntimeError("disk on fire")

    client = Client(
        "embedded", transport=CallableTransport(InProcessCollector()), queue=BrokenQueue()
    )
    assert client.report("app.theme", 0) is False
    assert client.stats()["dropped"]["internal_error"] == 1
    client.shutdown(0)


def test_a_definition_this_sdk_cannot_use_counts_as_an_unknown_metric() -> None:
    def serve(method: str, path: str, body: bytes | None) -> Response:
        data = {**THEME.to_dict(), "mechanism": {"mechanism": "from-the-future"}}
        return Response(200, {}, json.dumps(data).encode())

    client = Client("embedded", transport=CallableTransport(serve))
    assert client.report("app.theme", 0) is False
    assert client.stats()["dropped"]["unknown_metric"] == 1
    with pytest.raises(ValueError, match="unusable definition"):
        client.definition("app.theme")
    client.shutdown(0)

"""The SDK client's upload policy, one named test per guarantee (Glean-style).

Every test talks to a real HTTP server on 127.0.0.1 (:class:`Collector`) that serves real
metric definitions, validates reports with ``client_sdk.wire.check_report`` like the
collector does, and answers whatever a test scripts: 202 (with rejected indices), 400,
413, 429, 500, 503 with or without ``Retry-After``, or a dropped connection. Backoff
delays are observed through an injected ``sleep``/``clock`` instead of being waited out.
"""

from __future__ import annotations

import email.utils
import json
import logging
import os
import random
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

import pytest
from fork_helpers import in_child

from client_sdk import Client, wire
from client_sdk.errors import ReportError
from client_sdk.transport import HTTPTransport
from client_sdk.uploader import RETRY_CAP
from client_sdk.wire import MetricDefinition, parse_spec

ROOT = Path(__file__).resolve().parents[2]

THEME_LABELS = ["sunlit-meadow", "midnight-ocean", "auto-tangerine"]
THEME = parse_spec("app.theme", {"domain": THEME_LABELS, "epsilon": 1.0, "mechanism": "grr"})
PAGE_LABELS = [f"page-secret-{i:03d}" for i in range(200)]
PAGE = parse_spec("app.page", {"domain": PAGE_LABELS, "epsilon": 2.0, "mechanism": "oue"})


# -- a small real collector ----------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """What the test server answers to one request."""

    status: int = 202
    retry_after: str | None = None
    drop: bool = False
    """Close the connection without answering."""
    reject: tuple[int, ...] = ()
    """Indices of the batch to reject in a 202 (as the collector does for invalid ones)."""
    later: tuple[int, ...] = ()
    """With a 503: indices of the batch not stored (a cluster shard down), the others
    stored, and the answer's ``retry`` listing them (as the collector does)."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    collector: Collector


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.collector.opened(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_GET(self) -> None:
        self.server.collector.on_get(self)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self.server.collector.on_post(self, self.rfile.read(length))

    def send_json(self, status: int, body: Any, retry_after: str | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if retry_after is not None:
            self.send_header("Retry-After", retry_after)
        self.end_headers()
        self.wfile.write(data)


class Collector:
    """A real HTTP server speaking the collector's API, scriptable and recording."""

    def __init__(self, *definitions: MetricDefinition) -> None:
        self.lock = threading.Lock()
        self.current = {d.name: d for d in definitions}
        self.versions = {(d.name, d.version): d for d in definitions}
        self.get_answers: deque[Answer] = deque()
        self.device_budget: dict[str, float | None] | None = None
        """The device-wide caps published beside each definition (None: none)."""
        self.retired: set[str] = set()
        """Metrics whose definition says an operator retired them (``retired_at``)."""
        self.post_answers: deque[Answer] = deque()
        self.post_default = Answer()
        self.max_reports: int | None = None
        self.gets: list[str] = []
        self.posts: list[bytes] = []
        self.delivered: list[dict[str, Any]] = []
        self.seen: set[str] = set()
        self.connections = 0
        self._sockets: list[socket.socket] = []
        self.server = _Server(("127.0.0.1", 0), _Handler)
        self.server.collector = self
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> Collector:
        self._thread.start()
        return self

    @classmethod
    def serving(cls, *definitions: MetricDefinition) -> Iterator[Self]:
        """One started for a fixture to ``yield from``, stopped after the test."""
        server = cls(*definitions)
        server.start()
        yield server
        server.stop()

    def stop(self) -> None:
        """Stop listening and cut every open connection: the collector is down."""
        self.server.shutdown()
        self.server.server_close()
        self.drop_connections()

    def drop_connections(self) -> None:
        with self.lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def opened(self, sock: socket.socket) -> None:
        with self.lock:
            self.connections += 1
            self._sockets.append(sock)

    def publish(self, definition: MetricDefinition, *, retire_older: bool = True) -> None:
        """Make ``definition`` current; the older versions become unknown if ``retire_older``."""
        with self.lock:
            if retire_older:
                self.versions = {
                    key: d for key, d in self.versions.items() if key[0] != definition.name
                }
            self.versions[(definition.name, definition.version)] = definition
            self.current[definition.name] = definition

    def reports_per_post(self) -> list[int]:
        with self.lock:
            return [len(json.loads(body)["reports"]) for body in self.posts]

    def on_get(self, handler: _Handler) -> None:
        with self.lock:
            self.gets.append(handler.path)
            answer = self.get_answers.popleft() if self.get_answers else Answer(200)
            current = dict(self.current)
        if answer.drop:
            handler.close_connection = True
            return
        if answer.status != 200:
            handler.send_json(answer.status, {"error": "scripted"}, answer.retry_after)
        elif handler.path == "/v1/metrics":
            handler.send_json(200, {"metrics": [d.to_dict() for d in current.values()]})
        elif handler.path.startswith("/v1/metrics/") and handler.path[12:] in current:
            extra: dict[str, Any] = {}
            if self.device_budget is not None:
                extra["device_budget"] = self.device_budget
            if handler.path[12:] in self.retired:
                extra["retired_at"] = "2027-01-01T00:00:00+00:00"
            handler.send_json(200, {**current[handler.path[12:]].to_dict(), **extra})
        else:
            handler.send_json(404, {"error": f"unknown metric {handler.path[12:]!r}"})

    def on_post(self, handler: _Handler, body: bytes) -> None:
        with self.lock:
            self.posts.append(body)
            answer = self.post_answers.popleft() if self.post_answers else self.post_default
            if answer.drop:
                handler.close_connection = True
                return
            if answer.status != 202 and not answer.later:
                handler.send_json(answer.status, {"error": "scripted"}, answer.retry_after)
                return
            reports = json.loads(body)["reports"]
            if self.max_reports is not None and len(reports) > self.max_reports:
                handler.send_json(413, {"error": f"more than {self.max_reports} reports"})
                return
            accepted = duplicates = 0
            rejected: list[dict[str, Any]] = []
            for index, report in enumerate(reports):
                if index in answer.later:
                    continue
                if index in answer.reject:
                    rejected.append({"index": index, "error": "scripted rejection"})
                    continue
                try:
                    _, rid, _ = wire.check_report(report, lambda n, v: self.versions.get((n, v)))
                except ReportError as exc:
                    rejected.append({"index": index, "error": str(exc)})
                    continue
                if rid in self.seen:
                    duplicates += 1
                else:
                    self.seen.add(rid)
                    self.delivered.append(report)
                    accepted += 1
            if rejected and len(rejected) == len(reports):
                handler.send_json(
                    400, {"error": "no valid report", "details": [], "rejected": rejected}
                )
                return
            body_out = {"accepted": accepted, "duplicates": duplicates, "rejected": rejected}
            if answer.later:
                retry = [{"index": i, "error": "shard down"} for i in answer.later]
                body_out = {"error": "scripted", "details": [], **body_out, "retry": retry}
                handler.send_json(answer.status, body_out, answer.retry_after)
                return
        handler.send_json(202, body_out)


class FakeTime:
    """An injected clock and sleep: backoff delays are recorded, not waited out."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, delay: float) -> None:
        self.sleeps.append(delay)
        self.now += delay
        time.sleep(0.001)  # let other threads run, as a real wait would


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


@pytest.fixture
def collector() -> Iterator[Collector]:
    yield from Collector.serving(THEME, PAGE)


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime()


@contextmanager
def client_maker(url: str, **defaults: Any) -> Iterator[Callable[..., Client]]:
    """Make clients of ``url`` (an option ``url=`` overrides it), batching only on flush()
    and with ``defaults`` unless told otherwise; shut down when the block ends (the
    make_client fixtures of the SDK's tests)."""
    made: list[Client] = []

    def make(**options: Any) -> Client:
        settings = {"flush_at": 10_000, "flush_interval": 3600.0, **defaults, **options}
        client = Client(settings.pop("url", url), **settings)
        made.append(client)
        return client

    try:
        yield make
    finally:
        for client in made:
            client.shutdown(timeout=0.2)


@pytest.fixture
def make_client(collector: Collector, fake_time: FakeTime) -> Iterator[Callable[..., Client]]:
    """Clients on the test collector, batching only on flush() unless told otherwise."""
    with client_maker(
        collector.url, sleep=fake_time.sleep, clock=fake_time.clock, timeout=5.0
    ) as make:
        yield make


def queued_reports(client: Client) -> list[dict[str, Any]]:
    return [json.loads(e.data) for e in client._queue.peek(10**9, 10**12)]


# -- reporting: perturb on the spot, never raise ---------------------------------------------


def test_report_returns_true_and_the_report_is_delivered(
    collector: Collector, make_client: Callable[..., Client]
) -> None:
    client = make_client()
    assert client.report("app.theme", "midnight-ocean") is True
    assert client.report("app.page", 7) is True
    assert client.flush(timeout=5) is True
    assert len(collector.delivered) == 2
    for report in collector.delivered:
        assert list(report) == list(wire.REPORT_FIELDS)
    stats = client.stats()
    assert (stats["reported"], stats["sent"], stats["accepted"], stats["queued"]) == (2, 2, 2, 0)


def test_report_perturbs_on_the_spot_with_the_metric_mechanism(
    make_client: Callable[..., Client],
) -> None:
    client = make_client(rng=random.Random(42))
    for value in ["sunlit-meadow", "auto-tangerine", 1]:
        assert client.report("app.theme", value)
    for i in range(5):
        assert client.report("app.page", f"page-secret-{i:03d}")
    expected_rng = random.Random(42)
    expected = [THEME.mechanism.perturb(v, expected_rng) for v in (0, 2, 1)]
    expected += [PAGE.mechanism.perturb(i, expected_rng) for i in range(5)]
    queued = queued_reports(client)
    assert [r["payload"] for r in queued] == expected
    for report in queued:
        definition = THEME if report["metric"] == "app.theme" else PAGE
        assert definition.mechanism.check_payload(report["payload"]) == report["payload"]
        assert report["version"] == definition.version
    assert len({r["id"] for r in queued}) == len(queued)


def test_no_raw_value_reaches_the_queue_a_request_or_a_log_line(
    collector: Collector, make_client: Callable[..., Client], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="client_sdk")
    collector.post_answers.extend([Answer(503), Answer(drop=True), Answer(202, reject=(0,))])
    client = make_client()
    for label in THEME_LABELS:
        assert client.report("app.theme", label)
    for label in PAGE_LABELS[:10]:
        assert client.report("app.page", label)
    assert not client.report("app.theme", "secret-invalid-value")
    # Not a metric name (a value passed in its place?): warned about, never echoed.
    assert not client.report("Secret Invalid Value", "midnight-ocean")
    queue_text = b"".join(e.data for e in client._queue.peek(10**9, 10**12)).decode()
    assert client.flush(timeout=5) is False  # three reports were dropped
    requests_text = b"".join(collector.posts).decode()
    assert requests_text and collector.delivered
    for secret in [*THEME_LABELS, *PAGE_LABELS, "secret-invalid-value", "Secret Invalid Value"]:
        assert secret not in queue_text
        assert secret not in requests_text
        assert secret not in caplog.text
    assert "retry" in caplog.text  # the failures were logged, without values


@pytest.mark.parametrize(
    ("metric", "value", "reason"),
    [
        ("app.unknown", "x", "unknown_metric"),
        ("Not A Name!", "x", "unknown_metric"),
        (None, "x", "unknown_metric"),
        ("app.theme", "purple", "invalid_value"),
        ("app.theme", 3, "invalid_value"),
        ("app.theme", -1, "invalid_value"),
        ("app.theme", True, "invalid_value"),
        ("app.theme", 1.5, "invalid_value"),
        ("app.theme", None, "invalid_value"),
        ("app.theme", ["dark"], "invalid_value"),
    ],
)
def test_report_never_raises_and_counts_the_drop_by_reason(
    make_client: Callable[..., Client], metric: Any, value: Any, reason: str
) -> None:
    client = make_client()
    assert client.report(metric, value) is False
    stats = client.stats()
    assert stats["dropped"][reason] == 1
    assert sum(stats["dropped"].values()) == 1
    assert stats["queued"] == 0


def test_a_dropped_report_is_warned_about_once_per_metric_and_reason(
    make_client: Callable[..., Client], caplog: pytest.LogCaptureFixture
) -> None:
    """Unknown metric, value not in the domain, index out of range, wrong type: one
    WARNING each naming the metric and the reason, never the value; repeats are DEBUG."""
    caplog.set_level(logging.DEBUG, logger="client_sdk")
    client = make_client()
    for _ in range(3):
        assert not client.report("app.unknown", "secret-value-1")
        assert not client.report("app.theme", "secret-value-2")
        assert not client.report("app.theme", 31337)
        assert not client.report("app.theme", ["secret-value-3"])
    dropped = {k: v for k, v in client.stats()["dropped"].items() if v}
    assert dropped == {"unknown_metric": 3, "invalid_value": 9}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 4, warnings
    unknown, label, index, kind = warnings
    assert "'app.unknown'" in unknown and "unknown_metric" in unknown
    for line in (label, index, kind):
        assert "'app.theme'" in line and "invalid_value" in line
    assert "not a label of the metric's domain" in label
    assert "index outside the metric's domain" in index
    assert "wrong type" in kind and "list" in kind
    assert len(caplog.records) == 12  # the repeats at DEBUG
    for secret in ("secret-value", "31337"):
        assert secret not in caplog.text


SILENT_APP = """
import json, sys
from client_sdk import Client
client = Client(sys.argv[1], flush_at=10_000, flush_interval=3600.0, timeout=5)
down = Client(sys.argv[2], timeout=5)
results = []
for _ in range(3):
    results.append(client.report("app.unknown", "sunlit-meadow"))
    results.append(client.report("app.theme", "secret-purple"))
    results.append(client.report("app.old", 0))
    results.append(down.report("app.theme", 0))
flushed = [client.flush(timeout=5), down.flush(timeout=5)]
print(json.dumps({"results": results, "flushed": flushed}))
"""


def test_the_first_drop_of_each_reason_reaches_stderr_without_any_logging_set_up(
    collector: Collector,
) -> None:
    """Issue 36: an app that set up no logging saw nothing for an unknown metric, a
    value outside the domain, a retired metric or an unreachable collector (the SDK's
    logger had a NullHandler; the retired case logged at DEBUG), and flush() said True.
    Now each reason's first drop reaches stderr through Python's last-resort handler,
    once per client, and flush() says that nothing was delivered."""
    collector.publish(parse_spec("app.old", {"domain": ["a", "b"], "epsilon": 1.0}))
    collector.retired.add("app.old")
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{sock.getsockname()[1]}"
    app = subprocess.run(
        [sys.executable, "-c", SILENT_APP, collector.url, down],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert app.returncode == 0, app.stderr
    out = json.loads(app.stdout)
    assert out == {"results": [False] * 12, "flushed": [False, False]}
    lines = app.stderr.splitlines()
    for said in ("(unknown_metric)", "(invalid_value)", "retired 'app.old'", "(unreachable)"):
        assert sum(said in line for line in lines) == 1, (said, lines)
    assert len(lines) == 4, lines  # once each: the repeats are not printed
    assert "secret-purple" not in app.stderr and "sunlit-meadow" not in app.stderr


def test_flush_says_whether_everything_reported_since_the_last_flush_was_delivered(
    collector: Collector, make_client: Callable[..., Client]
) -> None:
    """Issue 36: flush() returned True when nothing was sent (the queue was empty because
    every report had been dropped). It is True only when the queue is empty and nothing
    was dropped since the previous flush()."""
    client = make_client()
    assert client.flush(timeout=5) is True  # nothing reported, nothing lost
    assert client.report("app.theme", 0) and client.flush(timeout=5) is True
    assert client.report("app.nope", 0) is False
    assert client.flush(timeout=5) is False  # nothing queued, and one report dropped
    assert client.flush(timeout=5) is True  # nothing dropped since
    collector.post_answers.append(Answer(400))
    assert client.report("app.theme", 1)
    assert client.flush(timeout=5) is False  # refused by the collector
    assert client.report("app.theme", 2) and client.flush(timeout=5) is True
    assert len(collector.delivered) == 2
    collector.stop()
    down = make_client()
    assert down.report("app.theme", 0) is False  # the collector is unreachable
    assert down.flush(timeout=1) is False


def test_build_report_raises_for_unknown_metric_or_value(
    make_client: Callable[..., Client],
) -> None:
    client = make_client()
    report = client.build_report("app.theme", "auto-tangerine")
    assert wire.check_report(report, lambda n, v: THEME)[1] == report["id"]
    with pytest.raises(ValueError, match="no metric"):
        client.build_report("app.unknown", "x")
    with pytest.raises(ValueError, match="not a value"):
        client.build_report("app.theme", "purple")


@pytest.mark.parametrize(
    "rid",
    [
        "0" * 32,
        "0123456789abcdef" * 2,
        "0123456789ABCDEF" * 2,  # upper case
        "0" * 31,
        "0" * 33,
        "",
        " " + "0" * 31,
        "0" * 31 + "\n",
        "0" * 31 + "g",
        "0" * 31 + "\u0661",  # ARABIC-INDIC DIGIT ONE: a digit, not a hex digit
        "0" * 31 + "\uff10",  # FULLWIDTH DIGIT ZERO
        "0" * 15 + "-" + "0" * 16,
    ],
)
def test_a_report_id_is_checked_exactly_as_its_pattern_says(rid: str) -> None:
    """The id check (a ``str.strip`` of the hex digits) accepts exactly what
    ``REPORT_ID_PATTERN`` fully matches."""
    report = {"metric": "app.theme", "version": 1, "id": rid, "payload": {"v": 0}}
    expected = wire.report.REPORT_ID_PATTERN.fullmatch(rid) is not None
    try:
        wire.check_report(report, lambda n, v: THEME)
        accepted = True
    except ReportError as exc:
        assert "'id'" in str(exc)
        accepted = False
    assert accepted == expected
    assert accepted == (rid in ("0" * 32, "0123456789abcdef" * 2))


def test_unreachable_definition_is_counted_and_fetching_backs_off(
    collector: Collector, make_client: Callable[..., Client], fake_time: FakeTime
) -> None:
    collector.get_answers.append(Answer(503))
    client = make_client()
    assert client.report("app.theme", 0) is False
    assert client.report("app.theme", 0) is False  # within the backoff: no request
    assert len(collector.gets) == 1
    assert client.stats()["dropped"]["unreachable"] == 2
    assert client.stats()["last_error"] == "HTTP 503"
    fake_time.now += 1.5
    assert client.report("app.theme", 0) is True
    assert len(collector.gets) == 2


def test_report_to_a_collector_that_is_down_returns_false(
    collector: Collector, make_client: Callable[..., Client]
) -> None:
    collector.stop()
    client = make_client()
    assert client.report("app.theme", 0) is False
    assert client.stats()["dropped"]["unreachable"] == 1
    assert client.stats()["last_error"] == "ConnectionRefusedError"


def test_definition_is_fetched_once_and_again_after_its_ttl(
    collector: Collector, make_client: Callable[..., Client], fake_time: FakeTime
) -> None:
    client = make_client(metrics_ttl=60.0)
    for _ in range(20):
        assert client.report("app.theme", 1)
    assert collector.gets == ["/v1/metrics/app.theme"]
    fake_time.now += 61
    assert client.report("app.theme", 1)
    assert len(collector.gets) == 2


def test_stale_definition_is_used_while_the_collector_is_unreachable(
    collector: Collector, make_client: Callable[..., Client], fake_time: FakeTime
) -> None:
    client = make_client(metrics_ttl=60.0)
    assert client.report("app.theme", 1)
    collector.get_answers.append(Answer(drop=True))
    fake_time.now += 61
    assert client.report("app.theme", 1) is True
    assert client.definition("app.theme") == THEME


def test_unknown_metric_is_remembered_for_a_while(
    collector: Collector, make_client: Callable[..., Client], fake_time: FakeTime
) -> None:
    client = make_client()
    assert not client.report("app.later", 0)
    assert not client.report("app.later", 0)
    assert len(collector.gets) == 1
    collector.publish(parse_spec("app.later", {"domain": ["a", "b"], "epsilon": 1.0}))
    fake_time.now += 61
    assert client.report("app.later", "b")
    assert client.stats()["dropped"]["unknown_metric"] == 2


def report_and_flush(client: Client, n: int) -> None:
    """``n`` reports of app.theme (values 0, 1, 2, 0, …), all accepted, then flushed."""
    for i in range(n):
        assert client.report("app.theme", i % 3)
    assert client.flush(timeout=5)


# -- batching --------------------------------------------------------------------------------


def test_uploads_are_batched_by_count(
    collector: Collector, make_client: Callable[..., Client]
) -> None:
    client = make_client(max_batch_reports=5)
    report_and_flush(client, 12)
    assert collector.reports_per_post() == [5, 5, 2]
    assert client.stats()["batches"] == 3


def test_uploads_are_batched_by_bytes(
    collector: Collector, make_client: Callable[..., Client]
) -> None:
    limit = 1000
    client = make_client(max_batch_bytes=limit)
    for i in range(30):
        assert client.report("app.page", i)
    assert client.flush(timeout=5)
    assert len(collector.posts) > 1
    assert all(len(body) <= limit for body in collector.posts)
    assert sum(collector.reports_per_post()) == 30 == len(collector.delivered)


def test_a_report_larger_than_the_batch_limit_is_sent_alone(
    collector: Collector, make_client: Callable[..., Client]
) -> None:
    client = make_client(max_batch_bytes=128)
    for i in range(3):
        assert client.report("app.page", i)
    assert client.flush(timeout=5)
    assert collector.reports_per_post() == [1, 1, 1]


def test_flush_at_queued_reports_triggers_an_upload(
    collector: Collector, make_client: Callable[..., Client]
) -> None:
    client = make_client(flush_at=3)
    for _ in range(3):
        assert client.report("app.theme", 0)
    assert wait_until(lambda: len(collector.delivered) == 3)


def test_flush_interval_triggers_an_upload(
    collector: Collector, make_client: Callable[..., Client]
) -> None:
    client = make_client(flush_interval=0.05, clock=time.monotonic)
    assert client.report("app.theme", 0)
    assert wait_until(lambda: len(collector.delivered) == 1)


def test_the_uploader_starts_lazily_on_the_first_report(
    make_client: Callable[..., Client],
) -> None:
    client = make_client()
    assert client.stats()["worker_alive"] is False
    assert client.flush(timeout=1) is True  # nothing queued: no thread either
    assert client.stats()["worker_alive"] is False
    assert client.report("app.theme", 0)
    assert client.stats()["worker_alive"] is True


# -- retries ---------------------------------------------------------------------------------


@pytest.mark.parametrize("failure", [500, 502, 503, 504, 408, 429, "dropped connection"])
def test_retryable_failures_are_retried_until_delivered(
    collector: Collector,
    make_client: Callable[..., Client],
    fake_time: FakeTime,
    failure: int | str,
) -> None:
    answer = Answer(drop=True) if failure == "dropped connection" else Answer(int(failure))
    collector.post_answers.extend([answer, answer])
    client = make_client()
    report_and_flush(client, 4)
    assert len(collector.delivered) == 4
    assert len(collector.posts) == 3
    stats = client.stats()
    assert stats["sent"] == 4 and sum(stats["dropped"].values()) == 0
    # A dropped kept-alive connection is retried once at once on a fresh one.
    assert stats["retries"] == len(fake_time.sleeps) == (1 if answer.drop else 2)
    for attempt, delay in enumerate(fake_time.sleeps):
        assert 0.0 <= delay <= 2.0**attempt  # full jitter under 1 s, then 2 s


def test_retry_after_in_seconds_is_honoured(
    collector: Collector, make_client: Callable[..., Client], fake_time: FakeTime
) -> None:
    collector.post_answers.append(Answer(503, retry_after="7"))
    client = make_client()
    assert client.report("app.theme", 0)
    assert client.flush(timeout=5)
    assert fake_time.sleeps == [7.0]
    assert len(collector.delivered) == 1


def test_retry_after_as_an_http_date_is_honoured(
    collector: Collector, make_client: Callable[..., Client], fake_time: FakeTime
) -> None:
    when = email.utils.formatdate(time.time() + 120, usegmt=True)
    collector.post_answers.append(Answer(429, retry_after=when))
    client = make_client()
    assert client.report("app.theme", 0)
    assert client.flush(timeout=5)
    assert len(fake_time.sleeps) == 1 and 115.0 <= fake_time.sleeps[0] <= 121.0


def test_a_run_of_failures_pauses_instead_of_spinning(
    collector: Collector, make_client: Callable[..., Client], fake_time: FakeTime
) -> None:
    collector.post_answers.extend([Answer(500)] * 4)
    client = make_client()
    assert client.report("app.theme", 0)
    assert client.flush(timeout=5)
    first, second, pause, fourth = fake_time.sleeps
    assert first <= 1.0 and second <= 2.0 and fourth <= 8.0
    assert pause == RETRY_CAP
    assert len(collector.delivered) == 1


def test_flush_returns_false_while_the_collector_is_down_and_reports_stay_queued(
    collector: Collector, make_client: Callable[..., Client], fake_time: FakeTime
) -> None:
    collector.post_default = Answer(503)
    client = make_client()
    for i in range(3):
        assert client.report("app.theme", i)
    assert client.flush() is False  # returns at the pause after a run of failures
    assert client.flush(timeout=0.2) is False
    stats = client.stats()
    assert stats["queued"] == 3 and stats["retries"] >= 3 and stats["sent"] == 0
    assert stats["last_error"] == "HTTP 503"
    assert RETRY_CAP in fake_time.sleeps
    collector.post_default = Answer(202)
    assert client.flush(timeout=5) is True
    assert len(collector.delivered) == 3


def test_flush_without_timeout_returns_at_once_while_uploads_are_paused(
    collector: Collector, make_client: Callable[..., Client]
) -> None:
    collector.post_default = Answer(503)
    resume = threading.Event()
    pauses: list[float] = []

    def sleep(delay: float) -> None:
        if delay >= RETRY_CAP:
            pauses.append(delay)
            resume.wait(10)

    client = make_client(sleep=sleep)
    assert client.report("app.theme", 0)
    assert client.flush() is False  # the run of failures ended in a pause
    assert client.flush() is False  # still paused: no waiting for the next run
    assert pauses == [RETRY_CAP]
    collector.post_default = Answer(202)
    resume.set()
    assert client.flush(timeout=5) is True


def test_reports_survive_a_collector_outage_in_the_queue(
    collector: Collector, make_client: Callable[..., Client]
) -> None:
    client = make_client()
    assert client.report("app.theme", 0)
    collector.stop()
    assert client.report("app.theme", 1)  # the definition is cached: still queued
    assert client.flush(timeout=0.3) is False
    stats = client.stats()
    assert stats["queued"] == 2 and stats["retries"] >= 1
    assert stats["last_error"] in ("ConnectionRefusedError", "RemoteDisconnected")


# -- drops -----------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422, 501])
def test_final_errors_drop_the_batch_and_count_it(
    collector: Collector, make_client: Callable[..., Client], fake_time: FakeTime, status: int
) -> None:
    collector.post_answers.append(Answer(status))
    client = make_client()
    for i in range(3):
        assert client.report("app.theme", i)
    assert client.flush(timeout=5) is False  # the queue is empty, but nothing was delivered
    stats = client.stats()
    assert stats["dropped"]["rejected"] == 3 and stats["queued"] == 0
    assert stats["last_error"] == f"HTTP {status}"
    assert collector.delivered == [] and len(collector.posts) == 1
    assert fake_time.sleeps == []


def test_413_halves_the_batch_until_the_collector_takes_it(
    collector: Collector, make_client: Callable[..., Client]
) -> None:
    collector.max_reports = 2
    client = make_client()
    report_and_flush(client, 5)
    assert collector.reports_per_post() == [5, 2, 2, 1]
    assert len(collector.delivered) == 5
    assert sum(client.stats()["dropped"].values()) == 0


def test_413_for_a_single_report_drops_it_as_too_large(
    collector: Collector, make_client: Callable[..., Client]
) -> None:
    collector.post_default = Answer(413)
    client = make_client()
    for i in range(3):
        assert client.report("app.theme", i)
    assert client.flush(timeout=5) is False
    assert client.stats()["dropped"]["too_large"] == 3
    assert collector.reports_per_post() == [3, 1, 1, 1]


def test_202_with_rejected_indices_drops_those_and_delivers_the_rest(
    collector: Collector, make_client: Callable[..., Client]
) -> None:
    collector.post_answers.append(Answer(202, reject=(1, 3)))
    client = make_client()
    for i in range(5):
        assert client.report("app.theme", i % 3)
    sent_ids = [r["id"] for r in queued_reports(client)]
    assert client.flush(timeout=5) is False  # two were dropped
    assert [r["id"] for r in collector.delivered] == [sent_ids[i] for i in (0, 2, 4)]
    stats = client.stats()
    assert (stats["sent"], stats["accepted"], stats["dropped"]["rejected"]) == (3, 3, 2)


def test_a_503_listing_retry_positions_resends_only_those(
    collector: Collector, make_client: Callable[..., Client], fake_time: FakeTime
) -> None:
    """A cluster shard down: the collector stored the rest of the batch and lists what to
    send again; those alone are sent again, each stored once, and the one it rejected
    is dropped, not sent again."""
    collector.post_answers.append(Answer(503, retry_after="2", reject=(0,), later=(1, 4)))
    client = make_client()
    for i in range(6):
        assert client.report("app.theme", i % 3)
    sent_ids = [r["id"] for r in queued_reports(client)]
    client.flush(timeout=5)  # False: one was dropped
    assert wait_until(lambda: len(collector.posts) == 2 and not queued_reports(client))
    resent = [r["id"] for r in json.loads(collector.posts[1])["reports"]]
    assert resent == [sent_ids[1], sent_ids[4]]
    assert sorted(r["id"] for r in collector.delivered) == sorted(sent_ids[1:])
    assert fake_time.sleeps[0] >= 2  # Retry-After holds
    stats = client.stats()
    assert (stats["sent"], stats["accepted"], stats["dropped"]["rejected"]) == (5, 5, 1)
    assert (stats["duplicates"], stats["retries"], stats["batches"]) == (0, 1, 1)


def test_a_503_without_retry_positions_resends_the_whole_batch(
    collector: Collector, make_client: Callable[..., Client]
) -> None:
    collector.post_answers.append(Answer(503, retry_after="1"))
    client = make_client()
    for i in range(3):
        assert client.report("app.theme", i)
    assert client.flush(timeout=5)
    assert collector.reports_per_post() == [3, 3]


def test_a_replayed_report_is_counted_as_duplicate(
    collector: Collector, make_client: Callable[..., Client]
) -> None:
    client = make_client()
    assert client.report("app.theme", 0)
    (report,) = queued_reports(client)
    collector.seen.add(report["id"])
    assert client.flush(timeout=5)
    stats = client.stats()
    assert (stats["sent"], stats["accepted"], stats["duplicates"]) == (1, 0, 1)


def test_rejection_for_an_unknown_version_refreshes_the_definition(
    collector: Collector, make_client: Callable[..., Client]
) -> None:
    client = make_client()
    assert client.report("app.theme", 0)
    new_theme = parse_spec(
        "app.theme", {"domain": THEME_LABELS, "epsilon": 2.0, "mechanism": "grr"}, version=2
    )
    collector.publish(new_theme)  # version 1 is no longer accepted
    assert client.report("app.theme", 1)
    assert client.flush(timeout=5) is False
    assert client.stats()["dropped"]["rejected"] == 2
    assert client.report("app.theme", 2)  # fetched again: version 2
    assert client.flush(timeout=5) is True  # no drop since the previous flush
    assert len(collector.gets) == 2
    assert [r["version"] for r in collector.delivered] == [2]


def test_a_full_queue_drops_the_oldest_reports_and_counts_them(
    collector: Collector, make_client: Callable[..., Client]
) -> None:
    client = make_client(max_queue=3)
    assert client.report("app.page", 0) and client.report("app.page", 1)
    for i in range(3):
        assert client.report("app.theme", i)
    stats = client.stats()
    assert stats["queued"] == 3 and stats["dropped"]["queue_full"] == 2
    assert client.flush(timeout=5) is False  # the queue was emptied, two reports lost
    assert [r["metric"] for r in collector.delivered] == ["app.theme"] * 3


def test_a_report_larger_than_the_whole_queue_is_refused(
    make_client: Callable[..., Client],
) -> None:
    client = make_client(max_queue_bytes=100)
    assert client.report("app.theme", 0)
    assert client.report("app.page", 0) is False
    assert client.stats()["dropped"]["queue_full"] == 1
    assert client.stats()["queued"] == 1


# -- stats, shutdown, fork, connections ------------------------------------------------------


def test_stats_report_everything_that_happened(
    collector: Collector, make_client: Callable[..., Client]
) -> None:
    collector.post_answers.extend([Answer(500), Answer(202, reject=(0,))])
    client = make_client()
    for i in range(3):
        assert client.report("app.theme", i)
    assert not client.report("app.theme", "purple")
    assert not client.report("app.nope", 0)
    assert client.flush(timeout=5) is False
    assert client.stats() == {
        "queued": 0,
        "queued_bytes": 0,
        "reported": 3,
        "sent": 2,
        "accepted": 2,
        "duplicates": 0,
        "batches": 1,
        "retries": 1,
        "dropped": {
            "unknown_metric": 1,
            "invalid_value": 1,
            "invalid_dimensions": 0,
            "unreachable": 0,
            "queue_full": 0,
            "rejected": 1,
            "too_large": 0,
            "shutdown": 0,
            "internal_error": 0,
            "budget": 0,
            "device_budget": 0,
            "disabled": 0,
            "storage_error": 0,
            "retired": 0,
            "bundle_mismatch": 0,
            "budget_not_shared_after_fork": 0,
        },
        "last_error": "HTTP 500",
        "worker_alive": True,
    }


def test_shutdown_delivers_then_refuses_new_reports(
    collector: Collector, make_client: Callable[..., Client]
) -> None:
    client = make_client()
    assert client.report("app.theme", 0)
    assert client.shutdown(timeout=5) is True
    assert len(collector.delivered) == 1
    assert client.report("app.theme", 0) is False
    stats = client.stats()
    assert stats["dropped"]["shutdown"] == 1 and stats["worker_alive"] is False


def test_shutdown_with_the_collector_down_drops_and_counts_what_is_left(
    collector: Collector, make_client: Callable[..., Client]
) -> None:
    collector.post_default = Answer(503)
    client = make_client(sleep=None)  # the real, interruptible backoff wait
    for i in range(2):
        assert client.report("app.theme", i)
    assert client.shutdown(timeout=0.3) is False
    stats = client.stats()
    assert stats["queued"] == 0 and stats["dropped"]["shutdown"] == 2
    assert wait_until(lambda: not client.stats()["worker_alive"], timeout=2)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_reports_and_flushes_its_own_reports(
    collector: Collector, make_client: Callable[..., Client]
) -> None:
    client = make_client(clock=time.monotonic)
    assert client.report("app.theme", 0)  # parent: definition cached, uploader running

    def child() -> dict[str, Any]:
        before = client.stats()
        reported = [client.report("app.theme", i) for i in (1, 2)]
        flushed = client.flush(timeout=5)
        return {"before": before, "reported": reported, "flushed": flushed, "after": client.stats()}

    _, result = in_child(child)
    assert result is not None  # the child exited 0
    assert result["before"]["queued"] == 0 and result["before"]["worker_alive"] is False
    assert result["reported"] == [True, True] and result["flushed"] is True
    assert result["after"]["sent"] == 2 and result["after"]["reported"] == 2
    assert len(collector.delivered) == 2
    # The parent is unaffected: its report is still queued, its uploader still runs.
    stats = client.stats()
    assert stats["queued"] == 1 and stats["reported"] == 1 and stats["worker_alive"]
    assert client.flush(timeout=5)
    assert len(collector.delivered) == 3 and client.stats()["sent"] == 1


def test_one_kept_alive_connection_serves_definitions_and_uploads(
    collector: Collector, make_client: Callable[..., Client]
) -> None:
    client = make_client(max_batch_reports=2)
    report_and_flush(client, 6)
    assert len(collector.posts) == 3 and len(collector.gets) == 1
    assert collector.connections == 1


def test_a_connection_closed_by_the_collector_is_replaced_without_a_retry(
    collector: Collector, make_client: Callable[..., Client], fake_time: FakeTime
) -> None:
    client = make_client()
    assert client.report("app.theme", 0) and client.flush(timeout=5)
    collector.drop_connections()  # e.g. the collector's idle timeout
    assert client.report("app.theme", 1) and client.flush(timeout=5)
    assert len(collector.delivered) == 2
    assert client.stats()["retries"] == 0 and fake_time.sleeps == []
    assert collector.connections == 2


def test_http_transport_sends_nothing_about_the_device(collector: Collector) -> None:
    seen: list[str] = []
    original = collector.on_get

    def record(handler: _Handler) -> None:
        seen.extend(name.lower() for name in handler.headers)
        original(handler)

    collector.on_get = record  # type: ignore[method-assign]
    response = HTTPTransport(collector.url, timeout=5).get("/v1/metrics")
    assert response.status == 200 and len(response.json()["metrics"]) == 2
    assert set(seen) <= {"host", "accept", "accept-encoding", "content-type", "content-length"}

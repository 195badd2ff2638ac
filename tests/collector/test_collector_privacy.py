"""Nothing about a client is stored or logged: no address, user agent or client time.

Requests carry marker values in every header that identifies or times a client; then
every Redis key and value (all types) and every log line is searched for them.
"""

from __future__ import annotations

import json
import logging
import re
import signal
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from collector_helpers import ADMIN, PAGES_SPEC, THEME_SPEC, TOKEN, make_app, reports, scan_redis
from flask import Flask, request
from gunicorn_helpers import collector_env, start_gunicorn
from werkzeug.serving import WSGIRequestHandler, make_server

from client_sdk.wire import MetricDefinition
from collector.logs import PrivateRequestHandler
from ldp_store.embedded import free_port
from tests.process_helpers import stop

ROOT = Path(__file__).resolve().parents[2]

MARKERS = {
    "X-Forwarded-For": "198.51.100.71, 203.0.113.72",
    "X-Real-IP": "198.51.100.73",
    "Forwarded": "for=198.51.100.74;proto=https",
    "True-Client-IP": "198.51.100.75",
    "User-Agent": "ZqMarkerAgent/7.7 (device zq-5521)",
    "Referer": "https://zq-referer.example/page",
    "Date": "Tue, 15 Nov 1994 08:12:31 GMT",
    "Cookie": "session=zq-cookie-6613",
}
PEER = "192.0.2.99"
"""A peer address for the test client (besides its default 127.0.0.1)."""

NEEDLES = [
    "198.51.100.",
    "203.0.113.",
    "ZqMarkerAgent",
    "zq-5521",
    "zq-referer",
    "zq-cookie",
    "Nov 1994",
    "Nov/1994",
    "08:12:31",
    PEER,
    "127.0.0.1",
]


def found_in(text: str | bytes, needles: list[str] = NEEDLES) -> list[str]:
    raw = text if isinstance(text, bytes) else text.encode("utf-8", "replace")
    return [n for n in needles if n.encode() in raw]


def _ours(record: logging.LogRecord) -> bool:
    """redis-py's debug lines name our own Redis server (127.0.0.1:port), not a client.

    What reaches Redis is scanned key by key and value by value instead.
    """
    return record.name == "redis" or record.name.startswith("redis.")


class Capture(logging.Handler):
    """Collects formatted records, attached directly to a logger."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if _ours(record):
            return
        text = self.format(record)
        self.lines.append(f"{record.name} {text} {record.args!r} {record.__dict__!r}")


@pytest.fixture
def captured() -> Iterator[Capture]:
    handler = Capture()
    loggers = [logging.getLogger(n) for n in ("", "collector", "werkzeug", "flask.app")]
    levels = [x.level for x in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
    yield handler
    for logger, level in zip(loggers, levels, strict=True):
        logger.removeHandler(handler)
        logger.setLevel(level)


def exercise(app: Flask, peer: str) -> list[bytes]:
    """Every kind of request, from ``peer`` with all the markers; the response bodies."""
    client = app.test_client()
    kw: dict[str, Any] = {"headers": MARKERS, "environ_base": {"REMOTE_ADDR": peer}}
    bodies = []

    def send(method: str, path: str, **more: Any) -> Any:
        headers = {**MARKERS, **more.pop("headers", {})}
        response = client.open(path, method=method, **{**kw, "headers": headers}, **more)
        assert response.status_code < 500, response.data
        bodies.append(response.data)
        return response

    theme = MetricDefinition.from_dict(
        send("PUT", "/v1/metrics/app.theme", json=THEME_SPEC, headers=ADMIN).json
    )
    pages = MetricDefinition.from_dict(
        send("PUT", "/v1/metrics/app.pages", json=PAGES_SPEC, headers=ADMIN).json
    )
    batch = reports(theme, 20) + reports(pages, 20)
    assert send("POST", "/v1/reports", json={"reports": batch}).status_code == 202
    assert send("POST", "/v1/reports", json={"reports": batch[:5]}).json["duplicates"] == 5
    mixed = [*reports(theme, 2), {"metric": "app.theme"}, {**batch[0], "payload": {"v": 9}}]
    assert send("POST", "/v1/reports", json={"reports": mixed}).status_code == 202
    send("POST", "/v1/reports", data=b'{"reports": [NaN', content_type="application/json")
    send("POST", "/v1/reports", data=b"\xff", content_type="application/json")
    send("PUT", "/v1/metrics/app.theme", json=THEME_SPEC, headers={"Authorization": "Bearer no"})
    for path in ("/v1/metrics", "/v1/metrics/app.theme", "/v1/metrics/zz", "/readyz", "/healthz"):
        send("GET", path)
    send("GET", "/metrics")
    send("GET", "/nowhere")
    send("DELETE", "/v1/reports")
    return bodies


@pytest.mark.parametrize("peer", ["127.0.0.1", PEER])
def test_nothing_identifying_reaches_redis_logs_or_responses(
    redis_db: Any,
    captured: Capture,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
    peer: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    # Reach our own Redis by name: a line about it (a timeout on a loaded machine, say)
    # then names "localhost", not the 127.0.0.1 this test plants as the client's address.
    app = make_app(redis_db.url.replace("127.0.0.1", "localhost"))
    app.logger.info("collector test app started")  # the app logger is captured too
    bodies = exercise(app, peer)

    stored = scan_redis(redis_db)
    assert any(b":reports" in key for key, _ in stored)  # the scan saw the streams
    for key, values in stored:
        assert not found_in(key), key
        for value in values:
            assert not found_in(value), (key, value)
        if key.endswith(b":reports"):
            # entry ids, field names, payloads, and a batch entry's payload sizes
            assert all(
                v in (b"p", b"s", b"b")
                or v.startswith(b"{")
                or b"-" in v
                or re.fullmatch(rb"[0-9]+(,[0-9]+)*", v)
                for v in values
            )

    assert any("rejected" in line for line in captured.lines)  # logs were written
    assert any("collector test app started" in line for line in captured.lines)
    records = [r for r in caplog.records if not _ours(r)]
    logs = "\n".join([*captured.lines, *(r.getMessage() for r in records), *map(repr, records)])
    assert not found_in(logs), found_in(logs)
    out, err = capfd.readouterr()
    assert not found_in(out + err), found_in(out + err)
    for body in bodies:
        assert not found_in(body), body


def test_the_app_never_sees_client_metadata(redis_db: Any) -> None:
    app = make_app(redis_db.url)
    seen: dict[str, Any] = {}

    @app.get("/_echo")
    def echo() -> dict[str, Any]:
        seen.update(
            remote_addr=request.remote_addr,
            access_route=list(request.access_route),
            user_agent=request.user_agent.string,
            headers=dict(request.headers),
            environ={k: str(v) for k, v in request.environ.items()},
        )
        return {}

    app.test_client().get("/_echo", headers=MARKERS, environ_base={"REMOTE_ADDR": PEER})
    assert seen["remote_addr"] is None and seen["access_route"] == []
    assert seen["user_agent"] == ""
    assert not found_in(json.dumps(seen)), found_in(json.dumps(seen))


def test_werkzeug_request_lines_are_dropped_and_addresses_stripped(
    redis_db: Any, captured: Capture
) -> None:
    make_app(redis_db.url)  # installs the filter
    log = logging.getLogger("werkzeug")
    log.info('198.51.100.71 - - [15/Nov/1994 08:12:31] "POST /v1/reports HTTP/1.1" 202 -')
    log.error("198.51.100.71 - - [15/Nov/1994 08:12:31] code 400, message Bad request syntax")
    log.info("Press CTRL+C to quit")
    text = "\n".join(captured.lines)
    assert "Bad request syntax" in text and "Press CTRL+C" in text
    assert not found_in(text, ["198.51.100.", "Nov/1994"])


@pytest.mark.parametrize("handler", [WSGIRequestHandler, PrivateRequestHandler])
def test_werkzeug_dev_server_logs_no_address(
    redis_db: Any, captured: Capture, handler: type[WSGIRequestHandler]
) -> None:
    """``ldp serve``-style development serving: Werkzeug's own handler (with the filter
    ``create_app`` installs) and :class:`PrivateRequestHandler` both log no address."""
    app = make_app(redis_db.url)
    server = make_server("127.0.0.1", free_port(), app, request_handler=handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        assert _request(url + "/healthz") == 200
        assert _request(url + "/v1/reports", "POST", {"reports": []}) == 400
        with socket.create_connection(("127.0.0.1", server.server_port)) as sock:
            sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")  # Werkzeug logs "code 400"
            sock.recv(1000)
    finally:
        server.shutdown()
        thread.join(5)
        server.server_close()
    text = "\n".join(captured.lines)
    assert "werkzeug" in text  # the malformed request was logged, without its address
    assert not found_in(text), found_in(text)


# -- the production server --------------------------------------------------------------


def _request(url: str, method: str = "GET", body: Any = None, headers: Any = None) -> int:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    for name, value in {**MARKERS, "Content-Type": "application/json", **(headers or {})}.items():
        req.add_header(name, value)
    try:
        with urllib.request.urlopen(req, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


@pytest.fixture
def gunicorn(redis_db: Any, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The collector under gunicorn with ``collector/gunicorn_conf.py``, logs in tmp_path."""
    port = free_port()
    env = collector_env(redis_db.url, port, TOKEN, tmp_path)
    output = open(tmp_path / "output.log", "wb")  # noqa: SIM115
    process = start_gunicorn(env, output)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, (tmp_path / "output.log").read_text()
            try:
                if _request(url + "/readyz") == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "gunicorn did not become ready"
            time.sleep(0.1)
        yield url, tmp_path
    finally:
        if process.poll() is None:
            stop(process, signal.SIGTERM, 30)
        output.close()


def test_gunicorn_logs_carry_no_client_metadata(gunicorn: tuple[str, Path], redis_db: Any) -> None:
    url, logs = gunicorn
    spec_status = _request(url + "/v1/metrics/app.theme", "PUT", THEME_SPEC, ADMIN)
    assert spec_status == 201
    with urllib.request.urlopen(url + "/v1/metrics/app.theme") as response:
        theme = MetricDefinition.from_dict(json.load(response))
    batch = reports(theme, 50)
    assert _request(url + "/v1/reports", "POST", {"reports": batch}) == 202
    assert _request(url + "/v1/reports", "POST", {"reports": batch[:3]}) == 202
    assert _request(url + "/v1/reports", "POST", {"reports": [{"x": 1}]}) == 400
    assert _request(url + "/v1/reports?src=zq-query", "POST", {"reports": []}) == 400
    assert _request(url + "/nowhere") == 404
    # A request gunicorn itself rejects: it logs "Invalid request from ip=..." by default.
    with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1]))) as sock:
        sock.sendall(b"BOGUS\x01 / HTTP/1.1\r\nUser-Agent: ZqMarkerAgent/7.7\r\n\r\n")
        sock.recv(1000)
    # The worker writes a request's line after answering it: wait for the last one (a
    # fixed pause was a race against the machine's load).
    deadline = time.monotonic() + 60
    access = ""
    while '"GET /nowhere" 404' not in access:
        assert time.monotonic() < deadline, access
        time.sleep(0.05)
        access = (logs / "access.log").read_text()
    lines = access.splitlines()
    assert len(lines) >= 7, access
    line_format = re.compile(r'"(GET|PUT|POST|BOGUS\S*|-) (/\S*|-)" \d{3} (\d+|-) \d+ms')
    assert all(line_format.fullmatch(line) for line in lines), lines
    assert '"POST /v1/reports" 202' in access
    assert not found_in(access, [*NEEDLES, "zq-query"]), found_in(access)

    errors = (logs / "error.log").read_text() + (logs / "output.log").read_text()
    assert "Booting worker" in errors  # the error log is written
    assert not found_in(errors, NEEDLES[:-1]), found_in(errors, NEEDLES[:-1])
    assert not re.search(r"ip=(?!-)", errors), errors
    for key, values in scan_redis(redis_db):
        assert not found_in(key) and not any(found_in(v) for v in values), key


def test_gunicorn_conf_has_no_client_atoms() -> None:
    text = (ROOT / "collector" / "gunicorn_conf.py").read_text()
    fmt = re.search(r"^access_log_format = (.+)$", text, re.M)
    assert fmt is not None
    for atom in ("h", "a", "t", "f", "u", "r", "q", "l"):
        assert f"%({atom})s" not in fmt.group(1)
    assert "{" not in fmt.group(1)  # no header or environ atoms either


FORGERIES = [
    b"GET /x%0d%0aFORGED-1%20200%20-%200ms HTTP/1.1",  # decodes to CR LF in PATH_INFO
    b"GET /x%0aFORGED-2 HTTP/1.1",
    b"GET /x%c2%85FORGED-3 HTTP/1.1",  # U+0085 (NEL): a line break to str.splitlines
    b"GET /x\rFORGED-4 HTTP/1.1",  # literal CR and LF: gunicorn refuses the request line
    b"GET /x\nFORGED-5 HTTP/1.1",
]


def test_a_crlf_in_the_path_cannot_forge_a_log_line(gunicorn: tuple[str, Path]) -> None:
    url, logs = gunicorn
    port = int(url.rsplit(":", 1)[1])
    for request_line in FORGERIES:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(request_line + b"\r\nHost: a\r\nConnection: close\r\n\r\n")
            while sock.recv(4096):
                pass
    assert _request(url + "/healthz") == 200  # the last line the worker writes
    deadline = time.monotonic() + 5
    access = ""
    while '"GET /healthz"' not in access and time.monotonic() < deadline:
        time.sleep(0.1)
        access = (logs / "access.log").read_text()
    errors = (logs / "error.log").read_text() + (logs / "output.log").read_text()
    for text in (access, errors):
        lines = re.split(r"\r\n|\r|\n|\x85|\u2028", text)
        assert not [line for line in lines if line.startswith("FORGED")], text
    assert '"GET /x\\x0D\\x0AFORGED-1 200 - 0ms" 404 ' in access, access
    assert '"GET /x\\x0AFORGED-2" 404 ' in access, access
    line_format = re.compile(r'"GET /[^"]*" \d{3} \d+ \d+ms')  # a quote cannot end a field
    assert all(line_format.fullmatch(line) for line in access.splitlines()), access

"""deploy/nginx.conf, run by a real nginx in front of a real gunicorn collector.

The collector runs with gunicorn's ``sync`` worker, one process: alone, two slow clients
stop it. Through nginx (the repository's config, only its addresses, log paths and the
header timeout changed for a test on loopback), 200 clients dribbling their headers are
absorbed: health checks and uploads answer meanwhile, and nginx cuts the slow ones off
after ``client_header_timeout``. Clients connect from 127.0.0.2, so the logs can be
searched for their address. The collector trusts the X-Real-IP nginx sets, as in
docker-compose.yml: a flood from one address through nginx gets 429 while another
address gets 202 (and a forged X-Real-IP changes nothing). Skipped when nginx is not
installed (``apt-get install nginx-light``; ``python3 tasks.py test`` installs it as root).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gunicorn_helpers import collector_env, start_gunicorn

from client_sdk.ohttp import bhttp
from client_sdk.ohttp.encapsulation import encapsulate_request
from client_sdk.ohttp.keys import (
    GATEWAY_PATH,
    REQUEST_MEDIA_TYPE,
    SEALING_OVERHEAD,
    decode_key_configs,
)
from client_sdk.wire import MetricDefinition, build_report
from collector.settings import MAX_BODY_BYTES
from ldp_edge.slow_bodies import MAX_SECONDS
from ldp_store.embedded import free_port
from tests.process_helpers import stop

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "deploy" / "nginx.conf"
NGINX = shutil.which("nginx") or next(
    (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if Path(p).exists()), None
)
if NGINX is None:
    pytest.skip(
        "nginx is not installed (apt-get install nginx-light; tasks.py does it as root)",
        allow_module_level=True,
    )

CLIENT = "127.0.0.2"
"""The address the test's clients connect from: any line holding it leaked it."""

SLOW_CLIENTS = 200
HEADER_TIMEOUT = 2
"""The test's client_header_timeout (the config's 10 s, shortened to keep the test fast)."""

TOKEN = "proxy-test-admin-token"
ANSWER_TIMEOUT = 5.0


def _test_config(tmp: Path, port: int, upstream: int) -> str:
    """The repository's config with loopback addresses, files in ``tmp`` and a 2 s header
    timeout; every edit must apply exactly once, so a changed config fails loudly here."""
    text = CONFIG.read_text()
    edits = [
        ("worker_processes auto;", "worker_processes 1;"),
        ("error_log /dev/stderr crit;", f"error_log {tmp}/error.log crit;"),
        ("access_log /dev/stdout private;", f"access_log {tmp}/access.log private;"),
        ("listen 8000;", f"listen 127.0.0.1:{port};"),
        ("server collector:8000", f"server 127.0.0.1:{upstream}"),
        ("client_header_timeout 10s;", f"client_header_timeout {HEADER_TIMEOUT}s;"),
        (
            "http {",
            "http {\n"
            + "".join(
                f"    {kind}_temp_path {tmp}/{kind};\n"
                for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
            ),
        ),
    ]
    for old, new in edits:
        assert text.count(old) == 1, f"deploy/nginx.conf no longer has {old!r} once"
        text = text.replace(old, new)
    return text


def _wait_port(port: int, process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        assert process.poll() is None, f"{what} exited with {process.returncode}"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"{what} did not listen on {port}"
            time.sleep(0.1)


def _stop(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    stop(process, sig, 20)


@contextlib.contextmanager
def _stack(redis_server: Any, tmp: Path, worker_class: str) -> Iterator[tuple[int, Path]]:
    """(nginx's port, its folder): nginx → gunicorn (1 worker) → a real Redis."""
    upstream, port = free_port(), free_port()
    env = collector_env(
        redis_server.url,
        upstream,
        TOKEN,
        WORKER_CLASS=worker_class,
        ACCESS_LOG="off",
        SOURCE_HEADER="X-Real-IP",  # as docker-compose.yml configures the collectors
    )
    with open(tmp / "gunicorn.log", "wb") as out:
        gunicorn = start_gunicorn(env, out)
    (tmp / "nginx.conf").write_text(_test_config(tmp, port, upstream))
    assert NGINX is not None
    nginx = subprocess.Popen(
        [
            NGINX,
            "-p",
            str(tmp),
            "-e",
            str(tmp / "startup.log"),
            "-c",
            str(tmp / "nginx.conf"),
            "-g",
            f"daemon off; pid {tmp}/nginx.pid;",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_port(upstream, gunicorn, "gunicorn")
        _wait_port(port, nginx, "nginx")
        yield port, tmp
    finally:
        _stop(nginx, signal.SIGQUIT)  # graceful: the access log is complete
        _stop(gunicorn)


@pytest.fixture(scope="module")
def stack(
    redis_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[int, Path]]:
    """nginx in front of the worker that needs a buffering proxy: ``sync``."""
    with _stack(redis_server, tmp_path_factory.mktemp("nginx"), "sync") as found:
        yield found


@pytest.fixture(scope="module")
def gevent_stack(
    redis_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[int, Path]]:
    """nginx in front of compose's collector worker: ``gevent`` (the body deadline's)."""
    with _stack(redis_server, tmp_path_factory.mktemp("nginx-gevent"), "gevent") as found:
        yield found


def _call(
    port: int,
    method: str,
    path: str,
    body: Any = None,
    token: str = "",
    source: str = CLIENT,
) -> Any:
    """One request through nginx from ``source``: (status, headers, decoded body)."""
    connection = http.client.HTTPConnection(
        "127.0.0.1", port, timeout=ANSWER_TIMEOUT, source_address=(source, 0)
    )
    headers = {
        "Content-Type": "application/json",
        "X-Forwarded-For": "203.0.113.77",
        "X-Real-IP": "203.0.113.78",  # forged: nginx replaces it with the peer's address
    }
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    try:
        connection.request(method, path, body=data, headers=headers)
        response = connection.getresponse()
        return response.status, response.headers, json.loads(response.read())
    finally:
        connection.close()


@pytest.fixture(scope="module")
def theme(stack: tuple[int, Path]) -> MetricDefinition:
    """A metric defined through nginx (each test process defines it; 201, then 200)."""
    status, _, created = _call(
        stack[0], "PUT", "/v1/metrics/proxy.theme", {"domain": ["a", "b"], "epsilon": 1.0}, TOKEN
    )
    assert status in (200, 201)
    return MetricDefinition.from_dict(created)


def _upload(port: int, definition: MetricDefinition) -> None:
    status, _, result = _call(
        port, "POST", "/v1/reports", {"reports": [build_report(definition, "b")]}
    )
    assert (status, result["accepted"]) == (202, 1)


def _slow(port: int) -> socket.socket:
    s = socket.create_connection(
        ("127.0.0.1", port), timeout=ANSWER_TIMEOUT, source_address=(CLIENT, 0)
    )
    s.sendall(b"POST /v1/reports HTTP/1.1\r\nHost: slow\r\nX-Slow: ")
    return s


def _closed(s: socket.socket, deadline: float) -> bool:
    """True once the peer closed ``s`` (EOF or reset), False if still open at deadline."""
    s.settimeout(max(deadline - time.monotonic(), 0.01))
    try:
        while s.recv(4096):
            pass  # a 408 answer, then EOF
        return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_slow_clients_are_absorbed_and_cut_off(
    stack: tuple[int, Path], theme: MetricDefinition
) -> None:
    port, _ = stack
    slow: list[socket.socket] = []
    try:
        for _ in range(SLOW_CLIENTS):
            slow.append(_slow(port))
        for s in slow:
            s.sendall(b"x")
        # gunicorn's one sync worker never sees them: nginx holds them, then answers these.
        assert _call(port, "GET", "/healthz")[::2] == (200, {"status": "ok"})
        _upload(port, theme)
        # ... and cuts them off after client_header_timeout.
        deadline = time.monotonic() + 3 * HEADER_TIMEOUT + 2
        still_open = [s for s in slow if not _closed(s, deadline)]
        assert not still_open, f"{len(still_open)} slow connections outlived the timeout"
    finally:
        for s in slow:
            s.close()
    assert _call(port, "GET", "/readyz")[::2] == (200, {"status": "ready", "refused": []})


SLOW_BODIES = 150


def test_slow_bodies_through_nginx_are_cut_by_the_collectors_deadline(
    gevent_stack: tuple[int, Path],
) -> None:
    """A POST /v1/reports body dripping a byte a second: nginx alone never cuts it (each
    byte restarts client_body_timeout); streamed to a gevent collector, the body deadline
    answers 408 and both close it. /healthz answers meanwhile."""
    port, _ = gevent_stack
    slow: list[socket.socket] = []
    try:
        for _ in range(SLOW_BODIES):
            s = socket.create_connection(
                ("127.0.0.1", port), timeout=ANSWER_TIMEOUT, source_address=(CLIENT, 0)
            )
            s.sendall(
                b"POST /v1/reports HTTP/1.1\r\nHost: slow\r\nContent-Type: application/json"
                b"\r\nContent-Length: 1000000\r\n\r\n{"
            )
            slow.append(s)
        assert _call(port, "GET", "/healthz")[::2] == (200, {"status": "ok"})
        deadline = time.monotonic() + MAX_SECONDS + 30  # a shared machine: a wide margin
        still_open = list(slow)
        while still_open and time.monotonic() < deadline:
            for s in still_open:
                with contextlib.suppress(OSError):
                    s.sendall(b" ")
            still_open = [s for s in still_open if not _closed(s, time.monotonic() + 0.01)]
            time.sleep(1.0)
        assert not still_open, f"{len(still_open)} of {SLOW_BODIES} slow bodies still open"
    finally:
        for s in slow:
            s.close()
    assert _call(port, "GET", "/readyz")[::2] == (200, {"status": "ready", "refused": []})


def test_bodies_over_the_collectors_limit_stop_at_nginx(stack: tuple[int, Path]) -> None:
    port, _ = stack
    status, headers, body = _call(port, "POST", "/v1/reports", b" " * (MAX_BODY_BYTES + 1))
    assert status == 413 and body["error"] == "the request body is too large"
    assert headers["X-Content-Type-Options"] == "nosniff"
    # At the limit, the body reaches the collector (which finds no JSON in it).
    status, _, body = _call(port, "POST", "/v1/reports", b" " * MAX_BODY_BYTES)
    assert status == 400 and "empty" in body["error"]


def test_a_sealed_batch_at_the_collectors_limit_passes_nginx_to_the_gateway(
    stack: tuple[int, Path], theme: MetricDefinition
) -> None:
    """The gateway path allows the collector's limit plus the sealing's overhead, as the
    relay and the gateway do: a batch the collector accepts directly is accepted sealed.
    Fails on the old config, whose 1 MiB applied to the gateway path too (413)."""
    port, _ = stack
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=ANSWER_TIMEOUT)
    connection.request("GET", GATEWAY_PATH)
    config = decode_key_configs(connection.getresponse().read())[0]
    report = json.dumps(build_report(theme, "a")).encode()
    body = b'{"reports":[' + report + b"]}"
    body = body[:-1] + b" " * (MAX_BODY_BYTES - len(body)) + b"}"  # whitespace: still JSON
    assert len(body) == MAX_BODY_BYTES
    inner = bhttp.BinaryRequest(
        "POST", "http", "collector", "/v1/reports", (("content-type", "application/json"),), body
    )
    sealed, context = encapsulate_request(config, bhttp.encode_request(inner))
    assert MAX_BODY_BYTES < len(sealed) <= MAX_BODY_BYTES + SEALING_OVERHEAD
    headers = {"Content-Type": REQUEST_MEDIA_TYPE}
    connection.request("POST", GATEWAY_PATH, body=sealed, headers=headers)
    response = connection.getresponse()
    assert response.status == 200, response.read()
    answer = bhttp.decode_response(context.decapsulate_response(response.read()))
    assert answer.status == 202 and json.loads(answer.content)["accepted"] == 1
    # One byte more than any sealed batch the collector accepts stops at nginx.
    too_big = b"\x00" * (MAX_BODY_BYTES + SEALING_OVERHEAD + 1)
    connection.request("POST", GATEWAY_PATH, body=too_big, headers=headers)
    response = connection.getresponse()
    assert response.status == 413 and b"too large" in response.read()
    connection.close()


def test_logs_hold_no_client_address_and_no_forged_line(
    stack: tuple[int, Path], theme: MetricDefinition
) -> None:
    port, logs = stack
    assert _call(port, "GET", "/healthz")[0] == 200
    _upload(port, theme)
    # A path that decodes to CR/LF: the log line must stay one line.
    with socket.create_connection(("127.0.0.1", port), source_address=(CLIENT, 0)) as s:
        s.sendall(b"GET /x%0d%0aFORGED-LINE HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        while s.recv(4096):
            pass
    deadline = time.monotonic() + 5
    access = ""
    while "FORGED" not in access and time.monotonic() < deadline:
        time.sleep(0.1)  # nginx writes the line after answering
        access = (logs / "access.log").read_text()
    lines = access.splitlines()
    assert any(line.startswith('"GET /healthz" 200 ') for line in lines), access
    assert any('"POST /v1/reports" 202 ' in line for line in lines), access
    forged = [line for line in lines if "FORGED" in line]
    assert forged and all(line.startswith('"GET /x') for line in forged), forged
    line_format = re.compile(r'"[A-Z]* \S*" \d{3} \d+ [\d.]+s upstream=\S+')
    assert all(line_format.fullmatch(line) for line in lines), lines
    every_log = access + "".join(p.read_text() for p in logs.glob("*.log"))
    assert CLIENT not in every_log and "203.0.113.77" not in every_log
    assert "203.0.113.78" not in every_log


def test_a_flood_through_nginx_gets_429_while_another_address_gets_202(
    stack: tuple[int, Path], theme: MetricDefinition
) -> None:
    port, logs = stack
    flooder, other = "127.0.0.4", "127.0.0.5"  # not CLIENT: the other tests' bucket stays
    statuses, others = [], []
    for i in range(200):  # the bucket holds 20 and refills 20 a second
        body = {"reports": [build_report(theme, "a")]}
        status, headers, answer = _call(port, "POST", "/v1/reports", body, source=flooder)
        statuses.append(status)
        if status == 429:
            assert headers["Retry-After"] == "1"
            assert answer["error"] == "too many requests from this source"
        if i % 20 == 19:
            body = {"reports": [build_report(theme, "b")]}
            others.append(_call(port, "POST", "/v1/reports", body, source=other)[0])
    assert statuses[:20] == [202] * 20 and 429 in statuses
    assert others == [202] * 10
    every_log = "".join(p.read_text() for p in logs.glob("*.log"))
    assert flooder not in every_log and other not in every_log

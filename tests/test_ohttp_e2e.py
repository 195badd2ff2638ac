"""Oblivious HTTP end to end with the real pieces: the collector under gunicorn, ``ldp
relay`` as its own process, a real Redis, and the SDK's ``Client(url, relay=…)``.

The device connects from 127.0.0.77 (its sockets are bound there), the relay listens on
127.0.0.2 and reaches the collector from 127.0.0.1: the device's address must appear in
none of the collector's logs, Redis or ``/metrics``, nor in the relay's logs.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests
import requests.adapters
from gunicorn_helpers import collector_env
from relay_helpers import Recording

from client_sdk import Client
from client_sdk.ohttp import bhttp
from client_sdk.ohttp.encapsulation import encapsulate_request
from client_sdk.ohttp.keys import (
    GATEWAY_PATH,
    REQUEST_MEDIA_TYPE,
    decode_key_configs,
)
from client_sdk.wire import MetricDefinition, build_report
from collector.ohttp_gateway import KEY_CACHE_SECONDS
from ldp_store import keys, streams
from ldp_store.embedded import free_port
from tests.process_helpers import spawn

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "e2e-admin-token-0123"
DEVICE = "127.0.0.77"
RELAY_HOST = "127.0.0.2"
SPEC = {"domain": [f"v{i}" for i in range(400)], "epsilon": 1.0, "mechanism": "grr"}


Popen = subprocess.Popen[bytes]


def serve(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    """``handler`` served on a free port of 127.0.0.1 from a daemon thread."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def wait_ready(url: str, process: Popen, log: Path) -> None:
    deadline = time.monotonic() + 30
    while True:
        assert process.poll() is None, log.read_text()
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        assert time.monotonic() < deadline, f"{url} did not come up:\n{log.read_text()}"
        time.sleep(0.1)


class Stack:
    """A collector (gunicorn) and a relay (``ldp relay``), each its own process group."""

    def __init__(self, redis_url: str, logs: Path, min_batch: int, relay_rate: int) -> None:
        self.redis_url, self.logs, self.min_batch = redis_url, logs, min_batch
        self.relay_rate = relay_rate
        self.port, self.relay_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.relay_url = f"http://{RELAY_HOST}:{self.relay_port}/"
        self.collector: Popen | None = None
        self.relay: Popen | None = None
        self.gateway = ""  # what the relay forwards to; default: the collector's gateway

    def _spawn(self, name: str, cmd: list[str], env: dict[str, str], ready: str) -> Popen:
        """Start ``cmd`` in a process group of its own, its output in ``{name}.out``, and
        wait until ``ready`` answers 200."""
        process = spawn(cmd, self.logs / f"{name}.out", env)
        wait_ready(ready, process, self.logs / f"{name}.out")
        return process

    def start_collector(self) -> None:
        env = collector_env(
            self.redis_url, self.port, TOKEN, self.logs, SHUFFLE_MIN_BATCH=str(self.min_batch)
        )
        gunicorn = ["gunicorn", "-c", "collector/gunicorn_conf.py", "collector:create_app()"]
        self.collector = self._spawn("collector", gunicorn, env, self.url + "/readyz")

    def start_relay(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LDP_")}
        relay = [
            *("ldp_server", "relay", "--gateway", self.gateway or self.url + GATEWAY_PATH),
            *("--host", RELAY_HOST, "--port", str(self.relay_port), "--workers", "1"),
            *("--requests-per-second", str(self.relay_rate)),
        ]
        self.relay = self._spawn("relay", relay, env, self.relay_url + "healthz")

    def kill_collector(self) -> None:
        assert self.collector is not None
        os.killpg(self.collector.pid, signal.SIGKILL)
        self.collector.wait()

    def stop(self) -> None:
        while _SESSIONS:
            _SESSIONS.pop().close()
        for process in (self.relay, self.collector):
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()

    def define(self) -> MetricDefinition:
        answer = requests.put(
            self.url + "/v1/metrics/app.wide",
            json=SPEC,
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=10,
        )
        assert answer.status_code in (200, 201), answer.text
        return MetricDefinition.from_dict(answer.json())


@pytest.fixture
def stack_of(redis_db: Any, tmp_path: Path) -> Iterator[Callable[..., Stack]]:
    made: list[Stack] = []

    def make(
        min_batch: int, relay_rate: int = 20, gateway: Callable[[str], str] | None = None
    ) -> Stack:
        stack = Stack(redis_db.url, tmp_path, min_batch, relay_rate)
        made.append(stack)
        stack.start_collector()
        if gateway is not None:
            stack.gateway = gateway(stack.url)
        stack.start_relay()
        return stack

    yield make
    for stack in made:
        stack.stop()


@dataclass
class Fronted:
    """A stack whose relay forwards to a recording front of the collector (``front``, on
    127.0.0.1), which the device also uses for its direct requests: ``seen`` holds every
    request the front forwarded, stamped with the device's clock ``now[0]``."""

    stack: Stack
    front: str
    seen: list[tuple[float, str, str, str]]
    now: list[float]


@pytest.fixture
def fronted(stack_of: Callable[..., Stack]) -> Iterator[Fronted]:
    now = [0.0]
    seen: list[tuple[float, str, str, str]] = []
    handler = type("ToCollector", (Recording,), {"clock": lambda self: now[0], "seen": seen})
    server = serve(handler)
    front = f"http://127.0.0.1:{server.server_address[1]}"
    stack = stack_of(1, gateway=lambda collector: front + GATEWAY_PATH)
    handler.target = stack.url  # type: ignore[attr-defined]
    yield Fronted(stack, front, seen, now)
    server.shutdown()


class FromAddress(requests.adapters.HTTPAdapter):
    """Connections bound to one local address: the device's."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["source_address"] = (DEVICE, 0)
        super().init_poolmanager(*args, **kwargs)


_SESSIONS: list[requests.Session] = []
"""Every device session made, closed before the stack stops: an idle keep-alive
connection holds a gunicorn service's graceful stop for up to its keepalive (5 s)."""


def device_session() -> requests.Session:
    session = requests.Session()
    _SESSIONS.append(session)
    session.trust_env = False
    session.mount("http://", FromAddress())
    return session


def stream(redis_db: Any, definition: MetricDefinition) -> list[int]:
    key = keys.stream_key(definition.name, definition.version)
    return [json.loads(payload)["v"] for _, payload in streams.reports(redis_db.client(), key)]


def sealed_upload(stack: Stack, reports: list[dict[str, Any]]) -> bytes:
    with urllib.request.urlopen(stack.url + GATEWAY_PATH, timeout=10) as answer:
        config = decode_key_configs(answer.read())[0]
    body = json.dumps({"reports": reports}).encode()
    request = bhttp.BinaryRequest(
        "POST",
        "http",
        f"127.0.0.1:{stack.port}",
        "/v1/reports",
        (("content-type", "application/json"),),
        body,
    )
    return encapsulate_request(config, bhttp.encode_request(request))[0]


def relay_post(url: str, sealed: bytes) -> requests.Response:
    return device_session().post(
        url, data=sealed, headers={"Content-Type": REQUEST_MEDIA_TYPE}, timeout=10
    )


def everything_the_collector_keeps(stack: Stack, redis_db: Any) -> str:
    texts = [
        (stack.logs / name).read_text() for name in ("access.log", "error.log", "collector.out")
    ]
    with urllib.request.urlopen(stack.url + "/metrics", timeout=10) as answer:
        texts.append(answer.read().decode())
    client = redis_db.client()
    for key in client.scan_iter(count=1000):
        texts.append(key.decode(errors="replace"))
        kind = client.type(key).decode()
        if kind == "stream":
            texts += [repr(e) for e in client.xrange(key)]
        elif kind == "hash":
            texts += [repr(client.hgetall(key))]
        elif kind == "set":
            texts += [repr(client.smembers(key))]
        elif kind == "string":
            texts += [repr(client.get(key))]
    return "\n".join(texts)


def test_the_sdk_reports_through_the_relay_and_no_device_address_reaches_the_collector(
    stack_of: Callable[..., Stack], redis_db: Any
) -> None:
    stack = stack_of(20)
    wide = stack.define()
    client = Client(stack.url, relay=stack.relay_url, session=device_session(), flush_at=1000)
    try:
        for i in range(20):
            assert client.report("app.wide", f"v{i}")
        assert client.flush(timeout=20)
        stats = client.stats()
        assert stats["accepted"] == 20 and not any(stats["dropped"].values()), stats
    finally:
        client.shutdown()
    assert len(stream(redis_db, wide)) == 20  # B = 20: released at once
    # The workers write a request's line after answering it: wait for it (a fixed pause
    # was a race against the machine's load).
    deadline = time.monotonic() + 60
    while "POST /.well-known/ohttp-gateway" not in (stack.logs / "access.log").read_text():
        assert time.monotonic() < deadline, "the gateway's request never reached the access log"
        time.sleep(0.05)
    kept = everything_the_collector_keeps(stack, redis_db)
    assert "POST /.well-known/ohttp-gateway" in kept  # the access log is written
    # One batch and the metric's definition, both sealed: no direct definition fetch.
    assert 'ldp_ohttp_requests_total{outcome="ok"} 2.0' in kept
    assert "GET /v1/metrics/app.wide" not in kept
    assert DEVICE not in kept
    assert DEVICE not in (stack.logs / "relay.out").read_text()


def test_a_replay_through_the_relay_appends_nothing(
    stack_of: Callable[..., Stack], redis_db: Any
) -> None:
    stack = stack_of(1)
    wide = stack.define()
    sealed = sealed_upload(stack, [build_report(wide, i) for i in range(5)])
    first, again = relay_post(stack.relay_url, sealed), relay_post(stack.relay_url, sealed)
    assert first.status_code == again.status_code == 200
    assert len(stream(redis_db, wide)) == 5


def test_after_a_rotation_the_sdk_fetches_the_keys_again_and_delivers(
    stack_of: Callable[..., Stack], redis_db: Any
) -> None:
    stack = stack_of(1)
    wide = stack.define()
    client = Client(stack.url, relay=stack.relay_url, session=device_session(), flush_at=1000)
    try:
        client.report("app.wide", "v1")
        assert client.flush(timeout=20)
        rotate = [
            sys.executable,
            "-m",
            "ldp_server",
            "keys",
            "rotate",
            "--redis-url",
            redis_db.url,
            "--overlap",
            "0",
        ]
        done = subprocess.run(rotate, cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        time.sleep(KEY_CACHE_SECONDS + 0.5)  # the collector's reading of the keys expires
        client.report("app.wide", "v2")
        assert client.flush(timeout=20)
        stats = client.stats()
        assert stats["accepted"] == 2 and not any(stats["dropped"].values()), stats
        assert client._transport.key_fetches == 2  # type: ignore[attr-defined]
    finally:
        client.shutdown()
    assert len(stream(redis_db, wide)) == 2


class Tampering(BaseHTTPRequestHandler):
    """A relay that flips one bit of every ciphertext after the first ``spared`` before
    forwarding it."""

    target = ""
    spared = 0

    def do_POST(self) -> None:  # noqa: N802
        body = bytearray(self.rfile.read(int(self.headers["Content-Length"])))
        cls = type(self)
        if cls.spared > 0:
            cls.spared -= 1
        else:
            body[-5] ^= 0x01
        answer = requests.post(
            self.target, data=bytes(body), headers={"Content-Type": REQUEST_MEDIA_TYPE}, timeout=10
        )
        self.send_response(answer.status_code)
        self.send_header("Content-Type", answer.headers["Content-Type"])
        self.send_header("Content-Length", str(len(answer.content)))
        self.end_headers()
        self.wfile.write(answer.content)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_tampering_relay_gets_a_400_and_nothing_is_appended(
    stack_of: Callable[..., Stack], redis_db: Any
) -> None:
    """The definition fetch (the first sealed request) is let through; the upload is
    tampered with. A tampered definition fetch is the collector unreachable, never an
    unknown metric (the gateway's 400 says nothing about the metric)."""
    stack = stack_of(1)
    wide = stack.define()
    handler = type("ToGateway", (Tampering,), {"target": stack.url + GATEWAY_PATH, "spared": 1})
    server = serve(handler)
    relay = f"http://127.0.0.1:{server.server_port}/"
    client = Client(stack.url, relay=relay, session=device_session(), flush_at=1000)
    try:
        assert client.report("app.wide", "v3")
        client.flush(timeout=20)
        stats = client.stats()
        assert stats["last_error"] == "HTTP 400" and stats["dropped"]["rejected"] == 1, stats
    finally:
        client.shutdown()
    client = Client(stack.url, relay=relay, session=device_session(), flush_at=1000)
    try:
        assert not client.report("app.wide", "v4")
        dropped = client.stats()["dropped"]
        assert dropped["unreachable"] == 1 and dropped["unknown_metric"] == 0, dropped
    finally:
        client.shutdown()
        server.shutdown()
    assert stream(redis_db, wide) == []


def spearman(order: list[int]) -> float:
    n = len(order)
    return 1 - 6 * sum((r - v) ** 2 for r, v in enumerate(order)) / (n * (n * n - 1))


def test_stream_order_is_not_arrival_order_and_a_crash_loses_no_pooled_report(
    stack_of: Callable[..., Stack], redis_db: Any
) -> None:
    """n = 200 labelled reports through the relay, one per request; the collector is
    killed (SIGKILL) after 150 were acknowledged and held in the pool, and a new one takes
    the rest. Under a uniform permutation Spearman's ρ has mean 0 and variance 1/(n − 1):
    |ρ| ≤ 5/√(n − 1) fails with probability below 10⁻⁶."""
    n = 200
    stack = stack_of(n, relay_rate=0)
    wide = stack.define()
    labelled = [build_report(wide, 0) | {"payload": {"v": i}} for i in range(n)]
    for i, report in enumerate(labelled):
        if i == 150:
            assert stream(redis_db, wide) == []  # all held in the pool
            stack.kill_collector()
            stack.start_collector()
        answer = relay_post(stack.relay_url, sealed_upload(stack, [report]))
        assert answer.status_code == 200, answer.text
    order = stream(redis_db, wide)
    assert sorted(order) == list(range(n))  # every acknowledged report, once
    assert abs(spearman(order)) <= 5 / math.sqrt(n - 1), spearman(order)


def test_the_per_device_limit_is_the_relays(stack_of: Callable[..., Stack], redis_db: Any) -> None:
    """The relay sees the device's address and limits it (here 2 requests at once, then 2
    a second): the third of a quick burst gets 429 with Retry-After from the relay."""
    stack = stack_of(1, relay_rate=2)
    wide = stack.define()
    sealed = [sealed_upload(stack, [build_report(wide, 0)]) for _ in range(3)]
    answers = [relay_post(stack.relay_url, s) for s in sealed]
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert answers[2].headers["Retry-After"] == "1"
    assert "per source" in answers[2].json()["details"][0]
    assert len(stream(redis_db, wide)) == 2


def test_keys_are_fetched_apart_from_the_uploads_never_just_before_one(
    fronted: Fronted, redis_db: Any
) -> None:
    """The collector sees the device's key fetches (directly) and the relayed uploads: a
    fetch right before an upload would tie the upload to the device's address. Fails on
    the old SDK, which fetched the keys inside the first upload and on every upload that
    found them an hour old."""
    from client_sdk.ohttp.transport import KEYS_TTL, REFRESH_DELAY

    stack, front, seen, now = fronted.stack, fronted.front, fronted.seen, fronted.now
    wide = stack.define()

    def fetches() -> list[float]:
        return [t for t, method, path, _ in seen if method == "GET" and path == GATEWAY_PATH]

    def wait_for_fetches(count: int) -> None:
        deadline = time.monotonic() + 15
        while len(fetches()) < count:
            assert time.monotonic() < deadline, seen
            time.sleep(0.05)

    client = Client(
        front, relay=stack.relay_url, session=device_session(), flush_at=1, clock=lambda: now[0]
    )
    try:
        wait_for_fetches(1)  # when the client is made, before any report
        now[0] = 30.0
        client.report("app.wide", "v1")
        assert client.flush(timeout=20)
        now[0] = 30.0 + KEYS_TTL + 1  # the keys have expired: used, refreshed later
        expired_upload = now[0]
        client.report("app.wide", "v2")
        assert client.flush(timeout=20)
        assert len(fetches()) == 1, seen
        least, spread = REFRESH_DELAY
        now[0] = expired_upload + least - 1
        time.sleep(1.5)  # the key thread re-reads the clock at least every second
        assert len(fetches()) == 1, seen
        now[0] = expired_upload + least + spread + 1
        wait_for_fetches(2)
        now[0] += 30
        client.report("app.wide", "v3")
        assert client.flush(timeout=20)
        stats = client.stats()
        assert stats["accepted"] == 3 and not any(stats["dropped"].values()), stats
    finally:
        client.shutdown()
    uploads = [t for t, method, path, _ in seen if method == "POST" and path == GATEWAY_PATH]
    # Three uploads and two definition fetches, sealed through the relay too (the first
    # report's, and the second's: its definition had expired, metrics_ttl).
    assert len(uploads) == 5 and len(fetches()) == 2, seen
    for upload in uploads:
        assert all(abs(upload - fetch) >= least for fetch in fetches()), seen
    assert len(stream(redis_db, wide)) == 3


def test_with_a_relay_the_device_never_reaches_the_collector_while_it_reports(
    fronted: Fronted, redis_db: Any
) -> None:
    """The collector (behind a recording front) sees the device's address only on the key
    fetch made when the client is made: every definition fetch (the first report of a
    metric, and again after ``metrics_ttl``) goes through the relay like the uploads.
    Fails on the old SDK, which fetched each definition directly on the reporting thread
    just before the relayed upload that carried it."""
    stack, front, seen, now = fronted.stack, fronted.front, fronted.seen, fronted.now
    wide = stack.define()
    client = Client(
        front,
        relay=stack.relay_url,
        session=device_session(),
        flush_at=1,
        clock=lambda: now[0],
        metrics_ttl=300,
    )
    try:
        deadline = time.monotonic() + 15
        while not any(peer == DEVICE for *_, peer in seen):
            assert time.monotonic() < deadline, seen
            time.sleep(0.05)
        made = len(seen)
        for at, value in ((30.0, "v1"), (60.0, "v2"), (400.0, "v3")):  # 400: the TTL is past
            now[0] = at
            assert client.report("app.wide", value)
            assert client.flush(timeout=20)
        stats = client.stats()
        assert stats["accepted"] == 3 and not any(stats["dropped"].values()), stats
    finally:
        client.shutdown()
    assert [(m, p) for _, m, p, peer in seen[:made] if peer == DEVICE] == [("GET", GATEWAY_PATH)]
    assert [r for r in seen[made:] if r[3] == DEVICE] == [], seen
    relayed = [(m, p) for _, m, p, peer in seen[made:] if peer != DEVICE]
    assert relayed == [("POST", GATEWAY_PATH)] * 5, seen  # 2 definitions, 3 uploads
    assert len(stream(redis_db, wide)) == 3


def test_pinned_keys_are_never_fetched(stack_of: Callable[..., Stack], redis_db: Any) -> None:
    stack = stack_of(1)
    wide = stack.define()
    with urllib.request.urlopen(stack.url + GATEWAY_PATH, timeout=10) as answer:
        published = answer.read()
    client = Client(
        stack.url, relay=stack.relay_url, session=device_session(), relay_keys=published
    )
    try:
        client.report("app.wide", "v1")
        assert client.flush(timeout=20)
        assert client.stats()["accepted"] == 1
        assert client._transport.key_fetches == 0  # type: ignore[attr-defined]
    finally:
        client.shutdown()
    assert len(stream(redis_db, wide)) == 1

"""A real ``ldp relay`` for tests (its own process, stopped after), a recording front for
the collector (who reached it, when, with what), sealed uploads and their posting to an
app's gateway through its test client, and aged shuffle pools."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import requests
from flask.testing import FlaskClient

from client_sdk.ohttp import bhttp
from client_sdk.ohttp.encapsulation import ClientContext, encapsulate_request
from client_sdk.ohttp.keys import (
    GATEWAY_PATH,
    KEYS_MEDIA_TYPE,
    REQUEST_MEDIA_TYPE,
    RESPONSE_MEDIA_TYPE,
    KeyConfig,
    decode_key_configs,
)
from ldp_store import keys
from ldp_store.embedded import free_port

ROOT = Path(__file__).resolve().parent.parent


def run_relay(
    gateway: str, cors_origins: str = "", *options: str, log: Path | None = None
) -> Iterator[str]:
    """Run ``ldp relay`` for ``gateway`` (one worker, more ``options`` if given); yield its
    URL once it answers; stop it. With ``log``, all it prints goes to that file."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LDP_")}
    args = ["--gateway", gateway, "--port", str(port), "--workers", "1", *options]
    if cors_origins:
        args += ["--cors-origins", cors_origins]
    out = open(log, "wb") if log else None  # noqa: SIM115 (the child keeps its own copy)
    process = subprocess.Popen(
        [sys.executable, "-m", "ldp_server", "relay", *args],
        cwd=ROOT,
        env=env,
        stdout=out or subprocess.DEVNULL,
        stderr=subprocess.STDOUT if out else subprocess.PIPE,
        start_new_session=True,
    )
    if out:
        out.close()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2):
                break
        except OSError:
            if process.poll() is not None:
                said = process.stderr.read().decode() if process.stderr else ""
                err = log.read_text() if log else said
                raise AssertionError(f"ldp relay exited: {err}") from None
            assert time.monotonic() < deadline, "ldp relay did not start"
            time.sleep(0.2)
    try:
        yield url + "/"
    finally:
        process.terminate()
        process.wait(timeout=30)


class Recording(BaseHTTPRequestHandler):
    """In front of the collector: forwards every request and records, for each, the
    device's (injected) clock when it arrived, the method, the path and the peer's
    address (the device's, or the relay's)."""

    target = ""
    clock: Callable[[], float] = time.monotonic
    seen: list[tuple[float, str, str, str]] = []

    def forward(self) -> None:
        self.seen.append((self.clock(), self.command, self.path, self.client_address[0]))
        size = int(self.headers.get("Content-Length") or 0)
        headers = {k: v for k, v in self.headers.items() if k.lower() in ("content-type", "accept")}
        answer = requests.request(
            self.command,
            self.target + self.path,
            data=self.rfile.read(size) if size else None,
            headers=headers,
            timeout=10,
        )
        self.send_response(answer.status_code)
        for name in ("Content-Type", "Cache-Control", "Retry-After"):
            if name in answer.headers:
                self.send_header(name, answer.headers[name])
        self.send_header("Content-Length", str(len(answer.content)))
        self.end_headers()
        self.wfile.write(answer.content)

    do_GET = do_POST = do_PUT = forward  # noqa: N815

    def log_message(self, *args: Any) -> None:
        pass


def age_pool(redis: Any, name: str, version: int, seconds: float, shard: int = 0) -> int:
    """Make a shuffle pool's reports look ``seconds`` older (their entry ids are their
    arrival times), as if it had waited that long: a pool a collector left before a
    restart, or one of a metric with little traffic. Returns how many it holds."""
    pool = keys.pool_key(name, version, shard)
    entries = redis.xrange(pool)
    born = int((time.time() - seconds) * 1000)
    pipe = redis.pipeline(transaction=True)
    pipe.delete(pool)
    for i, (_, fields) in enumerate(entries):
        pipe.xadd(pool, fields, id=f"{born}-{i + 1}")
    pipe.execute()
    return len(entries)


def key_config(client: FlaskClient) -> KeyConfig:
    answer = client.get(GATEWAY_PATH)
    assert answer.status_code == 200
    assert answer.mimetype == KEYS_MEDIA_TYPE
    return decode_key_configs(answer.data)[0]


def seal(
    config: KeyConfig, body: bytes, path: str = "/v1/reports", method: str = "POST"
) -> tuple[bytes, ClientContext]:
    request = bhttp.BinaryRequest(
        method, "https", "collector.example", path, (("content-type", "application/json"),), body
    )
    return encapsulate_request(config, bhttp.encode_request(request))


def post(client: FlaskClient, sealed: bytes, **headers: str) -> Any:
    return client.post(
        GATEWAY_PATH, data=sealed, headers={"Content-Type": REQUEST_MEDIA_TYPE, **headers}
    )


def opened(answer: Any, context: ClientContext) -> bhttp.BinaryResponse:
    assert answer.status_code == 200, answer.data
    assert answer.mimetype == RESPONSE_MEDIA_TYPE
    return bhttp.decode_response(context.decapsulate_response(answer.data))


def sealed_reports(config: KeyConfig, reports: list[Any]) -> tuple[bytes, ClientContext]:
    """``POST /v1/reports`` of ``reports`` encapsulated under the gateway key ``config``,
    as a device sends it through a relay, and the context that opens the answer."""
    return seal(config, json.dumps({"reports": reports}).encode())


def relay_reports(client: FlaskClient, reports: list[Any], per_request: int = 1) -> None:
    """Send ``reports`` sealed through the app's gateway, as a relay forwards them."""
    config = key_config(client)
    for i in range(0, len(reports), per_request):
        sealed, context = sealed_reports(config, reports[i : i + per_request])
        assert opened(post(client, sealed), context).status == 202

"""A real ``ldp relay`` for tests (its own process, stopped after), a recording front
for the collector (who reached it, when, with what), and sealed uploads."""

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

from client_sdk.ohttp import bhttp
from client_sdk.ohttp.encapsulation import ClientContext, encapsulate_request
from client_sdk.ohttp.keys import KeyConfig
from ldp_store.embedded import free_port

ROOT = Path(__file__).resolve().parent.parent


def run_relay(gateway: str, cors_origins: str = "", *options: str) -> Iterator[str]:
    """Run ``ldp relay`` for ``gateway`` (one worker, more ``options`` if given); yield its
    URL once it answers; stop it."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LDP_")}
    args = ["--gateway", gateway, "--port", str(port), "--workers", "1", *options]
    if cors_origins:
        args += ["--cors-origins", cors_origins]
    process = subprocess.Popen(
        [sys.executable, "-m", "ldp_server", "relay", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2):
                break
        except OSError:
            if process.poll() is not None:
                err = process.stderr.read().decode() if process.stderr else ""
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


def sealed_reports(config: KeyConfig, reports: list[Any]) -> tuple[bytes, ClientContext]:
    """``POST /v1/reports`` of ``reports`` encapsulated under the gateway key ``config``,
    as a device sends it through a relay, and the context that opens the answer."""
    inner = bhttp.BinaryRequest(
        "POST",
        "https",
        "collector.example",
        "/v1/reports",
        (("content-type", "application/json"),),
        json.dumps({"reports": reports}).encode(),
    )
    return encapsulate_request(config, bhttp.encode_request(inner))

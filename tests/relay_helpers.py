"""A real ``ldp relay`` for tests: its own process, stopped after."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from ldp_store.embedded import free_port

ROOT = Path(__file__).resolve().parent.parent


def run_relay(gateway: str, cors_origins: str = "") -> Iterator[str]:
    """Run ``ldp relay`` for ``gateway``; yield its URL once it answers; stop it."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LDP_")}
    args = ["--gateway", gateway, "--port", str(port), "--workers", "1"]
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

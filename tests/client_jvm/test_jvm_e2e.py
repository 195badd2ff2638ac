"""The JVM SDK end to end with the real pieces: ``ldp serve`` (collector, aggregator, an
embedded Redis), a JVM app (client_jvm/src/test/java/.../E2eReporter.java) with a durable
store, directly and through a real ``ldp relay`` (Oblivious HTTP).

The app reports 10,000 values of three kinds (categorical, numeric, string), is killed
with SIGKILL while its batches are being delivered, and is started again: it delivers what
the first run left (a batch in flight when it died is sent again, and the collector drops
the copies by report id), and the aggregator counts every report exactly once.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jvm_helpers import built
from relay_helpers import run_relay

from client_sdk.ohttp.keys import GATEWAY_PATH
from ldp_server.serve import Server
from tests.http_helpers import call as api

REPORTS = 10_000
SPECS = {
    "jvm.theme": {"domain": ["light", "dark", "auto"], "epsilon": 1.0},
    "jvm.minutes": {"kind": "numeric", "range": [0, 120], "epsilon": 1.0},
    "jvm.search": {"kind": "string", "max_length": 8, "epsilon": 4.0},
}
EXPECTED = {"jvm.theme": 3334, "jvm.minutes": 3333, "jvm.search": 3333}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LDP_SHUFFLE_MIN_BATCH", "1")  # relayed reports reach the stream at once
        mp.delenv("LDP_ADMIN_TOKEN", raising=False)
        data = tmp_path_factory.mktemp("jvm-e2e")
        with Server(port=0, data_dir=data, web_workers=1, aggregators=1, quiet=True) as s:
            yield s


@pytest.fixture(scope="module")
def relay(server: Server) -> Iterator[str]:
    """A real ``ldp relay`` (its own process) in front of the collector's gateway."""
    yield from run_relay(f"{server.url}{GATEWAY_PATH}")


def _define(server: Server, suffix: str) -> dict[str, str]:
    """The three metrics under names of this test's own (so the two tests can share a server)."""
    names = {}
    for name, spec in SPECS.items():
        api(f"{server.url}/v1/metrics/{name}{suffix}", "PUT", spec, server.admin_token)
        names[name] = name + suffix
    return names


def _counted(server: Server, names: dict[str, str]) -> dict[str, int]:
    return {name: api(f"{server.url}/v1/estimates/{full}")["n"] for name, full in names.items()}


def _app(*args: str) -> subprocess.Popen[str]:
    build = built()
    return subprocess.Popen(
        build.java_command("org.ldptelemetry.E2eReporter", *args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _run_killed_and_restarted(
    server: Server, tmp_path: Path, suffix: str, *relay: str
) -> dict[str, Any]:
    """Report REPORTS values, SIGKILL the app once a batch is delivered, restart it."""
    names = _define(server, suffix)
    store = tmp_path / "store"
    first = _app(server.url, str(store), str(REPORTS), suffix or "-", *relay)
    assert first.stdout is not None
    killed_at = None
    for line in first.stdout:
        if line.startswith("queued "):
            assert line.split()[1] == str(REPORTS), line
        if line.startswith("sent ") and int(line.split()[1]) > 0:
            killed_at = int(line.split()[1])
            first.send_signal(signal.SIGKILL)  # mid-upload: the next batch is on its way
            break
    first.wait(timeout=120)
    assert killed_at is not None, (
        first.stderr.read() if first.stderr else ""
    ) + "no batch was delivered"
    assert first.returncode == -signal.SIGKILL
    assert killed_at < REPORTS, "killed before everything was sent"
    second = _app(server.url, str(store), "0", suffix or "-", *relay)
    out, err = second.communicate(timeout=600)
    assert second.returncode == 0, out + err
    done = next(line for line in out.splitlines() if line.startswith("done "))
    assert done.startswith("done true "), done
    stats = json.loads(done.split(" ", 2)[2])
    assert stats["queued"] == 0 and stats["sent"] >= REPORTS - killed_at - 500, stats
    # Exactly once: every report counted, none twice (a resent batch's copies are dropped).
    deadline = time.monotonic() + 300
    while True:
        counted = _counted(server, names)
        assert all(counted[k] <= EXPECTED[k] for k in EXPECTED), counted
        if counted == EXPECTED:
            break
        assert time.monotonic() < deadline, f"counted {counted}, expected {EXPECTED}"
        time.sleep(0.5)
    return {"killed_at": killed_at, "stats": stats}


def test_a_jvm_app_killed_mid_upload_restarts_and_every_report_counts_once(
    server: Server, tmp_path: Path
) -> None:
    _run_killed_and_restarted(server, tmp_path, "")


def test_the_same_through_a_real_oblivious_http_relay(
    server: Server, relay: str, tmp_path: Path
) -> None:
    before = _sealed(server)
    _run_killed_and_restarted(server, tmp_path, ".relayed", relay)
    # Every batch (500 reports each) and the three definition fetches were sealed requests.
    assert _sealed(server) - before >= REPORTS // 500 + 3


def _sealed(server: Server) -> float:
    """Sealed requests the collector's gateway opened and served (its Prometheus counter)."""
    with urllib.request.urlopen(f"{server.url}/metrics", timeout=30) as r:
        text = r.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith('ldp_ohttp_requests_total{outcome="ok"}')
    )

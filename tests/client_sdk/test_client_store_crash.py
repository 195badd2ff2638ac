"""Kill the app in the middle of a flush, restart it: every report made counts exactly once.

The real stack (``ldp_server.serve.Server``: gunicorn collector, aggregator workers,
embedded Redis) and a real app process using ``Client(url, storage_dir=...)``. The app
makes its reports, records every one of them (read back from its store before the first
upload) to a side file, then flushes in small batches and is SIGKILLed mid-flush — by the
test after a few uploads, or by itself right after a 2xx arrived and before the reports
were deleted (the lost-acknowledgement case, which forces a resend). A second run of the
app on the same directory delivers the rest. The server's n and support counts must
equal those computed from the reports made: more would be double counting, fewer a loss.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis
from test_pipeline_e2e import offline_counts, put_metric, wait_counted

from aggregator.query.window import read_counts
from ldp_server.serve import Server
from ldp_store.registry import Registry

ROOT = Path(__file__).resolve().parents[2]

METRICS = {
    "crash.theme": {"domain": ["light", "dark", "auto"], "epsilon": 1.0, "mechanism": "grr"},
    "crash.screen": {
        "domain": [f"screen-{i}" for i in range(64)],
        "epsilon": 1.0,
        "mechanism": "oue",
    },
}

APP = r"""
import json, os, random, signal, sqlite3, sys, time
from client_sdk import Client
from client_sdk.store import FILENAME
from client_sdk.transport import CallableTransport, HTTPTransport

url, storage, side, mode, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
metrics = json.loads(sys.argv[6])
http = HTTPTransport(url, timeout=10)
posts = 0

def transport(method, path, body):
    global posts
    if method == "GET":
        return http.get(path)
    response = http.post(path, body)
    posts += 1
    print(f"POST {response.status}", flush=True)
    if mode == "self-kill" and posts == 3 and 200 <= response.status < 300:
        os.kill(os.getpid(), signal.SIGKILL)  # the 2xx arrived; the reports are not deleted
    time.sleep(0.02)  # a slow network: the kill lands mid-flush
    return response

client = Client(url, transport=CallableTransport(transport), storage_dir=storage,
                flush_at=10**9, flush_interval=3600, max_batch_reports=40)
if mode == "restart":
    delivered = client.flush(timeout=120)
    print(json.dumps({"delivered": delivered, "stats": client.stats()}), flush=True)
    client.shutdown()
    sys.exit(0)
picker = random.Random(7)
for i in range(n):
    name = picker.choice(sorted(metrics))
    domain = metrics[name]
    assert client.report(name, domain[picker.randrange(len(domain))])
with sqlite3.connect(os.path.join(storage, FILENAME)) as conn:
    made = [json.loads(d) for (d,) in conn.execute("SELECT data FROM reports ORDER BY id")]
with open(side + ".tmp", "w") as f:
    json.dump(made, f)
    f.flush()
    os.fsync(f.fileno())
os.replace(side + ".tmp", side)
print("READY", len(made), flush=True)
client.flush(timeout=120)
print("FLUSHED", flush=True)
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("crash-stack")
    with Server(port=0, data_dir=data, web_workers=2, aggregators=2, quiet=True) as s:
        for name, spec in METRICS.items():
            put_metric(s, name, spec)
        yield s


def run_app(
    server: Server, storage: Path, side: Path, mode: str, n: int = 0
) -> subprocess.Popen[str]:
    domains = json.dumps({name: spec["domain"] for name, spec in METRICS.items()})
    return subprocess.Popen(
        [sys.executable, "-c", APP, server.url, str(storage), str(side), mode, str(n), domains],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def counted(server: Server) -> tuple[redis.Redis, Registry]:
    r = redis.Redis.from_url(server.redis_url or "")
    return r, Registry(r)


def baseline(server: Server) -> dict[str, tuple[int, np.ndarray]]:
    r, registry = counted(server)
    out = {}
    for name in METRICS:
        definition = registry.get(name)
        assert definition is not None
        c = read_counts(r, definition)
        out[name] = (c.n, np.asarray(c.support))
    return out


@pytest.mark.parametrize("kill", ["sigkill-by-the-test", "self-kill-after-a-2xx"])
def test_kill_mid_flush_then_restart_delivers_every_report_exactly_once(
    server: Server, tmp_path: Path, kill: str
) -> None:
    before = baseline(server)
    storage, side = tmp_path / "app-store", tmp_path / "made.json"
    mode = "kill" if kill == "sigkill-by-the-test" else "self-kill"
    app = run_app(server, storage, side, mode, n=1200)  # 30 uploads of 40
    assert app.stdout is not None
    line = app.stdout.readline()
    assert line.startswith("READY"), line + (app.stderr.read() if app.stderr else "")
    posts = 0
    for line in app.stdout:
        if line.startswith("POST"):
            assert line.strip() == "POST 202"
            posts += 1
            if mode == "kill" and posts == 5:
                app.send_signal(signal.SIGKILL)
                break
    app.wait(timeout=60)  # reaped: its leases are released at once on restart
    assert app.returncode == -signal.SIGKILL
    made: list[dict[str, Any]] = json.loads(side.read_text())
    assert len(made) == 1200

    again = run_app(server, storage, side, "restart")
    out, err = again.communicate(timeout=180)
    assert again.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["delivered"] is True and result["stats"]["queued"] == 0
    assert 0 < result["stats"]["sent"] < 1200  # the kill left part of the flush undone
    if mode == "self-kill":
        # The batch whose 2xx was never processed was sent again, and discarded as a replay.
        assert result["stats"]["duplicates"] == 40

    r, registry = counted(server)
    definitions = [d for d in (registry.get(name) for name in METRICS) if d is not None]
    by_metric: dict[str, list[dict[str, Any]]] = {name: [] for name in METRICS}
    for report in made:
        by_metric[report["metric"]].append(report)
    expected_n = {name: before[name][0] + len(reports) for name, reports in by_metric.items()}
    wait_counted(r, definitions, expected_n)
    time.sleep(0.5)  # anything counted twice would show up now
    for d in definitions:
        counts = read_counts(r, d)
        assert counts.n == expected_n[d.name]
        np.testing.assert_array_equal(
            np.asarray(counts.support) - before[d.name][1], offline_counts(d, by_metric[d.name])
        )

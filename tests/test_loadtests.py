"""The Locust load tests run in the suite, so the locustfile, its runner and the SDK
encoder they use cannot rot unnoticed.

A real ``ldp serve`` (gunicorn web workers, an aggregator, an embedded Redis) on a free
port with the per-source limits off (every Locust user comes from 127.0.0.1), and a small
headless load through ``python -m loadtests.run --host/--port`` against it: a few
thousand simulated devices, well under a minute. The runner's own checks decide its exit
code (no failed request, the aggregator's ``n`` equal to the accepted reports exactly, no
improbable number of interval misses); the test reads its ``summary.json`` and asserts
them again. The p95 threshold is lifted: a shared test machine is no place to time.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from ldp_store.embedded import free_port
from tests.process_helpers import stop

ROOT = Path(__file__).resolve().parents[1]
DEVICES = 3_000
PER_BATCH = 50
USERS = 4


def test_a_small_headless_locust_load_against_ldp_serve_passes_its_checks(
    tmp_path: Path,
) -> None:
    port = free_port()
    env = {**os.environ, "COLUMNS": "200", "LDP_SOURCE_REQUESTS_PER_SECOND": "0",
           "LDP_SOURCE_REPORTS_PER_MINUTE": "0"}  # fmt: skip
    env.pop("REDIS_URL", None)
    serve = subprocess.Popen(
        [sys.executable, "-m", "ldp_server", "serve", "--port", str(port)]
        + ["--data-dir", str(tmp_path / "data"), "--aggregators", "1", "--web-workers", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    try:
        assert serve.stdout is not None
        line = serve.stdout.readline()
        found = re.search(r"running \(Redis: (\S+)\)", line)
        assert found, line + (serve.stderr.read() if serve.stderr else "")
        # The printed URL hides the embedded Redis's password; the data dir holds it (0600).
        redis_url = (tmp_path / "data" / "redis-url").read_text().strip()
        out = tmp_path / "load"
        load = subprocess.run(
            [sys.executable, "-m", "loadtests.run", "--host", "127.0.0.1", "--port", str(port)]
            + ["--redis-url", redis_url, "--devices", str(DEVICES), "--users", str(USERS)]
            + ["--devices-per-batch", str(PER_BATCH), "--time", "50s"]
            + ["--max-p95-ms", "1000000", "--drain-timeout", "60", "--out", str(out)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=150,
        )
        log = (out / "locust.log").read_text() if (out / "locust.log").exists() else ""
        assert load.returncode == 0, load.stdout + load.stderr + log[-3000:]
        assert "PASSED" in load.stdout
        summary = json.loads((out / "summary.json").read_text())
        assert summary["devices"] == summary["devices_target"] == DEVICES
        assert summary["requests"] == DEVICES // PER_BATCH and summary["failures"] == 0
        assert summary["rejected"] == 0 and summary["accepted"] > 0
        # One report per metric per device, each counted exactly once.
        counted = summary["counted"]
        assert sum(counted.values()) == summary["accepted"] + summary["duplicates"]
        assert all(n == DEVICES for n in counted.values()), counted
        assert summary["intervals"] > 0 and summary["misses"] <= summary["miss_limit"]
        assert summary["failed"] == []
    finally:
        stop(serve, signal.SIGTERM, 30)

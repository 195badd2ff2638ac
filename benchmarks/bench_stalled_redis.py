"""How long a client waits for its 503 when Redis is stalled: before and after issue 12.

Run on purpose, not as a test::

    .venv/bin/python benchmarks/bench_stalled_redis.py            # ~40 s (the old setting
                                                                  # waits 15 s per request)
    .venv/bin/python benchmarks/bench_stalled_redis.py --after-only

A real redis-server (:class:`~ldp_store.embedded.EmbeddedRedis`) and the composed web app
(:func:`ldp_server.app.create_server_app`: collector plus estimates API) served
over real HTTP on loopback by werkzeug's threaded server. For each Redis client setting —
*before* (connect 2 s, read 5 s, 2 retries that also retry timeouts: the collector's
settings until issue 12) and *after* (:func:`collector.open_redis`) — it times, with Redis
answering, the median of 200 uploads of 100 reports (what the timeouts must not slow or
break), then SIGSTOPs Redis and times one POST /v1/reports, GET /readyz and
GET /v1/estimates/<metric>, then SIGCONTs it (always, in a ``finally``).

The machine is shared: the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402
from werkzeug.serving import make_server  # noqa: E402

import collector  # noqa: E402
from client_sdk.transport import DEFAULT_TIMEOUT  # noqa: E402
from client_sdk.wire import MetricDefinition, build_report  # noqa: E402
from ldp_server.app import create_server_app  # noqa: E402
from ldp_store import connection  # noqa: E402
from ldp_store.embedded import EmbeddedRedis  # noqa: E402

TOKEN = "bench-admin-token"
SPEC = {"domain": ["light", "dark", "auto"], "epsilon": 1.0, "mechanism": "grr"}


def open_redis_before(url: str) -> redis.Redis:
    """The collector's Redis client before issue 12: 3 tries × a 5 s read."""
    return connection.connect(url, socket_connect_timeout=2.0, socket_timeout=5.0, retries=2)


def call(url: str, method: str = "GET", body: Any = None) -> tuple[int, str | None, float]:
    """(status, Retry-After, seconds) of one request; the client waits up to 60 s."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    request.add_header("Authorization", f"Bearer {TOKEN}")
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            response.read()
            status, retry_after = response.status, response.headers.get("Retry-After")
    except urllib.error.HTTPError as exc:
        exc.read()
        status, retry_after = exc.code, exc.headers.get("Retry-After")
    return status, retry_after, time.perf_counter() - started


def measure(label: str, server: EmbeddedRedis) -> dict[str, float]:
    """One setting: the normal upload median, then each route's answer under SIGSTOP."""
    server.client().flushall()
    app = create_server_app({"REDIS_URL": server.url, "ADMIN_TOKEN": TOKEN})
    http = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{http.server_port}"
    rng = random.Random(1)
    try:
        status, _, _ = call(f"{base}/v1/metrics/app.theme", "PUT", SPEC)
        assert status in (200, 201), status
        with urllib.request.urlopen(f"{base}/v1/metrics/app.theme") as response:
            definition = MetricDefinition.from_dict(json.load(response))
        normal = []
        for _ in range(200):
            batch = [build_report(definition, rng.randrange(3), rng) for _ in range(100)]
            status, _, seconds = call(f"{base}/v1/reports", "POST", {"reports": batch})
            assert status == 202, status
            normal.append(seconds)
        figures = {"POST 100 reports, Redis answering (median)": statistics.median(normal)}
        assert server.process is not None
        os.kill(server.process.pid, signal.SIGSTOP)
        try:
            batch = [build_report(definition, rng.randrange(3), rng) for _ in range(100)]
            for name, url, method, body in [
                ("POST /v1/reports", f"{base}/v1/reports", "POST", {"reports": batch}),
                ("GET /readyz", f"{base}/readyz", "GET", None),
                ("GET /v1/estimates/app.theme", f"{base}/v1/estimates/app.theme", "GET", None),
            ]:
                status, retry_after, seconds = call(url, method, body)
                figures[f"{name}, Redis stalled -> {status} Retry-After {retry_after}"] = seconds
        finally:
            os.kill(server.process.pid, signal.SIGCONT)
        status, _, _ = call(f"{base}/readyz")
        assert status == 200, status
    finally:
        http.shutdown()
    print(f"\n{label}")
    for name, seconds in figures.items():
        print(f"  {name:<62} {seconds * 1000:8.1f} ms")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--after-only", action="store_true", help="skip the old setting")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    print(
        f"collector: connect {collector.CONNECT_TIMEOUT} s, read {collector.SOCKET_TIMEOUT} s, "
        f"{collector.REDIS_RETRIES} retries (connection errors only); longest wait "
        f"{collector.LONGEST_REDIS_WAIT:.1f} s; SDK timeout {DEFAULT_TIMEOUT:.0f} s"
    )
    with tempfile.TemporaryDirectory() as folder:
        server = EmbeddedRedis(Path(folder)).start()
        try:
            if not args.after_only:
                current = collector.open_redis
                collector.open_redis = open_redis_before  # type: ignore[assignment]
                try:
                    measure("before (connect 2 s, read 5 s, 2 retries incl. timeouts)", server)
                finally:
                    collector.open_redis = current  # type: ignore[assignment]
            measure("after (collector.open_redis)", server)
        finally:
            server.stop()
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()

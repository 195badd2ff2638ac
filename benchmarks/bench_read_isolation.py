"""Ingest latency under concurrent expensive reads, and slow-body sockets held (issue 29).

Run on purpose, not as a test, with a checkout of the old code as the yardstick::

    git worktree add --detach /tmp/ldp-main main
    .venv/bin/python benchmarks/bench_read_isolation.py --before /tmp/ldp-main   # ~5 min
    .venv/bin/python benchmarks/bench_read_isolation.py                          # after only

For each tree (``--before``'s, then this one), ``ldp serve`` runs from that tree on
loopback (embedded Redis, 2 web workers, 1 aggregator, no read token: the estimates API
open to anyone, per-source limits off). A string metric (max_length 16, ε = 4: a
discovery costs ~0.7 s of CPU) and a categorical one are defined. Then, for 0/2/4/8
reader threads each asking ``GET /v1/estimates/<string metric>?window=hour:…`` of a
new hour window every time (the attack of issue 29, item 1), one client POSTs one report
at a time on a kept-alive connection for ``--seconds``: its p50/p99/max latency, errors
(timeouts at the SDK's 10 s), and the reads' answers by status are printed. Then the
same with 8 readers asking the ``all`` window of ``--cycle`` string metrics that have
reports, in turn (more windows than a process keeps discoveries of: each read needs
one). Then
``--slow`` sockets each send the headers of a POST declaring ``Content-Length:
1000000`` and one body byte a second: how many the server closed within ``--hold``
seconds and after how long, and the /healthz latency while they were open.

The machine is shared: the load average is printed at each step.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tree_server import load, serve_tree  # noqa: E402  (beside this script)

from client_sdk.wire import MetricDefinition, build_report  # noqa: E402
from tests.http_helpers import call  # noqa: E402

TOKEN = "bench-read-isolation-admin"
STRING = {"kind": "string", "max_length": 16, "epsilon": 4.0}
THEME = {"domain": ["light", "dark", "auto"], "epsilon": 1.0, "mechanism": "grr"}
SDK_TIMEOUT = 10.0


def request(url: str, method: str = "GET", body: Any = None, token: str = "") -> Any:
    return call(url, method, body, token, timeout=60)


def serve(tree: Path, data: Path) -> tuple[subprocess.Popen[bytes], str]:
    settings = dict(
        LDP_ADMIN_TOKEN=TOKEN,
        LDP_SOURCE_REQUESTS_PER_SECOND="0",
        LDP_SOURCE_REPORTS_PER_MINUTE="0",
    )
    return serve_tree(tree, data, settings, seconds=90)


def ingest(url: str, definition: MetricDefinition, seconds: float) -> dict[str, Any]:
    host, port = url.removeprefix("http://").split(":")
    times: list[float] = []
    errors = 0
    conn = http.client.HTTPConnection(host, int(port), timeout=SDK_TIMEOUT)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        body = json.dumps({"reports": [build_report(definition, "dark")]})
        started = time.perf_counter()
        try:
            conn.request("POST", "/v1/reports", body, {"Content-Type": "application/json"})
            reply = conn.getresponse()
            reply.read()
            ok = reply.status == 202
        except (OSError, http.client.HTTPException):
            ok = False
            conn.close()
            conn = http.client.HTTPConnection(host, int(port), timeout=SDK_TIMEOUT)
        times.append(time.perf_counter() - started)
        errors += not ok
        time.sleep(0.02)  # an SDK uploads now and then, not in a tight loop
    conn.close()
    times.sort()
    return {
        "n": len(times),
        "p50": statistics.median(times),
        "p99": times[min(len(times) - 1, int(0.99 * len(times)))],
        "max": times[-1],
        "errors": errors,
    }


def reader(url: str, metric: str, start: int, stop: threading.Event, got: dict[int, int]) -> None:
    """New hour windows of ``metric``; or, for ``metric`` "cycle:K", the ``all`` window of
    K string metrics with reports, in turn (more than the 64 discoveries a process keeps)."""
    hour = start
    host, port = url.removeprefix("http://").split(":")
    cycle = int(metric.removeprefix("cycle:")) if metric.startswith("cycle:") else 0
    while not stop.is_set():
        when = time.gmtime(946684800 + 3600 * hour)  # from 2000-01-01, a new hour each time
        hour += 1
        path = f"/v1/estimates/{metric}?window=" + time.strftime("hour:%Y-%m-%dT%H", when)
        if cycle:
            path = f"/v1/estimates/bench.s{hour % cycle}?window=all"
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        try:
            conn.request("GET", path)
            reply = conn.getresponse()
            reply.read()
            status = reply.status
        except (OSError, http.client.HTTPException):
            status = 0
        finally:
            conn.close()
        got[status] = got.get(status, 0) + 1


def slow_bodies(url: str, count: int, hold: float) -> dict[str, Any]:
    host, port = url.removeprefix("http://").split(":")
    sockets = []
    for _ in range(count):
        s = socket.create_connection((host, int(port)), timeout=10)
        s.sendall(
            b"POST /v1/reports HTTP/1.1\r\nHost: slow\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000000\r\n\r\n{"
        )
        sockets.append(s)
    opened = time.monotonic()
    closed_at: dict[int, float] = {}
    health: list[float] = []
    while len(closed_at) < count and time.monotonic() < opened + hold:
        for i, s in enumerate(sockets):
            if i in closed_at:
                continue
            try:
                s.sendall(b" ")
                s.setblocking(False)
                try:
                    s.recv(4096)  # the 408, or the end
                    gone = True
                except BlockingIOError:
                    gone = False
                s.setblocking(True)
            except OSError:
                gone = True
            if gone:
                closed_at[i] = time.monotonic() - opened
        started = time.perf_counter()
        try:
            request(url + "/healthz")
            health.append(time.perf_counter() - started)
        except OSError:
            health.append(float("inf"))
        time.sleep(1.0)
    for s in sockets:
        s.close()
    held = sorted(closed_at.values())
    return {
        "closed": len(held),
        "median_s": statistics.median(held) if held else None,
        "max_s": held[-1] if held else None,
        "still_open": count - len(held),
        "healthz_max_s": max(health) if health else None,
    }


def run(tree: Path, label: str, args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-iso-") as tmp:
        process, url = serve(tree, Path(tmp) / "data")
        try:
            request(url + "/v1/metrics/bench.term", "PUT", STRING, TOKEN)
            theme = MetricDefinition.from_dict(
                request(url + "/v1/metrics/bench.theme", "PUT", THEME, TOKEN)
            )
            print(f"\n== {label}: {tree} (load {load()})", flush=True)
            levels = [("new hour windows", "bench.term", r) for r in args.readers]
            if args.cycle:
                for i in range(args.cycle):
                    name = f"bench.s{i}"
                    d = MetricDefinition.from_dict(
                        request(url + f"/v1/metrics/{name}", "PUT", STRING, TOKEN)
                    )
                    reports = [build_report(d, f"v{j % 3}") for j in range(20)]
                    request(url + "/v1/reports", "POST", {"reports": reports})
                time.sleep(5.0)  # the aggregator counts them
                levels += [(f"{args.cycle} windows with reports", f"cycle:{args.cycle}", 8)]
            for what, metric, readers in levels:
                stop = threading.Event()
                got: dict[int, int] = {}
                threads = [
                    threading.Thread(target=reader, args=(url, metric, 100_000 * i, stop, got))
                    for i in range(readers)
                ]
                for t in threads:
                    t.start()
                time.sleep(1.0 if readers else 0)
                found = ingest(url, theme, args.seconds)
                stop.set()
                for t in threads:
                    t.join()
                print(
                    f"{label} readers={readers} ({what}): ingest p50 {found['p50'] * 1000:.1f} "
                    f"ms, p99 {found['p99'] * 1000:.1f} ms, max {found['max'] * 1000:.0f} ms, "
                    f"{found['n']} POSTs, {found['errors']} failed; reads by status "
                    f"{dict(sorted(got.items()))}; load {load()}",
                    flush=True,
                )
            if not args.slow:
                return
            held = slow_bodies(url, args.slow, args.hold)
            print(
                f"{label} {args.slow} slow bodies (1 byte/s, observed {args.hold:g} s): "
                f"{held['closed']} closed by the server (median {held['median_s']} s, max "
                f"{held['max_s']} s), {held['still_open']} still open; /healthz max "
                f"{held['healthz_max_s']:.3f} s; load {load()}",
                flush=True,
            )
        finally:
            process.terminate()
            process.wait(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="a checkout of the old code")
    parser.add_argument("--seconds", type=float, default=15.0, help="ingest time per level")
    parser.add_argument("--readers", type=int, nargs="+", default=[0, 2, 4, 8])
    parser.add_argument(
        "--cycle", type=int, default=70, help="string metrics with reports read in turn (0: none)"
    )
    parser.add_argument("--slow", type=int, default=150, help="slow-body sockets")
    parser.add_argument("--hold", type=float, default=75.0, help="seconds to watch them")
    args = parser.parse_args()
    print(f"load average at the start {load()}; cpus {os.cpu_count()}")
    if args.before is not None:
        run(args.before.resolve(), "before", args)
    run(ROOT, "after", args)
    print(f"\nload average at the end {load()}")


if __name__ == "__main__":
    main()

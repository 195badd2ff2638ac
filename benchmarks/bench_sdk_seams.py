"""The Python SDK in real processes: forks beside a reporting thread, a store held busy.

Run on purpose, not as a test::

    .venv/bin/python benchmarks/bench_sdk_seams.py   # 120 forks: ~1 min, + the timeout a hung child
    .venv/bin/python benchmarks/bench_sdk_seams.py --forks 40 --hold 7

(a) Forks: a parent with ``storage_dir`` reports from a thread in a tight loop (its
uploader sending to a real local HTTP collector meanwhile) while the main thread forks
``--forks`` children, one after another. Each child reports once and exits; a child that
has not exited after ``--child-timeout`` seconds is killed and counted *hung*, one whose
``report()`` returned False *unusable*. Then the parent stops, flushes, and the collector
must have received every report that ``report()`` accepted, the children's included.

It also gives the time of the parent's ``os.fork()`` call (the at-fork hooks included).

(b) A store held busy: another process holds the store's write lock for ``--hold``
seconds; a process that has imported the SDK and waited for that moment makes a client
(as at an app's start, its clock 2 days behind) and calls ``report()`` again and again
until the hold is over and 2 s more; the longest call is the figure (each store call
waits at most ``BUSY_TIMEOUT`` for the lock), and the longest after the first (which
also fetches the metric's definition, importing ``requests``). It also says how many
reports were charged on top of a day whose budget is spent (the clock floor, issue 44
item 2), and how many warnings the process printed (issue 36: once per reason).

Figures: ``docs/benchmarks/performance.md`` ("SDKs", "Python").
The speed probe (``sum(range(10**5))``, µs) and the load average are printed as yardsticks.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from client_sdk import Client  # noqa: E402
from client_sdk.store import FILENAME  # noqa: E402
from client_sdk.wire import parse_spec  # noqa: E402

SPEC = {"domain": ["light", "dark", "auto"], "epsilon": 1.0, "mechanism": "grr"}
METRIC = parse_spec("app.theme", SPEC).to_dict()
BUDGETED = parse_spec(
    "app.mode", {**SPEC, "budget": {"reports_per_period": 3, "period": "day"}}
).to_dict()


class _Collector(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.ids: set[str] = set()
        self.lock = threading.Lock()
        self.url = f"http://127.0.0.1:{self.server_address[1]}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        return None  # a child killed mid-request: nothing to report


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Collector

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _answer(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        name = self.path.split("?")[0].rsplit("/", 1)[-1]
        found = {d["name"]: d for d in (METRIC, BUDGETED)}.get(name)
        self._answer(200, found) if found else self._answer(404, {"error": "unknown"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        with self.server.lock:
            self.server.ids.update(r["id"] for r in body["reports"])
        self._answer(202, {"accepted": len(body["reports"])})


def yardstick() -> str:
    start = time.perf_counter()
    sum(range(10**5))
    probe = (time.perf_counter() - start) * 1e6
    return f"load average {os.getloadavg()[0]:.2f}, speed probe {probe:.0f} µs"


def forks(n: int, child_timeout: float) -> dict[str, Any]:
    """(a): fork ``n`` children beside a reporting thread; count hung and unusable ones."""
    collector = _Collector()
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as tmp:
        client = Client(collector.url, storage_dir=tmp, flush_at=20, flush_interval=0.05)
        accepted = [0]
        stop = threading.Event()

        def reporter() -> None:
            while not stop.is_set():
                accepted[0] += client.report("app.theme", "dark")

        assert client.report("app.theme", "dark")
        accepted[0] += 1
        thread = threading.Thread(target=reporter, daemon=True)
        thread.start()
        hung = unusable = 0
        fork_calls: list[float] = []
        for _ in range(n):
            begin = time.perf_counter()
            pid = os.fork()
            if pid == 0:  # the child: report once, say how it went, never return
                code = 3
                try:
                    code = 0 if client.report("app.theme", "light") else 4
                finally:
                    os._exit(code)
            fork_calls.append(time.perf_counter() - begin)
            deadline = time.monotonic() + child_timeout
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    code = os.waitstatus_to_exitcode(status)
                    unusable += code != 0
                    break
                if time.monotonic() > deadline:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    hung += 1
                    break
                time.sleep(0.005)
        stop.set()
        thread.join()
        children = n - hung - unusable
        flushed = client.flush(timeout=30)
        client.shutdown(timeout=5)
        with sqlite3.connect(Path(tmp) / FILENAME) as conn:
            left = conn.execute("SELECT count(*) FROM reports").fetchone()[0]
    collector.shutdown()
    return {
        "forks": n,
        "hung": hung,
        "unusable": unusable,
        "parent_reports": accepted[0],
        "delivered": len(collector.ids),
        "expected": accepted[0] + children,
        "left_in_store": left,
        "flushed": flushed,
        "fork_call_ms_median": round(statistics.median(fork_calls) * 1e3, 1),
        "fork_call_ms_max": round(max(fork_calls) * 1e3, 1),
    }


HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("COMMIT")
"""

REPORTER = """
import json, sys, time
sys.path.insert(0, sys.argv[4])
from client_sdk import Client
print("ready", flush=True)
sys.stdin.readline()  # go: the store is held from now on
back = 2 * 86400.0
start = time.monotonic()
client = Client(sys.argv[1], storage_dir=sys.argv[2], wallclock=lambda: time.time() - back,
                flush_at=10_000, flush_interval=3600.0)
made = time.monotonic() - start
calls = []
end = start + float(sys.argv[3]) + 2.0
while time.monotonic() < end:
    begin = time.monotonic()
    ok = client.report("app.mode", "dark")
    calls.append((time.monotonic() - begin, ok))
print(json.dumps({"made": made, "calls": calls, "stats": client.stats()}))
client.shutdown(timeout=0)
"""


def held_store(hold: float) -> dict[str, Any]:
    """(b): a process starts and reports while another holds the store's write lock."""
    collector = _Collector()
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as tmp:
        first = Client(collector.url, storage_dir=tmp, flush_at=10_000, flush_interval=3600.0)
        spent = [first.report("app.mode", "dark") for _ in range(3)]  # today's budget spent
        assert spent == [True] * 3 and first.flush(timeout=10)
        first.shutdown(timeout=1)
        reporter = subprocess.Popen(
            [sys.executable, "-c", REPORTER, collector.url, tmp, str(hold), str(ROOT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert reporter.stdin is not None and reporter.stdout is not None
        assert reporter.stdout.readline().strip() == "ready"
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(Path(tmp) / FILENAME), str(hold)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        reporter.stdin.write("go\n")
        reporter.stdin.flush()
        out, err = reporter.communicate(timeout=hold + 120)
        holder.wait()
        result = json.loads(out)
        with sqlite3.connect(Path(tmp) / FILENAME) as conn:
            charged = conn.execute(
                "SELECT count(*) FROM reports WHERE metric = 'app.mode'"
            ).fetchone()[0]
    collector.shutdown()
    times = [t for t, _ in result["calls"]]
    return {
        "hold_seconds": hold,
        "client_made_s": round(result["made"], 3),
        "calls": len(times),
        "longest_report_s": round(max(times), 3),
        "first_report_s": round(times[0], 3),
        "longest_later_report_s": round(max(times[1:]), 3),
        "warnings_on_stderr": err.count("ldp-telemetry:"),
        "accepted_over_spent_budget": charged,
        "dropped": {k: v for k, v in result["stats"]["dropped"].items() if v},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--forks", type=int, default=120)
    parser.add_argument("--child-timeout", type=float, default=20.0)
    parser.add_argument("--hold", type=float, default=7.0)
    args = parser.parse_args()
    print(yardstick())
    print(json.dumps({"forks": forks(args.forks, args.child_timeout)}, indent=1))
    print(json.dumps({"held_store": held_store(args.hold)}, indent=1))
    print(yardstick())


if __name__ == "__main__":
    main()

"""The JVM SDK's cost in an app: report() time and allocations, jar size, cold start.

* ``report()``: µs per call, median and p99 of 200,000 calls after 100,000 of warm-up
  (the JIT's), for OUE at k = 1,024 (ε = 1), GRR (k = 8, ε = 1) and a string metric
  (max_length 16, the automatic sketch at ε = 4), in memory and with a storage directory
  (each report then also written to the journal); the bytes the calling thread allocates
  per report (``ThreadMXBean.getThreadAllocatedBytes``). The collector is an in-process
  transport, uploads are held back: what is timed is report() alone
  (client_jvm/src/test/java/org/ldptelemetry/ReportBench.java). Python's ``build_report``
  for the same definitions is the yardstick.
* Jar size: ``client_jvm/build/ldp-telemetry.jar`` as built (with line numbers).
* Cold start: a fresh ``java`` process makes a client with a storage directory and reports
  once to a collector over HTTP (a local server answering the definition): milliseconds
  from the JVM's start to the client made and to the first report() returned, and the wall
  time of the whole process (JVM exit included); the median of 5 runs
  (ColdStart.java).

Distributions (1,024 log bins, ε = 1): ``bench.hh`` (the hierarchical histogram) and
``bench.haar`` (HaarHRR). ``--only bench.hh,bench.haar`` times just those, no cold start.

Run: ``python benchmarks/bench_client_jvm.py`` (the JDK 17; builds the jar first). Prints
the load average before and after: the machine is shared, and the figures move with it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from client_sdk import wire

ROOT = Path(__file__).resolve().parent.parent

OUE = {"domain": [f"v{i}" for i in range(1024)], "epsilon": 1.0, "mechanism": "oue"}
GRR = {"domain": [f"g{i}" for i in range(8)], "epsilon": 1.0, "mechanism": "grr"}
STRING = {"kind": "string", "max_length": 16, "epsilon": 4.0}
HH = {"kind": "numeric", "range": [1, 60000], "epsilon": 1.0,
      "distribution": {"bins": 1024, "scale": "log"}}  # fmt: skip
HAAR = {**HH, "mechanism": "haar"}
WARM, TIMED, COLD_RUNS = 100_000, 200_000, 5


def _build() -> Any:
    spec = importlib.util.spec_from_file_location(
        "client_jvm_build", ROOT / "client_jvm" / "build.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    why = module.missing()
    if why:
        sys.exit(f"cannot build the JVM SDK: {why}")
    module.build_tests()
    return module


def _serve(definition: dict[str, Any]) -> ThreadingHTTPServer:
    body = json.dumps(definition).encode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            return None

        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    only = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else None
    print(f"load average at the start {os.getloadavg()[0]:.2f}")
    build = _build()
    java = subprocess.run(
        [build.jdk_tool("java"), "-version"], capture_output=True, text=True
    ).stderr
    print(java.splitlines()[0])
    print(f"jar: {build.JAR.stat().st_size:,} B ({build.JAR.name})")
    specs = {
        "bench.oue": OUE,
        "bench.grr": GRR,
        "bench.string": STRING,
        "bench.hh": HH,
        "bench.haar": HAAR,
    }
    defs = {
        name: wire.parse_spec(name, spec)
        for name, spec in specs.items()
        if only is None or name in only
    }
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "defs.json").write_text(json.dumps([d.to_dict() for d in defs.values()]))
        for where in ("-", str(folder / "stores")):
            out = subprocess.run(
                build.java_command(
                    "org.ldptelemetry.ReportBench",
                    str(folder / "defs.json"),
                    where,
                    str(WARM),
                    str(TIMED),
                ),
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            for line in out.splitlines():
                r = json.loads(line)
                store = "storage directory" if r["durable"] else "in memory"
                print(
                    f"report() {r['name']} ({store}): median {r['median_us']:.1f} µs, "
                    f"p99 {r['p99_us']:.1f} µs, {r['bytes_per_report']:,} B allocated per report"
                )
        values = {
            "bench.oue": [0, 17, 1023],
            "bench.grr": ["g0", "g1", "g2"],
            "bench.string": ["café au lait", "ldp", "search term"],
            "bench.hh": [17.0, 1023.0, 42000.0],
            "bench.haar": [17.0, 1023.0, 42000.0],
        }
        for name, definition in defs.items():
            n = 5000
            t0 = time.perf_counter()
            for i in range(n):
                wire.build_report(definition, values[name][i % 3])
            took = (time.perf_counter() - t0) / n * 1e6
            print(f"yardstick: Python build_report {name}: {took:.1f} µs")
        if only is not None:  # --only a,b: report() alone, no cold start
            print(f"load average at the end {os.getloadavg()[0]:.2f}")
            return
        server = _serve(defs["bench.grr"].to_dict())
        url = f"http://127.0.0.1:{server.server_address[1]}"
        made, first, wall = [], [], []
        for run in range(COLD_RUNS):
            t0 = time.perf_counter()
            out = subprocess.run(
                build.java_command(
                    "org.ldptelemetry.ColdStart", url, str(folder / f"cold{run}"), "bench.grr", "g3"
                ),
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            wall.append((time.perf_counter() - t0) * 1000)
            r = json.loads(out.splitlines()[-1])
            assert r["ok"], r
            made.append(r["client_ms"])
            first.append(r["first_report_ms"])
        server.shutdown()
        print(
            f"cold start (median of {COLD_RUNS}): client made {statistics.median(made):.0f} ms, "
            f"first report() returned {statistics.median(first):.0f} ms after the JVM's start; "
            f"the whole process {statistics.median(wall):.0f} ms"
        )
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

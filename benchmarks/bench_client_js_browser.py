"""The JavaScript client in Chromium: bundle size, report() µs per call and long tasks.

Measures the bundle (as ``bench_client_js.py`` does), then serves ``client_js/`` and a page
from a local same-origin server (which also answers the definitions and ingest routes)
and in headless Debian Chromium times 1,000 ``client.report()`` calls each for OUE at
k = 1,024 and a string metric (max_length 16, ε = 4), after 1,000 untimed ones (the
definition fetched, the JIT warm), with IndexedDB and with memory storage: 8,000 reports.

Long tasks (> 50 ms, PerformanceObserver "longtask") are counted apart: at load (the page,
the module's compilation, the clients built and the first IndexedDB open; a ``buffered``
observer), and while reporting (observers without ``buffered``, started once the clients
are ready, stopped after the first 1,000 and after all 8,000 reports are flushed); each
with its start, duration and attribution.

Then times Oblivious HTTP on the page (``client_js/bench/ohttp_timing.js``): a batch of 100
and of 20 GRR reports encoded as Binary HTTP and encapsulated, and the gateway's answer
decapsulated, with Chromium's Web Crypto (the median of 7 blocks' means of 50 batches).

Run: ``python benchmarks/bench_client_js_browser.py`` (after ``npm ci`` in client_js/).
Prints the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench_client_js import bundle_sizes  # this folder: run as a script
from playwright.sync_api import sync_playwright

from client_sdk import wire

ROOT = Path(__file__).resolve().parent.parent
CLIENT_JS = ROOT / "client_js"
CHROMIUM = "/usr/bin/chromium"

DEFINITIONS = {
    d.name: d.to_dict()
    for d in (
        wire.parse_spec(
            "bench.oue",
            {"domain": [f"v{i}" for i in range(1024)], "epsilon": 1.0, "mechanism": "oue"},
        ),
        wire.parse_spec("bench.string", {"kind": "string", "max_length": 16, "epsilon": 4.0}),
    )
}

PAGE = b"""<!doctype html><meta charset="utf-8"><script>
// The page's load, the module's compilation and the first IndexedDB open: a buffered
// observer from the first script on, read once the clients are ready (window.atLoad).
window.loadTasks = [];
window.loadObserver = new PerformanceObserver((l) => { loadTasks.push(...l.getEntries()); });
loadObserver.observe({ type: "longtask", buffered: true });
</script><script type="module">
import { Client, MemoryStorage } from "/src/index.js";
import { timeOhttp } from "/bench/ohttp_timing.js";
window.timeOhttp = timeOhttp;
const entry = (e) => ({
  start: e.startTime, duration: e.duration, name: e.name,
  where: [e.name, ...(e.attribution ?? []).map((a) => a.containerType)],
});
const settle = () => new Promise((r) => setTimeout(r, 200)); // entries arrive after the task
window.client = new Client(location.origin, { flushAt: 100 });
window.memoryClient = new Client(location.origin, { flushAt: 100, storage: new MemoryStorage() });
await Promise.all([client.ready, memoryClient.ready, client.storage.open?.()]);
window.atLoad = async () => {
  await settle();
  loadTasks.push(...loadObserver.takeRecords());
  loadObserver.disconnect();
  return loadTasks.map(entry);
};
// The reporting span: an observer without `buffered`, started after the module loaded and
// the clients were built, stopped (after a settle) once the reports are flushed.
const spans = {};
window.startSpan = (name) => {
  const tasks = [];
  const observer = new PerformanceObserver((l) => { tasks.push(...l.getEntries()); });
  observer.observe({ type: "longtask" });
  spans[name] = { tasks, observer };
};
window.stopSpan = async (name) => {
  marks.push(`${performance.now().toFixed(0)} ms: flush`);
  await onPage(() => Promise.all([client.flush(), memoryClient.flush()]));
  await settle();
  const { tasks, observer } = spans[name];
  tasks.push(...observer.takeRecords());
  observer.disconnect();
  return tasks.map(entry);
};
window.probe = async () => {
  startSpan("probe");
  await new Promise((r) => setTimeout(() => {
    const t0 = performance.now();
    while (performance.now() - t0 < 80);
    r();
  }, 0));
  return stopSpan("probe");
};
// Run as the page's own task (a timer), not inside the harness's evaluate call.
const onPage = (fn) => new Promise((ok, fail) => setTimeout(() => fn().then(ok, fail), 0));
window.marks = [];
window.reportMany = (metric, values, n, memory) => onPage(async () => {
  const c = memory ? memoryClient : client;
  const t0 = performance.now();
  marks.push(`${t0.toFixed(0)} ms: ${n} x ${metric} (${memory ? "memory" : "IndexedDB"})`);
  for (let i = 0; i < n; i++) await c.report(metric, values[i % values.length]);
  return (performance.now() - t0) * 1000 / n;
});
window.ready = true;
</script>"""


class Handler(SimpleHTTPRequestHandler):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, directory=str(CLIENT_JS), **kwargs)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        return None

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802
        if self.path == "/page.html":
            self._send(200, PAGE, "text/html; charset=utf-8")
        elif self.path.startswith("/v1/metrics/"):
            name = self.path.split("/")[-1].split("?")[0]
            self._send(200, json.dumps(DEFINITIONS[name]).encode(), "application/json")
        else:
            super().do_GET()

    def do_POST(self) -> None:  # noqa: N802
        n = len(json.loads(self.rfile.read(int(self.headers["Content-Length"])))["reports"])
        self._send(200, json.dumps({"accepted": n, "duplicates": 0}).encode(), "application/json")


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def describe(tasks: list[dict[str, Any]]) -> str:
    if not tasks:
        return "none"
    parts = [
        f"{t['duration']:.0f} ms at {t['start']:.0f} ms ({' '.join(t['where'])})" for t in tasks
    ]
    return f"{len(tasks)}: " + "; ".join(parts)


TRACE_CATEGORIES = [
    "toplevel",
    "devtools.timeline",
    "disabled-by-default-devtools.timeline",
    "v8",
]


def longest_tasks(trace: bytes, top: int = 3) -> list[str]:
    """The longest tasks of the page's main thread in a Chromium trace, each with its wall
    and CPU time and the longest events inside it."""
    events = json.loads(trace)["traceEvents"]
    main = {
        (e["pid"], e["tid"])
        for e in events
        if e.get("ph") == "M" and e.get("args", {}).get("name") == "CrRendererMain"
    }
    on_main = [e for e in events if (e.get("pid"), e.get("tid")) in main and e.get("ph") == "X"]
    tasks = [e for e in on_main if e["name"] == "ThreadControllerImpl::RunTask"]
    lines = []
    for t in sorted(tasks, key=lambda e: -e["dur"])[:top]:
        inside = sorted(
            (
                e
                for e in on_main
                if e["name"] not in ("ThreadControllerImpl::RunTask", "RunTask")
                and t["ts"] <= e["ts"] <= e["ts"] + e.get("dur", 0) <= t["ts"] + t["dur"]
            ),
            key=lambda e: -e.get("dur", 0),
        )
        what = ", ".join(f"{_label(e)} {e.get('dur', 0) / 1000:.1f}" for e in inside[:3])
        wall, cpu = t["dur"] / 1000, t.get("tdur", 0) / 1000
        lines.append(f"{wall:.1f} ms wall, {cpu:.1f} CPU: {what}")
    return lines


def _label(event: dict[str, Any]) -> str:
    data = event.get("args", {}).get("data", {}) or {}
    where = data.get("functionName") or str(data.get("url", "")).rsplit("/", 1)[-1]
    return f"{event['name']}({where})" if where else str(event["name"])


def run(url: str, trace: bool) -> None:
    oue = ("bench.oue", [0, 17, 1023])
    string = ("bench.string", ["café au lait", "ldp", "search term"])
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
        page = browser.new_page()
        page.set_default_timeout(300_000)
        page.goto(f"{url}/page.html")
        page.wait_for_function("window.ready === true")
        print(f"Chromium {browser.version}")
        at_load = describe(page.evaluate("atLoad()"))
        print(f"long tasks at load (page, module, first IndexedDB open): {at_load}")

        def report_many(metric: str, values: list[Any], n: int, memory: bool) -> float:
            args = json.dumps([metric, values, n, memory])
            return float(page.evaluate(f"reportMany(...{args})"))

        if trace:  # the reporting span only
            browser.start_tracing(page=page, categories=TRACE_CATEGORIES)
        page.evaluate("startSpan('all'); startSpan('first')")
        report_many(*oue, 1000, False)  # the first 1,000: definition fetched, JIT cold
        first = page.evaluate("stopSpan('first')")
        print(f"long tasks while reporting the first 1,000 (OUE, IndexedDB): {describe(first)}")
        for metric, values in (oue, string):
            for memory in (False, True):
                if (metric, memory) != (oue[0], False):
                    report_many(metric, values, 1000, memory)  # warm up
                us = report_many(metric, values, 1000, memory)
                where = "memory" if memory else "IndexedDB"
                print(f"report() {metric}: {us:.1f} µs per call ({where})")
        every = page.evaluate("stopSpan('all')")
        print(f"long tasks while reporting all 8,000 values: {describe(every)}")
        if every:
            print("  phases: " + "; ".join(page.evaluate("marks")))
        if trace:
            print("longest main-thread tasks while reporting (trace; wall, CPU, inside, ms):")
            for line in longest_tasks(browser.stop_tracing()):
                print(f"  {line}")
        probe = page.evaluate("probe()")  # the observer sees a task it should
        if not any(t["duration"] >= 80 for t in probe):
            raise SystemExit(f"the long-task observer missed an 80 ms busy loop: {probe}")
        for size in (100, 20):
            r = page.evaluate(f"timeOhttp({size}, 50)")
            print(
                f"OHTTP, batch of {size} GRR reports ({r['bytes']:,} B): "
                f"encapsulate {r['seal']:.0f} µs + decapsulate the answer {r['open']:.0f} µs "
                f"= {(r['seal'] + r['open']) / size:.1f} µs per report"
            )
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1, help="fresh browsers, one after another")
    parser.add_argument(
        "--trace", action="store_true", help="record a Chromium trace and list the busiest tasks"
    )
    args = parser.parse_args()
    print(f"load average at the start {loadavg()}")
    full, grr_only = bundle_sizes()
    print(f"bundle, every mechanism: {full[0]:,} B minified, {full[1]:,} B min+gzip")
    print(f"bundle, GRR only (tree-shaken): {grr_only[0]:,} B minified, {grr_only[1]:,} B min+gzip")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        for n in range(args.runs):
            print(f"\nrun {n + 1}, load average {loadavg()}")
            run(f"http://127.0.0.1:{server.server_address[1]}", args.trace)
    finally:
        server.shutdown()
    print(f"\nload average at the end {loadavg()}")


if __name__ == "__main__":
    main()

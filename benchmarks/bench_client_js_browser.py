"""The JavaScript client's report() in Chromium: µs per call and long tasks.

Serves ``client_js/`` and a page from a local same-origin server (which also answers the
definitions and ingest routes), then in headless Debian Chromium times 1,000
``client.report()`` calls each for OUE at k = 1,024 and a string metric (max_length 16,
ε = 4), after 1,000 untimed ones (the definition fetched, the JIT warm), with IndexedDB
and with memory storage, and records every long task (> 50 ms) the page's main thread had
meanwhile (PerformanceObserver "longtask").

Then times Oblivious HTTP on the page (``client_js/bench/ohttp_timing.js``): a batch of 100
and of 20 GRR reports encoded as Binary HTTP and encapsulated, and the gateway's answer
decapsulated, with Chromium's Web Crypto (the median of 7 blocks' means of 50 batches).

Run: ``python benchmarks/bench_client_js_browser.py``. Prints the load average before
and after.
"""

from __future__ import annotations

import json
import os
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

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

PAGE = b"""<!doctype html><meta charset="utf-8"><script type="module">
import { Client, MemoryStorage } from "/src/index.js";
import { timeOhttp } from "/bench/ohttp_timing.js";
window.timeOhttp = timeOhttp;
window.longTasks = [];
new PerformanceObserver((l) => { for (const e of l.getEntries()) longTasks.push(e.duration); })
  .observe({ type: "longtask", buffered: true });
window.client = new Client(location.origin, { flushAt: 100 });
window.memoryClient = new Client(location.origin, { flushAt: 100, storage: new MemoryStorage() });
window.timeReports = async (metric, values, n, memory) => {
  const client = memory ? memoryClient : window.client;
  // warm up: fetch the definition, let the JIT compile the hot paths
  for (let i = 0; i < n; i++) await client.report(metric, values[i % values.length]);
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await client.report(metric, values[i % values.length]);
  return (performance.now() - t0) * 1000 / n;
};
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


def main() -> None:
    print(f"load average at the start {os.getloadavg()[0]:.2f}")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
            page = browser.new_page()
            page.set_default_timeout(300_000)
            page.goto(f"{url}/page.html")
            page.wait_for_function("window.ready === true")
            version = browser.version
            for metric, values in (
                ("bench.oue", "[0, 17, 1023]"),
                ("bench.string", '["café au lait", "ldp", "search term"]'),
            ):
                for memory in (False, True):
                    us = page.evaluate(
                        f"timeReports({json.dumps(metric)}, {values}, 1000, {str(memory).lower()})"
                    )
                    where = "memory" if memory else "IndexedDB"
                    print(f"Chromium {version}: report() {metric}: {us:.1f} µs per call ({where})")
            for size in (100, 20):
                r = page.evaluate(f"timeOhttp({size}, 50)")
                print(
                    f"Chromium {version}: OHTTP, batch of {size} GRR reports ({r['bytes']:,} B): "
                    f"encapsulate {r['seal']:.0f} µs + decapsulate the answer {r['open']:.0f} µs "
                    f"= {(r['seal'] + r['open']) / size:.1f} µs per report"
                )
            page.evaluate("client.flush()")
            page.evaluate("memoryClient.flush()")
            tasks = page.evaluate("longTasks")
            print(
                f"long tasks (> 50 ms) while reporting 8,000 values: {len(tasks)}"
                + (f", longest {max(tasks):.0f} ms" if tasks else "")
            )
            browser.close()
    finally:
        server.shutdown()
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

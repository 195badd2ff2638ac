"""The JavaScript client in a real Chromium: IndexedDB keeps reports made offline across
a reload, and every report reaches the collector exactly once.

The page loads ``client_js/src/index.js`` as an ES module from a small same-origin server
that also plays the collector's two routes (definitions and ingest), so the browser's
storage, offline mode and reload are real while no Redis is needed.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import REPORT_MANY_JS

from client_sdk import wire

CLIENT_JS = Path(__file__).resolve().parents[2] / "client_js"

DEFINITIONS = {
    d.name: d.to_dict()
    for d in (
        wire.parse_spec("app.theme", {"domain": ["light", "dark", "auto"], "epsilon": 1.0}),
        wire.parse_spec("session.minutes", {"kind": "numeric", "range": [0, 120], "epsilon": 1}),
        wire.parse_spec("search.term", {"kind": "string", "max_length": 8, "epsilon": 4.0}),
    )
}

PAGE = (
    b"""<!doctype html><meta charset="utf-8"><title>ldp client</title>
<script type="module">
import { Client } from "/src/index.js";
window.client = new Client(location.origin, { flushAt: 50, flushInterval: 200 });
"""
    + REPORT_MANY_JS
)


class Collector:
    """Counts every report id it is sent; says how many arrived twice."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ids: dict[str, int] = {}
        self.metrics: dict[str, int] = {}


def _handler(collector: Collector) -> type[SimpleHTTPRequestHandler]:
    class Handler(SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(CLIENT_JS), **kwargs)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            return None

        def _json(self, status: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            if self.path == "/page.html":
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(PAGE)))
                self.end_headers()
                self.wfile.write(PAGE)
            elif self.path.startswith("/v1/metrics/"):
                name = self.path.split("/")[-1].split("?")[0]
                if name in DEFINITIONS:
                    self._json(200, {**DEFINITIONS[name], "device_budget": None})
                else:
                    self._json(404, {"error": "unknown metric"})
            else:
                super().do_GET()

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            duplicates = 0
            with collector.lock:
                for report in body["reports"]:
                    definition = DEFINITIONS[report["metric"]]
                    # the collector's own check: the payload is one the mechanism can produce
                    wire.check_report(
                        report, lambda n, v: wire.MetricDefinition.from_dict(DEFINITIONS[n])
                    )
                    assert report["version"] == definition["version"]
                    if report["id"] in collector.ids:  # the replay guard
                        duplicates += 1
                        collector.ids[report["id"]] += 1
                        continue
                    collector.ids[report["id"]] = 1
                    metric = report["metric"]
                    collector.metrics[metric] = collector.metrics.get(metric, 0) + 1
            accepted = len(body["reports"]) - duplicates
            self._json(200, {"accepted": accepted, "duplicates": duplicates, "rejected": []})

    return Handler


@pytest.fixture
def collector() -> Iterator[tuple[str, Collector]]:
    state = Collector()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", state
    server.shutdown()
    server.server_close()


def test_offline_reports_survive_a_reload_and_arrive_once(
    browser: Any, collector: tuple[str, Collector]
) -> None:
    url, state = collector
    context = browser.new_context()
    context.set_default_timeout(60_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{url}/page.html")
    page.wait_for_function("window.ready === true")
    assert page.evaluate("reportMany(0, 600)") == 600
    assert page.evaluate("client.flush()") is True
    context.set_offline(True)
    assert page.evaluate("reportMany(600, 1000)") == 400  # definitions are cached
    assert page.evaluate("client.flush()") is False  # offline: kept in IndexedDB
    # Leave the page. Its pagehide flush may get through (Chromium lets keepalive requests
    # of an unloading page out even in offline emulation); the reports stay in IndexedDB
    # until acknowledged, so the next page resends them and the collector's replay guard
    # (here: counting ids) keeps them from counting twice.
    page.goto("about:blank")
    context.set_offline(False)
    page.goto(f"{url}/page.html")  # the page again: its client finds the 400 in IndexedDB
    page.wait_for_function("window.ready === true")
    page.evaluate("client.ready")
    page.wait_for_function("client.stats().queued === 0 || client.flush()")
    assert page.evaluate("client.flush()") is True
    assert not errors, errors
    assert len(state.ids) == 1000, "every report counted once"
    assert page.evaluate("client.stats().sent") + page.evaluate("client.stats().queued") >= 400
    assert state.metrics == {"app.theme": 334, "session.minutes": 333, "search.term": 333}
    context.close()

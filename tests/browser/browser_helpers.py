"""Debian's Chromium under Playwright, as headless Chromium needs it on these machines.

``playwright install`` cannot download browsers here: the tests drive the system's
``/usr/bin/chromium`` (``tasks.py test`` installs Debian's package when it is missing).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

from client_sdk import wire

if TYPE_CHECKING:
    from playwright.sync_api import Page

CHROMIUM = os.environ.get("LDP_CHROMIUM", "/usr/bin/chromium")

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",  # root in a container: the setuid sandbox is unavailable
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    # The machine's network is closed: without these, Chromium keeps trying to reach
    # Google's update, sync and component services, and logs every refusal.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_missing() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    if not Path(CHROMIUM).exists() and shutil.which(CHROMIUM) is None:
        return (
            f"no Chromium at {CHROMIUM}: `python3 tasks.py test` installs Debian's package "
            "(as root), or set LDP_CHROMIUM"
        )
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[dev]')"
    return None


def launch(playwright: Any) -> Any:
    """A fresh headless Chromium (Playwright gives it a new empty profile directory)."""
    return playwright.chromium.launch(
        executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True, timeout=30_000
    )


@dataclass
class Watched:
    """A page with everything it logged and requested."""

    page: Page
    origin: str
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def check(self) -> None:
        """No console or page errors; no request left the server's origin."""
        assert self.errors == [], self.errors
        foreign = [u for u in self.requests if not u.startswith(self.origin + "/")]
        assert foreign == [], foreign
        assert self.requests, "the page made no requests at all?"


def watch(page: Page, origin: str) -> Watched:
    """Record the page's console errors, uncaught exceptions and requests."""
    w = Watched(page, origin)
    page.on(
        "console", lambda m: w.errors.append(f"console: {m.text}") if m.type == "error" else None
    )
    page.on("pageerror", lambda e: w.errors.append(f"pageerror: {e}"))
    page.on("request", lambda r: w.requests.append(r.url))
    return w


def open_page(context: Any, url: str, errors: list[str]) -> Any:
    """A new page of ``context`` at ``url``, once its script set ``window.ready``; its
    uncaught errors go to ``errors``."""
    page = context.new_page()
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    page.wait_for_function("window.ready === true")
    return page


REPORT_MANY_JS = b"""window.values = (i) => [["app.theme", i % 3], ["session.minutes", i % 121],
                        ["search.term", ["caf\\u00e9", "ldp", "x" + (i % 7)][i % 3]]][i % 3];
window.reportMany = async (from, to) => {
  let ok = 0;
  for (let i = from; i < to; i++) ok += await client.report(...values(i));
  return ok;
};
window.ready = true;
</script>"""
"""The end of a JS SDK test page: three kinds of values by index, and a loop reporting a
range of them through ``window.client`` (the page makes the client first)."""

CLIENT_JS = Path(__file__).resolve().parents[2] / "client_js"

RATIONED = {"reports_per_period": 10, "period": "day"}
"""The budget of ``app.rationed``: 10 reports a UTC day."""

SDK_DEFINITIONS = {
    d.name: d.to_dict()
    for d in (
        wire.parse_spec("app.theme", {"domain": ["light", "dark", "auto"], "epsilon": 1.0}),
        wire.parse_spec("session.minutes", {"kind": "numeric", "range": [0, 120], "epsilon": 1}),
        wire.parse_spec("search.term", {"kind": "string", "max_length": 8, "epsilon": 4.0}),
        wire.parse_spec(
            "app.rationed",
            {"domain": ["a", "b"], "epsilon": 1.0, "budget": RATIONED},
        ),
        wire.parse_spec(
            "app.lang",
            {
                "domain": ["en", "de"],
                "epsilon": 1.0,
                "longitudinal": {"permanent_epsilon": 4.0},
                "budget": {"reports_per_period": 100, "period": "day"},
            },
        ),
    )
}
"""The definitions of :data:`REPORT_MANY_JS`'s three metrics; ``app.rationed``, a metric
with a budget of :data:`RATIONED`; ``app.lang``, a memoized one."""


class RecordingCollector:
    """A page of the JS SDK and the collector's two routes, on one origin, without Redis.

    Serves ``client_js/`` (the SDK's sources), ``/page.html`` and the definitions of
    :data:`SDK_DEFINITIONS`; checks every uploaded report as the collector does and counts
    how many times each report id arrived (``ids``; a copy is answered as a duplicate, as
    the replay guard would) and the distinct reports per metric (``metrics``). A context
    manager: the server runs on a free port of 127.0.0.1 at ``url``.
    """

    def __init__(self, page: bytes) -> None:
        self.page = page
        self.lock = threading.Lock()
        self.ids: dict[str, int] = {}
        self.metrics: dict[str, int] = {}
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> RecordingCollector:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _ingest(self, reports: list[dict[str, Any]]) -> int:
        """Count ``reports``; how many were copies of reports already counted."""
        duplicates = 0
        with self.lock:
            for report in reports:
                # the collector's own check: the payload is one the mechanism can produce
                wire.check_report(
                    report, lambda n, v: wire.MetricDefinition.from_dict(SDK_DEFINITIONS[n])
                )
                assert report["version"] == SDK_DEFINITIONS[report["metric"]]["version"]
                seen = self.ids.get(report["id"], 0)
                self.ids[report["id"]] = seen + 1
                if seen:
                    duplicates += 1
                else:
                    self.metrics[report["metric"]] = self.metrics.get(report["metric"], 0) + 1
        return duplicates

    def _handler(self) -> type[SimpleHTTPRequestHandler]:
        collector = self

        class Handler(SimpleHTTPRequestHandler):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, directory=str(CLIENT_JS), **kwargs)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return None

            def _send(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802
                if self.path == "/page.html":
                    self._send(200, collector.page, "text/html; charset=utf-8")
                elif self.path.startswith("/v1/metrics/"):
                    definition = SDK_DEFINITIONS.get(self.path.split("/")[-1].split("?")[0])
                    if definition is None:
                        self._send(404, b'{"error": "unknown metric"}', "application/json")
                    else:
                        body = json.dumps({**definition, "device_budget": None}).encode()
                        self._send(200, body, "application/json")
                else:
                    super().do_GET()

            def do_POST(self) -> None:  # noqa: N802
                reports = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                duplicates = collector._ingest(reports["reports"])
                answer = {
                    "accepted": len(reports["reports"]) - duplicates,
                    "duplicates": duplicates,
                    "rejected": [],
                }
                self._send(200, json.dumps(answer).encode(), "application/json")

        return Handler

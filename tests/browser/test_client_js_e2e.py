"""End to end in a real browser: a page on another origin reports with the JavaScript SDK
to a real ``ldp serve`` that allows that origin (CORS), offline spells and a reload
included, and the real aggregator counts every report exactly once; a page on an origin
the collector does not allow gets nothing through.

The page comes from a small static server (its origin); the module itself is imported
from ``ldp serve`` (``/sdk/ldp-telemetry/index.js``), which the disallowed origin cannot
even import.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from browser_helpers import REPORT_MANY_JS, chromium_missing, open_page

_missing = chromium_missing()
if _missing:
    pytest.skip(_missing, allow_module_level=True)

from test_dashboard_browser import _request  # noqa: E402

from ldp_server.serve import Server  # noqa: E402
from tests.serve_helpers import defined_server  # noqa: E402

SPECS = {
    "app.theme": {"domain": ["light", "dark", "auto"], "epsilon": 1.0},
    "session.minutes": {"kind": "numeric", "range": [0, 120], "epsilon": 1.0},
    "search.term": {"kind": "string", "max_length": 8, "epsilon": 4.0},
}

HASHED_SPECS = {
    # `auto` picks OLH for a large domain: the default metric the SDK once sent as {"y": …}
    "app.screen": {"domain": [f"s{i}" for i in range(300)], "epsilon": 1.0},
    "app.locale": {"domain": [f"l{i}" for i in range(20)], "epsilon": 1.0, "mechanism": "blh"},
    "app.cube": {
        "kind": "joint",
        "attributes": [{"name": n, "domain": ["a", "b", "c", "d"]} for n in ("p", "q", "r")],
        "epsilon": 2.0,
        "mechanism": "joint",
    },
}
"""Metrics whose reports carry a hash's (a, b, y): OLH, BLH and a joint metric's OLH group."""

PAGE = (
    b"""<!doctype html><meta charset="utf-8"><title>ldp e2e</title>
<script type="module">
const collector = new URLSearchParams(location.search).get("collector");
window.send = async () => {  // a raw upload, as the SDK would make it
  try {
    const r = await fetch(collector + "/v1/reports", { method: "POST",
      headers: { "Content-Type": "application/json" }, body: '{"reports": []}' });
    return r.status;
  } catch (e) { return "refused"; }
};
let Client;
try {
  ({ Client } = await import(collector + "/sdk/ldp-telemetry/index.js"));
} catch (e) {
  window.importFailed = String(e);
  window.ready = true;
  throw e;
}
window.client = new Client(collector, { flushAt: 100, flushInterval: 300 });
"""
    + REPORT_MANY_JS
)


class Static(BaseHTTPRequestHandler):
    """The page, and nothing else (the module comes from ``ldp serve``)."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        return None

    def do_GET(self) -> None:  # noqa: N802
        if self.path.startswith("/page.html"):
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(PAGE)))
            self.end_headers()
            self.wfile.write(PAGE)
        else:
            self.send_error(404)


@pytest.fixture(scope="module")
def origins() -> Iterator[tuple[str, str]]:
    """Two static origins serving the page: (allowed, not allowed)."""
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), Static) for _ in range(2)]
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    yield tuple(f"http://127.0.0.1:{s.server_address[1]}" for s in servers)  # type: ignore[misc]
    for s in servers:
        s.shutdown()
        s.server_close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, origins: tuple[str, str]) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("e2e")
    with defined_server(data, {**SPECS, **HASHED_SPECS}, {"LDP_CORS_ORIGINS": origins[0]}) as s:
        yield s


def _counted(server: Server, specs: dict[str, Any] = SPECS) -> dict[str, int]:
    return {name: _request(f"{server.url}/v1/estimates/{name}")["n"] for name in specs}


def test_a_page_reports_offline_and_after_a_reload_and_every_report_counts_once(
    browser: Any, server: Server, origins: tuple[str, str]
) -> None:
    allowed, refused = origins
    context = browser.new_context()
    context.set_default_timeout(120_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    module_urls: list[str] = []
    page.on("request", lambda r: module_urls.append(r.url) if r.url.endswith(".js") else None)
    encodings: list[str | None] = []
    page.on(
        "response",
        lambda r: (
            encodings.append(r.headers.get("content-encoding")) if r.url.endswith(".js") else None
        ),
    )
    page.goto(f"{allowed}/page.html?collector={server.url}")
    page.wait_for_function("window.ready === true")
    # the module and its siblings came from ldp serve, with the right type
    # one module from ldp serve (issue 35: it was 9 files), compressed as Chromium asks
    assert module_urls == [f"{server.url}/sdk/ldp-telemetry/index.js"]
    assert encodings in (["br"], ["gzip"]), encodings
    assert page.evaluate("reportMany(0, 600)") == 600
    assert page.evaluate("client.flush()") is True
    context.set_offline(True)
    assert page.evaluate("reportMany(600, 1000)") == 400
    assert page.evaluate("client.flush()") is False
    page.goto("about:blank")  # leave with 400 reports in IndexedDB
    context.set_offline(False)
    page.goto(f"{allowed}/page.html?collector={server.url}")
    page.wait_for_function("window.ready === true")
    page.wait_for_function("client.flush()")
    assert page.evaluate("client.stats().queued") == 0
    expected = {"app.theme": 334, "session.minutes": 333, "search.term": 333}
    deadline = time.monotonic() + 120
    while _counted(server) != expected:
        assert time.monotonic() < deadline, f"counted {_counted(server)}, expected {expected}"
        time.sleep(0.3)
    assert not errors, errors

    # A page on an origin the collector does not allow: the browser refuses it the module
    # and every upload.
    other = context.new_page()
    other.goto(f"{refused}/page.html?collector={server.url}")
    other.wait_for_function("window.ready === true")
    assert other.evaluate("window.importFailed")
    assert other.evaluate("send()") == "refused"
    assert page.evaluate("send()") == 400  # the allowed page sees the answer (empty batch)
    time.sleep(1.0)  # nothing in flight could arrive late
    assert _counted(server) == expected
    context.close()


def test_olh_blh_and_joint_olh_reports_from_a_page_are_all_counted(
    browser: Any, server: Server, origins: tuple[str, str]
) -> None:
    """Issue 35: the SDK sent every report with a ``y`` as ``{"y": …}``, dropping OLH's
    ``a`` and ``b``; the collector refused all of them (1,050 of 1,050 in Chromium)."""
    mechanisms = {
        name: _request(f"{server.url}/v1/metrics/{name}")["mechanism"] for name in HASHED_SPECS
    }
    assert mechanisms["app.screen"]["mechanism"] == "olh"
    assert mechanisms["app.locale"]["mechanism"] == "blh"
    assert [o["mechanism"] for o in mechanisms["app.cube"]["oracles"]] == ["olh"]
    context = browser.new_context()
    context.set_default_timeout(120_000)
    errors: list[str] = []
    page = open_page(context, f"{origins[0]}/page.html?collector={server.url}", errors)
    n = 60
    reported = page.evaluate(
        """async (n) => {
          let ok = 0;
          for (let i = 0; i < n; i++) {
            ok += await client.report("app.screen", `s${(i * 7) % 300}`);
            ok += await client.report("app.locale", i % 20);
            const cell = { p: "abcd"[i % 4], q: "abcd"[(i >> 2) % 4], r: "d" };
            ok += await client.report("app.cube", cell);
          }
          return ok;
        }""",
        n,
    )
    assert reported == 3 * n
    assert page.evaluate("client.flush()") is True
    stats = page.evaluate("client.stats()")
    assert sum(stats["dropped"].values()) == 0, stats
    assert stats["last_refusal"] is None
    deadline = time.monotonic() + 120
    while (
        counted := {
            name: _request(f"{server.url}/v1/estimates/{name}")["n"] for name in HASHED_SPECS
        }
    ) != dict.fromkeys(HASHED_SPECS, n):
        assert time.monotonic() < deadline, f"counted {counted}, expected {n} of each"
        time.sleep(0.3)
    assert not errors, errors
    context.close()

"""The JavaScript SDK's Oblivious HTTP in a real Chromium: its Web Crypto gives RFC 9458
Appendix A's encapsulated request byte for byte and opens the RFC's response; and a page on
its own origin reports through a real ``ldp relay`` to a real ``ldp serve`` (offline spells
and a reload included), every report counted exactly once and none posted to the collector
directly.

The vectors page loads ``client_js/src/ohttp.js`` (and the test gateway of
``client_js/test``) from a small static server of ``client_js/``; the reporting page
imports the SDK from ``ldp serve`` (``/sdk/ldp-telemetry/``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import REPORT_MANY_JS, chromium_missing
from relay_helpers import run_relay

_missing = chromium_missing()
if _missing:
    pytest.skip(_missing, allow_module_level=True)

from test_dashboard_browser import _request  # noqa: E402

from client_sdk.ohttp.keys import GATEWAY_PATH  # noqa: E402
from ldp_server.serve import Server  # noqa: E402
from tests.serve_helpers import defined_server  # noqa: E402

CLIENT_JS = Path(__file__).resolve().parents[2] / "client_js"
APPENDIX_A = json.loads((CLIENT_JS / "test" / "vectors" / "rfc9458-appendix-a.json").read_text())

VECTORS_PAGE = b"""<!doctype html><meta charset="utf-8"><title>ohttp vectors</title>
<script type="module">
import { encapsulate, parseKeyConfig } from "/src/ohttp.js";
import { encodeRequest, decodeResponse } from "/src/bhttp.js";
import { importPrivateKey } from "/src/hpke.js";
import { TestGateway, hex, toHex } from "/test/ohttp_gateway.js";
window.vectors = async () => {
  const A = await (await fetch("/test/vectors/rfc9458-appendix-a.json")).json();
  const { config } = parseKeyConfig(hex(A.key_config));
  const request = encodeRequest({ method: "GET", scheme: "https", authority: "example.com",
                                  path: "/" });
  const ephemeral = { privateKey: await importPrivateKey(hex(A.ephemeral_private_key)),
                      publicKey: hex(A.ephemeral_public_key) };
  const sealed = await encapsulate(config, hex(A.request), ephemeral);
  const opened = await sealed.open(hex(A.encapsulated_response));
  const gateway = new TestGateway(1, hex(A.gateway_private_key), hex(A.gateway_public_key));
  const back = await gateway.decapsulate(sealed.body);
  return {
    request: toHex(request), encapsulated_request: toHex(sealed.body),
    response: toHex(opened), status: decodeResponse(opened).status,
    gateway_request: toHex(back.request),
    encapsulated_response: toHex(await back.respond(opened, hex(A.response_nonce))),
  };
};
window.ready = true;
</script>"""


class Static(SimpleHTTPRequestHandler):
    """``client_js/`` and the page."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, directory=str(CLIENT_JS), **kwargs)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        return None

    def do_GET(self) -> None:  # noqa: N802
        if self.path == "/vectors.html":
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(VECTORS_PAGE)))
            self.end_headers()
            self.wfile.write(VECTORS_PAGE)
        else:
            super().do_GET()


@pytest.fixture(scope="module")
def static() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Static)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_rfc_9458_appendix_a_byte_for_byte_in_chromium(browser: Any, static: str) -> None:
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{static}/vectors.html")
    page.wait_for_function("window.ready === true")
    got = page.evaluate("vectors()")
    assert got == {
        # the RFC leaves out the request's three empty sections; the SDKs write them
        "request": APPENDIX_A["request"] + "000000",
        "encapsulated_request": APPENDIX_A["encapsulated_request"],
        "response": APPENDIX_A["response"],
        "status": 200,
        "gateway_request": APPENDIX_A["request"],
        "encapsulated_response": APPENDIX_A["encapsulated_response"],
    }
    assert not errors, errors
    page.close()


E2E_PAGE = (
    b"""<!doctype html><meta charset="utf-8"><title>ldp through a relay</title>
<script type="module">
const params = new URLSearchParams(location.search);
const collector = params.get("collector");
const { Client } = await import(collector + "/sdk/ldp-telemetry/index.js");
const { Relay } = await import(collector + "/sdk/ldp-telemetry/ohttp.js");
window.relay = new Relay(params.get("relay"));
window.client = new Client(collector, { relay, flushAt: 100, flushInterval: 300 });
"""
    + REPORT_MANY_JS
)


class Page(BaseHTTPRequestHandler):
    """The reporting page, and nothing else (the module comes from ``ldp serve``)."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        return None

    def do_GET(self) -> None:  # noqa: N802
        if not self.path.startswith("/page.html"):
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(E2E_PAGE)))
        self.end_headers()
        self.wfile.write(E2E_PAGE)


SPECS = {
    "app.theme": {"domain": ["light", "dark", "auto"], "epsilon": 1.0},
    "session.minutes": {"kind": "numeric", "range": [0, 120], "epsilon": 1.0},
    "search.term": {"kind": "string", "max_length": 8, "epsilon": 4.0},
}


@pytest.fixture(scope="module")
def origin() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory, origin: str) -> Iterator[Server]:
    # relayed reports are shuffled in batches of 50; the last few wait at most 1 s
    env = {"LDP_CORS_ORIGINS": origin, "LDP_SHUFFLE_MIN_BATCH": "50", "LDP_SHUFFLE_MAX_DELAY": "1"}
    with defined_server(tmp_path_factory.mktemp("ohttp-e2e"), SPECS, env) as s:
        yield s


@pytest.fixture(scope="module")
def relay(collector: Server, origin: str) -> Iterator[str]:
    """A real ``ldp relay`` in front of the collector's gateway, answering the page's origin."""
    yield from run_relay(f"{collector.url}{GATEWAY_PATH}", cors_origins=origin)


def _counted(server: Server) -> dict[str, int]:
    return {name: _request(f"{server.url}/v1/estimates/{name}")["n"] for name in SPECS}


def test_a_page_reports_through_a_real_relay_offline_and_after_a_reload_each_report_once(
    browser: Any, collector: Server, relay: str, origin: str
) -> None:
    context = browser.new_context()
    context.set_default_timeout(120_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    direct: list[str] = []  # what the page asked the collector itself
    page.on("request", lambda r: direct.append(r.url) if r.url.startswith(collector.url) else None)
    url = f"{origin}/page.html?collector={collector.url}&relay={relay}"
    page.goto(url)
    page.wait_for_function("window.ready === true")
    assert page.evaluate("reportMany(0, 600)") == 600
    assert page.evaluate("client.flush()") is True
    context.set_offline(True)
    assert page.evaluate("reportMany(600, 1000)") == 400
    assert page.evaluate("client.flush()") is False
    page.goto("about:blank")  # leave with 400 sealed-to-be reports in IndexedDB
    context.set_offline(False)
    page.goto(url)
    page.wait_for_function("window.ready === true")
    page.wait_for_function("client.flush()")
    assert page.evaluate("client.stats().queued") == 0
    expected = {"app.theme": 334, "session.minutes": 333, "search.term": 333}
    deadline = time.monotonic() + 120
    while _counted(collector) != expected:
        assert time.monotonic() < deadline, f"counted {_counted(collector)}, expected {expected}"
        time.sleep(0.3)
    # every upload went to the relay; the collector was never posted to directly
    assert posts and all(p == relay for p in posts), posts
    # and the collector saw the page only load the module and fetch the keys: the
    # definitions came sealed through the relay
    asked = {u for u in direct if not u.startswith(collector.url + "/sdk/")}
    assert asked == {collector.url + GATEWAY_PATH}, direct
    assert not errors, errors
    context.close()

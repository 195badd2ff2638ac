"""The JavaScript SDK's Oblivious HTTP in a real Chromium: its Web Crypto gives RFC 9458
Appendix A's encapsulated request byte for byte and opens the RFC's response.

The page loads ``client_js/src/ohttp.js`` (and the test gateway of ``client_js/test``) from
a small static server of ``client_js/``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import chromium_missing

_missing = chromium_missing()
if _missing:
    pytest.skip(_missing, allow_module_level=True)

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
  const sealed = await encapsulate(config, request, ephemeral);
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
        "request": APPENDIX_A["request"],
        "encapsulated_request": APPENDIX_A["encapsulated_request"],
        "response": APPENDIX_A["response"],
        "status": 200,
        "gateway_request": APPENDIX_A["request"],
        "encapsulated_response": APPENDIX_A["encapsulated_response"],
    }
    assert not errors, errors
    page.close()

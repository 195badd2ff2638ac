"""The JavaScript SDK through Oblivious HTTP against the real collector: a Node client seals
its batches for the gateway of a real ``ldp serve`` and posts them through a real
``ldp relay``; the aggregator counts every report exactly once. A key configuration the
gateway no longer has gets RFC 9458 §5.3's problem, and the SDK fetches the keys again and
recovers.

The client is ``client_js/src`` (its ``Client`` and ``Relay``), run by Node 20. The
collector shuffles relayed reports in batches of at least ``LDP_SHUFFLE_MIN_BATCH`` = 10
per metric version (every count sent here is a multiple of it, so every pool is released).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from relay_helpers import Recording, run_relay
from serve_helpers import defined_server

from client_sdk.ohttp.keys import GATEWAY_PATH
from ldp_server.serve import Server
from tests.http_helpers import call

ROOT = Path(__file__).resolve().parent.parent
SRC = (ROOT / "client_js" / "src").as_uri()
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(NODE is None, reason="Node 20 is not installed")

SPECS = {
    "app.theme": {"domain": ["light", "dark", "auto"], "epsilon": 1.0},
    "session.minutes": {"kind": "numeric", "range": [0, 120], "epsilon": 1.0},
}

CLIENT = f"""
import {{ Client, MemoryStorage }} from "{SRC}/index.js";
import {{ Relay }} from "{SRC}/ohttp.js";
const [collector, relayUrl, keysUrl, n] = process.argv.slice(2);
const relay = new Relay(relayUrl, keysUrl ? {{ keysUrl }} : {{}});
const client = new Client(collector, {{ relay, storage: new MemoryStorage(), flushAt: 1000,
                                        maxBatchReports: 100 }});
let ok = 0;
for (let i = 0; i < Number(n); i++) {{
  ok += await client.report(...(i % 2 ? ["session.minutes", i % 121] : ["app.theme", i % 3]));
}}
const empty = await client.flush();
console.log(JSON.stringify({{ ok, empty, stats: client.stats(), relay: relay.counts }}));
await client.shutdown();
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("ohttp-js")
    with defined_server(data, SPECS, {"LDP_SHUFFLE_MIN_BATCH": "10"}) as s:
        yield s


@pytest.fixture(scope="module")
def relay(server: Server) -> Iterator[str]:
    """A real ``ldp relay`` (its own process) in front of the collector's gateway."""
    yield from run_relay(f"{server.url}{GATEWAY_PATH}")


def _node(tmp_path: Path, *args: str) -> dict[str, Any]:
    assert NODE is not None
    script = tmp_path / "client.mjs"
    script.write_text(CLIENT)
    done = subprocess.run(
        [NODE, str(script), *args], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _counted(server: Server) -> dict[str, int]:
    return {name: call(f"{server.url}/v1/estimates/{name}")["n"] for name in SPECS}


def _wait_for(server: Server, expected: dict[str, int]) -> None:
    deadline = time.monotonic() + 120
    while _counted(server) != expected:
        assert time.monotonic() < deadline, f"counted {_counted(server)}, expected {expected}"
        time.sleep(0.3)


def test_a_node_client_reports_through_a_real_relay_and_each_report_counts_once(
    server: Server, relay: str, tmp_path: Path
) -> None:
    before = _counted(server)
    out = _node(tmp_path, server.url, relay, "", "300")
    assert out["ok"] == 300 and out["empty"] is True, out
    assert out["stats"]["accepted"] == 300 and out["stats"]["batches"] == 3, out
    # 3 batches and the 2 definitions, all sealed: the keys are the one direct fetch.
    assert out["relay"] == {"requests": 5, "keyFetches": 1, "keyRetries": 0}
    _wait_for(server, {name: before[name] + 150 for name in SPECS})


class StaleKeys(BaseHTTPRequestHandler):
    """Serves a key configuration the gateway never had, then the gateway's own."""

    gateway = ""
    served = 0

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        return None

    def do_GET(self) -> None:  # noqa: N802
        cls = type(self)
        cls.served += 1
        with urllib.request.urlopen(cls.gateway, timeout=10) as r:
            real = r.read()
        body = real
        if cls.served == 1:  # the same configuration under a key id the gateway does not hold
            config = bytearray(real[2 : 2 + int.from_bytes(real[:2], "big")])
            config[0] = (config[0] + 128) % 256
            body = len(config).to_bytes(2, "big") + bytes(config)
        self.send_response(200)
        self.send_header("Content-Type", "application/ohttp-keys")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_a_key_the_gateway_does_not_hold_is_refused_and_the_sdk_fetches_the_keys_again(
    server: Server, relay: str, tmp_path: Path
) -> None:
    StaleKeys.gateway = f"{server.url}{GATEWAY_PATH}"
    StaleKeys.served = 0
    keys = ThreadingHTTPServer(("127.0.0.1", 0), StaleKeys)
    threading.Thread(target=keys.serve_forever, daemon=True).start()
    try:
        before = _counted(server)
        keys_url = f"http://127.0.0.1:{keys.server_address[1]}/keys"
        out = _node(tmp_path, server.url, relay, keys_url, "40")
    finally:
        keys.shutdown()
        keys.server_close()
    assert out["ok"] == 40 and out["empty"] is True, out
    # The first definition fetch is refused (the key) and sealed anew; then the other
    # definition and the batch.
    assert out["relay"] == {"requests": 4, "keyFetches": 2, "keyRetries": 1}
    assert out["stats"]["accepted"] == 40 and out["stats"]["retries"] == 0, out
    _wait_for(server, {name: before[name] + 20 for name in SPECS})


def test_with_a_relay_the_node_client_reaches_the_collector_only_for_its_keys(
    server: Server, tmp_path: Path
) -> None:
    """A recording front before the collector: the device (Node) names it as the
    collector, and the real relay forwards to its gateway. The device's only direct
    request is the key fetch made when the client is made; the definitions are sealed
    through the relay like the batches (the relay only ever POSTs the gateway). Fails on
    the old SDK, which fetched each definition directly just before the relayed upload."""
    seen: list[tuple[float, str, str, str]] = []
    handler = type("ToCollector", (Recording,), {"target": server.url, "seen": seen})
    front = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=front.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{front.server_address[1]}"
    try:
        before = _counted(server)
        relay = run_relay(url + GATEWAY_PATH)
        out = _node(tmp_path, url, next(relay), "", "20")
        relay.close()
    finally:
        front.shutdown()
        front.server_close()
    assert out["ok"] == 20 and out["stats"]["accepted"] == 20, out
    direct = [(m, p) for _, m, p, _ in seen if (m, p) != ("POST", GATEWAY_PATH)]
    assert direct == [("GET", GATEWAY_PATH)], seen
    assert len(seen) == 1 + 3, seen  # the keys; 2 definitions and 1 batch, relayed
    _wait_for(server, {name: before[name] + 10 for name in SPECS})

"""``ldp relay`` as its own process, in front of a recording gateway: it forwards the body
unread with no header of the device and none of its own, passes back only what the device
needs, answers a page's preflight for allowed origins, and logs nothing about devices."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests
from relay_helpers import run_relay

from ldp_store.embedded import free_port

SEALED = bytes(range(256)) * 3
PAGE = "https://app.example"


class Recorder(BaseHTTPRequestHandler):
    """A stand-in gateway that keeps what reached it and answers like one."""

    seen: list[tuple[dict[str, str], bytes]] = []

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.seen.append(({k.lower(): v for k, v in self.headers.items()}, body))
        self.send_response(200)
        self.send_header("Content-Type", "message/ohttp-res")
        self.send_header("Set-Cookie", "tracking=1")
        self.send_header("X-Gateway-Secret", "internal")
        self.send_header("Content-Length", "4")
        self.end_headers()
        self.wfile.write(b"\x01\x02\x03\x04")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def relay(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    Recorder.seen = []
    gateway = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=gateway.serve_forever, daemon=True).start()
    log = tmp_path / "relay.out"
    try:
        gateway_url = f"http://127.0.0.1:{gateway.server_port}/.well-known/ohttp-gateway"
        for url in run_relay(gateway_url, PAGE, log=log):
            yield url, log
    finally:
        gateway.shutdown()


DEVICE_HEADERS = {
    "Content-Type": "message/ohttp-req",
    "User-Agent": "ZqDeviceAgent/1.0",
    "Cookie": "session=zq-cookie",
    "X-Forwarded-For": "203.0.113.9",
    "Forwarded": "for=203.0.113.9",
    "X-Real-IP": "203.0.113.9",
    "Authorization": "Bearer zq-secret-token-123",
    "Accept-Language": "zq-ZQ",
    "Origin": PAGE,
}


def test_the_body_goes_through_unread_and_no_device_header_with_it(
    relay: tuple[str, Path],
) -> None:
    url, log = relay
    answer = requests.post(url, data=SEALED, headers=DEVICE_HEADERS, timeout=10)
    assert answer.status_code == 200 and answer.content == b"\x01\x02\x03\x04"
    assert answer.headers["Content-Type"] == "message/ohttp-res"
    assert "Set-Cookie" not in answer.headers and "X-Gateway-Secret" not in answer.headers
    assert answer.headers["Access-Control-Allow-Origin"] == PAGE
    [(headers, body)] = Recorder.seen
    assert body == SEALED
    assert set(headers) <= {"host", "content-type", "accept", "content-length", "connection"}
    assert headers["content-type"] == "message/ohttp-req"
    time.sleep(0.2)
    text = log.read_text()
    assert "Booting worker" in text  # the log is written
    assert "zq" not in text.lower() and "203.0.113.9" not in text  # (the device's address:
    # tests/test_ohttp_e2e.py, where it differs from the relay's own)


def test_no_cookie_crosses_the_relay_and_exactly_the_documented_headers_go_on(
    relay: tuple[str, Path],
) -> None:
    """The gateway sets a cookie on every answer: the device never gets it, and the relay
    keeps no jar that would replay it (with it, a collector could chain one device's
    consecutive uploads). Every forwarded request has HTTP's own ``Host`` and
    ``Content-Length`` and the two the relay guide documents, nothing else."""
    url, _ = relay
    for _ in range(3):
        answer = requests.post(url, data=SEALED, headers=DEVICE_HEADERS, timeout=10)
        assert answer.status_code == 200
        assert "Set-Cookie" not in answer.headers and not answer.cookies
    assert len(Recorder.seen) == 3
    documented = {"content-type": "message/ohttp-req", "accept": "message/ohttp-res"}
    for headers, _ in Recorder.seen:
        assert set(headers) == {"host", "content-length", *documented}, headers
        assert {k: headers[k] for k in documented} == documented


def test_a_pages_preflight_is_answered_for_allowed_origins_only(relay: tuple[str, Path]) -> None:
    url, _ = relay
    asked = {
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type",
    }
    allowed = requests.options(url, headers={"Origin": PAGE, **asked}, timeout=10)
    assert allowed.status_code == 204
    assert allowed.headers["Access-Control-Allow-Origin"] == PAGE
    assert allowed.headers["Access-Control-Allow-Methods"] == "POST"
    other = requests.options(url, headers={"Origin": "https://evil.example", **asked}, timeout=10)
    assert "Access-Control-Allow-Origin" not in other.headers
    assert Recorder.seen == []  # nothing forwarded


@pytest.mark.parametrize(
    ("method", "path", "headers", "status"),
    [
        ("POST", "", {"Content-Type": "application/json"}, 415),
        ("GET", "", {}, 405),
        ("POST", "v1/reports", {"Content-Type": "message/ohttp-req"}, 404),
    ],
)
def test_anything_but_a_sealed_post_is_refused_unforwarded(
    relay: tuple[str, Path], method: str, path: str, headers: dict[str, str], status: int
) -> None:
    url, _ = relay
    answer = requests.request(method, url + path, data=b"x", headers=headers, timeout=10)
    assert answer.status_code == status and answer.json()["error"]
    assert Recorder.seen == []


def test_an_unreachable_gateway_is_a_502_to_retry(tmp_path: Path) -> None:
    from werkzeug.test import Client

    from ldp_relay.forward import create_relay

    app = create_relay({"LDP_RELAY_GATEWAY": f"http://127.0.0.1:{free_port()}/x"})
    answer = Client(app).post("/", data=b"x", headers={"Content-Type": "message/ohttp-req"})
    assert answer.status_code == 502 and answer.headers["Retry-After"] == "5"


def test_every_hop_of_the_gateway_path_allows_the_collectors_limit_plus_the_sealing() -> None:
    """The relay, the gateway and deploy/nginx.conf's gateway location agree: a batch
    the collector accepts directly is never refused sealed (the nginx test sends one)."""
    import re

    from client_sdk.ohttp.keys import SEALING_OVERHEAD
    from collector.ohttp_gateway import ENCAPSULATION_OVERHEAD
    from collector.settings import MAX_BODY_BYTES
    from ldp_relay.limits import DEFAULT_MAX_BODY_BYTES

    allowed = MAX_BODY_BYTES + SEALING_OVERHEAD
    assert DEFAULT_MAX_BODY_BYTES == allowed and ENCAPSULATION_OVERHEAD == SEALING_OVERHEAD
    conf = (Path(__file__).resolve().parents[1] / "deploy" / "nginx.conf").read_text()
    location = re.search(r"location = /\.well-known/ohttp-gateway \{(.*?)\}", conf, re.S)
    assert location is not None
    assert f"client_max_body_size {allowed};" in location.group(1)

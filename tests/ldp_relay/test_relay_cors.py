"""``ldp relay`` and web pages: an allowed page can read the relay's own refusals and their
``Retry-After`` (the JS SDK's backoff honours it), which a browser hides unless exposed."""

from __future__ import annotations

from werkzeug.test import Client

from ldp_relay.forward import create_relay

APP = "https://app.example"
# Nothing listens there: a forwarded upload gets the relay's own 502 (with Retry-After).
GATEWAY = "http://127.0.0.1:9/.well-known/ohttp-gateway"


def test_an_allowed_page_reads_the_relays_refusal_and_its_retry_after() -> None:
    relay = Client(create_relay({"LDP_RELAY_GATEWAY": GATEWAY, "LDP_RELAY_CORS_ORIGINS": APP}))
    posted = relay.post(
        "/", data=b"sealed", headers={"Origin": APP, "Content-Type": "message/ohttp-req"}
    )
    assert posted.status_code == 502 and posted.headers["Retry-After"] == "5"
    assert posted.headers["Access-Control-Allow-Origin"] == APP
    assert posted.headers["Access-Control-Expose-Headers"] == "Retry-After"
    other = relay.post(
        "/", data=b"sealed", headers={"Origin": "https://evil.example", "Content-Type": "x/y"}
    )
    assert "Access-Control-Expose-Headers" not in other.headers

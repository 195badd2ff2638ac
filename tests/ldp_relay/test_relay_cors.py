"""``ldp relay`` and web pages: for the origins in ``LDP_RELAY_CORS_ORIGINS`` the relay
answers the preflight of ``POST /`` and lets the page read every answer and its
``Retry-After``; other origins, and every origin by default, get nothing of the kind."""

from __future__ import annotations

import pytest
from werkzeug.test import Client

from ldp_relay.forward import PREFLIGHT_MAX_AGE, Relay, create_relay
from ldp_relay.limits import parse_origins

APP = "https://app.example"
# Nothing listens there: a forwarded upload gets the relay's own 502 (with Retry-After).
GATEWAY = "http://127.0.0.1:9/.well-known/ohttp-gateway"


def relay(origins: str = "") -> Client:
    return Client(create_relay({"LDP_RELAY_GATEWAY": GATEWAY, "LDP_RELAY_CORS_ORIGINS": origins}))


PREFLIGHT = {
    "Origin": APP,
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "content-type",
}


def test_an_allowed_page_gets_the_preflight_and_reads_the_answer_and_its_retry_after() -> None:
    c = relay(f"{APP}, https://other.example:8443")
    pre = c.options("/", headers=PREFLIGHT)
    assert pre.status_code == 204
    assert pre.headers["Access-Control-Allow-Origin"] == APP
    assert pre.headers["Access-Control-Allow-Methods"] == "POST"
    assert pre.headers["Access-Control-Allow-Headers"] == "Content-Type"
    assert pre.headers["Access-Control-Max-Age"] == str(PREFLIGHT_MAX_AGE)
    assert "Access-Control-Allow-Credentials" not in pre.headers
    posted = c.post(
        "/", data=b"sealed", headers={"Origin": APP, "Content-Type": "message/ohttp-req"}
    )
    assert posted.status_code == 502 and posted.headers["Retry-After"] == "5"
    assert posted.headers["Access-Control-Allow-Origin"] == APP
    assert posted.headers["Access-Control-Expose-Headers"] == "Retry-After"
    assert "Origin" in posted.headers["Vary"]
    refused = c.post("/", data=b"x", headers={"Origin": APP, "Content-Type": "text/plain"})
    assert refused.status_code == 415  # the relay's own refusals reach the page too
    assert refused.headers["Access-Control-Allow-Origin"] == APP


def test_other_origins_other_paths_and_the_default_get_no_cors() -> None:
    c = relay(APP)
    elsewhere = {**PREFLIGHT, "Origin": "https://evil.example"}
    assert c.options("/", headers=elsewhere).status_code == 405
    posted = c.post(
        "/", data=b"x", headers={"Origin": "https://evil.example", "Content-Type": "text/plain"}
    )
    assert "Access-Control-Allow-Origin" not in posted.headers
    health = c.get("/healthz", headers={"Origin": APP})
    assert "Access-Control-Allow-Origin" not in health.headers
    get = c.options("/", headers={**PREFLIGHT, "Access-Control-Request-Method": "GET"})
    assert "Access-Control-Allow-Origin" not in get.headers
    default = relay()
    assert default.options("/", headers=PREFLIGHT).status_code == 405
    assert "Access-Control-Allow-Origin" not in default.options("/", headers=PREFLIGHT).headers
    anyone = Client(Relay(GATEWAY, cors_origins=parse_origins("*")))
    assert anyone.options("/", headers=PREFLIGHT).headers["Access-Control-Allow-Origin"] == APP


@pytest.mark.parametrize("bad", ["app.example", "https://app.example/path", "ftp://x.example"])
def test_a_malformed_origin_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="not an origin"):
        parse_origins(bad)
    assert parse_origins(" HTTPS://App.example/ , * ") == {"https://app.example", "*"}

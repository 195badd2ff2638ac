"""The sign-in pages and sessions of the dashboard (aggregator/web/signin.py,
ldp_api/sessions.py) through the whole WSGI stack, on a real Redis, with a provider's
discovery and keys served over HTTP (tests/oidc_helpers.py): the cookie's attributes
over plain HTTP, TLS and a trusted proxy; no open redirect; roles and CSRF on changes;
sign-out. The flow with a real provider and Chromium: tests/browser/test_signin_browser.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from oidc_helpers import CLIENT, Issuer, rsa_keys, serving_issuer

from ldp_server.app import create_server_app
from ldp_store.sessions import SessionStore


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    with serving_issuer(rsa_keys()[0]) as found:
        yield found


def _app(redis_db: Any, issuer: Issuer, **extra: Any) -> Any:
    config = {
        "REDIS_URL": redis_db.url,
        "OIDC_ISSUER": issuer.url,
        "OIDC_CLIENT_ID": CLIENT,
        "OIDC_ROLES": {"ldp-owners": {"default": "owner"}},
    }
    return create_server_app(config | extra)


def _begin(
    client: Any, base_url: str = "http://localhost", **headers: str
) -> tuple[str, dict[str, list[str]]]:
    answer = client.get("/ui/signin?next=//evil.example/x", headers=headers, base_url=base_url)
    assert answer.status_code == 303
    return answer.headers["Set-Cookie"], parse_qs(urlsplit(answer.headers["Location"]).query)


def test_the_signin_cookie_is_secure_behind_tls_or_a_trusted_proxy_only(
    redis_db: Any, issuer: Issuer
) -> None:
    plain = _app(redis_db, issuer).test_client()
    cookie, query = _begin(plain, **{"X-Forwarded-Proto": "https"})  # not believed
    assert cookie.startswith("ldp_signin=") and "Secure" not in cookie
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Path=/" in cookie
    assert query["code_challenge_method"] == ["S256"] and len(query["code_challenge"][0]) == 43
    assert query["redirect_uri"] == ["http://localhost/ui/signin/callback"]
    attempt = SessionStore(redis_db.client()).take(query["state"][0])
    assert attempt is not None and attempt.next == "/"  # never back to another host

    proxied = _app(redis_db, issuer, TRUST_FORWARDED_PROTO=True).test_client()
    cookie, query = _begin(proxied, **{"X-Forwarded-Proto": "https"})
    assert cookie.startswith("__Host-ldp_signin=") and "Secure" in cookie
    assert query["redirect_uri"] == ["https://localhost/ui/signin/callback"]
    cookie, _ = _begin(proxied)  # the proxy said nothing: plain HTTP
    assert cookie.startswith("ldp_signin=")

    cookie, _ = _begin(plain, base_url="https://localhost")  # TLS to the service itself
    assert cookie.startswith("__Host-ldp_signin=") and "Secure" in cookie


def test_a_sessions_role_decides_and_its_csrf_token_guards_changes(
    redis_db: Any, issuer: Issuer
) -> None:
    app = _app(redis_db, issuer)
    store = SessionStore(redis_db.client())
    viewer_id, viewer = store.create("sso:v@example.org", {"default": "viewer"}, 3600)
    owner_id, owner = store.create("sso:o@example.org", {"default": "owner"}, 3600)
    client = app.test_client()
    # Signed out: pages go to sign-in, APIs answer 401.
    answer = client.get("/ui/alerts?x=1")
    assert answer.status_code == 303
    assert answer.headers["Location"] == "/ui/signin?next=/ui/alerts%3Fx%3D1"
    assert client.get("/v1/overview").status_code == 401

    client.set_cookie("_ga", "tracker")  # stripped before the app, beside the session's
    client.set_cookie("ldp_session", viewer_id)
    assert client.get("/v1/overview").status_code == 200
    refused = client.post("/v1/alerts", json={}, headers={"X-CSRF-Token": viewer.csrf})
    assert refused.status_code == 403  # a viewer may not change

    client.set_cookie("ldp_session", owner_id)
    page = client.get("/ui/alerts").get_data(as_text=True)
    assert f'name="csrf-token" content="{owner.csrf}"' in page and 'id="signout"' in page
    no_csrf = client.post("/v1/alerts", json={})
    assert no_csrf.status_code == 403 and "CSRF" in no_csrf.get_json()["error"]
    wrong = client.post("/v1/alerts", json={}, headers={"X-CSRF-Token": viewer.csrf})
    assert wrong.status_code == 403
    assert (
        client.post("/v1/alerts", json={}, headers={"X-CSRF-Token": owner.csrf}).status_code == 400
    )
    # A signed-in browser's reports (the "Try it" page) are a device's: no CSRF asked.
    assert client.post("/v1/reports", json={"reports": []}).status_code != 403

    # Signing out needs the form's token too; then the cookie is worth nothing.
    assert client.post("/ui/signout", data={"csrf_token": "stale"}).status_code == 403
    assert store.get(owner_id) is not None
    assert client.post("/ui/signout", data={"csrf_token": owner.csrf}).status_code == 200
    assert store.get(owner_id) is None
    assert client.get("/v1/overview").status_code == 401

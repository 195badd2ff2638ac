"""Signing in to the dashboard with a real OpenID Connect provider and a real Chromium.

The provider is oidc-provider (npm, tests/oidc/), started here on a free port; the app
is the whole web service (``create_server_app``) with ``LDP_OIDC_…`` set, on a real
Redis. Chromium signs in with the provider's login form (authorization code + PKCE),
is refused a project it has no role in, signs out, has its session expire (the
session store's injected clock jumps past the lifetime: no waiting), and signs in again
after the provider rotated its signing key (the app must fetch the new JWKS).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from werkzeug.serving import make_server

from ldp_api import sessions
from ldp_server.app import create_server_app
from ldp_store.auditlog import AuditLog
from ldp_store.embedded import free_port

OIDC = Path(__file__).resolve().parents[1] / "oidc"
CLIENT_ID = "ldp-dashboard"
CLIENT_SECRET = "a-client-secret-of-the-test-provider"
ADMIN_TOKEN = "admin-token-for-the-signin-test"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
ROLES = {"ldp-owners": {"default": "owner"}, "other-viewers": {"other": "viewer"}}
ACCOUNTS = {"alice": ["ldp-owners"], "bob": ["other-viewers"]}
LIFETIME = 3600


@dataclass
class Site:
    url: str
    issuer: str
    app: Any
    redis: Any


def _start_provider(redirect_uri: str) -> tuple[subprocess.Popen[str], str]:
    if shutil.which("node") is None or not (OIDC / "node_modules" / "oidc-provider").exists():
        pytest.skip("oidc-provider is not installed: `python3 tasks.py setup` (npm ci tests/oidc)")
    options = {
        "clientId": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
        "redirectUri": redirect_uri,
        "accounts": ACCOUNTS,
    }
    proc = subprocess.Popen(
        ["node", "provider.mjs", json.dumps(options)],
        cwd=OIDC,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # printed once it listens
    if not line:
        proc.kill()
        pytest.fail("the OpenID Connect provider did not start")
    return proc, json.loads(line)["issuer"]


@pytest.fixture(scope="module")
def server(redis_server: Any) -> Iterator[Site]:
    """The web service signing in with a real provider; both on loopback ports."""
    redis_server.client().flushall()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc, issuer = _start_provider(f"{url}/ui/signin/callback")
    app = create_server_app(
        {
            "REDIS_URL": redis_server.url,
            "ADMIN_TOKEN": ADMIN_TOKEN,
            "OIDC_ISSUER": issuer,
            "OIDC_CLIENT_ID": CLIENT_ID,
            "OIDC_CLIENT_SECRET": CLIENT_SECRET,
            "OIDC_SCOPES": "openid email profile groups",
            "OIDC_ROLES": ROLES,
            "SESSION_SECONDS": LIFETIME,
        }
    )
    web = make_server("127.0.0.1", port, app, threaded=True)
    thread = threading.Thread(target=web.serve_forever, daemon=True)
    thread.start()
    try:
        yield Site(url, issuer, app, redis_server.client())
    finally:
        web.shutdown()
        thread.join(5)
        web.server_close()
        proc.terminate()
        proc.wait(5)


def _sign_in(page: Any, site: Site, path: str, account: str) -> Any:
    """Open ``path`` signed out: the provider's login form, then back to ``path``."""
    page.goto(site.url + path)
    page.wait_for_url(f"{site.issuer}/**")
    page.fill("input[name=login]", account)
    page.fill("input[name=password]", "any password")
    page.click("button[type=submit]")
    page.wait_for_url(site.url + path)
    return page


def _audit(site: Site) -> list[tuple[str, str, str]]:
    log = AuditLog(site.redis)
    return [(e.action, e.actor, e.outcome) for e in log.read(50)]


def test_signing_in_out_expiry_and_key_rotation(browser: Any, server: Site) -> None:
    context = browser.new_context()
    context.set_default_timeout(20_000)
    page = context.new_page()
    # Signed out, a page goes to the provider; signed in, it comes back to that page.
    _sign_in(page, server, "/ui/alerts", "alice")
    assert page.locator("#signout").is_visible()
    cookie = next(c for c in context.cookies(server.url) if c["name"] == "ldp_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Lax"
    assert not cookie["secure"]  # plain HTTP here; behind TLS it is __Host- and Secure
    assert ("session.signin", "sso:alice@example.org", "ok") in _audit(server)

    # A state-changing request of the session needs its CSRF token.
    status = page.evaluate(
        """async ([headers]) => (await fetch('/v1/alerts', {method: 'POST', headers,
             body: '{}'})).status""",
        [{"Content-Type": "application/json"}],
    )
    assert status == 403
    csrf = page.locator('meta[name="csrf-token"]').get_attribute("content")
    status = page.evaluate(
        """async ([headers]) => (await fetch('/v1/alerts', {method: 'POST', headers,
             body: '{}'})).status""",
        [{"Content-Type": "application/json", "X-CSRF-Token": csrf}],
    )
    assert status == 400  # past the owner's check and the CSRF check: the body is empty

    # The alerts page's form, signed in: no token field, the session and its CSRF token.
    metric = {"domain": ["light", "dark"], "epsilon": 1.0, "mechanism": "grr"}
    made = requests.put(f"{server.url}/v1/metrics/theme", json=metric, headers=ADMIN, timeout=5)
    assert made.status_code == 201
    page.reload()
    assert page.locator("#new-alert input[name=token]").count() == 0
    page.fill("#new-alert input[name=metric]", "theme")
    page.fill("#new-alert input[name=value]", "dark")
    page.fill("#new-alert input[name=level]", "0.5")
    with page.expect_navigation():
        page.click("#new-alert button[type=submit]")
    assert page.locator("#alerts-table tr[data-rule]").count() == 1

    # The provider rotates its key; signing out and in again needs its new JWKS.
    old = sessions.SIGNIN.get(server.app).provider.keys()
    kid = requests.post(f"{server.issuer}/__rotate", timeout=5).json()["kid"]
    assert kid not in {k.kid for k in old.keys}
    page.click("#signout")
    assert page.locator("#signin-message").inner_text() == "You are signed out of the dashboard."
    assert page.context.request.get(server.url + "/", max_redirects=0).status == 303
    _sign_in(page, server, "/", "alice")
    assert page.locator("#signout").is_visible()
    assert kid in {k.kid for k in sessions.SIGNIN.get(server.app).provider.keys().keys}
    assert ("session.signout", "sso:alice@example.org", "ok") in _audit(server)
    assert ("alert.create", "sso:alice@example.org", "ok") in _audit(server)

    # An expired session is sent back to sign-in (its record is gone too).
    store = sessions.SIGNIN.get(server.app).store
    store.clock = lambda: time.time() + LIFETIME + 1
    try:
        answer = page.context.request.get(server.url + "/ui/alerts", max_redirects=0)
    finally:
        store.clock = time.time
    assert answer.status == 303
    assert answer.headers["location"] == "/ui/signin?next=/ui/alerts"
    assert not list(server.redis.scan_iter("ldp:session:*"))
    context.close()


def test_no_role_in_the_project_is_refused_and_tokens_still_work(
    browser: Any, server: Site
) -> None:
    context = browser.new_context()
    context.set_default_timeout(20_000)
    page = context.new_page()
    page.goto(server.url + "/")
    page.wait_for_url(f"{server.issuer}/**")
    page.fill("input[name=login]", "bob")
    page.fill("input[name=password]", "any password")
    with page.expect_response(server.url + "/") as answer:
        page.click("button[type=submit]")
    assert answer.value.status == 403
    assert "no role in project “default”" in page.locator("#signin-message").inner_text()
    assert page.context.request.get(server.url + "/v1/overview").status == 403
    context.close()
    # Machines keep their tokens; without one (and no session) reads are closed.
    overview = f"{server.url}/v1/overview"
    assert requests.get(overview, headers=ADMIN, timeout=5).status_code == 200
    assert requests.get(overview, timeout=5).status_code == 401
    # An answer not for a sign-in begun in this browser is refused, and logged.
    bad = requests.get(f"{server.url}/ui/signin/callback?state=x&code=y", timeout=5)
    assert bad.status_code == 400
    assert ("session.signin", "anonymous", "refused") in _audit(server)

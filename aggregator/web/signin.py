"""The dashboard's sign-in pages (OpenID Connect, with ``LDP_OIDC_ISSUER`` set).

* ``GET /ui/signin?next=/ui/…`` — begins the authorization code flow with PKCE: keeps the
  attempt (:mod:`ldp_store.sessions`), binds its ``state`` to this browser with a cookie,
  and sends the browser to the provider;
* ``GET /ui/signin/callback`` — the provider's answer: the code is exchanged and the
  ``id_token`` validated (:mod:`ldp_api.oidc`), a session made, the cookie set;
* ``POST /ui/signout`` — a form with the CSRF token: the session is ended.

Sign-in, failed sign-in and sign-out go to the audit log (who, never from where). When
signed out, a dashboard page sends the browser here; signed in without a role in the
project, it answers 403. Docs: docs/guides/teams.md.
"""

from __future__ import annotations

import hmac
import logging
import secrets
from urllib.parse import quote

import redis
from flask import Blueprint, Flask, Response, render_template, request, url_for
from redis.exceptions import RedisClusterException

from aggregator.web.dashboard import CONTENT_SECURITY_POLICY
from ldp_api import auditing, auth, sessions
from ldp_api.oidc import SignInError, pkce_pair
from ldp_store.auditlog import AuditRecord
from ldp_store.sessions import ATTEMPT_SECONDS, Attempt

__all__ = ["bp", "install", "safe_next"]

log = logging.getLogger(__name__)

bp = Blueprint("signin", __name__, template_folder="templates")


def safe_next(path: str | None) -> str:
    """A path on this site to return to (an absolute URL, or ``//host``, is refused: no
    open redirect)."""
    if not path or not path.startswith("/") or path.startswith(("//", "/\\")):
        return url_for("dashboard.overview")
    return path


def _page(status: int, title: str, message: str, again: bool = True) -> Response:
    body = render_template("signin.html", title=title, message=message, again=again)
    return Response(body, status=status, mimetype="text/html")


def _audit(action: str, actor: str, outcome: str, status: int) -> None:
    entry = AuditRecord(action, actor, sessions.project_of_request(), "", outcome, status)
    try:
        auditing.AUDIT.get().append(entry)
    except (redis.RedisError, RedisClusterException) as exc:
        log.error("audit entry not written (%s): %s", type(exc).__name__, entry)


def _cookie(response: Response, base: str, value: str, max_age: int) -> None:
    response.set_cookie(
        sessions.cookie_name(base),
        value,
        max_age=max_age,
        path="/",
        secure=sessions.is_secure(),
        httponly=True,
        samesite="Lax",
    )


def redirect(location: str) -> Response:
    """A 303 to ``location`` (a Flask response, for the cookies set on it)."""
    response = Response(status=303)
    response.headers["Location"] = location
    return response


def _redirect_uri(signin: sessions.SignIn) -> str:
    if signin.settings.redirect_uri:
        return signin.settings.redirect_uri
    scheme = "https" if sessions.is_secure() else request.scheme
    return url_for("signin.callback", _external=True, _scheme=scheme)


@bp.after_request
def _headers(response: Response) -> Response:
    # The callback's URL holds a code: no Referer carries it on, no cache keeps a page.
    response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
    response.headers.setdefault("Referrer-Policy", "no-referrer")
    response.headers.setdefault("Cache-Control", "no-store")
    return response


@bp.get("/ui/signin")
def begin() -> Response:
    """Send the browser to the provider."""
    signin = sessions.SIGNIN.get()
    verifier, challenge = pkce_pair()
    nonce = secrets.token_urlsafe(24)
    attempt = Attempt(verifier, nonce, safe_next(request.args.get("next")))
    state = signin.store.begin(attempt)
    try:
        url = signin.provider.authorization_url(_redirect_uri(signin), state, nonce, challenge)
    except SignInError as exc:
        return _page(502, "Sign-in unavailable", str(exc))
    response = redirect(url)
    _cookie(response, sessions.ATTEMPT_COOKIE, state, ATTEMPT_SECONDS)
    return response


@bp.get("/ui/signin/callback")
def callback() -> Response:
    """Check the provider's answer, make the session, go back to the page."""
    signin = sessions.SIGNIN.get()
    state = request.args.get("state", "")
    bound = request.cookies.get(sessions.cookie_name(sessions.ATTEMPT_COOKIE), "")
    if not state or not hmac.compare_digest(state.encode(), bound.encode()):
        _audit("session.signin", "anonymous", "refused", 400)
        return _page(400, "Sign-in failed", "This answer was not for a sign-in begun here.")
    attempt = signin.store.take(state)
    if attempt is None:
        _audit("session.signin", "anonymous", "refused", 400)
        return _page(400, "Sign-in failed", "The sign-in took too long or was used already.")
    if "error" in request.args or "code" not in request.args:
        _audit("session.signin", "anonymous", "refused", 403)
        error = request.args.get("error", "no code")[:100]
        return _page(403, "Sign-in failed", f"The identity provider answered: {error}.")
    try:
        id_token = signin.provider.exchange(
            request.args["code"], attempt.verifier, _redirect_uri(signin)
        )
        identity = signin.provider.identity(signin.provider.validate(id_token, attempt.nonce))
    except SignInError as exc:
        _audit("session.signin", "anonymous", "refused", 403)
        return _page(403, "Sign-in failed", str(exc))
    session_id, _ = signin.store.create(
        identity.actor, identity.roles, signin.settings.session_seconds
    )
    _audit("session.signin", identity.actor, "ok", 303)
    response = redirect(attempt.next)
    _cookie(response, sessions.SESSION_COOKIE, session_id, signin.settings.session_seconds)
    response.delete_cookie(sessions.cookie_name(sessions.ATTEMPT_COOKIE), path="/")
    return response


@bp.post("/ui/signout")
def signout() -> Response:
    """End the session (the form carries its CSRF token)."""
    found = sessions.session_of_request()
    if found is None:
        return _page(200, "Signed out", "You are signed out.")
    session_id, session = found
    if not sessions.csrf_ok(session):
        _audit("session.signout", session.actor, "refused", 403)
        return _page(403, "Not signed out", "The form was stale: reload the page and try again.")
    sessions.SIGNIN.get().store.end(session_id)
    _audit("session.signout", session.actor, "ok", 200)
    response = _page(200, "Signed out", "You are signed out of the dashboard.")
    response.delete_cookie(sessions.cookie_name(sessions.SESSION_COOKIE), path="/")
    return response


def _refuse_page(scope: str, reason: auth.Reason) -> Response:
    """A dashboard page refused: to sign-in when signed out, else 403 (no role)."""
    if reason in ("missing", "invalid") and request.method in sessions.SAFE_METHODS:
        return redirect(
            url_for("signin.begin") + "?next=" + quote(request.full_path.rstrip("?"), safe="/")
        )
    project = sessions.project_of_request()
    return _page(
        403,
        "No access",
        f"You are signed in, but have no role in project “{project}” that allows this "
        f"({scope}). Ask its owner for one.",
        again=False,
    )


def install(app: Flask) -> None:
    """Mount the sign-in pages when sign-in is configured, and send refused dashboard
    pages to them (after :func:`aggregator.web.access.install`)."""
    if sessions.SIGNIN.find(app) is None:
        return
    app.register_blueprint(bp)
    auth.POLICY.get(app).refusers["dashboard"] = _refuse_page

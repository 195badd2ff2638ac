"""Signed-in operators: the session cookie, CSRF, and who a session acts as.

With ``LDP_OIDC_ISSUER`` set, the dashboard signs operators in with OpenID Connect
(:mod:`ldp_api.oidc`; the pages are ``aggregator.web.signin``'s) and keeps them signed in
with a cookie holding a random session id (:mod:`ldp_store.sessions`): ``HttpOnly``,
``SameSite=Lax``, ``Secure`` whenever the request came over TLS (``X-Forwarded-Proto`` is
believed only with ``LDP_TRUST_FORWARDED_PROTO``), ``__Host-`` named then. Only these
cookies get past :class:`collector.logs.StripClientMetadata`. Every state-changing
request a session makes must carry its CSRF token (``X-CSRF-Token`` or a
``csrf_token`` form field). Tokens keep working as before for machines.
Docs: docs/guides/teams.md, docs/security/threat-model.md.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from flask import Flask, Response, current_app, g, jsonify, request

from ldp_api import auth
from ldp_api.context import Slot, shared
from ldp_api.models import Error, answer
from ldp_api.oidc import ROLES, OidcSettings, Provider, settings_from
from ldp_store.projects import check_project
from ldp_store.sessions import Session, SessionStore
from ldp_store.tokens import DEFAULT_PROJECT

__all__ = [
    "ATTEMPT_COOKIE",
    "COOKIE_NAMES",
    "CSRF_HEADER",
    "SAFE_METHODS",
    "SESSION_COOKIE",
    "SIGNIN",
    "SignIn",
    "cookie_name",
    "csrf_token",
    "install",
    "is_secure",
    "project_of_request",
    "session_of_request",
]

SESSION_COOKIE = "ldp_session"
ATTEMPT_COOKIE = "ldp_signin"
"""Binds a sign-in's ``state`` to the browser that began it (no login CSRF)."""
COOKIE_NAMES = frozenset(
    {SESSION_COOKIE, ATTEMPT_COOKIE, f"__Host-{SESSION_COOKIE}", f"__Host-{ATTEMPT_COOKIE}"}
)
"""The only cookies the app ever reads (the rest are stripped before it)."""
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass
class SignIn:
    """An app's sign-in: its settings, provider and session store."""

    settings: OidcSettings
    provider: Provider
    store: SessionStore
    trust_forwarded_proto: bool = False


SIGNIN: Slot[SignIn] = Slot("ldp.signin", SignIn)
"""The app's sign-in (attached by :func:`install` when ``OIDC_ISSUER`` is set)."""


def is_secure(app: Flask | None = None) -> bool:
    """Whether the browser reached us over TLS: the WSGI scheme, or a trusted proxy's
    ``X-Forwarded-Proto`` (only with ``LDP_TRUST_FORWARDED_PROTO``: anyone can send it)."""
    if request.scheme == "https":
        return True
    signin = SIGNIN.find(app)
    trusted = signin.trust_forwarded_proto if signin is not None else False
    forwarded = request.headers.get("X-Forwarded-Proto", "").split(",")[0].strip().lower()
    return trusted and forwarded == "https"


def cookie_name(base: str) -> str:
    """``base``, ``__Host-`` prefixed over TLS (the browser then refuses it from any other
    host or path, or over plain HTTP)."""
    return f"__Host-{base}" if is_secure() else base


def project_of_request() -> str:
    """The project a signed-in request acts in: its ``?project=``, else ``default``
    (one not valid: ``default`` here, and :func:`ldp_api.projects.enter` answers 400)."""
    query = request.args
    if "project" not in query:
        return DEFAULT_PROJECT
    try:
        return check_project(query["project"])
    except ValueError:
        return DEFAULT_PROJECT


def session_of_request() -> tuple[str, Session] | None:
    """The request's session cookie and its live session, or None."""
    if "ldp_session" in g:
        return g.ldp_session
    signin = SIGNIN.find()
    found: tuple[str, Session] | None = None
    if signin is not None:
        session_id = request.cookies.get(cookie_name(SESSION_COOKIE), "")
        session = signin.store.get(session_id) if session_id else None
        found = (session_id, session) if session is not None else None
    g.ldp_session = found
    return found


def csrf_token() -> str:
    """The current session's CSRF token ('' when signed out): for templates."""
    found = session_of_request()
    return found[1].csrf if found is not None else ""


def _csrf_refusal() -> Response:
    response = jsonify(
        answer(
            Error(
                error="the CSRF token is missing or wrong",
                details=[f"a signed-in page sends it as {CSRF_HEADER}; reload the page"],
            )
        )
    )
    response.status_code = 403
    return response


def csrf_ok(session: Session) -> bool:
    """Whether the request carries ``session``'s CSRF token (header or form field)."""
    sent = request.headers.get(CSRF_HEADER) or request.form.get("csrf_token") or ""
    return hmac.compare_digest(sent.encode(), session.csrf.encode())


def _principal() -> auth.Principal | Response | None:
    """The session's principal in the request's project (no scopes without a role
    there), a 403 for a state-changing request without the CSRF token, or None."""
    found = session_of_request()
    if found is None:
        return None
    session = found[1]
    if request.method not in SAFE_METHODS and not csrf_ok(session):
        return _csrf_refusal()
    project = project_of_request()
    role = session.roles.get(project)
    scopes = ROLES[role] if role in ROLES else frozenset()
    return auth.Principal(session.actor, scopes, project)


def install(app: Flask) -> SignIn | None:
    """Sign-in on ``app`` when ``OIDC_ISSUER`` is configured (else None): its store and
    provider attached, and sessions made a credential of :mod:`ldp_api.auth`.

    Raises:
        ValueError: a sign-in setting is malformed.
    """
    settings = settings_from(app.config)
    if settings is None:
        return None
    found = SIGNIN.find(app)
    if found is not None:
        return found
    signin = SignIn(
        settings,
        Provider(settings),
        SessionStore(shared(app=app).redis),
        bool(app.config.get("TRUST_FORWARDED_PROTO")),
    )
    SIGNIN.attach(app, signin)
    auth.POLICY.get(app).session = _principal
    app.context_processor(lambda: {"csrf_token": csrf_token, "signed_in": _signed_in})
    return signin


def _signed_in() -> bool:
    return SIGNIN.find(current_app) is not None and session_of_request() is not None

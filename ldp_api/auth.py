"""Authorization in one place: each route's scope, from its documented operation.

A view states the scope it needs beside its route (``@documented(..., scope="metrics:write")``,
:mod:`ldp_api.openapi`, which also writes it into the OpenAPI document as ``x-scope``);
a blueprint of undocumented pages (the dashboard) has one for all its views. One
``before_request`` hook (:func:`install`) checks every request against it, so a route
cannot forget its check, and a test derives the whole matrix from the document.

Who may: a signed-in operator's session (:mod:`ldp_api.sessions`, when no
``Authorization`` header is sent), the configured tokens (``LDP_ADMIN_TOKEN``: every
scope; ``LDP_READ_TOKEN``: reads and ``/metrics``; ``LDP_METRICS_TOKEN``: ``/metrics``)
and the scoped tokens of :mod:`ldp_store.tokens`. Reads, ``/metrics`` and ingest stay
open until a setting closes them (``READ_TOKEN``/``REQUIRE_READ_TOKEN``, ``METRICS_TOKEN``,
``REQUIRE_INGEST_KEY``; sign-in closes reads), as before scoped tokens. Docs: docs/guides/teams.md.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from flask import Flask, Response, current_app, g, jsonify, request

from ldp_api.context import Slot
from ldp_api.models import Error, answer
from ldp_api.openapi import operation_of
from ldp_store.tokens import SCOPES, Token, TokenStore, parse

__all__ = [
    "CONFIGURED",
    "POLICY",
    "Policy",
    "Principal",
    "Reason",
    "check",
    "current",
    "install",
    "is_open",
    "principal",
    "refuse",
    "refuse_json",
    "requires",
    "scope_of",
    "sent_principal",
    "sent_scoped_token",
]

Reason = Literal["missing", "invalid", "lacking", "disabled"]
"""Why a request is refused: no credential, one no token matches, a token without the
route's scope, or nothing configured that could grant it."""

Refuser = Callable[[str, Reason], Response]
View = TypeVar("View", bound=Callable[..., Any])
_SCOPE_ATTRIBUTE = "ldp_scope"

CONFIGURED: tuple[tuple[str, frozenset[str]], ...] = (
    ("ADMIN_TOKEN", frozenset(SCOPES)),
    ("READ_TOKEN", frozenset({"metrics:read", "prometheus:read"})),
    ("METRICS_TOKEN", frozenset({"prometheus:read"})),
)
"""The tokens of the configuration and what each grants (every project)."""

_REALM = 'Bearer realm="ldp-metrics"'


@dataclass(frozen=True)
class Principal:
    """Who a request acts as."""

    actor: str
    """For the audit log: ``admin-token``, ``read-token``, ``metrics-token`` or a scoped
    token's prefix (``ldp_<id>``)."""
    scopes: frozenset[str]
    project: str | None = None
    """A scoped token's project; None for a configured token (every project)."""
    token: Token | None = None


@dataclass
class Policy:
    """An app's authorization: its token store and what it adds to the documented scopes.

    Args:
        tokens: the scoped tokens.
    """

    tokens: TokenStore
    blueprints: dict[str, str] = field(default_factory=dict)
    """The scope of every undocumented view of a blueprint (``dashboard``)."""
    public: set[str] = field(default_factory=set)
    """Endpoints that need nothing even in such a blueprint (its CSS and JS)."""
    refusers: dict[str, Refuser] = field(default_factory=dict)
    """How a blueprint refuses, when not as JSON (the dashboard's pages)."""
    session: Callable[[], Principal | Response | None] | None = None
    """A signed-in operator's principal, when sign-in is configured
    (:mod:`ldp_api.sessions`): asked only when no ``Authorization`` header was sent; a
    Response is its refusal (a state-changing request without the CSRF token)."""
    _scopes: dict[str, str | None] = field(default_factory=dict)

    def protect(self, blueprint: str, scope: str, public: set[str] | frozenset[str]) -> None:
        """Make ``scope`` the scope of ``blueprint``'s undocumented views, but ``public``."""
        self.blueprints[blueprint] = scope
        self.public |= set(public)


POLICY: Slot[Policy] = Slot("ldp.auth", Policy)
"""The app's policy (:func:`install` attaches it)."""


def requires(scope: str) -> Callable[[View], View]:
    """Give an undocumented view (a dashboard page) a scope other than its blueprint's.

    Raises:
        ValueError: not one of :data:`ldp_store.tokens.SCOPES`.
    """
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}")

    def mark(view: View) -> View:
        setattr(view, _SCOPE_ATTRIBUTE, scope)
        return view

    return mark


def scope_of(app: Flask, endpoint: str) -> str | None:
    """The scope ``endpoint`` needs (None: open to all).

    Raises:
        LookupError: no policy is installed on ``app``.
    """
    policy = POLICY.get(app)
    if endpoint in policy._scopes:
        return policy._scopes[endpoint]
    view = app.view_functions.get(endpoint)
    operation = operation_of(view) if view is not None else None
    scope: str | None
    if operation is not None:
        scope = operation.scope
    elif getattr(view, _SCOPE_ATTRIBUTE, None) is not None:
        scope = getattr(view, _SCOPE_ATTRIBUTE)
    elif endpoint in policy.public:
        scope = None
    else:
        scope = policy.blueprints.get(endpoint.rpartition(".")[0] if "." in endpoint else "")
    policy._scopes[endpoint] = scope
    return scope


def is_open(app: Flask, scope: str) -> bool:
    """Whether ``scope`` needs no credential on ``app`` (as configured)."""
    config = app.config
    reads_closed = (
        bool(config.get("READ_TOKEN"))
        or bool(config.get("REQUIRE_READ_TOKEN"))
        or bool(config.get("OIDC_ISSUER"))  # with sign-in, reads want a session or a token
    )
    if scope == "ingest":
        return not config.get("REQUIRE_INGEST_KEY")
    if scope == "metrics:read":
        return not reads_closed
    if scope == "prometheus:read":
        return not (reads_closed or config.get("METRICS_TOKEN"))
    return False


def _credential(basic: bool) -> str | None:
    """The bearer token sent, or (``basic``) a Basic password, else None."""
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    scheme, value = scheme.lower(), value.strip()
    if scheme == "bearer" and value:
        return value
    if basic and scheme == "basic" and value:
        try:
            decoded = base64.b64decode(value, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return None
        _, sep, password = decoded.partition(":")
        return password if sep and password else None
    return None


def principal(app: Flask, text: str) -> Principal | None:
    """Who ``text`` is: a configured token or a valid scoped one (else None).

    Every configured token is compared, in constant time, whatever matched first: the
    time says nothing about which one was close.
    """
    sent = text.encode()
    found: Principal | None = None
    for key, scopes in CONFIGURED:
        expected = app.config.get(key)
        if expected and hmac.compare_digest(sent, str(expected).encode()) and found is None:
            found = Principal(key.lower().replace("_", "-"), scopes)
    if found is not None:
        return found
    token = POLICY.get(app).tokens.verify(text)
    if token is None:
        return None
    return Principal(token.prefix, token.scopes, token.project, token)


def sent_principal() -> Principal | None:
    """Who the current request's credential is (None: none sent, or not valid), read
    again: for the routes whose scope check needed none."""
    text = _credential(basic=True)
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    return principal(app, text) if text is not None else None


def sent_scoped_token() -> bool:
    """Whether the current request's credential is shaped like a scoped token
    (``ldp_<id>_<secret>``), valid or not: such a token names a project."""
    text = _credential(basic=True)
    return text is not None and parse(text) is not None


def _json(status: int, error: str, details: list[str], challenge: str | None) -> Response:
    response = jsonify(answer(Error(error=error, details=details)))
    response.status_code = status
    if challenge:
        response.headers["WWW-Authenticate"] = challenge
    return response


def refuse_json(scope: str, reason: Reason) -> Response:
    """The JSON refusal of every API route (the read APIs' own is the read side's)."""
    if reason == "lacking":
        return _json(403, f"this token does not grant {scope}", [], None)
    if scope == "ingest":
        error = (
            "an ingest key is required" if reason == "missing" else "the ingest key is not valid"
        )
        return _json(401, error, ["send 'Authorization: Bearer <ingest key>'"], _REALM)
    if scope == "prometheus:read":
        return _json(
            401,
            "a metrics token is required",
            ["send 'Authorization: Bearer <LDP_METRICS_TOKEN or LDP_READ_TOKEN>'"],
            _REALM,
        )
    if reason == "disabled":
        what = "metric changes" if scope.startswith("metrics:") else f"{scope} actions"
        return _json(
            403,
            f"{what} are disabled on this collector",
            ["set LDP_ADMIN_TOKEN to enable them (then make scoped tokens: ldp tokens create)"],
            None,
        )
    if reason == "missing":
        return _json(
            401, "an admin token is required", ["send 'Authorization: Bearer <token>'"], _REALM
        )
    return _json(403, "the admin token is not valid", [], None)


def check() -> Response | None:
    """The ``before_request`` hook: None to go on, else the refusal."""
    endpoint = request.endpoint
    if endpoint is None or request.method == "OPTIONS":
        return None  # 404/405, and CORS preflights, carry no credential
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    scope = scope_of(app, endpoint)
    if scope is None:
        return None
    # HTTP Basic is the dashboard's (a browser asks for it once): its pages, and the
    # read APIs their scripts call.
    text = _credential(basic=scope == "metrics:read" or request.blueprint == "dashboard")
    who = _principal_of(app, text, scope)
    if isinstance(who, Response):
        return who
    g.ldp_principal = who
    if who is None and text is not None and parse(text) is not None:
        g.ldp_stale_token = True  # shaped like a scoped token, not valid (ldp_api.projects)
    if is_open(app, scope) or (who is not None and scope in who.scopes):
        return None
    return refuse(scope, _reason(app, scope, who, text))


def _principal_of(app: Flask, text: str | None, scope: str) -> Principal | Response | None:
    """Who the credential ``text`` names, else the signed-in session's (or its refusal)."""
    if text is not None:
        return principal(app, text)
    session = POLICY.get(app).session
    # A session never grants ingest: a signed-in browser's reports (the "Try it" page)
    # are judged as any device's, with no CSRF token asked of them.
    if session is not None and scope != "ingest":
        return session()
    return None


def _reason(app: Flask, scope: str, who: Principal | None, text: str | None) -> Reason:
    """Why a request without ``scope`` is refused."""
    if who is not None:
        return "lacking"
    reads = scope in ("metrics:read", "prometheus:read")
    if not reads and scope != "ingest" and not _could_grant(app):
        return "disabled"
    return "missing" if text is None else "invalid"


def refuse(scope: str, reason: Reason) -> Response:
    """The current request's refusal, as its blueprint refuses (the dashboard's pages),
    else as JSON (:func:`refuse_json`)."""
    refuser = POLICY.get(current_app).refusers.get(request.blueprint or "", refuse_json)
    return refuser(scope, reason)


def _could_grant(app: Flask) -> bool:
    """Whether anything could grant an admin scope: the admin token, a scoped token, or a
    signed-in owner."""
    policy = POLICY.get(app)
    return bool(app.config.get("ADMIN_TOKEN")) or policy.session is not None or policy.tokens.any()


def current() -> Principal | None:
    """Who the current request acts as (None: no valid credential, or an open route)."""
    return g.get("ldp_principal")


def install(app: Flask, tokens: TokenStore) -> Policy:
    """Attach the policy and the hook to ``app`` (once; later calls return the policy).

    Args:
        app: the app (the collector's factory calls this first).
        tokens: the app's token store.
    """
    found = POLICY.find(app)
    if found is not None:
        return found
    policy = Policy(tokens)
    POLICY.attach(app, policy)
    app.before_request(check)
    return policy

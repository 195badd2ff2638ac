"""Read access: with ``LDP_READ_TOKEN`` set, estimates, plans and the dashboard need it.

Without a read token everything that reads is open, as before (a dashboard on a private
network). With one (config ``READ_TOKEN``, from ``LDP_READ_TOKEN``):

* the JSON APIs (``/v1/estimates/…``, ``/v1/export…``, ``/v1/overview``, ``/v1/plan…``) want
  ``Authorization: Bearer <token>``;
* the dashboard's pages want HTTP Basic authentication with the token as the password
  (any user name): the browser asks once, then sends it with every page and with the
  pages' own ``fetch`` calls to the APIs, which therefore accept Basic too.

Why not a cookie: :class:`collector.logs.StripClientMetadata` removes the ``Cookie``
header (with addresses and user agents) from every request on purpose, so nothing in the
process can tie a request to a client; the ``Authorization`` header is the credential
the app reads. Only with sign-in configured (``LDP_OIDC_ISSUER``) do the dashboard's own
session cookies get through (:mod:`ldp_api.sessions`). Use HTTPS in front of it, as for
the admin token.

The admin token (``LDP_ADMIN_TOKEN``) and scoped tokens granting ``metrics:read`` (``ldp
tokens``) read too; ``LDP_REQUIRE_READ_TOKEN`` closes reads without a configured read
token. Every check is :mod:`ldp_api.auth`'s (each route's scope); this module gives the
read side's answers to a refusal and the scope of the dashboard's pages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flask import Flask, Response, current_app, jsonify, render_template, request

from ldp_api import auth
from ldp_api.context import shared
from ldp_api.models import Error, answer
from ldp_api.openapi import Header, Reply, Scheme, View, documented
from ldp_store.tokens import TokenStore

__all__ = [
    "PROTECTED_BLUEPRINTS",
    "PUBLIC_ENDPOINTS",
    "READ_TOKEN",
    "REALM",
    "UNAUTHORIZED",
    "documented_read",
    "install",
    "read_token",
]

REALM = "ldp-telemetry"
"""The HTTP authentication realm: the browser keeps one password per origin and realm."""

PROTECTED_BLUEPRINTS = frozenset(
    {"estimates", "export", "dashboard", "plan", "status", "strings", "alerts"}
)
"""Blueprints that only read: the estimates API, the dashboard and its JSON helpers."""

PUBLIC_ENDPOINTS = frozenset({"dashboard.static", "dashboard.plotly_js"})
"""The dashboard's own CSS/JS and the charting library: public code, no data."""

READ_TOKEN = (
    Scheme(
        "readToken",
        "bearer",
        "LDP_READ_TOKEN, the admin token, or a scoped token granting metrics:read: asked "
        "for only when LDP_READ_TOKEN (or LDP_REQUIRE_READ_TOKEN) is set; without it the "
        "read APIs are open.",
        setting=("READ_TOKEN", "REQUIRE_READ_TOKEN"),
    ),
    Scheme(
        "readTokenBasic",
        "basic",
        "The same token as the password, any user name (what the dashboard's pages send).",
        setting=("READ_TOKEN", "REQUIRE_READ_TOKEN"),
    ),
)
"""How a read API's view documents its access: either scheme is accepted, and without
``LDP_READ_TOKEN`` neither is needed (the document then says the security is optional)."""

UNAUTHORIZED = Reply(
    "LDP_READ_TOKEN is set and no valid read (or admin) token was sent.",
    Error,
    {
        "WWW-Authenticate": Header(
            f'Bearer realm="{REALM}", then a Basic challenge of the same realm (for the '
            "dashboard's pages)."
        )
    },
)
"""The 401 every read API's view documents (:func:`_refuse_api` answers it)."""


def documented_read(
    summary: str, replies: Mapping[int, Reply], **more: Any
) -> Callable[[View], View]:
    """:func:`~ldp_api.openapi.documented` for a read API: :data:`READ_TOKEN`'s schemes,
    scope ``metrics:read``."""
    return documented(summary, replies, security=READ_TOKEN, scope="metrics:read", **more)


def read_token(app: Flask | None = None) -> str | None:
    """The configured read token, or None (the app factory reads it from the environment
    as text and refuses a short one: :func:`collector.settings.check_tokens`)."""
    token = (app or current_app).config.get("READ_TOKEN")
    return None if token in (None, "") else str(token)


def _refuse_page() -> Response:
    response = Response(render_template("unauthorized.html"), status=401, mimetype="text/html")
    response.headers["WWW-Authenticate"] = f'Basic realm="{REALM}", charset="UTF-8"'
    return response


def _refuse_api(scope: str, reason: auth.Reason) -> Response:
    if reason == "lacking" or scope != "metrics:read":  # changes (alert rules): the API's
        return auth.refuse_json(scope, reason)
    sent = bool(request.authorization or request.headers.get("Authorization"))
    error = "the read token is not valid" if sent else "a read token is required"
    response = jsonify(
        answer(Error(error=error, details=["send 'Authorization: Bearer <LDP_READ_TOKEN>'"]))
    )
    response.status_code = 401
    response.headers["WWW-Authenticate"] = f'Bearer realm="{REALM}"'
    # A page's fetch gets this answer only if the browser has not yet sent its cached
    # Basic credentials for this path: the Basic challenge of the same realm makes it
    # retry with them, without asking the operator again.
    response.headers.add("WWW-Authenticate", f'Basic realm="{REALM}", charset="UTF-8"')
    return response


def install(app: Flask) -> None:
    """Give the read routes their refusals and the dashboard's pages their scope
    (``metrics:read``, but for :data:`PUBLIC_ENDPOINTS`), on ``app``'s policy (installed
    here when the app has none: a read side mounted without the collector)."""
    policy = auth.install(app, TokenStore(shared(app=app).redis))
    for blueprint in PROTECTED_BLUEPRINTS:
        policy.protect(blueprint, "metrics:read", PUBLIC_ENDPOINTS)
        policy.refusers[blueprint] = _refuse_api
    policy.refusers["dashboard"] = lambda scope, reason: _refuse_page()

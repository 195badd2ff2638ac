"""Read access: with ``LDP_READ_TOKEN`` set, estimates, plans and the dashboard need it.

Without a read token everything that reads is open, as before (a dashboard on a private
network). With one (config ``READ_TOKEN``, from ``LDP_READ_TOKEN``):

* the JSON APIs (``/v1/estimates/…``, ``/v1/export…``, ``/v1/overview``, ``/v1/plan…``) want
  ``Authorization: Bearer <token>``;
* the dashboard's pages want HTTP Basic authentication with the token as the password
  (any user name): the browser asks once, then sends it with every page and with the
  pages' own ``fetch`` calls to the APIs, which therefore accept Basic too.

Why not a cookie: the app never sees cookies. :class:`collector.logs.StripClientMetadata`
removes the ``Cookie`` header (with addresses and user agents) from every request on
purpose, so nothing in the process can tie a request to a client; the ``Authorization``
header is the one credential the app reads. Use HTTPS in front of it, as for the admin
token.

The admin token (``LDP_ADMIN_TOKEN``) also grants reads. Metric changes always need the
admin token (:func:`collector.api_metrics.require_admin`). The apps' own endpoints stay
open: ``GET /v1/metrics`` (definitions), ``POST /v1/reports`` and health; Prometheus'
``/metrics`` wants this token (or ``LDP_METRICS_TOKEN``) once one is set
(:func:`collector.api_ops.require_metrics_token`).
Tokens are compared in constant time.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Collection

from flask import Flask, Response, current_app, jsonify, render_template, request

from ldp_api.models import Error, answer
from ldp_api.openapi import Header, Reply, Scheme

__all__ = [
    "PROTECTED_BLUEPRINTS",
    "PUBLIC_ENDPOINTS",
    "READ_TOKEN",
    "REALM",
    "UNAUTHORIZED",
    "authorized",
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
        "LDP_READ_TOKEN (or the admin token): asked for only when LDP_READ_TOKEN is set; "
        "without it the read APIs are open.",
        setting="READ_TOKEN",
    ),
    Scheme(
        "readTokenBasic",
        "basic",
        "The same token as the password, any user name (what the dashboard's pages send).",
        setting="READ_TOKEN",
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


def read_token(app: Flask | None = None) -> str | None:
    """The configured read token, or None when reads are open (the app factory reads it
    from the environment as text and refuses a short one: :func:`collector.settings.check_tokens`).
    """
    token = (app or current_app).config.get("READ_TOKEN")
    return None if token is None or token == "" else str(token)


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def _presented() -> str | None:
    """The token of a Bearer header or the password of a Basic one, else None."""
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    scheme, value = scheme.lower(), value.strip()
    if scheme == "bearer" and value:
        return value
    if scheme == "basic" and value:
        try:
            decoded = base64.b64decode(value, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return None
        _, sep, password = decoded.partition(":")
        return password if sep else None
    return None


def authorized(token: str | None = None) -> bool:
    """Whether the current request may read (always, when no read token is set).

    Args:
        token: the read token (default: the app's).
    """
    expected = token if token is not None else read_token()
    if expected is None:
        return True
    given = _presented()
    if given is None:
        return False
    admin = current_app.config.get("ADMIN_TOKEN")
    # Both comparisons always run: how long a check takes says nothing about which
    # token (if any) was close.
    read_ok = _same(given, expected)
    admin_ok = _same(given, str(admin)) if admin else False
    return read_ok or admin_ok


def _refuse_page() -> Response:
    response = Response(render_template("unauthorized.html"), status=401, mimetype="text/html")
    response.headers["WWW-Authenticate"] = f'Basic realm="{REALM}", charset="UTF-8"'
    return response


def _refuse_api() -> Response:
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


def install(app: Flask, blueprints: Collection[str] = PROTECTED_BLUEPRINTS) -> None:
    """Require the read token (when configured) for every endpoint of ``blueprints``.

    Args:
        app: the app the blueprints are (or will be) registered on.
        blueprints: names of the blueprints that read.
    """

    @app.before_request
    def _check_read_access() -> Response | None:
        if read_token() is None or request.blueprint not in blueprints:
            return None
        if request.endpoint in PUBLIC_ENDPOINTS or authorized():
            return None
        return _refuse_page() if request.blueprint == "dashboard" else _refuse_api()

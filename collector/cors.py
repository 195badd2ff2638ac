"""Cross-origin access for web pages that report with the JavaScript SDK.

Only the routes a browser SDK needs answer another origin: ingest (``POST /v1/reports``),
the definitions (``GET /v1/metrics``, ``GET /v1/metrics/<name>``) and the module itself
(``GET /sdk/ldp-telemetry/<name>``, which a page's ``import`` fetches in CORS mode), and
only for the origins in ``CORS_ORIGINS`` (default: none, i.e. same-origin only). No
credentials are ever allowed (a report carries none); a preflight is answered and may be
cached for a day. The admin routes (defining, retiring, deleting a metric) and the read
side never answer cross-origin: a page elsewhere cannot even learn their answers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from flask import Flask, Response, request

__all__ = ["CROSS_ORIGIN_ROUTES", "PREFLIGHT_MAX_AGE", "install", "wsgi_headers"]

CROSS_ORIGIN_ROUTES = {
    "/v1/reports": "POST",
    "/v1/metrics": "GET",
    "/v1/metrics/<name>": "GET",
    "/sdk/ldp-telemetry/<name>": "GET",
}
"""The routes a page on an allowed origin may use, each with its one method."""

PREFLIGHT_MAX_AGE = 86_400
"""Seconds a browser may cache a preflight's answer (Chromium caps it at 2 hours): one
preflight per page session instead of one per upload."""


def install(app: Flask, origins: Iterable[str]) -> None:
    """Answer the :data:`CROSS_ORIGIN_ROUTES` for ``origins`` (``*``: any); nothing else.

    Args:
        app: the collector.
        origins: checked origins (``scheme://host[:port]``, lowercase) or ``*``.
    """
    allowed = frozenset(origins)
    if not allowed:
        return

    def cors(response: Response) -> Response:
        rule = request.url_rule
        method = CROSS_ORIGIN_ROUTES.get(rule.rule) if rule is not None else None
        if method is None:
            return response
        response.vary.add("Origin")  # the answer differs by origin: caches must know
        origin = request.headers.get("Origin")
        if origin is None or not (origin in allowed or "*" in allowed):
            return response
        if request.method == "OPTIONS":
            if request.headers.get("Access-Control-Request-Method") != method:
                return response
            response.headers["Access-Control-Allow-Methods"] = method
            response.headers["Access-Control-Allow-Headers"] = "Content-Type"
            response.headers["Access-Control-Max-Age"] = str(PREFLIGHT_MAX_AGE)
        elif request.method not in (method, "HEAD" if method == "GET" else method):
            return response
        else:
            # the SDK waits at least Retry-After (429, 503); a page reads only exposed headers
            response.headers["Access-Control-Expose-Headers"] = "Retry-After"
        response.headers["Access-Control-Allow-Origin"] = origin
        return response

    app.after_request(cors)


def wsgi_headers(env: Mapping[str, Any], origins: Iterable[str], methods: str) -> dict[str, str]:
    """The CORS headers of an answer served outside Flask (the Oblivious HTTP gateway's
    keys and requests, the relay's forwarding), by the rules above: ``Vary: Origin``
    always, the rest only for an allowed origin (a preflight also names ``methods``).

    Args:
        env: the request's WSGI environ.
        origins: the allowed origins, or ``*``.
        methods: the methods the resource takes cross-origin, e.g. ``"GET, POST"``.
    """
    allowed = frozenset(origins)
    if not allowed:
        return {}
    headers = {"Vary": "Origin"}
    origin = env.get("HTTP_ORIGIN")
    if origin is None or not (origin in allowed or "*" in allowed):
        return headers
    if env.get("REQUEST_METHOD") == "OPTIONS":
        wanted = env.get("HTTP_ACCESS_CONTROL_REQUEST_METHOD", "")
        if wanted not in [m.strip() for m in methods.split(",")]:
            return headers
        headers["Access-Control-Allow-Methods"] = methods
        headers["Access-Control-Allow-Headers"] = "Content-Type"
        headers["Access-Control-Max-Age"] = str(PREFLIGHT_MAX_AGE)
    else:
        headers["Access-Control-Expose-Headers"] = "Retry-After"  # the SDK's backoff reads it
    headers["Access-Control-Allow-Origin"] = origin
    return headers

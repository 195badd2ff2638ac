"""Cross-origin access for web pages that report with the JavaScript SDK.

Only the routes a browser SDK needs answer another origin: ingest (``POST /v1/reports``),
the definitions (``GET /v1/metrics``, ``GET /v1/metrics/<name>``) and the module itself
(``GET /sdk/ldp-telemetry/<name>``, which a page's ``import`` fetches in CORS mode), and
only for the origins in ``CORS_ORIGINS`` (default: none, i.e. same-origin only). No
credentials are ever allowed (a report carries none); a preflight is answered and may be
cached for a day. The admin routes (defining, retiring, deleting a metric) and the read
side never answer cross-origin: a page elsewhere cannot even learn their answers.

The Oblivious HTTP gateway's key configurations (``GET /.well-known/ohttp-gateway``, served
outside Flask by :mod:`collector.ohttp_gateway`) answer the same origins through
:class:`CrossOriginKeys`: a page that seals its uploads for a relay needs them. Posting
there is the relay's business, never a page's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from flask import Flask, Response, request

from client_sdk.ohttp.keys import GATEWAY_PATH

__all__ = ["CROSS_ORIGIN_ROUTES", "PREFLIGHT_MAX_AGE", "CrossOriginKeys", "install"]

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


class CrossOriginKeys:
    """WSGI middleware: ``GET``/``HEAD`` of the gateway's key configurations
    (:data:`~client_sdk.ohttp.keys.GATEWAY_PATH`) answer pages on ``origins``; every other
    request passes untouched.

    Args:
        app: the gateway (and everything behind it).
        origins: as for :func:`install`; none: the middleware adds nothing.
    """

    def __init__(self, app: Callable[..., Any], origins: Iterable[str]) -> None:
        self.app = app
        self.allowed = frozenset(origins)

    def __call__(self, env: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        """Add ``Access-Control-Allow-Origin`` (and ``Vary: Origin``) to the keys' answer."""
        # (named env, not environ: tests/test_config_docs.py reads environ.get("X") as a
        # setting, and these are WSGI keys)
        keys = env.get("PATH_INFO") == GATEWAY_PATH and env.get("REQUEST_METHOD") in ("GET", "HEAD")
        if not keys or not self.allowed:
            return self.app(env, start_response)
        origin = env.get("HTTP_ORIGIN")
        allow = origin is not None and (origin in self.allowed or "*" in self.allowed)

        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            headers = [*headers, ("Vary", "Origin")]
            if allow:
                headers.append(("Access-Control-Allow-Origin", str(origin)))
            return start_response(status, headers, exc_info)

        return self.app(env, start)

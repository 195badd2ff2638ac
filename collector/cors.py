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

from collections.abc import Iterable

from flask import Flask, Response, request

from ldp_edge.cors import cross_origin_headers

__all__ = ["CROSS_ORIGIN_ROUTES", "install"]

CROSS_ORIGIN_ROUTES = {
    "/v1/reports": "POST",
    "/v1/metrics": "GET",
    "/v1/metrics/<name>": "GET",
    "/sdk/ldp-telemetry/<name>": "GET",
}
"""The routes a page on an allowed origin may use, each with its one method."""


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
        found = cross_origin_headers(
            allowed,
            (method,),
            request.headers.get("Origin"),
            request.method,
            request.headers.get("Access-Control-Request-Method"),
        )
        response.vary.add(found.pop("Vary"))
        response.headers.update(found)
        return response

    app.after_request(cors)

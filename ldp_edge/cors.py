"""Cross-origin access for web pages that report with the JavaScript SDK: the rule every
edge applies (the collector's routes, its Oblivious HTTP gateway, the relay).

An answer names an allowed page's origin only for the methods the resource takes from
another origin; no credentials are ever allowed (a report carries none); a preflight may
be cached for a day; ``Retry-After`` is exposed (the SDK's backoff reads it). With no
origins configured nothing is added: same-origin only. ``Authorization`` may be sent: the
app's ingest key (a header, not a browser credential: cookies stay refused). In full:
``docs/guides/web.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["PREFLIGHT_MAX_AGE", "cross_origin_headers", "wsgi_headers"]

PREFLIGHT_MAX_AGE = 86_400
"""Seconds a browser may cache a preflight's answer (Chromium caps it at 2 hours): one
preflight per page session instead of one per upload."""


def cross_origin_headers(
    origins: Iterable[str],
    methods: Sequence[str],
    origin: str | None,
    method: str,
    requested: str | None = None,
) -> dict[str, str]:
    """The CORS headers of one answer: ``Vary: Origin`` whenever origins are configured,
    the rest only for an allowed origin and a method the resource takes.

    Args:
        origins: the allowed origins (``scheme://host[:port]``, lowercase), or ``*``.
        methods: the methods the resource takes cross-origin (``HEAD`` goes with ``GET``).
        origin: the request's ``Origin``, if any.
        method: the request's method (``OPTIONS`` for a preflight).
        requested: a preflight's ``Access-Control-Request-Method``.
    """
    allowed = frozenset(origins)
    if not allowed:
        return {}
    headers = {"Vary": "Origin"}  # the answer differs by origin: caches must know
    if origin is None or not (origin in allowed or "*" in allowed):
        return headers
    if method == "OPTIONS":
        if requested not in methods:
            return headers
        headers["Access-Control-Allow-Methods"] = ", ".join(methods)
        headers["Access-Control-Allow-Headers"] = "Content-Type, Authorization"
        headers["Access-Control-Max-Age"] = str(PREFLIGHT_MAX_AGE)
    elif method in methods or (method == "HEAD" and "GET" in methods):
        headers["Access-Control-Expose-Headers"] = "Retry-After"
    else:
        return headers
    headers["Access-Control-Allow-Origin"] = origin
    return headers


def wsgi_headers(
    env: Mapping[str, Any], origins: Iterable[str], methods: Sequence[str]
) -> dict[str, str]:
    """:func:`cross_origin_headers` of a WSGI request."""
    return cross_origin_headers(
        origins,
        methods,
        env.get("HTTP_ORIGIN"),
        env.get("REQUEST_METHOD", "GET"),
        env.get("HTTP_ACCESS_CONTROL_REQUEST_METHOD"),
    )

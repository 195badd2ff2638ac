"""Read routes sent from ``ldp serve``'s ingest workers to its read workers.

``ldp serve`` answers on one port, but runs the read side (estimates, overview, plans,
the dashboard) in worker processes of its own, at a lower CPU priority: a string
discovery or a flood of reads then waits for CPU behind ingest instead of sharing an
event loop with it. :class:`ForwardReads` wraps the ingest workers' app: a GET or HEAD
that one of the read blueprints would answer, or ``/metrics`` (its poisoning alarms test
every metric's recent windows at each scrape), goes over loopback HTTP to the read
workers; everything else (reports, definitions, health) is served here.
Only the headers the read side uses are passed on (no address, cookie or user agent).

The read workers are two lanes: a read the read side calls expensive (a full table of
many values, a string discovery, an export: :func:`aggregator.web.lanes.heavy_read`) goes
to the heavy lane's port, stamped with the time it was sent (``sent_at_header``), so
one that waited there too long is answered 503 instead of computed for nobody; every
other read goes to the light lane, which an expensive read never occupies
(docs/architecture/read-side.md).
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from flask import Flask
from werkzeug.exceptions import HTTPException

from collector.logs import own_cookies
from ldp_api.sessions import COOKIE_NAMES

__all__ = ["ForwardReads", "Lane"]

Lane = Callable[[str, Mapping[str, Any], dict[str, Any]], bool]
"""Whether a read is expensive: (endpoint, its URL's arguments, the WSGI environ)."""

PASSED_HEADERS = (
    "Host",
    "Authorization",
    "Accept",
    "Accept-Encoding",
    "If-None-Match",
    "If-Modified-Since",
    "X-CSRF-Token",
    "X-Forwarded-Proto",
)
"""Request headers the read side looks at; nothing else about the client is sent on
(of its cookies, only the dashboard's session: :data:`ldp_api.sessions.COOKIE_NAMES`)."""

HOP_BY_HOP = frozenset(
    [
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    ]
)
"""Response headers of the loopback connection, not of the answer."""

CONNECT_TIMEOUT = 2.0
"""Seconds to connect to the read workers on loopback: they accept at once or are down
(restarting), and the client gets a 503 with ``Retry-After`` instead of waiting."""

READ_TIMEOUT = 40.0
"""Seconds the read workers may take to answer: above their gunicorn worker timeout
(30 s), so a stuck read worker is restarted before a client waits on it for nothing."""

RETRY_AFTER = 5
"""``Retry-After`` of the 503 answered while the read workers are unreachable."""

CHUNK = 64 * 1024
"""Bytes per piece of a streamed answer."""

SAFE_PATH = "/:@!$&'()*+,;=-._~"
"""Characters of a path sent as they are (RFC 3986's pchar and the separator)."""


class ForwardReads:
    """WSGI middleware: the read routes of ``app`` go to ``upstream``, the rest to ``inner``.

    Args:
        inner: the WSGI app that serves everything not forwarded.
        app: the Flask app whose URL map says which route a request is for.
        upstream: ``host:port`` of the read workers (loopback).
        blueprints: names of the blueprints whose routes are forwarded.
        endpoints: further endpoints forwarded (``ops.prometheus``).
        heavy_upstream: ``host:port`` of the heavy lane, or None (one lane).
        heavy: which reads go to the heavy lane (with ``heavy_upstream``).
        sent_at_header: the header that tells the heavy lane when a read was sent (a
            client's own is never passed on).
    """

    def __init__(
        self,
        inner: Callable[..., Any],
        app: Flask,
        upstream: str,
        blueprints: Iterable[str],
        endpoints: Iterable[str] = (),
        heavy_upstream: str | None = None,
        heavy: Lane | None = None,
        sent_at_header: str = "X-Ldp-Sent-At",
    ) -> None:
        self.inner = inner
        self.app = app
        self.light = _address(upstream)
        self.heavy_upstream = _address(heavy_upstream) if heavy_upstream and heavy else None
        self.heavy = heavy
        self.sent_at_header = sent_at_header
        self.blueprints = frozenset(blueprints)
        self.endpoints = frozenset(endpoints)

    def _route(self, env: dict[str, Any]) -> tuple[str, int] | None:
        """Where a read goes (the light or the heavy lane); None: served here."""
        if env.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            return None
        try:
            endpoint, arguments = self.app.url_map.bind_to_environ(env).match()
        except HTTPException:  # 404, 405, a redirect: the local app answers those
            return None
        name = str(endpoint)
        if name not in self.endpoints and name.rpartition(".")[0] not in self.blueprints:
            return None
        if self.heavy_upstream is not None and self.heavy is not None:
            if self.heavy(name, arguments, env):
                return self.heavy_upstream
        return self.light

    def __call__(self, env: dict[str, Any], start_response: Callable[..., Any], /) -> Any:
        """Serve the request here, or forward it to the read workers."""
        where = self._route(env)
        if where is None:
            return self.inner(env, start_response)
        headers = _headers(env)
        if where is self.heavy_upstream:
            headers[self.sent_at_header] = f"{time.time():.3f}"
        conn = http.client.HTTPConnection(*where, timeout=CONNECT_TIMEOUT)
        try:
            conn.connect()
            assert conn.sock is not None
            conn.sock.settimeout(READ_TIMEOUT)
            conn.request(env["REQUEST_METHOD"], _target(env), headers=headers)
            reply = conn.getresponse()
        except (OSError, http.client.HTTPException):
            conn.close()
            return _unavailable(start_response)
        answered = [(k, v) for k, v in reply.getheaders() if k.lower() not in HOP_BY_HOP]
        start_response(f"{reply.status} {reply.reason}", answered)
        return _stream(conn, reply)


def _address(upstream: str) -> tuple[str, int]:
    host, _, port = upstream.rpartition(":")
    return host.strip("[]"), int(port)


def _target(env: dict[str, Any]) -> str:
    path = env.get("SCRIPT_NAME", "") + env.get("PATH_INFO", "")
    target = urllib.parse.quote(path.encode("latin-1"), safe=SAFE_PATH) or "/"
    query = env.get("QUERY_STRING")
    return f"{target}?{query}" if query else target


_COOKIE_KEY = "HTTP_COOKIE"  # a request header, not a setting


def _headers(env: dict[str, Any]) -> dict[str, str]:
    found = {}
    for name in PASSED_HEADERS:
        value = env.get("HTTP_" + name.upper().replace("-", "_"))
        if value is not None:
            found[name] = value
    cookies = own_cookies(env.get(_COOKIE_KEY) or "", COOKIE_NAMES)
    if cookies:
        found["Cookie"] = cookies
    return found


def _stream(conn: http.client.HTTPConnection, reply: http.client.HTTPResponse) -> Iterator[bytes]:
    try:
        while piece := reply.read(CHUNK):
            yield piece
    finally:
        conn.close()


def _unavailable(start_response: Callable[..., Any]) -> list[bytes]:
    body = json.dumps(
        {
            "error": "the read service is unavailable (restarting)",
            "details": [f"retry after {RETRY_AFTER} s; ingest is not affected"],
        }
    ).encode()
    start_response(
        "503 SERVICE UNAVAILABLE",
        [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            ("Retry-After", str(RETRY_AFTER)),
            ("Cache-Control", "no-store"),
            ("X-Content-Type-Options", "nosniff"),
        ],
    )
    return [body]

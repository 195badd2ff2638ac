"""Read routes sent from ``ldp serve``'s ingest workers to its read workers.

``ldp serve`` answers on one port, but runs the read side (estimates, overview, plans,
the dashboard) in worker processes of its own, at a lower CPU priority: a string
discovery or a flood of reads then waits for CPU behind ingest instead of sharing an
event loop with it. :class:`ForwardReads` wraps the ingest workers' app: a GET or HEAD
that one of the read blueprints would answer, or ``/metrics`` (its poisoning alarms test
every metric's recent windows at each scrape), goes over loopback HTTP to the read
workers; everything else (reports, definitions, health) is served here.
Only the headers the read side uses are passed on (no address, cookie or user agent).
"""

from __future__ import annotations

import http.client
import json
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from flask import Flask
from werkzeug.exceptions import HTTPException

__all__ = ["ForwardReads"]

PASSED_HEADERS = (
    "Host",
    "Authorization",
    "Accept",
    "Accept-Encoding",
    "If-None-Match",
    "If-Modified-Since",
)
"""Request headers the read side looks at; nothing else about the client is sent on."""

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
    """

    def __init__(
        self,
        inner: Callable[..., Any],
        app: Flask,
        upstream: str,
        blueprints: Iterable[str],
        endpoints: Iterable[str] = (),
    ) -> None:
        self.inner = inner
        self.app = app
        host, _, port = upstream.rpartition(":")
        self.host, self.port = host.strip("[]"), int(port)
        self.blueprints = frozenset(blueprints)
        self.endpoints = frozenset(endpoints)

    def _is_read(self, env: dict[str, Any]) -> bool:
        if env.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            return False
        try:
            endpoint, _ = self.app.url_map.bind_to_environ(env).match()
        except HTTPException:  # 404, 405, a redirect: the local app answers those
            return False
        name = str(endpoint)
        return name in self.endpoints or name.rpartition(".")[0] in self.blueprints

    def __call__(self, env: dict[str, Any], start_response: Callable[..., Any], /) -> Any:
        """Serve the request here, or forward it to the read workers."""
        if not self._is_read(env):
            return self.inner(env, start_response)
        conn = http.client.HTTPConnection(self.host, self.port, timeout=CONNECT_TIMEOUT)
        try:
            conn.connect()
            assert conn.sock is not None
            conn.sock.settimeout(READ_TIMEOUT)
            conn.request(env["REQUEST_METHOD"], _target(env), headers=_headers(env))
            reply = conn.getresponse()
        except (OSError, http.client.HTTPException):
            conn.close()
            return _unavailable(start_response)
        headers = [(k, v) for k, v in reply.getheaders() if k.lower() not in HOP_BY_HOP]
        start_response(f"{reply.status} {reply.reason}", headers)
        return _stream(conn, reply)


def _target(env: dict[str, Any]) -> str:
    path = env.get("SCRIPT_NAME", "") + env.get("PATH_INFO", "")
    target = urllib.parse.quote(path.encode("latin-1"), safe=SAFE_PATH) or "/"
    query = env.get("QUERY_STRING")
    return f"{target}?{query}" if query else target


def _headers(env: dict[str, Any]) -> dict[str, str]:
    found = {}
    for name in PASSED_HEADERS:
        value = env.get("HTTP_" + name.upper().replace("-", "_"))
        if value is not None:
            found[name] = value
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

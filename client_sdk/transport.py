"""How the SDK talks to the collector: a small protocol and two implementations.

:class:`Transport` is all the client and its uploader need: ``get(path)`` and
``post(path, body)`` returning a :class:`Response`, raising ``OSError`` (or
``http.client.HTTPException``) when no answer came. :class:`HTTPTransport` speaks
HTTP/1.1 with keep-alive over ``http.client``; :class:`CallableTransport` hands requests to
a function, to embed the SDK in a host that already has an HTTP stack (or a test client).

Standard library only. Requests carry no cookie, no user agent and nothing else about the
device: the collector must learn nothing but the perturbed reports.
"""

from __future__ import annotations

import json
import os
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import http.client

__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_IDLE_CONNECTIONS",
    "MAX_RESPONSE_BYTES",
    "CallableTransport",
    "HTTPTransport",
    "Response",
    "Transport",
]

DEFAULT_TIMEOUT = 10.0
"""Seconds to connect and to wait for each answer, by default. It must exceed the longest a
collector takes to answer when its storage is in trouble, so the client gets the 503 and
its ``Retry-After`` rather than a dead socket: that is 1.7 s at most (the collector's
``LONGEST_REDIS_WAIT``: one 0.5 s connect and one 1 s read timeout, not retried), and
10 s leaves room for a request queued behind others on a busy collector or a slow
mobile link. (Before issue 12 the collector could take 15 s and the SDK gave up first.)"""

MAX_RESPONSE_BYTES = 16 * 1024 * 1024
"""Largest answer read: the biggest metric definition (65 536 labels of up to 128
characters, JSON-escaped) is about 9 MiB; anything beyond is not a collector speaking."""

MAX_IDLE_CONNECTIONS = 2
"""Kept-alive connections per transport: one for the uploader's batches, one for a definition
fetch made by an app thread at the same time."""

_STALE_CONNECTION_ERRORS = (
    ConnectionResetError,  # including http.client.RemoteDisconnected, a subclass
    ConnectionAbortedError,
    BrokenPipeError,
)
"""What a kept-alive connection the server already closed fails with; worth one retry on a
fresh connection (a replayed upload is harmless: the collector discards known report ids)."""


@dataclass(frozen=True)
class Response:
    """One HTTP answer.

    Attributes:
        status: the HTTP status code.
        headers: header names in lower case.
        body: the raw body.
    """

    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""

    def json(self) -> Any:
        """The body decoded as JSON, or None when it is not JSON."""
        try:
            return json.loads(self.body)
        except (ValueError, UnicodeDecodeError):
            return None


class Transport(Protocol):
    """What the SDK needs from an HTTP stack. Paths start with ``/v1/``."""

    def get(self, path: str) -> Response:
        """GET ``path``; raise ``OSError``/``http.client.HTTPException`` if no answer came."""
        ...

    def post(self, path: str, body: bytes) -> Response:
        """POST a JSON ``body`` to ``path``; raise like :meth:`get`."""
        ...

    def close(self) -> None:
        """Release connections; the transport may still be used afterwards."""
        ...


_live: weakref.WeakSet[HTTPTransport] = weakref.WeakSet()


class HTTPTransport:
    """HTTP/1.1 over ``http.client`` with kept-alive connections, safe across threads and forks.

    Connections are pooled (at most :data:`MAX_IDLE_CONNECTIONS` idle), so an app thread
    fetching a definition never waits for the uploader's upload. A connection that fails is
    closed; one the server closed while idle is retried once on a fresh connection. A
    forked child never uses its parent's sockets.

    Args:
        base_url: ``http://host:port`` or ``https://…``, optionally with a path prefix.
        timeout: seconds to connect and to wait for each read.

    Raises:
        ValueError: a URL that is not http(s) with a host, or a non-positive timeout.
    """

    def __init__(self, base_url: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        import urllib.parse  # here: an app that never builds a transport never loads it

        if not isinstance(base_url, str):
            raise ValueError(f"url must be a string, got {type(base_url).__name__}")
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url must be http:// or https:// with a host, got {base_url!r}")
        if parts.query or parts.fragment or parts.username or parts.password:
            raise ValueError(f"url must have no query, fragment or credentials: {base_url!r}")
        try:
            port = parts.port
        except ValueError as exc:
            raise ValueError(f"url has an invalid port: {base_url!r} ({exc})") from None
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = port
        self._prefix = parts.path.rstrip("/")
        self.timeout = float(timeout)
        self._lock = threading.Lock()
        self._idle: list[http.client.HTTPConnection] = []
        self.connections_opened = 0
        """Connections made so far (keep-alive shows as a small number)."""
        _live.add(self)

    @property
    def base_url(self) -> str:
        """The URL requests go to, without a trailing slash."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        port = f":{self._port}" if self._port else ""
        return f"{'https' if self._https else 'http'}://{host}{port}{self._prefix}"

    def get(self, path: str) -> Response:  # noqa: D102
        return self._request("GET", path, None)

    def post(self, path: str, body: bytes) -> Response:  # noqa: D102
        return self._request("POST", path, body)

    def close(self) -> None:  # noqa: D102
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _connect(self) -> http.client.HTTPConnection:
        # Imported on the first connection (by the upload thread, usually), not with the
        # SDK: http.client and the email package it loads take ~20 ms to import.
        import http.client

        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        self.connections_opened += 1
        return cls(self._host, self._port, timeout=self.timeout)

    def _request(self, method: str, path: str, body: bytes | None) -> Response:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        reused = conn is not None
        if conn is None:
            conn = self._connect()
        try:
            response, keep = self._exchange(conn, method, path, body)
        except _STALE_CONNECTION_ERRORS:
            conn.close()
            if not reused:
                raise
            conn = self._connect()
            try:
                response, keep = self._exchange(conn, method, path, body)
            except BaseException:
                conn.close()
                raise
        except BaseException:
            conn.close()
            raise
        if keep:
            with self._lock:
                if len(self._idle) < MAX_IDLE_CONNECTIONS:
                    self._idle.append(conn)
                    return response
        conn.close()
        return response

    def _exchange(
        self, conn: http.client.HTTPConnection, method: str, path: str, body: bytes | None
    ) -> tuple[Response, bool]:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        conn.request(method, self._prefix + path, body=body, headers=headers)
        answer = conn.getresponse()
        data = answer.read(MAX_RESPONSE_BYTES + 1)
        if len(data) > MAX_RESPONSE_BYTES:
            import http.client  # loaded already: by _connect

            raise http.client.HTTPException(f"response larger than {MAX_RESPONSE_BYTES} bytes")
        headers_in = {name.lower(): value for name, value in answer.getheaders()}
        keep = not answer.will_close and answer.isclosed()
        return Response(answer.status, headers_in, data), keep

    def _after_fork_in_child(self) -> None:
        # The parent's sockets stay the parent's: forget them without closing (closing
        # an SSL connection here would send a close_notify on the parent's session).
        self._lock = threading.Lock()
        self._idle = []


def _after_fork_in_child() -> None:
    for transport in list(_live):
        transport._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class CallableTransport:
    """A transport that hands every request to a function.

    Args:
        fn: ``fn(method, path, body)`` with ``method`` ``"GET"`` or ``"POST"`` and
            ``body`` None for a GET; returns a :class:`Response` and raises ``OSError``
            when the request could not be made.
    """

    def __init__(self, fn: Callable[[str, str, bytes | None], Response]) -> None:
        if not callable(fn):
            raise ValueError("CallableTransport needs a callable")
        self._fn = fn

    def get(self, path: str) -> Response:  # noqa: D102
        return self._fn("GET", path, None)

    def post(self, path: str, body: bytes) -> Response:  # noqa: D102
        return self._fn("POST", path, body)

    def close(self) -> None:  # noqa: D102
        return None

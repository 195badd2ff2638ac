"""How the SDK talks to the collector: a small protocol and two implementations.

:class:`Transport` is all the client and its uploader need: ``get(path)`` and
``post(path, body)`` returning a :class:`Response`, raising ``OSError`` when no answer
came. :class:`HTTPTransport` speaks HTTP through ``requests`` (connection pooling with
keep-alive, proxies and CA bundles from the environment, or an app's own
``requests.Session`` for mTLS and corporate proxies); :class:`CallableTransport` hands
requests to a function, to embed the SDK in a host that already has an HTTP stack (or a
test client).

``requests`` is imported by the first request, not with the SDK: ``import client_sdk``
stays standard-library only and fast. The transport's own session sends no cookie, no
user agent and nothing else about the device: the collector must learn nothing but the
perturbed reports (an app's session sends what the app configured it to).
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
    import requests

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
        """GET ``path``; raise ``OSError`` if no answer came."""
        ...

    def post(self, path: str, body: bytes) -> Response:
        """POST a JSON ``body`` to ``path``; raise like :meth:`get`."""
        ...

    def close(self) -> None:
        """Release connections; the transport may still be used afterwards."""
        ...


_live: weakref.WeakSet[HTTPTransport] = weakref.WeakSet()


def _checked_url(base_url: object) -> tuple[str, str, int | None, str]:
    """The scheme, host, port (None: not given) and path of an http(s) URL with a host and
    no query, fragment or credentials.

    Raises:
        ValueError: saying which of these ``base_url`` is not.
    """
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
    return parts.scheme, parts.hostname, port, parts.path


class HTTPTransport:
    """HTTP/1.1 through a ``requests.Session``, safe across threads and forks.

    The transport's own session pools at most :data:`MAX_IDLE_CONNECTIONS` kept-alive
    connections per host (an app thread fetching a definition never waits for the
    uploader's upload), retries a request once on a fresh connection when its pooled one
    turns out closed by the server (a replayed upload is harmless: the collector discards
    known report ids), never after a timeout or a refused connection,
    follows no redirect, keeps no cookie and sends no user agent. Like any
    ``requests.Session`` it takes proxies (``HTTPS_PROXY``, ``NO_PROXY``) and a CA bundle
    (``REQUESTS_CA_BUNDLE``) from the environment. A forked child gets a new session and
    never uses its parent's sockets.

    An app's own ``session`` is used as given (its adapters, certificates, proxies,
    headers and cookies: the app's choice), shared with the app and never closed here.

    Args:
        base_url: ``http://host:port`` or ``https://…``, optionally with a path prefix.
        timeout: seconds to connect and to wait for each read.
        session: a ``requests.Session`` to send through; None: the transport's own,
            made on the first request.
        ingest_key: sent as ``Authorization: Bearer <key>`` with :meth:`get` and
            :meth:`post` (not with :meth:`exchange`'s key fetches and relay posts).

    Raises:
        ValueError: a URL that is not http(s) with a host, or a non-positive timeout.
    """

    def __init__(
        self,
        base_url: str,
        timeout: float = DEFAULT_TIMEOUT,
        session: requests.Session | None = None,
        ingest_key: str | None = None,
    ) -> None:
        scheme, host, port, path = _checked_url(base_url)
        self._authorization = None if ingest_key is None else f"Bearer {ingest_key}"
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self._https = scheme == "https"
        self._host = host
        # The scheme's default port is left out (RFC 3986 §6.2.3, as a browser's URL does):
        # the authority an Oblivious HTTP request names is then the web SDK's, byte for byte.
        self._port = None if port == (443 if self._https else 80) else port
        self._prefix = path.rstrip("/")
        self._root = self.base_url
        self.timeout = float(timeout)
        self._lock = threading.Lock()
        self._given = session
        self._own: requests.Session | None = None
        _live.add(self)

    @property
    def base_url(self) -> str:
        """The URL requests go to, without a trailing slash."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        port = f":{self._port}" if self._port else ""
        return f"{'https' if self._https else 'http'}://{host}{port}{self._prefix}"

    @property
    def session(self) -> requests.Session:
        """The session requests go through (the transport's own is made on first use)."""
        if self._given is not None:
            return self._given
        own = self._own
        if own is None:
            with self._lock:
                if self._own is None:
                    self._own = _new_session()
                own = self._own
        return own

    def get(self, path: str) -> Response:  # noqa: D102
        return self._request("GET", path, None, authorized=True)

    def post(self, path: str, body: bytes) -> Response:  # noqa: D102
        return self._request("POST", path, body, authorized=True)

    def close(self) -> None:  # noqa: D102
        with self._lock:
            own, self._own = self._own, None
        if own is not None:
            own.close()

    def exchange(
        self, method: str, path: str, body: bytes | None, content_type: str, accept: str
    ) -> Response:
        """Send ``body`` as ``content_type`` and ask for ``accept`` (the oblivious
        transport's key fetches and relay posts); raise like :meth:`get`."""
        return self._request(method, path, body, content_type, accept)

    def _request(
        self,
        method: str,
        path: str,
        body: bytes | None,
        content_type: str = "application/json",
        accept: str = "application/json",
        authorized: bool = False,
    ) -> Response:
        headers = {"Accept": accept}
        if body is not None:
            headers["Content-Type"] = content_type
        if authorized and self._authorization is not None:
            headers["Authorization"] = self._authorization
        try:
            answer = self.session.request(
                method,
                self._root + path,
                data=body,
                headers=headers,
                timeout=self.timeout,
                allow_redirects=False,
                stream=True,  # read at most MAX_RESPONSE_BYTES + 1, below
            )
        except OSError as exc:  # requests' exceptions are OSErrors
            raise _root_cause(exc) from None
        try:
            chunks: list[bytes] = []
            size = 0
            for chunk in answer.iter_content(64 * 1024):
                chunks.append(chunk)
                size += len(chunk)
                if size > MAX_RESPONSE_BYTES:
                    raise OSError(f"response larger than {MAX_RESPONSE_BYTES} bytes")
            data = b"".join(chunks)
        finally:
            answer.close()  # back to the pool when read to the end; closed otherwise
        headers_in = {name.lower(): value for name, value in answer.headers.items()}
        return Response(answer.status_code, headers_in, data)

    def _after_fork_in_child(self) -> None:
        # The parent's sockets stay the parent's: forget its session without closing it.
        # An app's session is the app's to manage.
        self._lock = threading.Lock()
        self._own = None


def _root_cause(exc: BaseException) -> BaseException:
    """The socket-level error under ``requests``' wrappers (``ConnectionRefusedError``,
    ``TimeoutError``, ``socket.gaierror``, ``ssl.SSLError``…), so that
    ``stats()["last_error"]`` names what happened; ``exc`` itself if there is none."""
    found, seen = exc, set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and type(current).__module__ in _SOCKET_MODULES:
            found = current
        current = _wrapped(current)
    return found


def _wrapped(error: BaseException) -> BaseException | None:
    """The error ``error`` wraps: its ``reason`` (urllib3's), its first argument
    (``requests``'), else its cause or context; None when there is none."""
    reason = getattr(error, "reason", None)
    if isinstance(reason, BaseException):
        return reason
    args = getattr(error, "args", ())
    if args and isinstance(args[0], BaseException):
        return args[0]
    return error.__cause__ or error.__context__


_SOCKET_MODULES = ("builtins", "socket", "ssl")
"""Modules of the errors :func:`_root_cause` reports (the standard library's own)."""


def _new_session() -> requests.Session:
    """The transport's own session: small pool, one retry of a dropped connection, no
    cookies, no user agent."""
    import http.cookiejar

    import requests
    import requests.adapters
    import urllib3.exceptions
    import urllib3.util

    class ReplayDropped(urllib3.util.Retry):
        """Retry a request once when its kept-alive connection was dropped, not after a
        timeout: a read timeout would otherwise double the wait ``timeout`` promises."""

        def increment(  # urllib3 passes these by keyword
            self, *args: Any, **kwargs: Any
        ) -> ReplayDropped:
            error = kwargs.get("error")
            if isinstance(error, urllib3.exceptions.ReadTimeoutError):
                raise error
            return super().increment(*args, **kwargs)

    session = requests.Session()
    retry = ReplayDropped(
        total=1,
        connect=0,
        read=1,
        redirect=0,
        status=0,
        other=0,
        allowed_methods=None,
        respect_retry_after_header=False,  # the uploader's backoff honours Retry-After
    )
    adapter = requests.adapters.HTTPAdapter(
        pool_connections=1, pool_maxsize=MAX_IDLE_CONNECTIONS, max_retries=retry
    )
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    session.headers.clear()
    session.headers["User-Agent"] = urllib3.util.SKIP_HEADER  # urllib3 adds none then
    session.headers["Accept-Encoding"] = "identity"
    session.cookies.set_policy(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))
    return session


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

"""The relay's one job: forward sealed uploads to the gateway, blind (RFC 9458 §6.2).

A WSGI app. ``POST /`` with a ``message/ohttp-req`` body is admitted by its source's
request bucket (:class:`ldp_edge.admission.Admission`, a keyed hash of the address held
in memory only), its body read under the edge's deadline (:mod:`ldp_edge.slow_bodies`),
then posted to the gateway with exactly the :data:`FORWARDED` headers; the gateway's
status, the :data:`PASSED_BACK` headers and body come back (with ``Cache-Control:
no-store``). No cookie crosses in either direction: the gateway is called through a
connection pool that has no cookie jar. ``GET /healthz`` answers ``ok``. Nothing else is
served, and nothing about a request is logged. In full: ``docs/guides/relay.md``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import urllib3
import urllib3.exceptions
import urllib3.util

from client_sdk.ohttp.keys import REQUEST_MEDIA_TYPE, RESPONSE_MEDIA_TYPE
from ldp_edge import cors
from ldp_edge.admission import Admission, TooManyRequests
from ldp_edge.answers import answer, error, read_body, refuse
from ldp_edge.slow_bodies import BodyDeadline
from ldp_relay.limits import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_SOURCE_REQUESTS_PER_SECOND,
    DEFAULT_TIMEOUT,
)

__all__ = [
    "FORWARDED",
    "PASSED_BACK",
    "Relay",
    "create_relay",
]

log = logging.getLogger(__name__)

FORWARDED = {"Content-Type": REQUEST_MEDIA_TYPE, "Accept": RESPONSE_MEDIA_TYPE}
"""The only headers the gateway gets, besides HTTP's own ``Host`` and ``Content-Length``:
none of the device's (no user agent, cookie, origin or address) and none of the relay's
(no user agent, ``Forwarded`` or cookie)."""

PASSED_BACK = ("Content-Type", "Retry-After")
"""The gateway's headers the device gets: what it needs to read the answer and to wait
(never ``Set-Cookie``)."""

POOL_CONNECTIONS = 20
"""Kept-alive connections to the gateway per worker (one per concurrent upload)."""

WsgiStart = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], WsgiStart], Iterable[bytes]]


class Relay:
    """The relay's WSGI app.

    Args:
        gateway: the gateway URL (``https://collector.example/.well-known/ohttp-gateway``).
        requests_per_second: per-source uploads per second; 0: no limit.
        source_header: the header a trusted proxy in front of the relay puts the device's
            address in; None: the peer address.
        max_body_bytes: the largest body forwarded.
        timeout: seconds for the gateway to answer.
        cors_origins: origins whose web pages may post through the relay (the web SDK),
            or ``*``; none by default. ``Origin`` is read for that and never forwarded.
    """

    def __init__(
        self,
        gateway: str,
        requests_per_second: int = DEFAULT_SOURCE_REQUESTS_PER_SECOND,
        source_header: str | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        timeout: float = DEFAULT_TIMEOUT,
        cors_origins: tuple[str, ...] = (),
    ) -> None:
        if not gateway.startswith(("http://", "https://")):
            raise ValueError(f"the gateway must be an http(s) URL, got {gateway!r}")
        self.gateway = gateway
        self.admission = Admission(requests_per_second, 0, source_header)
        self.max_body_bytes = max_body_bytes
        self.timeout = timeout
        self.pool = _pool()
        self.cors_origins = cors_origins

    def __call__(self, env: dict[str, Any], start: WsgiStart) -> Iterable[bytes]:
        """Serve one request (with CORS headers for an allowed page's origin)."""
        cross = cors.wsgi_headers(env, self.cors_origins, ("POST",))

        def start_response(status: str, headers: list[tuple[str, str]], *info: Any) -> Any:
            return start(status, headers + list(cross.items()), *info)

        if env.get("REQUEST_METHOD") == "OPTIONS" and env.get("PATH_INFO", "/") == "/":
            return answer(start_response, 204, {}, b"")
        return self._serve(env, start_response)

    def _serve(self, env: dict[str, Any], start_response: WsgiStart) -> Iterable[bytes]:
        path, method = env.get("PATH_INFO", "/"), env.get("REQUEST_METHOD", "GET")
        if path == "/healthz" and method in ("GET", "HEAD"):
            return answer(start_response, 200, {"Content-Type": "text/plain"}, b"ok")
        if path != "/":
            return error(start_response, 404, "the relay serves only POST /")
        if method != "POST":
            return error(start_response, 405, "the relay takes POST", (), {"Allow": "POST"})
        kind = env.get("CONTENT_TYPE", "").split(";", 1)[0].strip().lower()
        if kind != REQUEST_MEDIA_TYPE:
            return error(start_response, 415, f"the relay forwards only {REQUEST_MEDIA_TYPE}")
        if self.admission.enabled:
            try:
                self.admission.admit_request(self.admission.source(env))
            except TooManyRequests as exc:
                return refuse(start_response, exc)
        body = read_body(env, self.max_body_bytes)
        if body is None:
            return error(start_response, 413, "the request is too large")
        return self._forward(body, start_response)

    def _forward(self, body: bytes, start_response: WsgiStart) -> Iterable[bytes]:
        """POST ``body`` to the gateway; its answer (status, the passed-back headers, body)
        or a 502/504 of the relay's own."""
        try:
            answered = self.pool.request(
                "POST",
                self.gateway,
                body=body,
                headers={**FORWARDED, **_NOTHING_ELSE},
                timeout=urllib3.Timeout(connect=self.timeout, read=self.timeout),
                redirect=False,
                retries=False,
            )
        except urllib3.exceptions.HTTPError as exc:
            return _failed(start_response, exc)
        headers = {k: answered.headers[k] for k in PASSED_BACK if k in answered.headers}
        headers["Cache-Control"] = "no-store"
        return answer(start_response, answered.status, headers, answered.data)


_RETRY = {"Retry-After": "5"}

_NOTHING_ELSE = {
    "User-Agent": urllib3.util.SKIP_HEADER,
    "Accept-Encoding": urllib3.util.SKIP_HEADER,
}
"""urllib3 and http.client would add a user agent and ``Accept-Encoding: identity``."""


def _failed(start_response: WsgiStart, exc: urllib3.exceptions.HTTPError) -> list[bytes]:
    """504 when the gateway was too slow, 502 when it cannot be reached (urllib3 counts a
    refused connection as a connect timeout: it is not one)."""
    if isinstance(exc, urllib3.exceptions.TimeoutError) and not isinstance(
        exc, urllib3.exceptions.NewConnectionError
    ):
        return error(start_response, 504, "the gateway did not answer in time", (), _RETRY)
    log.warning("gateway unreachable: %s", type(exc).__name__)  # nothing of the device
    return error(start_response, 502, "the gateway cannot be reached", (), _RETRY)


def _pool() -> urllib3.PoolManager:
    """Kept-alive connections to the gateway: no cookie jar (urllib3 keeps none), no
    retries or redirects, no proxy or credentials from the environment."""
    return urllib3.PoolManager(num_pools=1, maxsize=POOL_CONNECTIONS, retries=False)


def create_relay(environ: Mapping[str, str] | None = None) -> WsgiApp:
    """The relay configured from the environment (gunicorn's app factory), behind the
    edge's body deadline.

    Variables: ``LDP_RELAY_GATEWAY`` (required), ``LDP_RELAY_SOURCE_REQUESTS_PER_SECOND``,
    ``LDP_RELAY_SOURCE_HEADER``, ``LDP_RELAY_MAX_BODY_BYTES``, ``LDP_RELAY_TIMEOUT``,
    ``LDP_RELAY_CORS_ORIGINS`` (comma-separated, or ``*``).

    Raises:
        ValueError: a variable is missing or invalid.
    """
    environ = os.environ if environ is None else environ
    gateway = environ.get("LDP_RELAY_GATEWAY", "")
    if not gateway:
        raise ValueError("LDP_RELAY_GATEWAY (the collector's gateway URL) is required")
    try:
        rate = int(
            environ.get("LDP_RELAY_SOURCE_REQUESTS_PER_SECOND", DEFAULT_SOURCE_REQUESTS_PER_SECOND)
        )
        size = int(environ.get("LDP_RELAY_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES))
        timeout = float(environ.get("LDP_RELAY_TIMEOUT", DEFAULT_TIMEOUT))
    except ValueError as exc:
        raise ValueError(f"invalid relay setting: {exc}") from None
    if rate < 0 or size <= 0 or timeout <= 0:
        raise ValueError("relay limits must be positive (the request rate may be 0: off)")
    header = environ.get("LDP_RELAY_SOURCE_HEADER") or None
    raw = environ.get("LDP_RELAY_CORS_ORIGINS", "")
    origins = tuple(o.strip().rstrip("/").lower() for o in raw.split(",") if o.strip())
    return BodyDeadline(Relay(gateway, rate, header, size, timeout, origins), size)

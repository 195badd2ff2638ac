"""The collector as an Oblivious HTTP gateway (RFC 9458) for the SDK's routes.

``GET /.well-known/ohttp-gateway`` answers the key configurations
(``application/ohttp-keys``); ``POST`` of a ``message/ohttp-req`` is decapsulated, and the
Binary HTTP request inside, which must be ``POST /v1/reports`` or the read-only
``GET /v1/metrics/<name>`` (a definition), is served by the app itself, through the same
WSGI stack, view, validation, limits and append as a direct one, from a fresh environ
that holds no address or header of the sender (the relay), only the inner request's
``authorization`` (the app's ingest key) besides what the route reads. Its
answer goes back sealed, as ``message/ohttp-res``. A request under a key id the gateway
does not hold gets RFC 9458 §5.3's ``ohttp-key`` problem, on which the SDK fetches the
keys again. In full: ``docs/reference/ohttp.md``.
"""

from __future__ import annotations

import io
import json
import logging
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import redis
from prometheus_client import Counter

from client_sdk.errors import ObliviousError, UnknownKeyIdError
from client_sdk.ohttp import bhttp
from client_sdk.ohttp import keys as ohttp_keys
from client_sdk.ohttp.encapsulation import decapsulate_request
from client_sdk.ohttp.keys import GATEWAY_PATH, PROBLEM_KEY
from collector.ohttp_shuffle import PoolAppender, Shuffler
from collector.settings import ConfigError
from ldp_edge import cors
from ldp_edge.admission import Admission, TooManyRequests
from ldp_edge.answers import answer, error, read_body, refuse
from ldp_store.ohttp_keys import DEFAULT_LIFETIME, DEFAULT_OVERLAP, GatewayKeys, LiveKey

__all__ = [
    "GATEWAY_PATH",
    "DEFINITION_PATH",
    "INNER_PATH",
    "OBLIVIOUS_ENVIRON_KEY",
    "PROBLEM_KEY",
    "ObliviousGateway",
    "install",
]

log = logging.getLogger(__name__)

INNER_PATH = "/v1/reports"
"""The route an encapsulated ``POST`` may name: the gateway is not a proxy to the API."""

DEFINITION_PATH = "/v1/metrics/"
"""The route (followed by one metric name) an encapsulated ``GET`` may name: a device
behind a relay fetches its definitions there too, so the collector never sees its
address. Read-only: served as a direct ``GET``, with the app's ingest key if it sent one
(which picks the project)."""

_DEFINITION = re.compile(r"/v1/metrics/([^/]+)\Z")

OBLIVIOUS_ENVIRON_KEY = "ldp.oblivious"
"""Set (True) in the environ of an inner request: it came through the gateway."""

KEY_CACHE_SECONDS = 5.0
"""Seconds a process reuses its reading of the keys: a rotation by ``ldp keys rotate`` or
another replica is seen within this; an unknown key id re-reads at once (at most once per
:data:`MISS_RELOAD_SECONDS`), so a device using the newest key never waits for it."""

MISS_RELOAD_SECONDS = 1.0
"""Least seconds between two re-readings caused by unknown key ids (a flood of invented
ids must not become a flood of Redis reads)."""

KEYS_MAX_AGE = 300
"""``Cache-Control: max-age`` of the published keys: a shared cache (or relay) may hand
the same configuration to every device for five minutes, much less than the overlap."""

ENCAPSULATION_OVERHEAD = ohttp_keys.SEALING_OVERHEAD
"""Bytes an encapsulated request may exceed the app's body limit by (the SDK keeps its
framing within it; deploy/nginx.conf and ``ldp relay`` allow the same)."""

RELAY_REQUESTS_PER_SECOND = 1000
"""Encapsulated requests one relay (address) may send per second, and at once, by
default: the collector's own limit on a relay, which pools many devices and applies the
per-device limits itself (``ldp relay``). 0: no limit."""

INNER_HEADERS = ("content-type", "content-encoding")
"""Inner request headers passed to the app with a ``POST``: what ``POST /v1/reports``
reads."""

AUTHORIZATION = "authorization"
"""The inner header passed with either route: the app's ingest key, which picks the
project of its definitions and reports and, where keys are required, admits them (sealed,
so the relay never reads it; the same for every device of the app, so it tells the
collector nothing of the device). Everything else a device put inside (a user agent, a
cookie) is dropped unread."""

ANSWER_HEADERS = ("content-type", "retry-after")
"""Headers of the app's answer sealed into the encapsulated response."""

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

_SERVER_KEYS = (
    "SERVER_NAME",
    "SERVER_PORT",
    "SERVER_PROTOCOL",
    "SCRIPT_NAME",
    "wsgi.version",
    "wsgi.url_scheme",
    "wsgi.errors",
    "wsgi.multithread",
    "wsgi.multiprocess",
    "wsgi.run_once",
)
"""What an inner request's environ keeps of the outer one: the server's, not the peer's."""


_REFUSALS: dict[str, tuple[int, str]] = {
    "unavailable": (503, "storage is unavailable"),
    "wrong_type": (415, "the gateway takes message/ohttp-req"),
    "too_large": (413, "the encapsulated request is too large"),
    "undecryptable": (400, "the encapsulated request cannot be opened"),
}
"""The gateway's own refusals, by outcome (the ``ldp_ohttp_gateway`` counter's label):
status and message."""


class ObliviousGateway:
    """WSGI middleware: the gateway at :data:`GATEWAY_PATH`, everything else passed on.

    It sits outside :class:`collector.logs.StripClientMetadata` (inner requests go through
    that too) and inside :class:`ldp_edge.admission.IdentifySource`.

    Args:
        app: the WSGI app that serves the inner requests (and every other path).
        keys: the key schedule.
        max_body_bytes: the app's body limit (an inner body is held to it again).
        registry: the Prometheus registry to count outcomes in.
        relay_admission: the per-relay request limit.
        shuffler: the relayed reports' shuffler, or None (kept for ``/metrics``).
        cors_origins: origins whose pages may fetch the keys and post (``CORS_ORIGINS``).
    """

    def __init__(
        self,
        app: WsgiApp,
        keys: GatewayKeys,
        max_body_bytes: int,
        registry: Any = None,
        relay_admission: Admission | None = None,
        shuffler: Shuffler | None = None,
        cors_origins: Iterable[str] = (),
    ) -> None:
        self.app = app
        self.cors_origins = tuple(cors_origins)
        self.shuffler = shuffler
        self.keys = keys
        self.max_bytes = max_body_bytes + ENCAPSULATION_OVERHEAD
        self.relay_admission = relay_admission
        self._lock = threading.Lock()
        self._live: list[LiveKey] = []
        self._read_at = -1e9
        self._miss_at = -1e9
        self.outcomes = Counter(
            "ldp_ohttp_requests",
            "Encapsulated requests at the gateway, by outcome: ok (decapsulated and served; "
            "the inner status is counted with /v1/reports), unknown_key, undecryptable, "
            "malformed, too_large, wrong_type, rate_limited, unavailable.",
            ["outcome"],
            registry=registry,
        )

    # -- keys --------------------------------------------------------------------------------
    def live_keys(self, refresh: bool = False) -> list[LiveKey]:
        """The live keys, re-read (and rotated when due) every :data:`KEY_CACHE_SECONDS`."""
        now = time.monotonic()
        with self._lock:
            fresh = now - self._read_at < KEY_CACHE_SECONDS and self._live
            if fresh and not refresh:
                return self._live
            if refresh and now - self._miss_at < MISS_RELOAD_SECONDS:
                return self._live
            if refresh:
                self._miss_at = now
        live = self.keys.ensure()
        with self._lock:
            self._live, self._read_at = live, now
        return live

    def _lookup(self, key_id: int) -> LiveKey | None:
        for refresh in (False, True):
            for key in self.live_keys(refresh):
                if key.config.key_id == key_id:
                    return key
        return None

    # -- WSGI --------------------------------------------------------------------------------
    def __call__(self, env: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        """Serve :data:`GATEWAY_PATH`; pass every other request on."""
        if env.get("PATH_INFO") != GATEWAY_PATH:
            return self.app(env, start_response)
        method = env.get("REQUEST_METHOD", "GET")
        cross = cors.wsgi_headers(env, self.cors_origins, ("GET", "POST"))

        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            return start_response(status, headers + list(cross.items()), exc_info)

        if method == "OPTIONS":  # a browser's preflight (the web SDK)
            return answer(start, 204, {}, b"")
        return self._serve_gateway(env, start, method)

    def _serve_gateway(
        self, env: dict[str, Any], start_response: Callable[..., Any], method: str
    ) -> Any:
        try:
            if method in ("GET", "HEAD"):
                configs = ohttp_keys.encode_key_configs([k.config for k in self.live_keys()])
                headers = {
                    "Content-Type": ohttp_keys.KEYS_MEDIA_TYPE,
                    "Cache-Control": f"max-age={KEYS_MAX_AGE}",
                }
                return answer(start_response, 200, headers, b"" if method == "HEAD" else configs)
            if method != "POST":
                return error(
                    start_response,
                    405,
                    "method not allowed",
                    ["allowed: GET, HEAD, POST, OPTIONS"],
                    {"Allow": "GET, HEAD, POST, OPTIONS"},
                )
            return self._post(env, start_response)
        except (redis.RedisError, redis.exceptions.RedisClusterException) as exc:
            log.warning("gateway keys unavailable: %s", type(exc).__name__)
            return self._error(
                start_response, "unavailable", ["retry after 5 s"], {"Retry-After": "5"}
            )

    def _error(
        self,
        start_response: Callable[..., Any],
        outcome: str,
        details: list[str],
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """Count ``outcome``, then answer its error (:data:`_REFUSALS`)."""
        self.outcomes.labels(outcome=outcome).inc()
        status, message = _REFUSALS[outcome]
        return error(start_response, status, message, details, headers)

    def _post(self, env: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        kind = env.get("CONTENT_TYPE", "").split(";", 1)[0].strip().lower()
        if kind != ohttp_keys.REQUEST_MEDIA_TYPE:
            return self._error(
                start_response, "wrong_type", [f"Content-Type is {kind[:100] or 'none'!r}"]
            )
        if self.relay_admission is not None and self.relay_admission.enabled:
            try:
                self.relay_admission.admit_request(self.relay_admission.source(env))
            except TooManyRequests as exc:
                self.outcomes.labels(outcome="rate_limited").inc()
                return refuse(start_response, exc)
        body = read_body(env, self.max_bytes)
        if body is None:
            return self._error(start_response, "too_large", [f"at most {self.max_bytes} bytes"])
        try:
            plain, context = decapsulate_request(body, self._lookup)
        except UnknownKeyIdError as exc:
            self.outcomes.labels(outcome="unknown_key").inc()
            return _unknown_key(start_response, exc.key_id)
        except ObliviousError as exc:
            return self._error(start_response, "undecryptable", [str(exc)])
        inner_answer = self._inner_answer(env, plain)
        sealed = context.encapsulate_response(bhttp.encode_response(inner_answer))
        headers = {"Content-Type": ohttp_keys.RESPONSE_MEDIA_TYPE, "Cache-Control": "no-store"}
        return answer(start_response, 200, headers, sealed)

    def _inner_answer(self, outer: Mapping[str, Any], plain: bytes) -> bhttp.BinaryResponse:
        """The answer to the decapsulated request ``plain``: the app's, or a 400 when it
        is not a binary HTTP request (each counted)."""
        try:
            inner = bhttp.decode_request(plain)
        except ObliviousError as exc:
            self.outcomes.labels(outcome="malformed").inc()
            return _inner_error(
                400, "the encapsulated message is not a binary HTTP request", [str(exc)]
            )
        self.outcomes.labels(outcome="ok").inc()
        return self._serve(outer, inner)

    def _serve(self, outer: Mapping[str, Any], inner: bhttp.BinaryRequest) -> bhttp.BinaryResponse:
        """The app's answer to the inner request, served from a fresh environ."""
        routed = _route(inner)
        if isinstance(routed, bhttp.BinaryResponse):
            return routed
        route, query = routed
        environ = _inner_environ(outer, inner, route, query)
        status: list[int] = []
        headers: list[tuple[str, str]] = []

        def start(line: str, answer_headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            status[:] = [int(line.split(" ", 1)[0])]
            headers[:] = answer_headers
            return lambda data: None

        result = self.app(environ, start)
        try:
            content = b"".join(result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        kept = tuple(
            (name.lower(), value) for name, value in headers if name.lower() in ANSWER_HEADERS
        )
        return bhttp.BinaryResponse(status[0], kept, content)


def _inner_environ(
    outer: Mapping[str, Any], inner: bhttp.BinaryRequest, route: str, query: str
) -> dict[str, Any]:
    """A fresh environ for the inner request to ``route`` with ``query``: the outer
    request's server keys, the inner one's method, body and allowed headers."""
    environ: dict[str, Any] = {k: outer[k] for k in _SERVER_KEYS if k in outer}
    environ.update(
        {
            "REQUEST_METHOD": inner.method,
            "PATH_INFO": route,
            "QUERY_STRING": query,
            "CONTENT_LENGTH": str(len(inner.content)),
            "wsgi.input": io.BytesIO(inner.content),
            OBLIVIOUS_ENVIRON_KEY: True,
        }
    )
    for header in (*INNER_HEADERS, AUTHORIZATION) if inner.method == "POST" else (AUTHORIZATION,):
        value = inner.header(header)
        if value is not None:
            key = header.upper().replace("-", "_")
            environ[key if key == "CONTENT_TYPE" else "HTTP_" + key] = value
    return environ


def _route(inner: bhttp.BinaryRequest) -> tuple[str, str] | bhttp.BinaryResponse:
    """The app's path and query string for an inner request (``GET`` of a definition,
    ``POST`` of reports), else the error answering it (404, or 405 for another method)."""
    path, _, query = inner.path.partition("?")
    # A prefix before /v1/ is the collector URL's own (the SDK names it as it is).
    match = _DEFINITION.search(path) if path.startswith("/") else None
    name = "" if match is None else urllib.parse.unquote(match.group(1))
    if name and "/" not in name:
        if inner.method != "GET":
            return _inner_error(405, "method not allowed", [f"allowed for {path[:100]}: GET"])
        return DEFINITION_PATH + name, query
    if path.startswith("/") and path.endswith(INNER_PATH):
        if inner.method != "POST":
            return _inner_error(405, "method not allowed", [f"allowed for {INNER_PATH}: POST"])
        return INNER_PATH, ""
    return _inner_error(
        404,
        "the gateway serves only POST /v1/reports and GET /v1/metrics/<name>",
        [f"got {inner.method[:10]} {inner.path[:100]!r}"],
    )


def _unknown_key(start_response: Callable[..., Any], key_id: int) -> list[bytes]:
    """RFC 9458 §5.3's problem, with the project's ``error``/``details`` beside it."""
    detail = (
        f"key identifier {key_id} is not (or no longer) held by this gateway: fetch "
        f"GET {GATEWAY_PATH} again and encapsulate under a key listed there"
    )
    body = {
        "type": PROBLEM_KEY,
        "title": "key identifier unknown",
        "status": 400,
        "detail": detail,
        "error": "key identifier unknown",
        "details": [detail],
    }
    headers = {"Content-Type": "application/problem+json", "Cache-Control": "no-store"}
    return answer(start_response, 400, headers, json.dumps(body).encode())


def _inner_error(status: int, message: str, details: list[str]) -> bhttp.BinaryResponse:
    body = json.dumps({"error": message, "details": details}).encode()
    return bhttp.BinaryResponse(status, (("content-type", "application/json"),), body)


def install(
    app_config: Mapping[str, Any],
    wsgi: WsgiApp,
    client: redis.Redis,
    registry: Any,
    pool: PoolAppender | None = None,
) -> WsgiApp:
    """Wrap ``wsgi`` (the app behind :class:`collector.logs.StripClientMetadata`) in the
    gateway, configured from the app's settings (``OHTTP_KEY_LIFETIME``,
    ``OHTTP_KEY_OVERLAP``, ``RELAY_REQUESTS_PER_SECOND``, ``SOURCE_HEADER``)."""
    lifetime = _number("OHTTP_KEY_LIFETIME", app_config.get("OHTTP_KEY_LIFETIME", DEFAULT_LIFETIME))
    overlap = _number("OHTTP_KEY_OVERLAP", app_config.get("OHTTP_KEY_OVERLAP", DEFAULT_OVERLAP), 0)
    rate = _number(
        "RELAY_REQUESTS_PER_SECOND",
        app_config.get("RELAY_REQUESTS_PER_SECOND", RELAY_REQUESTS_PER_SECOND),
        0,
    )
    relay_admission = Admission(int(rate), 0, app_config.get("SOURCE_HEADER"))
    keys = GatewayKeys(client, lifetime, overlap)
    return ObliviousGateway(
        wsgi,
        keys,
        int(app_config["MAX_BODY_BYTES"]),
        registry,
        relay_admission,
        None if pool is None else pool.shuffler,
        app_config.get("CORS_ORIGINS", ()),
    )


def _number(name: str, value: object, least: float | None = None) -> float:
    """A setting that must be a number > 0 (or >= ``least``)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or (value <= 0 if least is None else value < least):  # type: ignore[operator]
        bound = "> 0" if least is None else f">= {least:g}"
        raise ConfigError(f"LDP_{name} must be a number {bound}, got {value!r}")
    return float(value)  # type: ignore[arg-type]

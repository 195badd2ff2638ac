"""Every error the collector answers, mapped to JSON in this one place.

Clients always get ``{"error": "...", "details": [...]}``: a 4xx for anything they sent
(they should drop it, not retry), a 503 with ``Retry-After`` for storage trouble (they
should retry), and a 500 only for a bug of ours, which is logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import partial

import redis
from flask import Flask, Response, current_app, jsonify
from werkzeug.exceptions import HTTPException, InternalServerError, MethodNotAllowed

from ldp_api.models import Error, answer
from ldp_edge.answers import Refusal, clip
from ldp_store.connection import out_of_memory, unavailable

__all__ = ["ApiError", "Unavailable", "register_error_handlers"]

log = logging.getLogger(__name__)


class ApiError(Refusal):
    """An answer other than success, raised anywhere below a view (a
    :class:`~ldp_edge.answers.Refusal`, as the edge's own refusals: a 429 of the
    per-source limits).

    Args:
        status: the HTTP status.
        error: one sentence for people.
        details: every individual problem, e.g. one per rejected report.
        headers: extra response headers.
    """

    def body(self) -> Error:
        """The JSON body (a subclass may answer a richer :class:`Error`)."""
        return Error(error=self.error, details=self.details)


class Unavailable(ApiError):
    """Storage cannot take writes now (Redis down, out of memory, backlog): retry later.

    Args:
        error: what is wrong, for people.
        reason: a short category for the ``ldp_collector_unavailable_total`` counter.
        retry_after: seconds the client should wait (default: the app's ``RETRY_AFTER``).
    """

    def __init__(self, error: str, reason: str, retry_after: int | None = None) -> None:
        super().__init__(503, error)
        self.reason = reason
        self.retry_after = retry_after


_GENERIC: dict[int, tuple[str, list[str]]] = {
    404: ("no such endpoint", ["GET /openapi.json describes the API"]),
    405: ("method not allowed", []),
    413: ("the request body is too large", []),
}


def _json(status: int, body: Error) -> Response:
    response = jsonify(answer(body))
    response.status_code = status
    return response


def _error(status: int, error: str, details: Sequence[str] = ()) -> Response:
    return _json(status, Error(error=error, details=list(details)))


Count = Callable[[str], object]
"""Counts a 503 by its reason (``ldp_collector_unavailable_total``)."""


def _api_error(count: Count, exc: Refusal) -> Response:
    if isinstance(exc, Unavailable):
        return _unavailable(count, exc)
    body = exc.body() if isinstance(exc, ApiError) else Error(error=exc.error, details=exc.details)
    response = _json(exc.status, body)
    response.headers.update(exc.headers)
    return response


def _unavailable(count: Count, exc: Unavailable) -> Response:
    retry_after = exc.retry_after or int(current_app.config["RETRY_AFTER"])
    count(exc.reason)
    details = exc.details or [f"retry after {retry_after} s; nothing was lost"]
    response = _json(503, exc.body().model_copy(update={"details": details}))
    response.headers["Retry-After"] = str(retry_after)
    return response


_STORAGE_ERRORS = (redis.RedisError, redis.exceptions.RedisClusterException)
"""What storage raises. redis-py's cluster client raises RedisClusterException (not a
RedisError) when no node answers; :func:`ldp_store.connection.unavailable` tells such an
outage (503) from a bug (cross-slot keys, say: 500)."""


def _redis_error(count: Count, exc: Exception) -> Response:
    if isinstance(exc, redis.exceptions.RedisClusterException) and not unavailable(exc):
        log.error("storage misuse (a bug): %s: %s", type(exc).__name__, exc)
        return _error(500, "internal error (logged; please report it)")
    # The message names our own Redis (host, port), never the client: log it for
    # operators, do not send it to clients.
    log.warning("storage unavailable: %s: %s", type(exc).__name__, exc)
    if out_of_memory(exc):
        return _unavailable(count, Unavailable("storage is out of memory", "oom"))
    return _unavailable(count, Unavailable("storage is unavailable", "redis"))


def _http_error(count: Count, exc: HTTPException) -> Response:
    if isinstance(exc, InternalServerError):
        original = getattr(exc, "original_exception", None)
        if isinstance(original, _STORAGE_ERRORS):
            return _redis_error(count, original)
        return _error(500, "internal error (logged; please report it)")
    status = exc.code or 500
    error = exc.description or exc.name
    details: list[str] = []
    if error == type(exc).description:  # Werkzeug's generic text: say something useful
        error, details = _GENERIC.get(status, (exc.name.lower(), []))
        if isinstance(exc, MethodNotAllowed) and exc.valid_methods:
            details = [f"allowed: {', '.join(sorted(exc.valid_methods))}"]
    response = _error(status, clip(error), details)
    for name, value in exc.get_headers():
        if name.lower() != "content-type":
            response.headers[name] = value
    return response


def register_error_handlers(app: Flask, count: Count) -> None:
    """Map ``ApiError``, Werkzeug's HTTP errors and Redis errors to JSON responses;
    ``count(reason)`` is called for each 503 (the collector's telemetry counts them)."""
    app.register_error_handler(Refusal, partial(_api_error, count))
    for error in _STORAGE_ERRORS:
        app.register_error_handler(error, partial(_redis_error, count))
    app.register_error_handler(HTTPException, partial(_http_error, count))

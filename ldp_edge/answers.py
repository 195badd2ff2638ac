"""Answers an edge gives outside any web framework: a refusal, a JSON error, a body read
within a limit. The collector's Flask errors build on :class:`Refusal`; the relay and the
gateway answer with these helpers directly. In full: ``docs/reference/http.md``.
"""

from __future__ import annotations

import http
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["MAX_DETAIL_CHARS", "Refusal", "answer", "clip", "error", "read_body", "refuse"]

MAX_DETAIL_CHARS = 500
"""A detail names one problem; a client's megabyte of bad input is not echoed back."""

WsgiStart = Callable[..., Any]


def clip(text: str, limit: int = MAX_DETAIL_CHARS) -> str:
    """``text``, cut to ``limit`` characters with a visible ellipsis."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Refusal(Exception):
    """An answer other than success: ``{"error": ..., "details": [...]}`` with a status.

    Args:
        status: the HTTP status.
        error: one sentence for people.
        details: every individual problem, e.g. one per rejected report.
        headers: extra response headers (``Retry-After``).
    """

    def __init__(
        self,
        status: int,
        error: str,
        details: Sequence[str] = (),
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(error)
        self.status = status
        self.error = error
        self.details = [clip(d) for d in details]
        self.headers = dict(headers or {})


def answer(
    start_response: WsgiStart, status: int, headers: Mapping[str, str], body: bytes
) -> list[bytes]:
    """Start a response with ``headers`` (plus its length and ``nosniff``), return ``body``."""
    out = {**headers, "Content-Length": str(len(body)), "X-Content-Type-Options": "nosniff"}
    try:
        reason = http.HTTPStatus(status).phrase
    except ValueError:
        reason = "Status"
    start_response(f"{status} {reason}", list(out.items()))
    return [body]


def error(
    start_response: WsgiStart,
    status: int,
    message: str,
    details: Sequence[str] = (),
    headers: Mapping[str, str] | None = None,
) -> list[bytes]:
    """The JSON error body of the API, never cached."""
    body = json.dumps({"error": message, "details": list(details)}).encode()
    out = {"Content-Type": "application/json", "Cache-Control": "no-store", **(headers or {})}
    return answer(start_response, status, out, body)


def refuse(start_response: WsgiStart, refusal: Refusal) -> list[bytes]:
    """:func:`error` for a :class:`Refusal`."""
    return error(start_response, refusal.status, refusal.error, refusal.details, refusal.headers)


def read_body(env: Mapping[str, Any], limit: int) -> bytes | None:
    """The request body, or None when it is longer than ``limit`` (or its length is not a
    number). A declared length over the limit is refused unread."""
    try:
        length = int(env.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return None
    if length > limit:
        return None
    stream = env["wsgi.input"]
    body = stream.read(length) if length > 0 else stream.read(limit + 1)
    return None if len(body) > limit else bytes(body)

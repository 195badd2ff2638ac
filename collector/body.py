"""Strict decoding of request bodies: JSON as RFC 8259 defines it, nothing more.

Python's ``json`` module is lenient where a collector must not be: it accepts ``NaN``
and ``Infinity``, turns ``1e400`` into ``inf``, parses integers of thousands of digits
and lets the last of two equal keys win (``{"version": 1, "version": 2}``: which one did
the client mean, and which one did a proxy or log reader see?). Here those are errors
with a message, as is a body that is not UTF-8, not ``application/json``, or larger than
the configured limit.
"""

from __future__ import annotations

import json
import math
from typing import Any

import msgspec
from flask import Request

from collector.errors import ApiError
from ldp_edge.answers import clip

__all__ = ["MAX_INT_DIGITS", "parse_json", "read_body", "read_json"]

MAX_INT_DIGITS = 100
"""No field of the API holds an integer anywhere near 10¹⁰⁰ (versions and payload values
are far below 2⁶³); longer literals are refused before Python spends quadratic time
converting them (and before its 4300-digit limit raises somewhere less helpful)."""


_DIGIT_RUNS = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
"""``bytes.translate`` table: ASCII digits become "0", every other byte a space."""

_LONG_RUN = b"0" * (MAX_INT_DIGITS + 1)
"""A run of digits too long for an integer we accept, in a body translated as above."""


class _Rejected(ValueError):
    """A literal the strict parser refuses."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook``: the object as a dict, unless a key occurs twice.

    One C-level ``dict()`` and a length comparison per object: about 0.55 µs a report of
    an SDK batch (two objects each; benchmarks/bench_json_body.py), against 15-20 µs of
    CPU the collector spends on a report in all. The duplicate is looked for only then.
    """
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Rejected(f"duplicate key {clip(json.dumps(key), 100)} in one object")
            seen.add(key)
    return found


def _no_constants(name: str) -> Any:
    raise _Rejected(f"{name} is not valid JSON (numbers must be finite)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Rejected(f"number {clip(text, 40)} is out of range (numbers must be finite)")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Rejected(f"integer with {len(text)} digits is out of range")
    return int(text)


def parse_json(raw: bytes) -> Any:
    """Decode a UTF-8 JSON document strictly.

    An object with the same key twice is refused (RFC 8259 leaves its meaning to the
    parser; most keep the last, some the first).

    Args:
        raw: the request body.

    Returns:
        The decoded value.

    Raises:
        ApiError: 400 for an empty body, invalid UTF-8, malformed JSON, NaN or
            Infinity, non-finite or overlong numbers, a duplicate key (named), or nesting
            too deep to parse.
    """
    if not raw.strip():
        raise ApiError(400, "the request body is empty; send a JSON object")
    fast = _fast_parse(raw)
    return fast if fast is not _SLOW else _strict_parse(raw)


def _strict_parse(raw: bytes) -> Any:
    """:func:`parse_json` with the stdlib's parser alone: every refusal's message."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(
            400,
            "the request body is not valid UTF-8",
            [f"invalid byte at offset {exc.start}: {exc.reason}"],
        ) from None
    # An integer literal longer than MAX_INT_DIGITS is a run of more than that many ASCII
    # digits in the body (UTF-8 uses bytes 0x30-0x39 for nothing else). A body without
    # such a run, i.e. every real batch, cannot hold one: one C-speed scan of the body
    # (~0.3 µs a report) then spares json a Python call per integer (0.4-2.4 µs a report
    # for SDK batches, by mechanism).
    long_run = _LONG_RUN in raw.translate(_DIGIT_RUNS)
    try:
        return json.loads(
            text,
            parse_constant=_no_constants,
            parse_float=_finite_float,
            parse_int=_bounded_int if long_run else None,
            object_pairs_hook=_unique_keys,
        )
    except _Rejected as exc:
        raise ApiError(400, "malformed JSON", [str(exc)]) from None
    except json.JSONDecodeError as exc:
        raise ApiError(
            400, "malformed JSON", [f"{exc.msg} at line {exc.lineno} column {exc.colno}"]
        ) from None
    except RecursionError:
        raise ApiError(400, "malformed JSON", ["nesting is too deep"]) from None
    except ValueError as exc:  # e.g. an integer over Python's digit limit
        raise ApiError(400, "malformed JSON", [clip(str(exc))]) from None


_DECODE = msgspec.json.Decoder().decode
"""msgspec's JSON decoder into plain Python objects."""

_SLOW = object()
"""What :func:`_fast_parse` answers when the body needs the stdlib's strict parse."""


def _fast_parse(raw: bytes) -> Any:
    """msgspec's parse of a batch when it provably equals :func:`parse_json`'s, else _SLOW.

    msgspec refuses what the strict parse refuses (NaN, Infinity, numbers out of a
    double's range, invalid UTF-8, control characters, trailing data), reads integers
    exactly, and also refuses lone surrogates, which the strict parse accepts (those
    bodies go the slow way). It differs in two ways, both checked here:

    * it reads integers longer than :data:`MAX_INT_DIGITS`: a body with such a run of
      digits goes the slow way (which refuses it);
    * of two equal keys in one object it keeps the last, silently. Every member of an
      object has exactly one ``:`` outside strings, so the body's colons number at least
      the members parsed; here the members of the body, its reports and their payloads
      are counted. If the colons are no more than those, no object lost a duplicate key
      (and none is nested deeper, nor holds a colon in a string); else the slow way.

    About 0.5-1.3 µs a report instead of 3-6 (profile: docs/benchmarks/performance.md).
    """
    try:
        body = _DECODE(raw)
    except (msgspec.DecodeError, ValueError, RecursionError):
        return _SLOW
    if _LONG_RUN in raw.translate(_DIGIT_RUNS):
        return _SLOW
    reports = body.get("reports") if type(body) is dict else None
    if type(reports) is not list:  # not the usual shape: its errors come from the slow way
        return _SLOW
    members = len(body)
    for report in reports:
        if type(report) is not dict:
            return _SLOW
        payload = report.get("payload")
        members += len(report) + (len(payload) if type(payload) is dict else 0)
    if raw.count(b":") != members:
        return _SLOW
    return body


def read_json(request: Request, max_bytes: int) -> Any:
    """The JSON body of ``request``, after checking its type and size.

    Args:
        request: the current request.
        max_bytes: the largest body accepted.

    Returns:
        The decoded body.

    Raises:
        ApiError: 415 if it is not ``application/json`` (UTF-8) or is compressed,
            413 if it is larger than ``max_bytes``, 400 if it is not strict JSON.
    """
    return parse_json(read_body(request, max_bytes))


def read_body(request: Request, max_bytes: int) -> bytes:
    """The body of ``request``, undecoded, after the checks of :func:`read_json`.

    Raises:
        ApiError: 415 if it is not ``application/json`` (UTF-8) or is compressed,
            413 if it is larger than ``max_bytes``.
    """
    if request.mimetype != "application/json":
        shown = request.content_type or "none"
        details = [f"Content-Type is {clip(shown, 100)!r}; send 'application/json'"]
        if request.mimetype == "application/x-www-form-urlencoded":  # what curl -d sends
            details.append("with curl: -H 'Content-Type: application/json' (or --json)")
        raise ApiError(415, "the request body must be JSON", details)
    charset = request.mimetype_params.get("charset", "utf-8").lower()
    if charset not in ("utf-8", "utf8"):
        raise ApiError(415, "JSON must be UTF-8", [f"charset {clip(charset, 40)!r} is not"])
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding != "identity":
        raise ApiError(
            415, "compressed bodies are not accepted", [f"Content-Encoding {clip(encoding, 40)!r}"]
        )
    if request.content_length is not None and request.content_length > max_bytes:
        raise _too_large(request.content_length, max_bytes)
    # A chunked body has no Content-Length: Werkzeug stops reading it at the app's
    # MAX_CONTENT_LENGTH (set to max_bytes + 1 by create_app), so an overflow shows here.
    raw = request.get_data(cache=False)
    if len(raw) > max_bytes:
        raise _too_large(len(raw), max_bytes)
    return raw


def _too_large(size: int, max_bytes: int) -> ApiError:
    return ApiError(
        413,
        "the request body is too large",
        [f"{size} bytes; at most {max_bytes} are accepted: send smaller batches"],
    )

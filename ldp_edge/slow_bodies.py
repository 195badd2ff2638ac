"""A deadline on reading a request body, with a bytes-per-second floor.

Gunicorn's gevent worker gives a request's headers ``keepalive`` seconds (5) to arrive,
but nothing bounds its body: a POST that declares ``Content-Length: 1000000`` and sends a
byte a second held its connection for as long as the client liked, and a few hundred of
them filled a worker's connection pool. :class:`BodyDeadline` reads the body before the
app sees it, in pieces of :data:`PIECE_BYTES`: after :data:`GRACE_SECONDS` the body must
keep coming at :data:`MIN_BYTES_PER_SECOND` on average, and all of it within
:data:`MAX_SECONDS`; otherwise the request is answered 408 and the connection closed.

It needs gevent's timeouts (the default worker of ``ldp serve``, the compose collectors
and ``ldp relay``); under other workers the body is left to the app and to the buffering
proxy in front (``deploy/nginx.conf`` bounds the same waits). In full:
``docs/guides/operating.md``.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from typing import Any

from ldp_edge.answers import error

__all__ = ["GRACE_SECONDS", "MAX_SECONDS", "MIN_BYTES_PER_SECOND", "BodyDeadline", "TooSlow"]

GRACE_SECONDS = 10.0
"""Seconds any body gets before the rate floor applies: a phone on a poor link may stall
a few seconds while a batch (≈ 10–50 KB from the SDK) is on its way; twice gunicorn's
header timeout."""

MIN_BYTES_PER_SECOND = 4096
"""The floor after the grace: 4 KiB/s, a 2G (GPRS) link's speed. A client that holds a
connection with a slower body spends at least this much bandwidth doing it."""

MAX_SECONDS = 60.0
"""No body takes longer, at any rate: a full 1 MiB body needs ≥ 17 KiB/s (honest batches
are far smaller). The longest a slow-body connection is held."""

PIECE_BYTES = 16384
"""Bytes read per step; each must be in by its share of the deadline, so the floor is
checked every 4 s. Each step costs ~10 µs (a gevent timer); an SDK batch is 1–4 steps."""


class TooSlow(Exception):  # noqa: N818  # a condition, named as the 408 says
    """The body did not arrive in time. An ``Exception`` (not gevent's ``Timeout``) so
    gunicorn marks the half-read body failed and closes the connection after the 408."""


def _gevent_timeout() -> Any:
    """gevent's ``Timeout`` class if gevent has patched this process, else None."""
    try:
        from gevent import Timeout, monkey  # type: ignore[import-untyped]  # noqa: PLC0415
    except ImportError:  # pragma: no cover - gevent is a dependency
        return None
    return Timeout if monkey.is_module_patched("socket") else None


class BodyDeadline:
    """WSGI middleware: read the body under the deadline, or answer 408.

    Args:
        app: the WSGI app.
        max_bytes: the app's body limit; a longer declared body is left to the app
            (which refuses it without reading), a longer chunked one is read one byte past
            it (so the app sees the overflow).
        on_cut: called (without arguments) for every request answered 408 (a counter).
    """

    def __init__(
        self,
        app: Callable[..., Any],
        max_bytes: int,
        on_cut: Callable[[], object] | None = None,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout = _gevent_timeout()
        self.on_cut = on_cut

    def __call__(self, env: dict[str, Any], start_response: Callable[..., Any], /) -> Any:
        """Serve the request with its body read in time."""
        if self.timeout is None:
            return self.app(env, start_response)
        chunked = "chunked" in env.get("HTTP_TRANSFER_ENCODING", "").lower()
        try:
            length = int(env.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return self.app(env, start_response)  # the app refuses it
        if (length <= 0 and not chunked) or length > self.max_bytes:
            return self.app(env, start_response)
        try:
            body = self._read(env["wsgi.input"], length if length > 0 else None)
        except TooSlow:
            if self.on_cut is not None:
                self.on_cut()
            return _too_slow(start_response)
        env["wsgi.input"] = io.BytesIO(body)
        env["CONTENT_LENGTH"] = str(len(body))
        env.pop("HTTP_TRANSFER_ENCODING", None)
        return self.app(env, start_response)

    def _read(self, stream: Any, length: int | None) -> bytes:
        """The body (``length`` bytes, or until its end, at most ``max_bytes`` + 1).

        Raises:
            TooSlow: a piece was not in by its deadline.
        """
        want = length if length is not None else self.max_bytes + 1
        started = time.monotonic()
        pieces: list[bytes] = []
        got = 0
        while got < want:
            size = min(PIECE_BYTES, want - got)
            due = min(GRACE_SECONDS + (got + size) / MIN_BYTES_PER_SECOND, MAX_SECONDS)
            left = started + due - time.monotonic()
            if left <= 0:
                raise TooSlow
            with self.timeout(left, TooSlow):
                piece = stream.read(size)
            if not piece:  # the client ended early: the app sees what came
                break
            pieces.append(piece)
            got += len(piece)
        return b"".join(pieces)


def _too_slow(start_response: Callable[..., Any]) -> list[bytes]:
    return error(
        start_response,
        408,
        "the request body came too slowly",
        [
            f"a body must arrive at {MIN_BYTES_PER_SECOND} bytes/s or more after the "
            f"first {GRACE_SECONDS:g} s, and within {MAX_SECONDS:g} s in all"
        ],
        {"Connection": "close"},
    )

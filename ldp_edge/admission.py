"""Admission limits: a token bucket per source, kept in memory under a key that rotates.

One client must not be able to send everything: a flood from one address gets ``429``
with ``Retry-After`` once its buckets are empty, and other sources go on being served.
A source is named only by a keyed hash of its address (:class:`SourceNames`), under a
random key held in memory and replaced daily. In full: ``docs/security/limits.md``.
"""

from __future__ import annotations

import hashlib
import math
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from ldp_edge.answers import Refusal

__all__ = [
    "KEY_LIFETIME",
    "MAX_SOURCES",
    "SOURCE_ENVIRON_KEY",
    "Admission",
    "IdentifySource",
    "SourceNames",
    "TooManyRequests",
    "environ_key",
]

KEY_LIFETIME = 86_400.0
"""Seconds a source key lives: a day, so the hashes of one address under two keys cannot
be linked beyond a day, while the buckets (which need at most a minute to refill) are
reset only once a day."""

MAX_SOURCES = 65_536
"""Sources one process remembers (least recently seen forgotten first): about 250 bytes
each (benchmarks/bench_admission.py), 16 MiB at most per worker, whatever a million
addresses do. Forgetting a source only gives it a full bucket again, never refuses
anyone; a flooding source is seen often, so it is forgotten only if 65,536 other sources
come between two of its requests, and then it is not flooding that worker."""

SOURCE_ENVIRON_KEY = "ldp.source"
"""The WSGI environ key of a request's source hash (set by :class:`IdentifySource`)."""

_PEER = "REMOTE_ADDR"
"""The WSGI environ key of the connection's peer address."""

_KEY_BYTES = 32
_DIGEST_BYTES = 16
"""128 bits: two sources of a million collide with probability about 10⁻²⁷."""


class TooManyRequests(Refusal):
    """A 429: this source's bucket is empty; retry after ``retry_after`` seconds.

    Args:
        limit: which bucket: ``requests`` or ``reports``.
        retry_after: whole seconds until the bucket can pay for the request.
        detail: what the limit is.
    """

    def __init__(self, limit: str, retry_after: int, detail: str) -> None:
        super().__init__(
            429,
            "too many requests from this source",
            [detail, f"retry after {retry_after} s; nothing of this request was stored"],
            {"Retry-After": str(retry_after)},
        )
        self.limit = limit


def environ_key(header: str) -> str:
    """The WSGI environ key of an HTTP request header (``X-Real-IP`` → ``HTTP_X_REAL_IP``)."""
    return "HTTP_" + header.upper().replace("-", "_")


class SourceNames:
    """Names sources by ``BLAKE2b-128(key, address)`` under a random key that is replaced
    every :data:`KEY_LIFETIME` seconds; whoever keeps state per name forgets it then.

    Args:
        clock: monotonic seconds.
        on_rotate: called (without arguments) whenever the key is replaced.
    """

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        on_rotate: Callable[[], None] | None = None,
    ) -> None:
        self.clock = clock
        self._on_rotate = on_rotate
        self._key = b""
        self._born = 0.0
        self.rotate()

    def name(self, address: str) -> bytes:
        """The keyed hash of ``address`` under the current key."""
        if self.clock() - self._born >= KEY_LIFETIME:
            self.rotate()
        return hashlib.blake2b(
            address.encode("utf-8", "replace"), key=self._key, digest_size=_DIGEST_BYTES
        ).digest()

    def rotate(self) -> None:
        """Replace the key with fresh random bytes."""
        self._key = secrets.token_bytes(_KEY_BYTES)
        self._born = self.clock()
        if self._on_rotate is not None:
            self._on_rotate()


class _Buckets:
    """One source's two buckets: tokens left, and when they were last refilled."""

    __slots__ = ("requests", "reports", "at")

    def __init__(self, requests: float, reports: float, at: float) -> None:
        self.requests = requests
        self.reports = reports
        self.at = at


class Admission:
    """The sources' token buckets and the key that names the sources.

    Thread- and greenlet-safe: every look-up and charge holds one lock for a few
    microseconds, and nothing in it waits on I/O.

    Args:
        requests_per_second: requests per source per second, and the most at once;
            0: no request limit.
        reports_per_minute: reports per source per minute, and the most at once;
            0: no report limit.
        header: the request header a trusted proxy puts the client's address in
            (its last comma-separated value is taken); None: the peer address.
        clock: monotonic seconds (tests inject one; after replacing :attr:`clock`, call
            :meth:`rotate`).
        max_sources: sources remembered at most.
    """

    def __init__(
        self,
        requests_per_second: int,
        reports_per_minute: int,
        header: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        max_sources: int = MAX_SOURCES,
    ) -> None:
        self.requests_per_second = requests_per_second
        self.reports_per_minute = reports_per_minute
        self.header_key = environ_key(header) if header else None
        self._max_sources = max_sources
        self._lock = threading.Lock()
        self._buckets: OrderedDict[bytes, _Buckets] = OrderedDict()
        self._names = SourceNames(clock, self._forget)

    @property
    def clock(self) -> Callable[[], float]:
        """Monotonic seconds (the key's and the buckets' clock)."""
        return self._names.clock

    @clock.setter
    def clock(self, clock: Callable[[], float]) -> None:
        self._names.clock = clock

    @property
    def enabled(self) -> bool:
        """Whether any limit is on."""
        return bool(self.requests_per_second or self.reports_per_minute)

    def __len__(self) -> int:
        return len(self._buckets)

    # -- who ------------------------------------------------------------------------------
    def address(self, environ: dict[str, Any]) -> str:
        """The client's address: the trusted header's last value, else the peer's."""
        if self.header_key is not None:
            forwarded = environ.get(self.header_key, "")
            last = forwarded.rsplit(",", 1)[-1].strip()
            if last:
                return str(last)
        return str(environ.get(_PEER) or "")

    def source(self, environ: dict[str, Any]) -> bytes:
        """The keyed hash that names the request's source (under the current key)."""
        return self._names.name(self.address(environ))

    def rotate(self) -> None:
        """Replace the key with fresh random bytes, and forget every source's buckets (they
        are named under the old key: no request would meet them again)."""
        self._names.rotate()

    def _forget(self) -> None:
        with self._lock:
            self._buckets.clear()

    # -- how much ---------------------------------------------------------------------------
    def admit_request(self, source: bytes) -> None:
        """Take one request token of ``source``.

        Raises:
            TooManyRequests: the source has sent ``requests_per_second`` requests in the
                last second or so.
        """
        rate = self.requests_per_second
        if not rate:
            return
        with self._lock:
            buckets = self._refilled(source)
            if buckets.requests >= 1:
                buckets.requests -= 1
                return
            wait = (1 - buckets.requests) / rate
        raise TooManyRequests(
            "requests", _whole_seconds(wait), f"at most {rate} requests per second per source"
        )

    def admit_reports(self, source: bytes, count: int) -> None:
        """Take ``count`` report tokens of ``source``, or none.

        Raises:
            TooManyRequests: the source's report bucket holds fewer than ``count``.
        """
        per_minute = self.reports_per_minute
        if not per_minute:
            return
        with self._lock:
            buckets = self._refilled(source)
            if buckets.reports >= count:
                buckets.reports -= count
                return
            wait = (count - buckets.reports) * 60 / per_minute
        raise TooManyRequests(
            "reports", _whole_seconds(wait), f"at most {per_minute} reports per minute per source"
        )

    def _refilled(self, source: bytes) -> _Buckets:
        """With the lock held: ``source``'s buckets, refilled to now, marked most recent."""
        now = self.clock()
        found = self._buckets.get(source)
        if found is None:
            found = _Buckets(self.requests_per_second, self.reports_per_minute, now)
            self._buckets[source] = found
            if len(self._buckets) > self._max_sources:
                self._buckets.popitem(last=False)
            return found
        self._buckets.move_to_end(source)
        elapsed = max(0.0, now - found.at)
        found.at = now
        found.requests = min(
            self.requests_per_second, found.requests + elapsed * self.requests_per_second
        )
        found.reports = min(
            self.reports_per_minute, found.reports + elapsed * self.reports_per_minute / 60
        )
        return found


def _whole_seconds(wait: float) -> int:
    """``Retry-After`` is whole seconds: the wait rounded up, at least 1."""
    return max(1, math.ceil(wait))


class IdentifySource:
    """WSGI middleware: sets ``environ["ldp.source"]`` to the request's source hash.

    In the collector it wraps :class:`collector.logs.StripClientMetadata`, which then
    removes the address (and the trusted header) before the app sees the request: the app
    gets the hash only.

    Args:
        app: the WSGI application to wrap.
        admission: the limiter whose key names sources.
    """

    def __init__(
        self,
        app: Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]],
        admission: Admission,
    ) -> None:
        self.app = app
        self.admission = admission

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        """Tag the request with its source, then serve it."""
        if self.admission.enabled:
            environ[SOURCE_ENVIRON_KEY] = self.admission.source(environ)
        return self.app(environ, start_response)

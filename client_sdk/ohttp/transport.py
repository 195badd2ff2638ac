"""The SDK's requests through an Oblivious HTTP relay: :class:`ObliviousTransport`.

Each ``POST /v1/reports``, and each ``GET /v1/metrics/<name>`` (a definition, fetched on
the reporting thread just before the upload that carries the metric), is written as a
Binary HTTP request, sealed to the collector's current gateway key and posted to the
relay, which forwards it without being able to read it; the collector opens it without
learning who sent it (the relay's address is all it sees). Only the key configuration is
fetched from the collector directly (it cannot be sealed without it): when the client is
made and then on a thread of its own at a random moment away from the uploads, never
right before one (the collector could tie the two by timing), or pinned and never
fetched. On RFC 9458's ``ohttp-key`` problem (a key rotated away) the keys are
fetched again and the upload is sealed anew, once. In full: ``docs/reference/ohttp.md``
and ``docs/guides/relay.md``.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import TYPE_CHECKING

from client_sdk.errors import ObliviousError
from client_sdk.ohttp import bhttp
from client_sdk.ohttp.encapsulation import ClientContext, encapsulate_request
from client_sdk.ohttp.keys import (
    GATEWAY_PATH,
    KEYS_MEDIA_TYPE,
    PROBLEM_KEY,
    REQUEST_MEDIA_TYPE,
    RESPONSE_MEDIA_TYPE,
    SEALING_OVERHEAD,
    KeyConfig,
    decode_key_configs,
)
from client_sdk.transport import HTTPTransport, Response
from client_sdk.uploader import REPORTS_PATH, classify

if TYPE_CHECKING:
    import requests

__all__ = ["HPKE_OVERHEAD", "KEYS_TTL", "REFRESH_DELAY", "ObliviousTransport"]

KEYS_TTL = 3600.0
"""Seconds after which a fetched key configuration is refreshed: well inside the
gateway's overlap (a day by default), so a rotation is followed without an error."""

HPKE_OVERHEAD = 7 + 32 + 16
"""Bytes HPKE adds to the sealed plaintext (RFC 9458 §4.1): the header (key id, KEM, KDF
and AEAD ids), the X25519 share, the AEAD tag."""

REFRESH_DELAY = (10.0, 60.0)
"""An expired configuration is still used, and fetched again at a moment drawn uniformly
from ``[10, 10 + 60]`` seconds after the upload that found it expired (the web SDK's
rule): the fetch is apart from every upload, at a time the collector cannot predict."""


class ObliviousTransport:
    """A :class:`~client_sdk.transport.Transport` whose uploads go through a relay.

    Args:
        collector_url: the collector (its keys, and the authority the sealed requests
            name).
        relay_url: the relay's full URL that takes ``message/ohttp-req`` posts.
        timeout: seconds to connect and to wait for each answer.
        session: a ``requests.Session`` for both (the app's), or None.
        clock: monotonic seconds (key configuration age, refresh moments).
        pinned: an ``application/ohttp-keys`` body shipped with the app: used for every
            upload and never fetched; None: fetched from the collector.
        ingest_key: the app's ingest key, sent as ``authorization`` inside every sealed
            request (never on the request to the relay, nor on the key fetches).

    Raises:
        ValueError: ``pinned`` holds no configuration this client can use, or the
            collector's URL is so long that a sealed upload would exceed the collector's
            body limit by more than :data:`~client_sdk.ohttp.keys.SEALING_OVERHEAD`.
    """

    def __init__(
        self,
        collector_url: str,
        relay_url: str,
        timeout: float,
        session: requests.Session | None = None,
        clock: Callable[[], float] = time.monotonic,
        pinned: bytes | None = None,
        ingest_key: str | None = None,
    ) -> None:
        self._authorization: tuple[tuple[str, str], ...] = (
            () if ingest_key is None else (("authorization", f"Bearer {ingest_key}"),)
        )
        self._direct = HTTPTransport(collector_url, timeout, session)
        self._relay = HTTPTransport(relay_url, timeout, session)
        parts = urllib.parse.urlsplit(self._direct.base_url)
        self._scheme = parts.scheme
        self._authority = parts.netloc
        self._prefix = parts.path
        self.overhead = HPKE_OVERHEAD + len(self.binary_request(b"")) + 3
        """Bytes a sealed upload adds to its body (the empty body's length varint, 1
        byte, becomes at most 4 for a body under 1 GiB)."""
        if self.overhead > SEALING_OVERHEAD:
            raise ValueError(
                f"the collector URL is too long for sealed uploads: {self.overhead} bytes of "
                f"framing, at most {SEALING_OVERHEAD} fit the gateway path's body limit"
            )
        self._clock = clock
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._config: KeyConfig | None = None
        self._pinned = pinned is not None
        if pinned is not None:
            self._config = _usable(pinned, ValueError)
        self._fetched_at = 0.0
        self._fetching = False  # a fetch off the upload path is under way
        self._refresh_at: float | None = None  # clock() of the next scheduled fetch
        self._worker: threading.Thread | None = None
        self._pid = os.getpid()
        self._closed = False
        self.key_fetches = 0
        """Key configurations fetched so far (tests, ``stats``)."""

    def prepare(self) -> None:
        """Fetch the keys now, off the upload path, on this transport's own thread (the
        client calls this when it is made); nothing with pinned keys."""
        if self._pinned:
            return
        with self._lock:
            if self._config is None and self._refresh_at is None:
                self._refresh_at = self._clock()
            self._start()

    def get(self, path: str) -> Response:
        """Seal ``GET path`` (a definition) and send it through the relay; answers and
        raises like :meth:`post`, except that a refusal by the relay or the gateway that is
        not to be retried (a 400: a ciphertext that could not be opened) raises OSError:
        it says nothing about the metric, which must not be taken as unknown."""
        return self._send("GET", path, None)

    def post(self, path: str, body: bytes) -> Response:
        """Seal ``POST path`` with ``body`` and send it through the relay.

        Returns:
            The collector's answer to the inner request, or the relay's or gateway's own
            answer when the request never reached the collector's ingest (429 or 502 from
            the relay, 400 from the gateway): the uploader classifies either the same way.

        Raises:
            OSError: no answer came, or one that cannot be opened (retried later).
        """
        return self._send("POST", path, body)

    def _send(self, method: str, path: str, body: bytes | None) -> Response:
        encoded = self.binary_request(body, path, method)
        for attempt in range(2):
            config = self._current() if attempt == 0 else self._fetch()
            sealed, context = encapsulate_request(config, encoded)
            answer = self._relay.exchange(
                "POST", "", sealed, REQUEST_MEDIA_TYPE, RESPONSE_MEDIA_TYPE
            )
            if _is_unknown_key(answer):
                if attempt == 0 and not self._pinned:
                    continue  # a rotation since the keys were fetched: fetch, seal anew
                # It does not know the key it just published (replicas out of step for a
                # few seconds): try later, keep the reports.
                raise OSError("the gateway refused the key it publishes; retrying later")
            if not _is_sealed(answer):
                if method == "GET" and classify(answer.status, None) == "drop":
                    # The relay or gateway refused the sealed request (a 400: it could not
                    # be opened): the collector said nothing about the metric.
                    raise OSError(f"the relay or gateway answered HTTP {answer.status}")
                return answer
            return _opened(context, answer)
        raise AssertionError("unreachable")  # pragma: no cover

    def binary_request(
        self, body: bytes | None, path: str = REPORTS_PATH, method: str = "POST"
    ) -> bytes:
        """``method path`` with ``body`` (None: a ``GET``, without) as the Binary HTTP
        request that is sealed (``conformance/vectors/ohttp.json`` pins its bytes)."""
        request = bhttp.BinaryRequest(
            method,
            self._scheme,
            self._authority,
            self._prefix + path,
            (() if body is None else (("content-type", "application/json"),)) + self._authorization,
            b"" if body is None else body,
        )
        return bhttp.encode_request(request)

    def close(self) -> None:  # noqa: D102
        with self._lock:
            self._closed = True
            self._cond.notify_all()
        self._direct.close()
        self._relay.close()

    # -- keys ------------------------------------------------------------------------------
    def _current(self) -> KeyConfig:
        """The key configuration for an upload, never fetched here: the upload path only
        schedules a refresh (:data:`REFRESH_DELAY`) of an expired one and uses it.

        Raises:
            OSError: none was fetched yet (the batch waits; a fetch is scheduled).
        """
        with self._lock:
            config = self._config
            if self._pinned:
                assert config is not None
                return config
            if config is None:
                # Fetched since the client was made (the key thread may not have started
                # it yet): wait for that fetch, not a new one.
                if self._fetching or self._due():
                    self._cond.wait_for(
                        lambda: self._closed or not (self._fetching or self._due()),
                        timeout=self._direct.timeout,
                    )
                    config = self._config
                if config is None:
                    self._schedule()
                    raise OSError("no gateway key configuration yet; fetching it apart")
            elif self._clock() - self._fetched_at >= KEYS_TTL:
                self._schedule()
            return config

    def _due(self) -> bool:
        """With the lock held: a fetch is due now (the key thread is about to run it)."""
        return self._refresh_at is not None and self._refresh_at <= self._clock()

    def _schedule(self) -> None:
        """With the lock held: fetch the keys at a random moment from now."""
        if self._refresh_at is None and not self._fetching:
            least, spread = REFRESH_DELAY
            draw = secrets.randbits(32) / 2**32
            self._refresh_at = self._clock() + least + draw * spread
        self._start()

    def _start(self) -> None:
        """With the lock held: run the key thread (again after a fork)."""
        if self._pid != os.getpid():
            self._pid, self._worker = os.getpid(), None
        if self._closed or (self._worker is not None and self._worker.is_alive()):
            self._cond.notify_all()
            return
        self._worker = threading.Thread(target=self._run, name="ldp-telemetry-keys", daemon=True)
        self._worker.start()

    def _run(self) -> None:
        """The key thread: fetch when a fetch is due, else sleep until then (re-reading
        the clock at least every second, so an injected clock is followed)."""
        while True:
            with self._lock:
                if self._closed:
                    return
                due = self._refresh_at
                if due is None or self._clock() < due:
                    wait = 1.0 if due is None else min(1.0, max(0.0, due - self._clock()))
                    self._cond.wait(wait if due is not None else None)
                    continue
                self._refresh_at = None
                self._fetching = True
            try:
                self._fetch()
                failed = False
            except Exception:  # offline, or an unreadable answer: never kill this thread
                failed = True
            with self._lock:
                self._fetching = False
                if failed:
                    self._schedule()  # try again at another random moment
                self._cond.notify_all()

    def _fetch(self) -> KeyConfig:
        """Fetch the gateway's key configuration now (the key thread; or once after the
        gateway refused the key it had: see ``docs/reference/ohttp.md``).

        Raises:
            OSError: it cannot be fetched or read.
        """
        answer = self._direct.exchange("GET", GATEWAY_PATH, None, "", KEYS_MEDIA_TYPE)
        if answer.status != 200:
            raise OSError(f"the gateway keys answered {answer.status}")
        config = _usable(answer.body, OSError)
        with self._lock:
            self._config, self._fetched_at = config, self._clock()
            self.key_fetches += 1
        return config


def _usable(body: bytes, error: type[Exception]) -> KeyConfig:
    """The first configuration of an ``application/ohttp-keys`` body this client speaks."""
    try:
        usable = [c for c in decode_key_configs(body) if _speaks(c)]
    except ObliviousError as exc:
        raise error(f"the gateway keys cannot be read: {exc}") from None
    if not usable:
        raise error("the gateway publishes no key this client can use")
    return usable[0]


def _speaks(config: KeyConfig) -> bool:
    try:
        config.choose()
    except ObliviousError:
        return False
    return True


def _is_sealed(answer: Response) -> bool:
    """Whether ``answer`` is the gateway's encapsulated answer (a 200 of the OHTTP
    response media type), not the relay's or the gateway's own."""
    kind = answer.headers.get("content-type", "")
    return answer.status == 200 and kind.startswith(RESPONSE_MEDIA_TYPE)


def _opened(context: ClientContext, answer: Response) -> Response:
    """The collector's answer sealed in the gateway's ``answer``.

    Raises:
        OSError: it cannot be opened.
    """
    try:
        inner = bhttp.decode_response(context.decapsulate_response(answer.body))
    except ObliviousError as exc:
        raise OSError(f"the gateway's answer cannot be opened: {exc}") from None
    return Response(inner.status, dict(inner.headers), inner.content)


def _is_unknown_key(answer: Response) -> bool:
    if answer.status != 400 or "problem+json" not in answer.headers.get("content-type", ""):
        return False
    try:
        return bool(json.loads(answer.body).get("type") == PROBLEM_KEY)
    except (ValueError, AttributeError):
        return False

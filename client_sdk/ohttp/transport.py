"""The SDK's uploads through an Oblivious HTTP relay: :class:`ObliviousTransport`.

Each ``POST /v1/reports`` is written as a Binary HTTP request, sealed to the collector's
current gateway key and posted to the relay, which forwards it without being able to read
it; the collector opens it without learning who sent it (the relay's address is all it
sees). Definitions and the key configuration are fetched from the collector directly:
they are the same for every device and carry no report. On RFC 9458's ``ohttp-key``
problem (a key rotated away) the keys are fetched again and the upload is sealed anew,
once. In full: ``docs/reference/ohttp.md`` and ``docs/guides/relay.md``.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import TYPE_CHECKING

from client_sdk.errors import ObliviousError
from client_sdk.ohttp import bhttp
from client_sdk.ohttp.encapsulation import encapsulate_request
from client_sdk.ohttp.keys import (
    GATEWAY_PATH,
    KEYS_MEDIA_TYPE,
    PROBLEM_KEY,
    REQUEST_MEDIA_TYPE,
    RESPONSE_MEDIA_TYPE,
    KeyConfig,
    decode_key_configs,
)
from client_sdk.transport import HTTPTransport, Response

if TYPE_CHECKING:
    import requests

__all__ = ["KEYS_TTL", "ObliviousTransport"]

KEYS_TTL = 3600.0
"""Seconds a fetched key configuration is used before it is fetched again: well inside
the gateway's overlap (a day by default), so a rotation is followed without an error."""


class ObliviousTransport:
    """A :class:`~client_sdk.transport.Transport` whose uploads go through a relay.

    Args:
        collector_url: the collector (definitions, keys, and the authority the sealed
            requests name).
        relay_url: the relay's full URL that takes ``message/ohttp-req`` posts.
        timeout: seconds to connect and to wait for each answer.
        session: a ``requests.Session`` for both (the app's), or None.
        clock: monotonic seconds (key configuration age).
    """

    def __init__(
        self,
        collector_url: str,
        relay_url: str,
        timeout: float,
        session: requests.Session | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._direct = HTTPTransport(collector_url, timeout, session)
        self._relay = HTTPTransport(relay_url, timeout, session)
        parts = urllib.parse.urlsplit(self._direct.base_url)
        self._scheme = parts.scheme
        self._authority = parts.netloc
        self._prefix = parts.path
        self._clock = clock
        self._lock = threading.Lock()
        self._config: KeyConfig | None = None
        self._fetched_at = 0.0
        self.key_fetches = 0
        """Key configurations fetched so far (tests, ``stats``)."""

    def get(self, path: str) -> Response:  # noqa: D102
        return self._direct.get(path)

    def post(self, path: str, body: bytes) -> Response:
        """Seal ``POST path`` with ``body`` and send it through the relay.

        Returns:
            The collector's answer to the inner request, or the relay's or gateway's own
            answer when the request never reached the collector's ingest (429 or 502 from
            the relay, 400 from the gateway): the uploader classifies either the same way.

        Raises:
            OSError: no answer came, or one that cannot be opened (retried later).
        """
        request = bhttp.BinaryRequest(
            "POST",
            self._scheme,
            self._authority,
            self._prefix + path,
            (("content-type", "application/json"),),
            body,
        )
        encoded = bhttp.encode_request(request)
        for attempt in range(2):
            config = self._key(refresh=attempt > 0)
            sealed, context = encapsulate_request(config, encoded)
            answer = self._relay.exchange(
                "POST", "", sealed, REQUEST_MEDIA_TYPE, RESPONSE_MEDIA_TYPE
            )
            if _is_unknown_key(answer):
                if attempt == 0:
                    continue  # a rotation since the keys were fetched: fetch, seal anew
                # It does not know the key it just published (replicas out of step for a
                # few seconds): try later, keep the reports.
                raise OSError("the gateway refused the key it publishes; retrying later")
            if answer.status != 200 or not answer.headers.get("content-type", "").startswith(
                RESPONSE_MEDIA_TYPE
            ):
                return answer
            try:
                inner = bhttp.decode_response(context.decapsulate_response(answer.body))
            except ObliviousError as exc:
                raise OSError(f"the gateway's answer cannot be opened: {exc}") from None
            return Response(inner.status, dict(inner.headers), inner.content)
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:  # noqa: D102
        self._direct.close()
        self._relay.close()

    def _key(self, refresh: bool) -> KeyConfig:
        """The gateway's current key configuration, fetched when missing, stale or
        ``refresh``.

        Raises:
            OSError: it cannot be fetched or read.
        """
        with self._lock:
            fresh = self._config is not None and self._clock() - self._fetched_at < KEYS_TTL
            if fresh and not refresh:
                assert self._config is not None
                return self._config
        answer = self._direct.exchange("GET", GATEWAY_PATH, None, "", KEYS_MEDIA_TYPE)
        if answer.status != 200:
            raise OSError(f"the gateway keys answered {answer.status}")
        try:
            configs = decode_key_configs(answer.body)
            usable = [c for c in configs if _speaks(c)]
        except ObliviousError as exc:
            raise OSError(f"the gateway keys cannot be read: {exc}") from None
        if not usable:
            raise OSError("the gateway publishes no key this client can use")
        with self._lock:
            self._config, self._fetched_at = usable[0], self._clock()
            self.key_fetches += 1
        return usable[0]


def _speaks(config: KeyConfig) -> bool:
    try:
        config.choose()
    except ObliviousError:
        return False
    return True


def _is_unknown_key(answer: Response) -> bool:
    if answer.status != 400 or "problem+json" not in answer.headers.get("content-type", ""):
        return False
    try:
        return bool(json.loads(answer.body).get("type") == PROBLEM_KEY)
    except (ValueError, AttributeError):
        return False

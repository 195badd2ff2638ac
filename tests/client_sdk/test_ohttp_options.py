"""``Client(url, relay=…)``: the setting is checked at construction like every other."""

from __future__ import annotations

import pytest

from client_sdk import Client
from client_sdk.ohttp.transport import ObliviousTransport
from client_sdk.options import ClientOptions
from client_sdk.transport import CallableTransport, HTTPTransport, Response


def test_a_relay_makes_the_oblivious_transport() -> None:
    client = Client("http://127.0.0.1:9", relay="http://127.0.0.1:8100/")
    try:
        assert isinstance(client._transport, ObliviousTransport)
    finally:
        client.shutdown()
    plain = Client("http://127.0.0.1:9")
    try:
        assert isinstance(plain._transport, HTTPTransport)
    finally:
        plain.shutdown()


@pytest.mark.parametrize("relay", ["127.0.0.1:8100", "ftp://relay", 8100, b"http://x"])
def test_a_relay_that_is_not_an_http_url_is_refused(relay: object) -> None:
    with pytest.raises(ValueError, match="relay must be an http"):
        ClientOptions(relay=relay)  # type: ignore[arg-type]


def test_relay_and_transport_are_exclusive() -> None:
    transport = CallableTransport(lambda method, path, body: Response(200))
    with pytest.raises(ValueError, match="relay or transport"):
        ClientOptions(relay="http://relay.example/", transport=transport)

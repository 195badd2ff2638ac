"""``Client(url, relay=…)``: the setting is checked at construction like every other."""

from __future__ import annotations

import pytest

from client_sdk import Client
from client_sdk.ohttp.encapsulation import encapsulate_request
from client_sdk.ohttp.keys import (
    AEAD_AES_128_GCM,
    KDF_HKDF_SHA256,
    KEM_X25519_HKDF_SHA256,
    SEALING_OVERHEAD,
    KeyConfig,
    encode_key_configs,
)
from client_sdk.ohttp.transport import ObliviousTransport
from client_sdk.options import ClientOptions
from client_sdk.transport import CallableTransport, HTTPTransport, Response

MAX_BODY_BYTES = 1 << 20
"""The collector's default body limit (collector.settings; the SDK's tests import no
service)."""


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


def _config() -> KeyConfig:
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    public = X25519PrivateKey.generate().public_key().public_bytes_raw()
    return KeyConfig(1, KEM_X25519_HKDF_SHA256, public, ((KDF_HKDF_SHA256, AEAD_AES_128_GCM),))


def test_a_batch_at_the_collectors_limit_seals_within_the_gateway_paths_limit() -> None:
    """Every hop of the gateway path (nginx, ``ldp relay``, the gateway) allows the
    collector's limit plus SEALING_OVERHEAD: a batch the collector accepts directly must
    be accepted sealed (nothing accepted is lost)."""
    transport = ObliviousTransport(
        "https://collector.example.org/some/prefix", "https://relay.example/", 5.0
    )
    try:
        body = b'{"reports":[' + b" " * (MAX_BODY_BYTES - 14) + b"]}"
        assert len(body) == MAX_BODY_BYTES
        sealed, _ = encapsulate_request(_config(), transport.binary_request(body))
        assert len(sealed) - len(body) <= transport.overhead <= SEALING_OVERHEAD
        assert len(sealed) - len(body) >= transport.overhead - 3  # the bound is tight
    finally:
        transport.close()


def test_a_collector_url_too_long_to_seal_within_the_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="too long for sealed uploads"):
        Client("https://collector.example.org/" + "p" * 1000, relay="https://relay.example/")


def test_pinned_keys_must_be_usable_and_need_a_relay() -> None:
    with pytest.raises(ValueError, match="relay_keys needs relay"):
        ClientOptions(relay_keys=encode_key_configs([_config()]))
    with pytest.raises(ValueError, match="application/ohttp-keys bytes"):
        ClientOptions(relay="http://relay.example/", relay_keys="abc")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cannot be read"):
        Client("http://127.0.0.1:9", relay="http://127.0.0.1:9/", relay_keys=b"\x00\x05ab")
    client = Client(
        "http://127.0.0.1:9",
        relay="http://127.0.0.1:9/",
        relay_keys=encode_key_configs([_config()]),
    )
    try:
        assert client._transport._current().key_id == 1  # type: ignore[attr-defined]
    finally:
        client.shutdown()

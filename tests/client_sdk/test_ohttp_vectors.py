"""RFC 9458 Appendix A, byte for byte: key configuration, request and response.

The gateway side is deterministic given the private key; the device side given the
ephemeral key and the response nonce, which the encapsulation functions take for exactly
this test (real calls draw them from the OS's CSPRNG).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from client_sdk.errors import ObliviousError, UnknownKeyIdError
from client_sdk.ohttp import bhttp
from client_sdk.ohttp.encapsulation import (
    decapsulate_request,
    encapsulate_request,
    generate_private_key,
    public_key_of,
)
from client_sdk.ohttp.keys import (
    AEAD_AES_128_GCM,
    AEAD_CHACHA20_POLY1305,
    KDF_HKDF_SHA256,
    KeyConfig,
    decode_key_config,
    decode_key_configs,
    encode_key_configs,
)

VECTOR = {
    name: bytes.fromhex(value) if name != "source" else value
    for name, value in json.loads(
        (Path(__file__).parents[1] / "data" / "rfc9458_appendix_a.json").read_text()
    ).items()
}


@dataclass(frozen=True)
class Key:
    config: KeyConfig
    private_key: bytes


def rfc_key() -> Key:
    return Key(decode_key_config(VECTOR["key_config"]), VECTOR["private_key"])


def test_the_key_configuration_decodes_and_encodes_to_the_rfc_bytes() -> None:
    config = decode_key_config(VECTOR["key_config"])
    assert config.key_id == 1 and config.kem_id == 0x0020
    assert config.algorithms == (
        (KDF_HKDF_SHA256, AEAD_AES_128_GCM),
        (KDF_HKDF_SHA256, AEAD_CHACHA20_POLY1305),
    )
    assert config.public_key == public_key_of(VECTOR["private_key"])
    assert config.encode() == VECTOR["key_config"]
    listed = encode_key_configs([config])
    assert listed == len(VECTOR["key_config"]).to_bytes(2, "big") + VECTOR["key_config"]
    assert decode_key_configs(listed) == [config]


def test_the_device_encapsulates_the_rfc_request_byte_for_byte() -> None:
    sealed, _ = encapsulate_request(
        rfc_key().config, VECTOR["request"], ephemeral_key=VECTOR["ephemeral_private_key"]
    )
    assert sealed == VECTOR["encapsulated_request"]


def test_the_gateway_opens_the_rfc_request_and_seals_the_rfc_response() -> None:
    key = rfc_key()
    plain, context = decapsulate_request(
        VECTOR["encapsulated_request"], lambda i: key if i == 1 else None
    )
    assert plain == VECTOR["request"]
    assert bhttp.decode_request(plain) == bhttp.BinaryRequest("GET", "https", "example.com", "/")
    sealed = context.encapsulate_response(VECTOR["response"], nonce=VECTOR["response_nonce"])
    assert sealed == VECTOR["encapsulated_response"]


def test_the_device_opens_the_rfc_response() -> None:
    _, context = encapsulate_request(
        rfc_key().config, VECTOR["request"], ephemeral_key=VECTOR["ephemeral_private_key"]
    )
    plain = context.decapsulate_response(VECTOR["encapsulated_response"])
    assert plain == VECTOR["response"]
    assert bhttp.decode_response(plain) == bhttp.BinaryResponse(200)


def test_an_unknown_key_id_is_named() -> None:
    with pytest.raises(UnknownKeyIdError) as caught:
        decapsulate_request(VECTOR["encapsulated_request"], lambda i: None)
    assert caught.value.key_id == 1


@pytest.mark.parametrize("where", [0, 8, 40, 60, -1])
def test_any_altered_byte_fails_authentication(where: int) -> None:
    key = rfc_key()
    altered = bytearray(VECTOR["encapsulated_request"])
    altered[where] ^= 0x01
    with pytest.raises(ObliviousError):
        decapsulate_request(bytes(altered), lambda i: key if i == 1 else None)


def test_a_response_sealed_for_another_request_is_refused() -> None:
    key = rfc_key()
    _, mine = encapsulate_request(key.config, VECTOR["request"])
    with pytest.raises(ObliviousError, match="authentication"):
        mine.decapsulate_response(VECTOR["encapsulated_response"])


@pytest.mark.parametrize("aead", [AEAD_AES_128_GCM, AEAD_CHACHA20_POLY1305])
def test_a_round_trip_with_a_fresh_key_under_each_aead(aead: int) -> None:
    private = generate_private_key()
    config = KeyConfig(7, 0x0020, public_key_of(private), ((KDF_HKDF_SHA256, aead),))
    key = Key(config, private)
    sealed, device = encapsulate_request(config, b"\x00hello")
    plain, gateway = decapsulate_request(sealed, lambda i: key if i == 7 else None)
    assert plain == b"\x00hello"
    assert device.decapsulate_response(gateway.encapsulate_response(b"\x01ok")) == b"\x01ok"


def test_two_encapsulations_of_one_request_differ() -> None:
    """A fresh ephemeral key each time: the relay cannot tell two equal uploads apart."""
    config = rfc_key().config
    assert encapsulate_request(config, b"x")[0] != encapsulate_request(config, b"x")[0]

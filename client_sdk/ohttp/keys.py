"""Oblivious HTTP key configurations (RFC 9458 §3): what a gateway publishes.

A key configuration names a key identifier, the HPKE KEM and its public key, and the
(KDF, AEAD) pairs the gateway accepts; ``application/ohttp-keys`` is a list of them, each
behind a two-byte length. Standard library only: the device parses, the gateway writes.
In full: ``docs/reference/ohttp.md``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from client_sdk.errors import ObliviousError

__all__ = [
    "AEAD_AES_128_GCM",
    "GATEWAY_PATH",
    "PROBLEM_KEY",
    "AEAD_CHACHA20_POLY1305",
    "KDF_HKDF_SHA256",
    "KEM_X25519_HKDF_SHA256",
    "KEYS_MEDIA_TYPE",
    "REQUEST_MEDIA_TYPE",
    "RESPONSE_MEDIA_TYPE",
    "SEALING_OVERHEAD",
    "SUPPORTED",
    "KeyConfig",
    "decode_key_config",
    "decode_key_configs",
    "encode_key_configs",
]

GATEWAY_PATH = "/.well-known/ohttp-gateway"
"""The collector's key configurations (GET) and gateway (POST): RFC 9540's name."""

PROBLEM_KEY = "https://iana.org/assignments/http-problem-types#ohttp-key"
"""RFC 9458 §5.3's problem type: the gateway does not hold the request's key identifier."""

SEALING_OVERHEAD = 1024
"""Bytes a sealed upload may exceed the collector's body limit by, at every hop of the
gateway path (nginx, ``ldp relay``, the gateway): HPKE adds 55 (header, X25519 share,
tag), Binary HTTP's framing the method, scheme, authority, path and Content-Type line.
The SDK refuses a collector URL whose framing would not fit, so any batch the collector
accepts directly is accepted sealed (``docs/reference/ohttp.md``)."""

KEYS_MEDIA_TYPE = "application/ohttp-keys"
REQUEST_MEDIA_TYPE = "message/ohttp-req"
RESPONSE_MEDIA_TYPE = "message/ohttp-res"

KEM_X25519_HKDF_SHA256 = 0x0020
KDF_HKDF_SHA256 = 0x0001
AEAD_AES_128_GCM = 0x0001
AEAD_CHACHA20_POLY1305 = 0x0003

PUBLIC_KEY_BYTES = {KEM_X25519_HKDF_SHA256: 32}
"""Npk (= Nenc) of each KEM this implementation speaks (RFC 9180 §7.1)."""

SUPPORTED = ((KDF_HKDF_SHA256, AEAD_AES_128_GCM), (KDF_HKDF_SHA256, AEAD_CHACHA20_POLY1305))
"""The (KDF, AEAD) pairs this implementation speaks, in order of preference: AES-128-GCM
first (every Web Crypto has it), ChaCha20-Poly1305 for devices without AES hardware."""


@dataclass(frozen=True)
class KeyConfig:
    """One key configuration (RFC 9458 §3.1).

    Attributes:
        key_id: 0–255, names the key in every request made under it.
        kem_id: the HPKE KEM; only X25519 (0x0020) is spoken here.
        public_key: the KEM public key (32 bytes for X25519).
        algorithms: the accepted (KDF id, AEAD id) pairs, at least one.
    """

    key_id: int
    kem_id: int
    public_key: bytes
    algorithms: tuple[tuple[int, int], ...]

    def encode(self) -> bytes:
        """The key configuration's bytes (RFC 9458 §3.1)."""
        symmetric = b"".join(struct.pack(">HH", kdf, aead) for kdf, aead in self.algorithms)
        return (
            struct.pack(">BH", self.key_id, self.kem_id)
            + self.public_key
            + struct.pack(">H", len(symmetric))
            + symmetric
        )

    def choose(self) -> tuple[int, int]:
        """The first (KDF, AEAD) pair of :data:`SUPPORTED` that this key accepts.

        Raises:
            ObliviousError: the key accepts none this implementation speaks.
        """
        for pair in SUPPORTED:
            if pair in self.algorithms:
                return pair
        raise ObliviousError(f"key {self.key_id} offers no algorithm this client speaks")


def _decode_one(data: bytes, at: int, end: int) -> tuple[KeyConfig, int]:
    if end - at < 3:
        raise ObliviousError("key configuration truncated")
    key_id, kem_id = struct.unpack_from(">BH", data, at)
    size = PUBLIC_KEY_BYTES.get(kem_id)
    if size is None:
        raise ObliviousError(f"key configuration {key_id} uses an unsupported KEM {kem_id:#06x}")
    at += 3
    if end - at < size + 2:
        raise ObliviousError("key configuration truncated")
    public_key = bytes(data[at : at + size])
    (length,) = struct.unpack_from(">H", data, at + size)
    at += size + 2
    if length < 4 or length % 4 or end - at < length:
        raise ObliviousError(f"key configuration {key_id} has a malformed algorithm list")
    pairs = tuple(struct.unpack_from(">HH", data, at + i) for i in range(0, length, 4))
    return KeyConfig(key_id, kem_id, public_key, pairs), at + length


def decode_key_config(data: bytes) -> KeyConfig:
    """One key configuration, exactly (no length prefix; RFC 9458 §3.1).

    Raises:
        ObliviousError: malformed, an unsupported KEM, or bytes left over.
    """
    config, end = _decode_one(data, 0, len(data))
    if end != len(data):
        raise ObliviousError("bytes left after the key configuration")
    return config


def decode_key_configs(data: bytes) -> list[KeyConfig]:
    """An ``application/ohttp-keys`` body (RFC 9458 §3.2): the configurations whose KEM
    this implementation speaks, in the gateway's order; others are skipped.

    Raises:
        ObliviousError: malformed, or no configuration usable here.
    """
    found: list[KeyConfig] = []
    at = 0
    while at < len(data):
        if len(data) - at < 2:
            raise ObliviousError("application/ohttp-keys truncated")
        (length,) = struct.unpack_from(">H", data, at)
        end = at + 2 + length
        if end > len(data):
            raise ObliviousError("application/ohttp-keys truncated")
        try:
            config, used = _decode_one(data, at + 2, end)
        except ObliviousError as exc:
            if "unsupported KEM" not in str(exc):
                raise
        else:
            if used != end:
                raise ObliviousError("a key configuration is longer than its contents")
            found.append(config)
        at = end
    if not found:
        raise ObliviousError("application/ohttp-keys holds no key configuration usable here")
    return found


def encode_key_configs(configs: list[KeyConfig]) -> bytes:
    """An ``application/ohttp-keys`` body: each configuration behind its 2-byte length."""
    out = bytearray()
    for config in configs:
        encoded = config.encode()
        out += struct.pack(">H", len(encoded)) + encoded
    return bytes(out)

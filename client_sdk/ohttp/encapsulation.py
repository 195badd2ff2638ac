"""Encapsulated requests and responses of Oblivious HTTP (RFC 9458 §4), both sides.

The device seals a Binary HTTP request to the gateway's public key with HPKE (RFC 9180,
base mode) and opens the answer with a key exported from the same HPKE context; the
gateway does the reverse. HPKE is ``pyhpke``'s; the response's HKDF and AEAD are
``cryptography``'s primitives, composed as RFC 9458 §4.4 says. Both are imported by the
first call (the ``ldp-telemetry[ohttp]`` extra), so ``import client_sdk`` stays standard
library only. In full: ``docs/reference/ohttp.md``.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from client_sdk.errors import ObliviousError, UnknownKeyIdError
from client_sdk.ohttp.keys import (
    AEAD_AES_128_GCM,
    AEAD_CHACHA20_POLY1305,
    KDF_HKDF_SHA256,
    KEM_X25519_HKDF_SHA256,
    PUBLIC_KEY_BYTES,
    KeyConfig,
)

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "HEADER_BYTES",
    "ClientContext",
    "GatewayContext",
    "GatewayKey",
    "decapsulate_request",
    "encapsulate_request",
    "generate_private_key",
    "public_key_of",
]

REQUEST_LABEL = b"message/bhttp request"
RESPONSE_LABEL = b"message/bhttp response"

HEADER_BYTES = 7
"""key_id (1) + kem_id (2) + kdf_id (2) + aead_id (2) (RFC 9458 §4.3)."""

_AEAD_SIZES = {AEAD_AES_128_GCM: (16, 12), AEAD_CHACHA20_POLY1305: (32, 12)}
"""Nk and Nn of each AEAD (RFC 9180 §7.3)."""


class GatewayKey(Protocol):
    """What the gateway needs of one of its keys."""

    @property
    def config(self) -> KeyConfig:
        """The key's published configuration."""
        ...

    @property
    def private_key(self) -> bytes:
        """The raw X25519 private key."""
        ...


def _suite(kem_id: int, kdf_id: int, aead_id: int) -> Any:
    from pyhpke import AEADId, CipherSuite, KDFId, KEMId

    return CipherSuite.new(KEMId(kem_id), KDFId(kdf_id), AEADId(aead_id))


def _x25519_private(raw: bytes) -> Any:
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    return X25519PrivateKey.from_private_bytes(raw)


def generate_private_key() -> bytes:
    """A fresh X25519 private key (32 bytes, from the OS's CSPRNG via ``cryptography``)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    return X25519PrivateKey.generate().private_bytes(
        serialization.Encoding.Raw,
        serialization.PrivateFormat.Raw,
        serialization.NoEncryption(),
    )


def public_key_of(private_key: bytes) -> bytes:
    """The X25519 public key (32 bytes) of a raw private key."""
    from cryptography.hazmat.primitives import serialization

    return (
        _x25519_private(private_key)
        .public_key()
        .public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    )


def _header(key_id: int, kem_id: int, kdf_id: int, aead_id: int) -> bytes:
    return struct.pack(">BHHH", key_id, kem_id, kdf_id, aead_id)


def _info(header: bytes) -> bytes:
    return REQUEST_LABEL + b"\x00" + header


def _aead(aead_id: int, key: bytes) -> Any:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

    return AESGCM(key) if aead_id == AEAD_AES_128_GCM else ChaCha20Poly1305(key)


def _response_keys(context: Any, enc: bytes, nonce: bytes, aead_id: int) -> tuple[Any, bytes]:
    """RFC 9458 §4.4: the AEAD and nonce that seal (or open) the response."""
    import hashlib
    import hmac

    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

    key_size, nonce_size = _AEAD_SIZES[aead_id]
    secret = context.export(RESPONSE_LABEL, key_size)
    prk = hmac.new(enc + nonce, secret, hashlib.sha256).digest()  # HKDF-Extract(salt, IKM)
    key = HKDFExpand(hashes.SHA256(), key_size, b"key").derive(prk)
    aead_nonce = HKDFExpand(hashes.SHA256(), nonce_size, b"nonce").derive(prk)
    return _aead(aead_id, key), aead_nonce


def _response_nonce_bytes(aead_id: int) -> int:
    return max(_AEAD_SIZES[aead_id])  # max(Nn, Nk)


@dataclass(frozen=True)
class ClientContext:
    """What the device keeps of one encapsulated request to open its response."""

    _context: Any
    enc: bytes
    aead_id: int

    def decapsulate_response(self, data: bytes) -> bytes:
        """The Binary HTTP response inside a ``message/ohttp-res`` body.

        Raises:
            ObliviousError: too short, or it fails authentication (not this request's
                answer, or altered on the way).
        """
        from cryptography.exceptions import InvalidTag

        size = _response_nonce_bytes(self.aead_id)
        if len(data) < size + 16:
            raise ObliviousError("encapsulated response too short")
        nonce, sealed = data[:size], data[size:]
        aead, aead_nonce = _response_keys(self._context, self.enc, nonce, self.aead_id)
        try:
            return bytes(aead.decrypt(aead_nonce, sealed, b""))
        except InvalidTag:
            raise ObliviousError("encapsulated response failed authentication") from None


def encapsulate_request(
    config: KeyConfig, request: bytes, *, ephemeral_key: bytes | None = None
) -> tuple[bytes, ClientContext]:
    """Seal a Binary HTTP request to a gateway key (RFC 9458 §4.3).

    Args:
        config: the gateway's key configuration (its first (KDF, AEAD) pair spoken here).
        request: the Binary HTTP request.
        ephemeral_key: the HPKE ephemeral private key, for test vectors only; None draws
            a fresh one from the OS's CSPRNG, as every real request must.

    Returns:
        The ``message/ohttp-req`` body, and the context that opens its response.

    Raises:
        ObliviousError: the configuration offers nothing spoken here.
    """
    if config.kem_id != KEM_X25519_HKDF_SHA256:
        raise ObliviousError(f"unsupported KEM {config.kem_id:#06x}")
    kdf_id, aead_id = config.choose()
    from pyhpke import KEMKey, KEMKeyPair

    header = _header(config.key_id, config.kem_id, kdf_id, aead_id)
    suite = _suite(config.kem_id, kdf_id, aead_id)
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PublicKey

    public = KEMKey.from_pyca_cryptography_key(X25519PublicKey.from_public_bytes(config.public_key))
    eks = None
    if ephemeral_key is not None:
        private = _x25519_private(ephemeral_key)
        eks = KEMKeyPair(
            KEMKey.from_pyca_cryptography_key(private),
            KEMKey.from_pyca_cryptography_key(private.public_key()),
        )
    enc, context = suite.create_sender_context(public, _info(header), eks=eks)
    sealed = context.seal(request)
    return header + enc + sealed, ClientContext(context, bytes(enc), aead_id)


@dataclass(frozen=True)
class GatewayContext:
    """What the gateway keeps of one decapsulated request to seal its response."""

    _context: Any
    enc: bytes
    aead_id: int

    def encapsulate_response(self, response: bytes, *, nonce: bytes | None = None) -> bytes:
        """The ``message/ohttp-res`` body sealing a Binary HTTP response (RFC 9458 §4.4).

        Args:
            response: the Binary HTTP response.
            nonce: the response nonce, for test vectors only; None draws it from the OS's
                CSPRNG.
        """
        size = _response_nonce_bytes(self.aead_id)
        nonce = os.urandom(size) if nonce is None else nonce
        if len(nonce) != size:
            raise ValueError(f"the response nonce is {size} bytes")
        aead, aead_nonce = _response_keys(self._context, self.enc, nonce, self.aead_id)
        return nonce + aead.encrypt(aead_nonce, response, b"")


def decapsulate_request(
    data: bytes, lookup: Callable[[int], GatewayKey | None]
) -> tuple[bytes, GatewayContext]:
    """Open a ``message/ohttp-req`` body (RFC 9458 §4.3).

    Args:
        data: the encapsulated request.
        lookup: key identifier → the gateway's live key, or None.

    Returns:
        The Binary HTTP request, and the context that seals its response.

    Raises:
        UnknownKeyIdError: no live key has the request's key identifier.
        ObliviousError: malformed, an algorithm the key does not accept, or a ciphertext
            that fails authentication (altered on the way, or sealed to another key).
    """
    if len(data) < HEADER_BYTES:
        raise ObliviousError("encapsulated request too short")
    header = bytes(data[:HEADER_BYTES])
    key_id, kem_id, kdf_id, aead_id = struct.unpack(">BHHH", header)
    key = lookup(key_id)
    if key is None:
        raise UnknownKeyIdError(key_id)
    if kem_id != key.config.kem_id or (kdf_id, aead_id) not in key.config.algorithms:
        raise ObliviousError(
            f"key {key_id} does not accept KEM {kem_id:#06x}, KDF {kdf_id:#06x}, "
            f"AEAD {aead_id:#06x}"
        )
    if kdf_id != KDF_HKDF_SHA256 or aead_id not in _AEAD_SIZES:
        raise ObliviousError("unsupported HPKE algorithms")
    size = PUBLIC_KEY_BYTES[kem_id]
    if len(data) < HEADER_BYTES + size + 16:
        raise ObliviousError("encapsulated request too short")
    enc = bytes(data[HEADER_BYTES : HEADER_BYTES + size])
    sealed = bytes(data[HEADER_BYTES + size :])
    from pyhpke import KEMKey
    from pyhpke.exceptions import PyHPKEError

    suite = _suite(kem_id, kdf_id, aead_id)
    private = KEMKey.from_pyca_cryptography_key(_x25519_private(key.private_key))
    try:
        context = suite.create_recipient_context(enc, private, _info(header))
        request = context.open(sealed)
    except (PyHPKEError, ValueError):
        raise ObliviousError("encapsulated request failed authentication") from None
    return bytes(request), GatewayContext(context, enc, aead_id)

"""Binary HTTP messages (RFC 9292): the plaintext inside an Oblivious HTTP request.

The encoder writes the known-length form (framing indicators 0 and 1) without padding;
the decoder reads both the known-length and the indeterminate-length forms (0–3),
truncated messages and zero padding included, and refuses anything else with
:class:`~client_sdk.errors.ObliviousError`. Field names are kept in lower case (HTTP/2
and HTTP/3 require it; a name sent in upper case is lowered), values as Latin-1 text
(lossless for any byte).

No library on PyPI implements Binary HTTP; RFC 9292's and RFC 9458's examples are the
tests (``tests/client_sdk/test_ohttp_bhttp.py``). In full: ``docs/reference/ohttp.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

from client_sdk.errors import ObliviousError

__all__ = [
    "BinaryRequest",
    "BinaryResponse",
    "decode_request",
    "decode_response",
    "decode_varint",
    "encode_request",
    "encode_response",
    "encode_varint",
]

Fields = tuple[tuple[str, str], ...]
"""Field lines in order: (lower-case name, value)."""

_TOKEN = frozenset(b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
"""RFC 9110 ``tchar``: what a method and a field name may hold."""

MAX_VARINT = (1 << 62) - 1
"""The largest QUIC variable-length integer (RFC 9000 §16)."""


@dataclass(frozen=True)
class BinaryRequest:
    """An HTTP request as Binary HTTP carries it (RFC 9292 §3.4).

    Attributes:
        method: e.g. ``"POST"``.
        scheme: ``"https"`` or ``"http"``.
        authority: host[:port]; may be empty (a ``host`` field may say it instead).
        path: e.g. ``"/v1/reports"``.
        headers: the header section.
        content: the body.
        trailers: the trailer section.
    """

    method: str
    scheme: str
    authority: str
    path: str
    headers: Fields = ()
    content: bytes = b""
    trailers: Fields = ()

    def header(self, name: str) -> str | None:
        """The first value of the header ``name`` (any case), or None."""
        return _first(self.headers, name)


@dataclass(frozen=True)
class BinaryResponse:
    """An HTTP response as Binary HTTP carries it (RFC 9292 §3.5).

    Attributes:
        status: the final status, 200–599.
        headers: the header section.
        content: the body.
        trailers: the trailer section.
        informational: interim responses before it: (status 100–199, fields).
    """

    status: int
    headers: Fields = ()
    content: bytes = b""
    trailers: Fields = ()
    informational: tuple[tuple[int, Fields], ...] = ()

    def header(self, name: str) -> str | None:
        """The first value of the header ``name`` (any case), or None."""
        return _first(self.headers, name)


def _first(fields: Fields, name: str) -> str | None:
    wanted = name.lower()
    return next((value for key, value in fields if key == wanted), None)


# -- variable-length integers (RFC 9000 §16) ---------------------------------------------


def encode_varint(value: int) -> bytes:
    """``value`` in the shortest QUIC variable-length encoding.

    Raises:
        ValueError: negative, or above :data:`MAX_VARINT`.
    """
    if value < 0 or value > MAX_VARINT:
        raise ValueError(f"a variable-length integer is 0..2**62-1, got {value}")
    if value < 1 << 6:
        return bytes((value,))
    if value < 1 << 14:
        return (value | 0x4000).to_bytes(2, "big")
    if value < 1 << 30:
        return (value | 0x8000_0000).to_bytes(4, "big")
    return (value | 0xC000_0000_0000_0000).to_bytes(8, "big")


def decode_varint(data: bytes | memoryview, at: int) -> tuple[int, int]:
    """The variable-length integer at ``data[at:]`` and the offset after it.

    Raises:
        ObliviousError: the data ends inside the integer.
    """
    if at >= len(data):
        raise ObliviousError("binary HTTP message truncated inside an integer")
    first = data[at]
    size = 1 << (first >> 6)
    if at + size > len(data):
        raise ObliviousError("binary HTTP message truncated inside an integer")
    value = first & 0x3F
    for byte in data[at + 1 : at + size]:
        value = (value << 8) | byte
    return value, at + size


# -- encoding (known-length) ---------------------------------------------------------------


def _bytes(data: bytes) -> bytes:
    return encode_varint(len(data)) + data


def _field_section(fields: Fields) -> bytes:
    lines = bytearray()
    for name, value in fields:
        key = name.lower().encode("ascii")
        if not key or not set(key) <= _TOKEN:
            raise ValueError(f"invalid field name {name!r}")
        lines += _bytes(key) + _bytes(value.encode("latin-1"))
    return _bytes(bytes(lines))


def encode_request(request: BinaryRequest) -> bytes:
    """``request`` as a known-length Binary HTTP message (framing indicator 0).

    Raises:
        ValueError: a method or field name that is not an HTTP token.
    """
    method = request.method.encode("ascii")
    if not method or not set(method) <= _TOKEN:
        raise ValueError(f"invalid method {request.method!r}")
    return b"".join(
        (
            encode_varint(0),
            _bytes(method),
            _bytes(request.scheme.encode("ascii")),
            _bytes(request.authority.encode("ascii")),
            _bytes(request.path.encode("ascii")),
            _field_section(request.headers),
            _bytes(request.content),
            _field_section(request.trailers),
        )
    )


def encode_response(response: BinaryResponse) -> bytes:
    """``response`` as a known-length Binary HTTP message (framing indicator 1).

    Raises:
        ValueError: a status outside 200–599 (interim ones outside 100–199), or a field
            name that is not an HTTP token.
    """
    if not 200 <= response.status <= 599:
        raise ValueError(f"a final status is 200..599, got {response.status}")
    parts = [encode_varint(1)]
    for status, fields in response.informational:
        if not 100 <= status <= 199:
            raise ValueError(f"an informational status is 100..199, got {status}")
        parts += [encode_varint(status), _field_section(fields)]
    parts += [
        encode_varint(response.status),
        _field_section(response.headers),
        _bytes(response.content),
        _field_section(response.trailers),
    ]
    return b"".join(parts)


# -- decoding (both forms) -------------------------------------------------------------------


class _Reader:
    """A cursor over one message; ``done`` once only zero padding is left."""

    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.at = 0

    @property
    def done(self) -> bool:
        return self.at >= len(self.data)

    def varint(self) -> int:
        value, self.at = decode_varint(self.data, self.at)
        return value

    def take(self, size: int) -> bytes:
        end = self.at + size
        if end > len(self.data):
            raise ObliviousError("binary HTTP message truncated inside a length-prefixed field")
        piece = bytes(self.data[self.at : end])
        self.at = end
        return piece

    def prefixed(self) -> bytes:
        return self.take(self.varint())

    def padding(self) -> None:
        if any(self.data[self.at :]):
            raise ObliviousError("binary HTTP message has non-zero bytes after its end")

    def known_fields(self) -> Fields:
        """A known-length field section; an absent (truncated) one is empty."""
        if self.done:
            return ()
        inner = _Reader(self.prefixed())
        fields = []
        while not inner.done:
            fields.append(_field(inner.prefixed(), inner.prefixed()))
        return tuple(fields)

    def indeterminate_fields(self) -> Fields:
        """An indeterminate-length field section, ended by a zero-length name."""
        fields = []
        while not self.done:
            name = self.prefixed()
            if not name:
                break
            fields.append(_field(name, self.prefixed()))
        return tuple(fields)

    def known_content(self) -> bytes:
        return b"" if self.done else self.prefixed()

    def indeterminate_content(self) -> bytes:
        chunks = []
        while not self.done:
            chunk = self.prefixed()
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def _field(name: bytes, value: bytes) -> tuple[str, str]:
    if not name or not set(name) <= _TOKEN:
        raise ObliviousError("binary HTTP message has an invalid field name")
    if b"\r" in value or b"\n" in value or b"\0" in value:
        raise ObliviousError("binary HTTP message has a field value with CR, LF or NUL")
    return name.decode("ascii").lower(), value.decode("latin-1")


def _control(reader: _Reader, what: str) -> str:
    try:
        return reader.prefixed().decode("ascii")
    except UnicodeDecodeError:
        raise ObliviousError(f"binary HTTP request has a non-ASCII {what}") from None


def decode_request(data: bytes) -> BinaryRequest:
    """The request in a Binary HTTP message (known- or indeterminate-length).

    Raises:
        ObliviousError: not a well-formed Binary HTTP request.
    """
    reader = _Reader(data)
    framing = reader.varint()
    if framing not in (0, 2):
        raise ObliviousError(f"not a binary HTTP request (framing indicator {framing})")
    method = _control(reader, "method")
    if not method or not set(method.encode()) <= _TOKEN:
        raise ObliviousError("binary HTTP request has an invalid method")
    scheme, authority, path = (_control(reader, what) for what in ("scheme", "authority", "path"))
    if framing == 0:
        headers, content, trailers = (
            reader.known_fields(),
            reader.known_content(),
            reader.known_fields(),
        )
    else:
        headers, content, trailers = (
            reader.indeterminate_fields(),
            reader.indeterminate_content(),
            reader.indeterminate_fields(),
        )
    reader.padding()
    return BinaryRequest(method, scheme, authority, path, headers, content, trailers)


def decode_response(data: bytes) -> BinaryResponse:
    """The response in a Binary HTTP message (known- or indeterminate-length).

    Raises:
        ObliviousError: not a well-formed Binary HTTP response.
    """
    reader = _Reader(data)
    framing = reader.varint()
    if framing not in (1, 3):
        raise ObliviousError(f"not a binary HTTP response (framing indicator {framing})")
    known = framing == 1
    interim: list[tuple[int, Fields]] = []
    while True:
        status = reader.varint()
        if 100 <= status <= 199:
            interim.append(
                (status, reader.known_fields() if known else reader.indeterminate_fields())
            )
            continue
        if not 200 <= status <= 599:
            raise ObliviousError(f"binary HTTP response has an invalid status {status}")
        break
    if known:
        headers, content, trailers = (
            reader.known_fields(),
            reader.known_content(),
            reader.known_fields(),
        )
    else:
        headers, content, trailers = (
            reader.indeterminate_fields(),
            reader.indeterminate_content(),
            reader.indeterminate_fields(),
        )
    reader.padding()
    return BinaryResponse(status, headers, content, trailers, tuple(interim))

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

from collections.abc import Iterator
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


def _message_body(headers: Fields, content: bytes, trailers: Fields) -> tuple[bytes, ...]:
    """What follows the control data of either message: the header section, the content
    and the trailer section, each length-prefixed (RFC 9292 §3.1)."""
    return _field_section(headers), _bytes(content), _field_section(trailers)


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
            *_message_body(request.headers, request.content, request.trailers),
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
        *_message_body(response.headers, response.content, response.trailers),
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

    def until_empty(self) -> Iterator[bytes]:
        """Length-prefixed pieces up to a zero-length one (or the end): how the
        indeterminate-length form ends a field section (a name) and the content (a chunk).
        Read lazily, so the caller may read more between two pieces."""
        while not self.done:
            piece = self.prefixed()
            if not piece:
                return
            yield piece

    def indeterminate_fields(self) -> Fields:
        """An indeterminate-length field section, ended by a zero-length name."""
        return tuple(_field(name, self.prefixed()) for name in self.until_empty())

    def known_content(self) -> bytes:
        return b"" if self.done else self.prefixed()

    def indeterminate_content(self) -> bytes:
        return b"".join(self.until_empty())

    def fields(self, known: bool) -> Fields:
        """A field section of the known-length form or of the indeterminate-length one."""
        return self.known_fields() if known else self.indeterminate_fields()

    def message_body(self, known: bool) -> tuple[Fields, bytes, Fields]:
        """The rest of either message: its header section, content and trailer section,
        then nothing but zero padding."""
        headers = self.fields(known)
        content = self.known_content() if known else self.indeterminate_content()
        trailers = self.fields(known)
        self.padding()
        return headers, content, trailers


def _framing(data: bytes, what: str, known: int) -> tuple[_Reader, bool]:
    """A reader of a Binary HTTP ``what`` past its framing indicator, which must be
    ``known`` (known-length) or ``known + 2`` (indeterminate-length); whether it is the
    known-length form."""
    reader = _Reader(data)
    framing = reader.varint()
    if framing not in (known, known + 2):
        raise ObliviousError(f"not a binary HTTP {what} (framing indicator {framing})")
    return reader, framing == known


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
    reader, known = _framing(data, "request", 0)
    method = _control(reader, "method")
    if not method or not set(method.encode()) <= _TOKEN:
        raise ObliviousError("binary HTTP request has an invalid method")
    scheme, authority, path = (_control(reader, what) for what in ("scheme", "authority", "path"))
    return BinaryRequest(method, scheme, authority, path, *reader.message_body(known))


def decode_response(data: bytes) -> BinaryResponse:
    """The response in a Binary HTTP message (known- or indeterminate-length).

    Raises:
        ObliviousError: not a well-formed Binary HTTP response.
    """
    reader, known = _framing(data, "response", 1)
    interim: list[tuple[int, Fields]] = []
    while True:
        status = reader.varint()
        if 100 <= status <= 199:
            interim.append((status, reader.fields(known)))
            continue
        if not 200 <= status <= 599:
            raise ObliviousError(f"binary HTTP response has an invalid status {status}")
        break
    headers, content, trailers = reader.message_body(known)
    return BinaryResponse(status, headers, content, trailers, tuple(interim))

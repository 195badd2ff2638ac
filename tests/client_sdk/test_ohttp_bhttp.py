"""Binary HTTP (RFC 9292): the RFC's own examples, truncation, padding, malformed input."""

from __future__ import annotations

import pytest

from client_sdk.errors import ObliviousError
from client_sdk.ohttp import bhttp

RFC9292_KNOWN_LENGTH_REQUEST = bytes.fromhex(
    # RFC 9292 §5, the known-length encoding of
    # GET /hello.txt (https, no authority; user-agent, host, accept-language), zero padded.
    "000347455405687474707300"
    "0a2f68656c6c6f2e747874"
    "406c"
    "0a757365722d6167656e74"
    "34" + b"curl/7.16.3 libcurl/7.16.3 OpenSSL/0.9.7l zlib/1.2.3".hex() + "04686f7374"
    "0f7777772e6578616d706c652e636f6d"
    "0f6163636570742d6c616e6775616765"
    "06656e2c206d69"
    "0000"
    "000000000000000000"
)

RFC9458_REQUEST = bytes.fromhex("00034745540568747470730b6578616d706c652e636f6d012f")
RFC9458_RESPONSE = bytes.fromhex("0140c8")


def test_the_rfc9292_known_length_request_example() -> None:
    request = bhttp.decode_request(RFC9292_KNOWN_LENGTH_REQUEST)
    assert request == bhttp.BinaryRequest(
        "GET",
        "https",
        "",
        "/hello.txt",
        (
            ("user-agent", "curl/7.16.3 libcurl/7.16.3 OpenSSL/0.9.7l zlib/1.2.3"),
            ("host", "www.example.com"),
            ("accept-language", "en, mi"),
        ),
    )
    # Re-encoded: the same bytes up to the padding (the encoder does not pad).
    assert RFC9292_KNOWN_LENGTH_REQUEST.startswith(bhttp.encode_request(request))


def test_the_rfc9458_messages_are_truncated_binary_http() -> None:
    assert bhttp.decode_request(RFC9458_REQUEST) == bhttp.BinaryRequest(
        "GET", "https", "example.com", "/"
    )
    assert bhttp.decode_response(RFC9458_RESPONSE) == bhttp.BinaryResponse(200)
    # The encoder writes the empty sections the RFC's examples leave out.
    assert (
        bhttp.encode_request(bhttp.decode_request(RFC9458_REQUEST)) == RFC9458_REQUEST + b"\0\0\0"
    )
    assert bhttp.encode_response(bhttp.BinaryResponse(200)) == RFC9458_RESPONSE + b"\0\0\0"


def test_an_indeterminate_length_response_with_an_interim_one() -> None:
    def text(value: bytes) -> bytes:
        return bytes([len(value)]) + value

    data = (
        b"\x03"  # indeterminate-length response
        + b"\x40\x66"
        + text(b"running")
        + text(b'"sleep 15"')
        + b"\x00"  # 102, its fields
        + b"\x40\xc8"
        + text(b"content-type")
        + text(b"text/plain")
        + b"\x00"  # 200
        + text(b"Hello")
        + text(b" world")
        + b"\x00"  # content in two chunks
        + b"\x00"  # no trailers
    )
    assert bhttp.decode_response(data) == bhttp.BinaryResponse(
        200,
        (("content-type", "text/plain"),),
        b"Hello world",
        (),
        ((102, (("running", '"sleep 15"'),)),),
    )


def test_a_post_round_trips() -> None:
    request = bhttp.BinaryRequest(
        "POST",
        "https",
        "collector.example:8443",
        "/v1/reports",
        (("content-type", "application/json"),),
        b'{"reports": []}',
    )
    assert bhttp.decode_request(bhttp.encode_request(request)) == request
    response = bhttp.BinaryResponse(
        202, (("content-type", "application/json"),), b'{"accepted": 1}'
    )
    assert bhttp.decode_response(bhttp.encode_response(response)) == response


@pytest.mark.parametrize("value", [0, 37, 63, 64, 15293, 16383, 16384, 494878333, 2**62 - 1])
def test_varints_round_trip_in_the_shortest_form(value: int) -> None:
    encoded = bhttp.encode_varint(value)
    assert len(encoded) == (1 if value < 64 else 2 if value < 2**14 else 4 if value < 2**30 else 8)
    assert bhttp.decode_varint(encoded, 0) == (value, len(encoded))


def test_rfc9000_varint_examples() -> None:
    """RFC 9000 §A.1's sample decodings (non-minimal forms are read too)."""
    for hex_, value in [
        ("c2197c5eff14e88c", 151288809941952652),
        ("9d7f3e7d", 494878333),
        ("7bbd", 15293),
        ("25", 37),
        ("4025", 37),
    ]:
        assert bhttp.decode_varint(bytes.fromhex(hex_), 0)[0] == value


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "truncated"),
        (b"\x01\x40\xc8", "framing indicator 1"),
        (b"\x00\x03GE", "truncated"),
        (b"\x00\x00\x05https\x00\x01/", "invalid method"),
        (b"\x00\x03G T\x05https\x00\x01/", "invalid method"),
        (RFC9458_REQUEST + b"\x00\x00\x00\x01", "non-zero"),
        (b"\x00\x03GET\x05https\x00\x01/\x06\x04Ho t\x00", "invalid field name"),
        (b"\x00\x03GET\x05https\x00\x01/\x06\x01a\x03x\ny", "CR, LF or NUL"),
        (b"\x00\x03GET\x05https\x00\x01/\x05\x01a\x03xyz", "truncated"),
    ],
)
def test_malformed_requests_are_refused_with_a_reason(data: bytes, message: str) -> None:
    with pytest.raises(ObliviousError, match=message):
        bhttp.decode_request(data)


def test_a_status_out_of_range_is_refused() -> None:
    with pytest.raises(ObliviousError, match="invalid status 600"):
        bhttp.decode_response(b"\x01" + bhttp.encode_varint(600))

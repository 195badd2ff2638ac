"""The committed conformance vectors are what the Python SDK does now, byte for byte.

``conformance/generate.py`` writes them from the reference SDK; here they are
regenerated in memory and compared with the files, so a change to a mechanism's
sampling, a hash family or the wire format shows up as a failing test until the vectors
are regenerated (and every other SDK is brought along).
"""

from __future__ import annotations

import importlib.util
import json
import urllib.parse
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "conformance_generate", ROOT / "conformance" / "generate.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATE = _generator()
RENDERED = GENERATE.render()


@pytest.mark.parametrize("name", sorted(RENDERED))
def test_committed_vectors_equal_what_the_sdk_does(name: str) -> None:
    committed = (ROOT / "conformance" / "vectors" / name).read_text(encoding="utf-8")
    assert json.loads(committed) == json.loads(RENDERED[name]), (
        f"conformance/vectors/{name} differs from the Python SDK: run "
        "`.venv/bin/python conformance/generate.py` and update every other SDK"
    )
    assert committed == RENDERED[name]


def test_no_stray_vector_files() -> None:
    on_disk = {p.name for p in (ROOT / "conformance" / "vectors").glob("*.json")}
    assert on_disk == set(RENDERED)


def test_every_mechanism_and_kind_has_vectors() -> None:
    from client_sdk import mechanisms

    oracles = json.loads(RENDERED["oracles.json"])
    covered = {m["params"]["mechanism"] for m in oracles["mechanisms"]}
    assert covered == set(mechanisms.MECHANISMS)
    numeric = json.loads(RENDERED["numeric.json"])
    assert {m["params"]["mechanism"] for m in numeric["mechanisms"]} == set(
        mechanisms.NUMERIC_MECHANISMS
    )
    memo = json.loads(RENDERED["memoized.json"])
    assert {m["params"]["mechanism"] for m in memo["mechanisms"]} == {
        "memo-grr",
        "memo-sue",
        "memo-oue",
    }
    wire_items = json.loads(RENDERED["wire.json"])["reports"]
    kinds = {item["definition"]["kind"] for item in wire_items}
    from client_sdk.wire import KINDS

    assert kinds == set(KINDS)
    # every mechanism on the wire too, as a served definition's report: its exact JSON
    on_wire = {item["definition"]["mechanism"]["mechanism"] for item in wire_items}
    assert set(mechanisms.MECHANISMS) | set(mechanisms.NUMERIC_NAMES) - {"auto"} <= on_wire
    joint_groups = {
        tuple(o["mechanism"] for o in item["definition"]["mechanism"]["oracles"])
        for item in wire_items
        if item["definition"]["kind"] == "joint"
    }
    assert {("grr",), ("olh",), ("olh", "olh", "olh")} <= joint_groups
    assert any(len(g) > 1 and "grr" in g for g in joint_groups)
    with_dimensions = [
        item
        for item in json.loads(RENDERED["wire.json"])["reports"]
        if "dimensions" in item["report"]
    ]
    assert with_dimensions and all(
        item["report"]["dimensions"] == item["dimensions"] for item in with_dimensions
    )


def test_replaying_a_vector_reproduces_its_payload() -> None:
    """The recorded bytes alone determine the payload: a replay from them, through the
    production generator, gives the recorded payload (what another SDK does)."""
    from client_sdk import mechanisms
    from client_sdk.mechanisms.randomness import SecureRandom

    class Replay(SecureRandom):
        def __init__(self, data: bytes) -> None:
            super().__init__()
            self._data, self._at = data, 0

        def randbytes(self, n: int) -> bytes:
            out = self._data[self._at : self._at + n]
            assert len(out) == n, "the vector's bytes ran out"
            self._at += n
            return out

    oracles = json.loads(RENDERED["oracles.json"])
    for entry in oracles["mechanisms"]:
        m = mechanisms.from_params(entry["params"])
        for case in entry["cases"]:
            rng = Replay(bytes.fromhex(case["random"]))
            assert m.perturb(case["value"], rng) == case["payload"]
            assert rng._at == len(rng._data)


def test_the_python_client_posts_the_wire_batch_byte_for_byte() -> None:
    """The real :class:`~client_sdk.Client`, its definitions fetched, its perturbation fed
    the vectors' bytes in order, its report ids and device secret the vectors': the batch
    its uploader posts is ``wire.json``'s, byte for byte (what every other SDK's client
    must post too)."""
    from unittest import mock

    from client_sdk import Client
    from client_sdk.mechanisms.randomness import SecureRandom
    from client_sdk.transport import CallableTransport, Response

    vectors = json.loads(RENDERED["wire.json"])
    items = vectors["reports"]
    definitions = {item["definition"]["name"]: item["definition"] for item in items}
    posted: list[bytes] = []

    def answer(method: str, path: str, body: bytes | None) -> Response:
        if method == "POST":
            assert body is not None
            posted.append(body)
            return Response(202, {}, json.dumps({"accepted": len(items)}).encode())
        name = path.split("?")[0].rsplit("/", 1)[-1]
        return Response(200, {}, json.dumps(definitions[name]).encode())

    class Replay(SecureRandom):
        def __init__(self, data: bytes) -> None:
            super().__init__()
            self.data, self.at = data, 0

        def randbytes(self, n: int) -> bytes:
            out = self.data[self.at : self.at + n]
            assert len(out) == n, "the vectors' bytes ran out"
            self.at += n
            return out

    rng = Replay(bytes.fromhex("".join(item["random"] for item in items)))
    ids = iter(item["id"] for item in items)
    secret = bytes.fromhex(next(item["secret"] for item in items if item["secret"]))
    with (
        mock.patch("client_sdk.wire.report.new_report_id", lambda: next(ids)),
        mock.patch("client_sdk.ledger.secrets.token_bytes", lambda n: secret),
    ):
        client = Client(
            "https://collector.example",
            transport=CallableTransport(answer),
            rng=rng,
            flush_at=10_000,
            flush_interval=3600.0,
        )
        for item in items:
            assert client.report(
                item["definition"]["name"], item["value"], dimensions=item.get("dimensions")
            ), item["definition"]["name"]
        assert client.flush(timeout=30)
        client.shutdown()
    assert rng.at == len(rng.data), "every random byte is consumed"
    assert posted == [vectors["batch"].encode()]


def test_the_ohttp_vectors_open_to_their_requests() -> None:
    """The sealed requests of ``ohttp.json`` open, with the gateway's key, to their Binary
    HTTP requests, which decode to the request each names (the batch of ``wire.json``)."""
    from client_sdk.ohttp import bhttp
    from client_sdk.ohttp.encapsulation import decapsulate_request
    from client_sdk.ohttp.keys import decode_key_configs

    vectors = json.loads(RENDERED["ohttp.json"])
    (config,) = decode_key_configs(bytes.fromhex(vectors["keys"]))

    class Key:
        def __init__(self) -> None:
            self.config = config
            self.private_key = bytes.fromhex(vectors["gateway_private_key"])

    batch = json.loads(RENDERED["wire.json"])["batch"]
    for r in vectors["requests"]:
        plain, _ = decapsulate_request(bytes.fromhex(r["encapsulated_request"]), lambda i: Key())
        assert plain.hex() == r["binary_request"]
        request = bhttp.decode_request(plain)
        prefix = urllib.parse.urlsplit(r["collector"]).path
        assert (request.method, request.path) == (r["method"], prefix + r["path"])
        body = {"wire.json": batch, None: ""}.get(r["body"], r["body"])
        assert request.content == body.encode()

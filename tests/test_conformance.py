"""The committed conformance vectors are what the Python SDK does now, byte for byte.

``conformance/generate.py`` writes them from the reference SDK; here they are
regenerated in memory and compared with the files, so a change to a mechanism's
sampling, a hash family or the wire format shows up as a failing test until the vectors
are regenerated (and every other SDK is brought along).
"""

from __future__ import annotations

import importlib.util
import json
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
    kinds = {item["definition"]["kind"] for item in json.loads(RENDERED["wire.json"])["reports"]}
    from client_sdk.wire import KINDS

    assert kinds == set(KINDS)
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

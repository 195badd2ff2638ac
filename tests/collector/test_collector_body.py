"""The strict JSON parse of request bodies: its fast path (msgspec) answers exactly what the
stdlib's strict parse answers, or leaves the body to it."""

from __future__ import annotations

import base64
import json
import random
from typing import Any

import pytest

from collector.body import _SLOW, _fast_parse, _strict_parse, parse_json
from collector.errors import ApiError


def batch(n: int = 50, seed: int = 1, oue: bool = False) -> bytes:
    """A batch as the SDK sends it (compact JSON), of GRR or OUE-like payloads."""
    rng = random.Random(seed)
    reports = [
        {
            "metric": "app.theme",
            "version": 1,
            "id": rng.randbytes(16).hex(),
            "payload": {"b": base64.b64encode(rng.randbytes(128)).decode()}
            if oue
            else {"v": i % 3},
        }
        for i in range(n)
    ]
    return json.dumps({"reports": reports}, separators=(",", ":")).encode()


def outcome(parse: Any, raw: bytes) -> tuple[str, Any]:
    try:
        value = parse(raw)
    except ApiError as exc:
        return "refused", (exc.status, exc.error, exc.details)
    return "parsed", (value, json.dumps(value, sort_keys=True))  # types too: 1 vs 1.0


@pytest.mark.parametrize("oue", [False, True])
def test_an_sdk_batch_takes_the_fast_path_and_parses_as_the_strict_parse(oue: bool) -> None:
    raw = batch(oue=oue)
    assert _fast_parse(raw) is not _SLOW
    assert outcome(parse_json, raw) == outcome(_strict_parse, raw)


BODIES = [
    # duplicate keys at each level, spaced or not: refused with the key named
    b'{"reports":[],"reports":[]}',
    b'{"reports":[{"metric":"a","metric":"b","version":1,"id":"x","payload":{"v":1}}]}',
    b'{"reports":[{"metric":"a","version":1,"id":"x","payload":{"v":1,"v":2}}]}',
    b'{"reports" : [{"metric" : "a", "version" : 1, "id" : "x", "payload" : {"v" : 1, "v" : 2}}]}',
    # a duplicate balanced by a colon inside a string: the colon count must not be fooled
    b'{"reports":[{"metric":"a:b","version":1,"version":2,"id":"x","payload":{"v":1}}]}',
    # a duplicate in a nested object the count does not reach
    b'{"reports":[{"metric":"a","version":1,"id":"x","payload":{"v":{"w":1,"w":2}}}]}',
    b'{"reports":[{"metric":{"a":1,"a":2},"version":1,"id":"x","payload":{"v":1}}]}',
    # a duplicate in a payload that is not an object, or a report that is not one
    b'{"reports":[{"metric":"a","version":1,"id":"x","payload":[{"v":1,"v":2}]}]}',
    b'{"reports":[[{"v":1,"v":2}],{"metric":"a","version":1,"id":"x","payload":"q"}]}',
    b'{"reports":["abcd",{"metric":"a","version":1,"version":2,"id":"x","payload":{"v":1}}]}',
    b'{"reports":[{"metric":"a","version":1,"version":2,"id":"x","payload":"q"}]}',
    # integers past 64 bits stay integers; 100+ digits are refused
    b'{"reports":[{"metric":"a","version":18446744073709551616,"id":"x","payload":{"v":1}}]}',
    b'{"reports":[{"metric":"a","version":-9223372036854775809,"id":"x","payload":{"v":1}}]}',
    b'{"reports":[{"metric":"a","version":1,"id":"x","payload":{"v":' + b"9" * 101 + b"}}]}",
    # what msgspec and the strict parse both refuse, what only msgspec refuses, long ints
    b'{"reports":[NaN]}',
    b'{"reports":[1e400]}',
    b'{"reports":[-Infinity]}',
    b'{"reports":["\\ud800"]}',
    b'{"reports":["\xff"]}',
    b'{"reports":[1,]}',
    b'{"reports":[]} x',
    b"[" * 5000 + b"]" * 5000,
    b'{"reports":[{"metric":"a","version":1,"id":"x","payload":{"v":' + b"9" * 150 + b"}}]}",
    b'{"reports":[{"metric":"a","version":1,"id":"x","payload":{"v":' + b"9" * 100 + b"}}]}",
    # other shapes, floats
    b'["reports"]',
    b'"reports"',
    b'{"reports":{"a":1}}',
    b'{"reports":[{"metric":"a","version":1.0,"id":"x","payload":{"y":-0.0,"z":1e-7}}]}',
    b' {"reports":[]}\n',
]


@pytest.mark.parametrize("raw", BODIES)
def test_parse_json_answers_as_the_strict_parse(raw: bytes) -> None:
    assert outcome(parse_json, raw) == outcome(_strict_parse, raw)


def test_duplicates_slipped_into_sdk_batches_are_always_refused() -> None:
    """Each report of a real batch gets a repeated field, one at a time, in every place."""
    raw = batch(20, seed=2).decode()
    rng = random.Random(3)
    for _ in range(200):
        field = rng.choice(['"metric":"app.theme"', '"version":1', '"payload":{"v":', '"v":'])
        starts = [i for i in range(len(raw)) if raw.startswith(field, i)]
        at = rng.choice(starts)
        repeat = '"version":7,' if field == '"version":1' else '"metric":"x",'
        if field == '"v":':
            repeat = '"v":2,'
        mutated = (raw[:at] + repeat + raw[at:]).encode()
        got = outcome(parse_json, mutated)
        assert got == outcome(_strict_parse, mutated)
        assert got[0] == "refused" and "duplicate key" in got[1][2][0]

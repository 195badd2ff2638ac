"""Plain batches (``collector.plain``): the same verdicts and stored bytes as the
report-by-report path, or no verdict at all (the request then takes that path)."""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Callable
from typing import Any

import pytest
from collector_helpers import ADMIN, define
from flask.testing import FlaskClient

from client_sdk.wire import MetricDefinition, build_report
from collector import plain
from collector.body import parse_json
from collector.context import services
from collector.ingest import MAX_VERSIONS_PER_REQUEST, validate
from ldp_store import keys, streams

SPECS: dict[str, dict[str, Any]] = {
    "grr": {"domain": [f"v{i}" for i in range(16)], "epsilon": 1.0, "mechanism": "grr"},
    "brr": {"domain": ["no", "yes"], "epsilon": 1.0, "mechanism": "grr"},
    "oue": {"domain": [f"v{i}" for i in range(1024)], "epsilon": 1.0, "mechanism": "oue"},
    "oue-13": {"domain": [f"v{i}" for i in range(13)], "epsilon": 1.0, "mechanism": "oue"},
    "sue": {"domain": [f"v{i}" for i in range(40)], "epsilon": 2.0, "mechanism": "sue"},
    "olh": {"domain": [f"v{i}" for i in range(64)], "epsilon": 2.0, "mechanism": "olh"},
    "blh": {"domain": [f"v{i}" for i in range(64)], "epsilon": 2.0, "mechanism": "blh"},
    "hr": {"domain": [f"v{i}" for i in range(64)], "epsilon": 2.0, "mechanism": "hr"},
    "ss": {"domain": [f"v{i}" for i in range(32)], "epsilon": 1.0, "mechanism": "ss"},
    "pram": {
        "domain": ["a", "b", "c"],
        "mechanism": "pram",
        "options": {
            "matrix": [["0.6", "0.3", "0.1"], ["0.2", "0.6", "0.2"], ["0.1", "0.3", "0.6"]]
        },
    },
    "string": {"kind": "string", "max_length": 8, "epsilon": 4.0},
    "string-olh": {"kind": "string", "max_length": 6, "epsilon": 1.0},
    "memo-grr": {
        "domain": [f"v{i}" for i in range(8)],
        "epsilon": 1.0,
        "mechanism": "grr",
        "longitudinal": {"permanent_epsilon": 3.0},
        "budget": {"reports_per_period": 100, "period": "day"},
    },
}
"""A metric of every frequency oracle the plain path knows (memoized included)."""

SECRET = b"s" * 32


def made(definition: MetricDefinition, n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` honest reports of ``definition`` built with the SDK."""
    rng = random.Random(seed)
    if definition.domain:
        values: list[Any] = [rng.randrange(definition.k) for _ in range(n)]
    else:
        values = [f"w{rng.randrange(60)}" for _ in range(n)]
    memoized = definition.longitudinal is not None
    return [build_report(definition, v, rng, SECRET if memoized else None) for v in values]


def both(client: FlaskClient, raw: bytes) -> tuple[Any, Any]:
    """(the plain path's answer or None, the report-by-report path's groups and
    rejections) for the body ``raw``."""
    registry = services(client.application).registry
    batch = plain.decode(raw, 500)
    fast = None
    if batch is not None:
        fast = plain.validate(batch, registry.lookup, registry.retired, MAX_VERSIONS_PER_REQUEST)
    slow = validate(parse_json(raw)["reports"], registry.lookup, registry.retired)
    return fast, slow


def body(reports: list[Any]) -> bytes:
    return json.dumps({"reports": reports}, separators=(",", ":")).encode()


@pytest.fixture
def defined(client: FlaskClient) -> dict[str, MetricDefinition]:
    return {kind: define(client, f"plain.{kind}", spec) for kind, spec in SPECS.items()}


@pytest.mark.parametrize("kind", list(SPECS))
def test_an_honest_batch_takes_the_plain_path_with_the_same_items(
    client: FlaskClient, defined: dict[str, MetricDefinition], kind: str
) -> None:
    """Every frequency oracle's SDK batch is plain, and its items (ids, stored bytes)
    and shards are those the report-by-report path makes."""
    definition = defined[kind]
    fast, slow = both(client, body(made(definition, 300, seed=len(kind))))
    assert not slow.rejected
    assert fast is not None, f"an honest {kind} batch did not take the plain path"
    assert fast[0] == slow.groups
    assert fast[1] == slow.shards


def test_a_batch_of_several_versions_keeps_each_group_in_order(
    client: FlaskClient, defined: dict[str, MetricDefinition]
) -> None:
    mixed = [r for kind in ("grr", "oue", "string") for r in made(defined[kind], 50, seed=3)]
    random.Random(4).shuffle(mixed)
    fast, slow = both(client, body(mixed))
    assert fast is not None and not slow.rejected
    assert fast[0] == slow.groups and len(fast[0]) == 3


def _set(field: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(report: dict[str, Any]) -> None:
        report["payload"][field] = value

    return change


def _report(field: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(report: dict[str, Any]) -> None:
        report[field] = value

    return change


def _unary_bits(fill: int, nbytes: int) -> str:
    return base64.b64encode(bytes([fill]) * nbytes).decode()


INVALID: dict[str, list[tuple[str, Callable[[dict[str, Any]], None]]]] = {
    "grr": [
        ("v = k", _set("v", 16)),
        ("v < 0", _set("v", -1)),
        ("v a float", _set("v", 1.0)),
        ("v a bool", _set("v", True)),
        ("v a string", _set("v", "1")),
        ("v huge", _set("v", 10**30)),
        ("an extra field", _set("w", 1)),
        ("no field", lambda r: r["payload"].clear()),
        ("payload a list", _report("payload", [1])),
        ("id upper case", lambda r: r.update(id=r["id"].upper())),
        ("id 31 digits", lambda r: r.update(id=r["id"][:31])),
        ("id with a newline", lambda r: r.update(id=r["id"][:31] + "\n")),
        ("id with a non-ASCII digit", lambda r: r.update(id=r["id"][:31] + "٣")),
        ("version 0", _report("version", 0)),
        ("version a float", _report("version", 1.0)),
        ("unknown version", _report("version", 99)),
        ("unknown metric", _report("metric", "plain.nothing")),
        ("empty metric", _report("metric", "")),
        ("metric name too long", _report("metric", "m" * 65)),
        ("an extra report field", _report("device", "x")),
        ("dimensions it does not declare", _report("dimensions", {"platform": "ios"})),
        ("no id", lambda r: r.pop("id")),
    ],
    "brr": [("v = 2", _set("v", 2))],
    "oue": [
        ("bits too short", _set("b", "AAAA")),
        ("bits not a string", _set("b", 5)),
        ("all ones (implausible)", _set("b", _unary_bits(0xFF, 128))),
        ("all zeros (implausible)", _set("b", _unary_bits(0, 128))),
        ("base64 with a space", lambda r: r["payload"].update(b=" " + r["payload"]["b"][1:])),
        ("base64 non-ASCII", lambda r: r["payload"].update(b="é" + r["payload"]["b"][1:])),
        (
            "base64 non-strict padding",
            lambda r: r["payload"].update(b=r["payload"]["b"][:-2] + "=="),
        ),
    ],
    "oue-13": [("a bit past the domain", _set("b", base64.b64encode(b"\x00\x01").decode()))],
    "sue": [("bits of another size", _set("b", _unary_bits(0x55, 6)))],
    "olh": [("a = 0", _set("a", 0)), ("y = g", _set("y", 10**6)), ("b < 0", _set("b", -1))],
    "hr": [("j past the order", _set("j", 10**6)), ("j a float", _set("j", 0.0))],
    "ss": [
        ("not increasing", lambda r: r["payload"].update(v=r["payload"]["v"][::-1])),
        (
            "a value twice",
            lambda r: r["payload"].update(v=[r["payload"]["v"][0]] * len(r["payload"]["v"])),
        ),
        ("one value short", lambda r: r["payload"].update(v=r["payload"]["v"][:-1])),
        ("a value out of range", lambda r: r["payload"].update(v=[*r["payload"]["v"][:-1], 32])),
    ],
    "pram": [("v = k", _set("v", 3))],
    "string": [
        ("level = L", _set("l", 8)),
        ("row out of range", _set("r", 10**5)),
        ("no level", lambda r: r["payload"].pop("l")),
    ],
    "memo-grr": [("v = k", _set("v", 8))],
}
"""Near misses, one report of a batch changed: each one the report-by-report path
rejects."""


@pytest.mark.parametrize(
    ("kind", "what", "change"),
    [(kind, what, change) for kind, cases in INVALID.items() for what, change in cases],
    ids=[f"{kind}: {what}" for kind, cases in INVALID.items() for what, _ in cases],
)
def test_a_batch_with_one_bad_report_is_never_plain(
    client: FlaskClient,
    defined: dict[str, MetricDefinition],
    kind: str,
    what: str,
    change: Callable[[dict[str, Any]], None],
) -> None:
    batch = made(defined[kind], 40, seed=9)
    change(batch[17])
    fast, slow = both(client, body(batch))
    assert [r.index for r in slow.rejected] == [17], slow.rejected  # the near miss is one
    assert fast is None, f"the plain path accepted a batch with {what}"


@pytest.mark.parametrize(
    "text",
    [
        # a key twice: the JSON parsers keep the last; the strict parse refuses
        '{"reports":[{"metric":"M","version":1,"id":"ID","payload":{"v":1,"v":2}}]}',
        '{"reports":[{"metric":"M","version":1,"version":1,"id":"ID","payload":{"v":1}}]}',
        '{"reports":[],"reports":[{"metric":"M","version":1,"id":"ID","payload":{"v":1}}]}',
    ],
    ids=["in a payload", "in a report", "in the body"],
)
def test_a_key_twice_is_never_plain(
    client: FlaskClient, defined: dict[str, MetricDefinition], text: str
) -> None:
    definition = defined["grr"]
    rid = made(definition, 1, seed=1)[0]["id"]
    raw = text.replace("ID", rid).replace('"M"', json.dumps(definition.name)).encode()
    batch = plain.decode(raw, 500)
    registry = services(client.application).registry
    assert batch is None or (
        plain.validate(batch, registry.lookup, registry.retired, MAX_VERSIONS_PER_REQUEST) is None
    )
    answer = client.post("/v1/reports", data=raw, content_type="application/json")
    assert answer.status_code == 400 and "duplicate key" in str(answer.json), answer.json


def test_a_retired_metric_is_never_plain(
    client: FlaskClient, defined: dict[str, MetricDefinition]
) -> None:
    definition = defined["grr"]
    raw = body(made(definition, 20, seed=2))
    retired = client.post(f"/v1/metrics/{definition.name}/retire", headers=ADMIN)
    assert retired.status_code == 200, retired.json
    fast, slow = both(client, raw)
    assert fast is None and {r.reason for r in slow.rejected} == {"retired"}


def test_numeric_and_dimension_metrics_take_the_other_path_and_are_stored_alike(
    client: FlaskClient,
) -> None:
    """Mechanisms the plain path does not know (numeric: floats) and metrics with
    dimensions are checked report by report, with the same answer as before."""
    numeric = define(client, "plain.numeric", {"kind": "numeric", "range": [0, 10], "epsilon": 1.0})
    rng = random.Random(1)
    numbers = [build_report(numeric, rng.uniform(0, 10), rng) for _ in range(30)]
    fast, slow = both(client, body(numbers))
    assert fast is None and not slow.rejected
    spec = {**SPECS["grr"], "dimensions": [{"name": "platform", "values": ["ios", "web"]}]}
    dims = define(client, "plain.dims", spec)
    split = [build_report(dims, 1, rng, None, {"platform": "ios"}) for _ in range(30)]
    fast, slow = both(client, body(split))
    assert fast is None and not slow.rejected
    for batch in (numbers, split):
        answer = client.post("/v1/reports", json={"reports": batch})
        assert answer.status_code == 202 and answer.json["accepted"] == 30, answer.json


def test_the_plain_path_answers_and_stores_as_the_other(
    client: FlaskClient, redis_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same requests through the app, on two metrics alike, one on each path: the
    same answers (a replay included) and the same stream contents."""
    answers, stored = [], []
    for name, on in (("plain.on", True), ("plain.off", False)):
        definition = define(client, name, SPECS["oue"])
        if not on:
            monkeypatch.setattr(plain, "decode", lambda raw, most: None)
        first, second = made(definition, 100, seed=5), made(definition, 100, seed=6)
        for batch in (first, first[:10] + second):
            answer = client.post("/v1/reports", data=body(batch), content_type="application/json")
            answers.append((on, answer.status_code, answer.json))
        key = keys.stream_key(definition.name, definition.version)
        stored.append([p for _, p in streams.reports(redis_db.client(), key)])
    assert [a[1:] for a in answers[:2]] == [a[1:] for a in answers[2:]]
    assert answers[1][2] == {"accepted": 100, "duplicates": 10, "rejected": []}
    assert stored[0] == stored[1] and len(stored[0]) == 200

"""Numeric metrics at the collector: definitions over HTTP, strict payload validation, ingest."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from collector_helpers import ADMIN, THEME_SPEC, define, post_accepted
from flask.testing import FlaskClient

from client_sdk.mechanisms.numeric import SCALE
from client_sdk.wire import MetricDefinition, build_report
from ldp_store import keys, streams

SPEC: dict[str, Any] = {
    "kind": "numeric",
    "range": [0, 120],
    "epsilon": 1.0,
    "description": "minutes per session",
}


@pytest.fixture
def minutes(client: FlaskClient) -> MetricDefinition:
    """A numeric metric (auto: the hybrid at ε = 1)."""
    return define(client, "session.minutes", SPEC)


def numeric_reports(definition: MetricDefinition, n: int, seed: int = 1) -> list[dict[str, Any]]:
    """``n`` valid reports of values spread over the range, made by the SDK."""
    rng = random.Random(seed)
    low, high = definition.value_range or (0.0, 1.0)
    return [build_report(definition, rng.uniform(low, high), rng) for _ in range(n)]


def stream_payloads(server: Any, definition: MetricDefinition) -> list[bytes]:
    key = keys.stream_key(definition.name, definition.version)
    return [payload for _, payload in streams.reports(server.client(), key)]


def test_a_numeric_metric_is_defined_and_served(
    client: FlaskClient, minutes: MetricDefinition
) -> None:
    body = client.get("/v1/metrics/session.minutes").json
    assert body["kind"] == "numeric" and body["range"] == [0.0, 120.0]
    assert "domain" not in body
    assert body["mechanism"] == {"mechanism": "hybrid", "epsilon": 1.0}
    assert "hybrid" in body["mechanism_reason"]
    assert MetricDefinition.from_dict(body) == minutes
    listed = {m["name"]: m for m in client.get("/v1/metrics").json["metrics"]}
    assert listed["session.minutes"]["range"] == [0.0, 120.0]


def test_changing_the_range_makes_a_new_version_a_description_does_not(
    client: FlaskClient, minutes: MetricDefinition
) -> None:
    same = client.put(
        "/v1/metrics/session.minutes", json={**SPEC, "description": "new words"}, headers=ADMIN
    )
    assert same.status_code == 200 and same.json["version"] == minutes.version
    assert same.json["range"] == [0.0, 120.0] and same.json["kind"] == "numeric"
    changed = client.put(
        "/v1/metrics/session.minutes", json={**SPEC, "range": [0, 60]}, headers=ADMIN
    )
    assert changed.status_code == 201 and changed.json["version"] == minutes.version + 1
    assert changed.json["range"] == [0.0, 60.0]
    old = client.get(f"/v1/metrics/session.minutes?version={minutes.version}").json
    assert old["range"] == [0.0, 120.0]


@pytest.mark.parametrize(
    ("spec", "detail"),
    [
        ({**SPEC, "range": [10, 0]}, "lo < hi"),
        ({**SPEC, "range": [0]}, "range must be a list [lo, hi]"),
        ({**SPEC, "range": None}, "range must be a list [lo, hi]"),
        ({**SPEC, "range": [0, 1e309]}, "finite"),
        ({**SPEC, "mechanism": "oue"}, "must be one of duchi, pm, hybrid, auto"),
        ({**SPEC, "domain": ["a", "b"]}, "unknown fields ['domain']"),
        ({**SPEC, "kind": "numerical"}, "kind must be one of categorical, numeric"),
    ],
)
def test_bad_numeric_definitions_get_400_with_the_problem(
    client: FlaskClient, spec: dict[str, Any], detail: str
) -> None:
    raw = json.dumps(spec).replace("Infinity", "1e309")  # what a client would send
    response = client.put(
        "/v1/metrics/session.minutes",
        data=raw,
        headers={**ADMIN, "Content-Type": "application/json"},
    )
    assert response.status_code == 400
    text = json.dumps(response.json)
    assert detail in text, response.json


def test_numeric_reports_are_accepted_and_stored_as_compact_payloads(
    client: FlaskClient, minutes: MetricDefinition, redis_db: Any
) -> None:
    batch = numeric_reports(minutes, 40)
    post_accepted(client, batch, 40)
    stored = stream_payloads(redis_db, minutes)
    assert stored == [json.dumps(r["payload"], separators=(",", ":")).encode() for r in batch]
    for raw in stored:  # the exact floats survive: y·2³⁰ is still an integer report
        assert minutes.numeric.is_report(int(json.loads(raw)["y"] * SCALE))


def _with_payload(definition: MetricDefinition, payload: Any) -> dict[str, Any]:
    return {**build_report(definition, 60.0), "payload": payload}


BAD_PAYLOADS: list[tuple[Any, str]] = [
    ({"y": 1}, "'y' must be a float, got int"),
    ({"y": True}, "'y' must be a float, got bool"),
    ({"y": "0.5"}, "'y' must be a float, got str"),
    ({"y": None}, "'y' must be a float, got NoneType"),
    ({"y": 5.0}, "is outside [-4.0829"),
    ({"y": -1e300}, "is outside"),
    ({"y": 0.1}, "is not a report hybrid can produce"),
    ({"y": 0.5}, "is not a report hybrid can produce"),
    ({"y": 2.0, "v": 1}, "exactly the field 'y'"),
    ({"v": 1}, "exactly the field 'y'"),
    ([0.5], "exactly the field 'y'"),
]


@pytest.mark.parametrize(("payload", "error"), BAD_PAYLOADS)
def test_bad_numeric_payloads_get_400_with_the_reason(
    client: FlaskClient, minutes: MetricDefinition, redis_db: Any, payload: Any, error: str
) -> None:
    response = client.post("/v1/reports", json={"reports": [_with_payload(minutes, payload)]})
    assert response.status_code == 400
    assert response.json["error"] == "no valid report in the request"
    assert error in response.json["details"][0], response.json
    assert response.json["details"][0].startswith("reports[0]: hybrid payload")
    assert stream_payloads(redis_db, minutes) == []


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_numbers_never_reach_validation(
    client: FlaskClient, minutes: MetricDefinition, redis_db: Any, literal: str
) -> None:
    report = json.dumps(_with_payload(minutes, {"y": 0.0})).replace("0.0", literal)
    response = client.post(
        "/v1/reports", data='{"reports": [' + report + "]}", content_type="application/json"
    )
    assert response.status_code == 400
    assert "finite" in json.dumps(response.json)
    assert stream_payloads(redis_db, minutes) == []


def test_a_mixed_batch_keeps_the_good_reports_and_lists_the_bad(
    client: FlaskClient, minutes: MetricDefinition, redis_db: Any
) -> None:
    theme = define(client, "app.theme", THEME_SPEC)
    good = numeric_reports(minutes, 3)
    batch = [
        good[0],
        _with_payload(minutes, {"y": 1}),
        good[1],
        {**build_report(theme, "dark"), "metric": "session.minutes", "version": minutes.version},
        good[2],
        _with_payload(minutes, {"y": 0.25}),
    ]
    response = client.post("/v1/reports", json={"reports": batch})
    assert response.status_code == 202
    assert response.json["accepted"] == 3
    assert [r["index"] for r in response.json["rejected"]] == [1, 3, 5]
    assert "'y' must be a float" in response.json["rejected"][0]["error"]
    assert "exactly the field 'y'" in response.json["rejected"][1]["error"]
    assert "not a report" in response.json["rejected"][2]["error"]
    assert len(stream_payloads(redis_db, minutes)) == 3


def test_a_numeric_payload_sent_to_a_categorical_metric_is_refused(
    client: FlaskClient, minutes: MetricDefinition
) -> None:
    theme = define(client, "app.theme", THEME_SPEC)
    report = {**build_report(theme, "dark"), "payload": build_report(minutes, 3)["payload"]}
    response = client.post("/v1/reports", json={"reports": [report]})
    assert response.status_code == 400
    assert "grr payload" in response.json["details"][0]

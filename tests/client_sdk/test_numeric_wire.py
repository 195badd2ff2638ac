"""Numeric metrics on the wire: specs, definitions, reports, and their validation."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest

from client_sdk import mechanisms
from client_sdk.errors import DefinitionError, ReportError
from client_sdk.wire import MetricDefinition, build_report, check_report, parse_spec

SPEC: dict[str, Any] = {"kind": "numeric", "range": [0, 120], "epsilon": 1.0}


def minutes(**changes: Any) -> MetricDefinition:
    return parse_spec("session.minutes", {**SPEC, **changes})


def lookup_of(definition: MetricDefinition) -> Any:
    return lambda name, version: (
        definition
        if (name, version)
        == (
            definition.name,
            definition.version,
        )
        else None
    )


# -- specs and definitions ------------------------------------------------------------------


def test_a_numeric_spec_resolves_auto_and_keeps_the_range() -> None:
    d = minutes()
    assert d.kind == "numeric" and d.value_range == (0.0, 120.0) and d.domain == ()
    assert d.mechanism == mechanisms.choose_numeric(1.0).mechanism
    assert d.mechanism_reason == mechanisms.choose_numeric(1.0).reason
    assert d.numeric is d.mechanism
    with pytest.raises(TypeError, match="numeric"):
        _ = d.oracle
    body = d.to_dict()
    assert body["range"] == [0.0, 120.0] and "domain" not in body
    assert body["kind"] == "numeric"
    assert body["mechanism"] == {"mechanism": "hybrid", "epsilon": 1.0}


@pytest.mark.parametrize("name", ["duchi", "pm", "hybrid"])
def test_definitions_round_trip_through_json(name: str) -> None:
    d = minutes(mechanism=name, range=[-2.5, 7], description="minutes per session")
    again = MetricDefinition.from_dict(json.loads(json.dumps(d.to_dict())))
    assert again == d and again.same_parameters(d)
    assert again.mechanism.name == name and again.value_range == (-2.5, 7.0)


def test_a_different_range_or_kind_is_a_different_version() -> None:
    d = minutes()
    assert not d.same_parameters(minutes(range=[0, 60]))
    assert not d.same_parameters(minutes(epsilon=2.0))
    assert d.same_parameters(minutes(description="other words"))
    categorical = parse_spec("session.minutes", {"domain": ["a", "b"], "epsilon": 1.0})
    assert not d.same_parameters(categorical) and not categorical.same_parameters(d)
    assert categorical.oracle is categorical.mechanism
    with pytest.raises(TypeError, match="categorical"):
        _ = categorical.numeric


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"range": None}, "range must be a list"),
        ({"range": [1]}, "range must be a list"),
        ({"range": [0, 1, 2]}, "range must be a list"),
        ({"range": "0..1"}, "range must be a list"),
        ({"range": [0, "1"]}, "two numbers"),
        ({"range": [False, True]}, "two numbers"),
        ({"range": [1, 1]}, "lo < hi"),
        ({"range": [5, -5]}, "lo < hi"),
        ({"range": [0, math.inf]}, "finite"),
        ({"range": [math.nan, 1]}, "finite"),
        ({"range": [-1e301, 0]}, "finite"),
        ({"range": [0, 10**400]}, "finite"),
        ({"domain": ["a", "b"]}, "unknown fields ['domain']"),
        ({"options": {}}, "unknown fields ['options']"),
        ({"mechanism": "grr"}, "must be one of duchi, pm, hybrid, auto"),
        ({"mechanism": 3}, "must be one of duchi, pm, hybrid, auto"),
        ({"epsilon": 0}, "epsilon must be finite and in"),
        ({"epsilon": None}, "epsilon must be a number"),
        ({"kind": "histogram"}, "kind must be one of categorical, numeric"),
        ({"description": 5}, "description must be a string"),
    ],
)
def test_bad_numeric_specs_list_the_problem(changes: dict[str, Any], problem: str) -> None:
    with pytest.raises(DefinitionError) as info:
        minutes(**changes)
    assert any(problem in p for p in info.value.problems), info.value.problems


def test_every_problem_is_listed_at_once() -> None:
    with pytest.raises(DefinitionError) as info:
        parse_spec("Bad Name", {"kind": "numeric", "range": [2, 1], "epsilon": -1, "x": 0})
    assert len(info.value.problems) == 4, info.value.problems


def test_categorical_specs_refuse_numeric_fields_and_mechanisms() -> None:
    with pytest.raises(DefinitionError, match="range"):
        parse_spec("app.theme", {"domain": ["a", "b"], "epsilon": 1.0, "range": [0, 1]})
    with pytest.raises(DefinitionError, match="mechanism must be one of"):
        parse_spec("app.theme", {"domain": ["a", "b"], "epsilon": 1.0, "mechanism": "pm"})
    d = parse_spec("app.theme", {"kind": "categorical", "domain": ["a", "b"], "epsilon": 1.0})
    assert d.kind == "categorical" and d.value_range is None and "range" not in d.to_dict()


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"range": None}, "range must be a list"),
        ({"domain": ["a", "b"]}, "a numeric metric has a range, not a domain"),
        ({"mechanism": {"mechanism": "grr", "epsilon": 1.0}}, "unknown numeric mechanism"),
        (
            {"mechanism": {"mechanism": "pm", "epsilon": 1.0, "domain_size": 2}},
            "no parameter",
        ),
        ({"kind": "vector"}, "unknown metric kind 'vector'"),
    ],
)
def test_bad_numeric_definitions_are_refused(changes: dict[str, Any], problem: str) -> None:
    data = {**minutes().to_dict(), **changes}
    with pytest.raises(DefinitionError) as info:
        MetricDefinition.from_dict(data)
    assert any(problem in p for p in info.value.problems), info.value.problems


# -- reports --------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, 12.5, 120, 119.99999, 60.0, 0.0])
def test_build_report_scales_perturbs_and_passes_check_report(value: float) -> None:
    d = minutes()
    report = build_report(d, value, random.Random(1))
    assert set(report) == {"metric", "version", "id", "payload"}
    sent = json.loads(json.dumps(report))  # what travels
    definition, rid, payload = check_report(sent, lookup_of(d))
    assert definition is d and rid == report["id"] and payload == report["payload"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (120.0001, r"value 120.0001 is outside the range \[0, 120\] of metric 'session.minutes'"),
        (-1, r"value -1 is outside the range \[0, 120\]"),
        (math.nan, r"value nan is outside the range \[0, 120\]"),
        (math.inf, r"value inf is outside the range \[0, 120\]"),
        (10**400, r"value 1000000000000000000000000000000000000... is outside the range"),
        ("12", "must be a number, got str"),
        (True, "must be a number, got bool"),
        (None, "must be a number, got NoneType"),
    ],
)
def test_values_outside_the_range_are_a_clear_error(value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_report(minutes(), value)


def test_a_fractional_range_is_shown_as_written() -> None:
    d = minutes(range=[0.25, 1.5])
    with pytest.raises(ValueError, match=r"outside the range \[0.25, 1.5\]"):
        build_report(d, 2)


def test_reports_of_the_range_ends_are_unbiased() -> None:
    """The scaled mean of many reports of one value comes back to that value."""
    d = minutes(mechanism="pm", epsilon=4.0)
    rng = random.Random(5)
    ys = [build_report(d, 90.0, rng)["payload"]["y"] for _ in range(4000)]
    sigma = math.sqrt(d.numeric.variance(len(ys), 0.5))
    assert abs(sum(ys) / len(ys) - 0.5) < 4 * sigma  # 90 of [0, 120] scales to 0.5


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        ({"y": 1}, "'y' must be a float, got int"),
        ({"y": "2.0"}, "'y' must be a float, got str"),
        ({"y": None}, "'y' must be a float"),
        ({"y": [1.0]}, "'y' must be a float"),
        ({"y": math.nan}, "outside"),
        ({"y": math.inf}, "outside"),
        ({"y": 1e6}, "outside"),
        ({"y": 0.1}, "not a report hybrid can produce"),
        ({"y": 1.0, "v": 1}, "exactly the field 'y'"),
        ({}, "exactly the field 'y'"),
        ([1.0], "exactly the field 'y'"),
        ({"v": 3}, "exactly the field 'y'"),
    ],
)
def test_check_report_refuses_bad_numeric_payloads(payload: Any, problem: str) -> None:
    d = minutes()
    report = {**build_report(d, 10), "payload": payload}
    with pytest.raises(ReportError, match=problem):
        check_report(report, lookup_of(d))


def test_a_categorical_payload_is_refused_by_a_numeric_metric_and_vice_versa() -> None:
    d = minutes()
    theme = parse_spec("app.theme", {"domain": ["a", "b", "c"], "epsilon": 1.0, "mechanism": "grr"})
    with pytest.raises(ReportError):
        check_report({**build_report(d, 10), "payload": {"v": 1}}, lookup_of(d))
    with pytest.raises(ReportError):
        check_report({**build_report(theme, "a"), "payload": {"y": 0.5}}, lookup_of(theme))
    with pytest.raises(ValueError):
        build_report(theme, 1.5)

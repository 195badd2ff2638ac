"""Public dimensions on the device: checked before anything is charged, sent in the clear
beside the perturbed payload; bad ones dropped as ``invalid_dimensions`` (never raised)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_client import Collector
from test_client_ledger import at, clients_on

from client_sdk import wire
from tests.clock import Clock

THEME = wire.parse_spec(
    "app.theme",
    {
        "domain": ["light", "dark"],
        "epsilon": 1.0,
        "dimensions": [
            {"name": "platform", "values": ["ios", "android", "web"]},
            {"name": "app_version", "values": ["1.0", "2.0"]},
        ],
        "budget": {"reports_per_period": 5, "period": "day"},
    },
)


@pytest.fixture
def collector() -> Iterator[Collector]:
    yield from Collector.serving(THEME)


def test_dimensions_travel_beside_the_payload_and_cost_nothing_more(
    collector: Collector, tmp_path: Path
) -> None:
    with clients_on(collector, Clock(at(2027, 1, 13)), tmp_path, "memory") as make:
        client = make(rng=random.Random(1))
        dims = {"platform": "web", "app_version": "2.0"}
        assert client.report("app.theme", "dark", dimensions=dims)
        assert client.report(
            "app.theme", "light", dimensions={"platform": "ios", "app_version": "1.0"}
        )
        spent = client.privacy()["metrics"]["app.theme"]
        assert (spent["today"]["reports"], spent["today"]["epsilon"]) == (2, 2.0)
        assert client.flush(timeout=5)
    assert [r["dimensions"] for r in collector.delivered] == [
        dims,
        {"platform": "ios", "app_version": "1.0"},
    ]
    for report in collector.delivered:
        assert THEME.mechanism.check_payload(report["payload"]) == report["payload"]


@pytest.mark.parametrize(
    "dimensions",
    [
        None,
        {"platform": "symbian"},
        {"platform": "symbian", "app_version": "1.0"},
        {"platform": "ios", "app_version": "1.0", "device_id": "abc"},
        {"platform": "ios", "app_version": 1.0},
    ],
)
def test_bad_dimensions_are_dropped_before_any_charge(
    collector: Collector, tmp_path: Path, dimensions: object
) -> None:
    with clients_on(collector, Clock(at(2027, 1, 13)), tmp_path, "memory") as make:
        client = make()
        assert client.report("app.theme", "dark", dimensions=dimensions) is False  # type: ignore[arg-type]
        assert client.stats()["dropped"]["invalid_dimensions"] == 1
        assert (
            client.privacy()["metrics"].get("app.theme", {}).get("today", {}).get("reports", 0) == 0
        )


def test_build_report_checks_dimensions_before_perturbing() -> None:
    class Refuse(random.Random):
        def random(self) -> float:
            raise AssertionError("perturbed before the dimensions were checked")

    with pytest.raises(ValueError, match="allowed"):
        wire.build_report(THEME, "dark", Refuse(), None, {"platform": "tv", "app_version": "1.0"})
    plain = wire.parse_spec("plain", {"domain": ["a", "b"], "epsilon": 1.0})
    with pytest.raises(ValueError, match="declares no dimensions"):
        wire.build_report(plain, "a", None, None, {"platform": "ios"})


def test_dimensions_are_part_of_the_version_and_round_trip() -> None:
    again = wire.MetricDefinition.from_dict(THEME.to_dict())
    assert again == THEME and again.segments == 6
    other = wire.parse_spec(
        "app.theme",
        {
            "domain": ["light", "dark"],
            "epsilon": 1.0,
            "budget": {"reports_per_period": 5, "period": "day"},
        },
    )
    assert not THEME.same_parameters(other)
    assert "dimensions" not in other.to_dict()  # older definitions serialise unchanged
    for index in range(THEME.segments):
        labels = wire.segment_labels(THEME.dimensions, index)
        assert THEME.segment(labels) == index


def test_string_metrics_and_wide_metrics_take_no_dimensions() -> None:
    dims = [{"name": "platform", "values": ["ios", "android"]}]
    with pytest.raises(wire.DefinitionError, match="at most 1023 counters"):
        wire.parse_spec(
            "s", {"kind": "string", "max_length": 8, "epsilon": 4.0, "dimensions": dims}
        )
    spec = {"domain": [f"v{i}" for i in range(2000)], "epsilon": 1.0, "dimensions": dims}
    with pytest.raises(wire.DefinitionError, match="2000"):
        wire.parse_spec("wide", spec)


def test_joint_metrics_take_no_dimensions_yet() -> None:
    spec = {
        "kind": "joint",
        "attributes": [
            {"name": "os", "domain": ["android", "ios"]},
            {"name": "crash", "domain": ["none", "oom"]},
        ],
        "epsilon": 2.0,
        "dimensions": [{"name": "platform", "values": ["ios", "android"]}],
    }
    with pytest.raises(wire.DefinitionError, match="joint metric takes no public dimensions"):
        wire.parse_spec("j", spec)

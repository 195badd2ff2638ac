"""A joint metric on the device: one report per tuple, ε charged once, bad tuples dropped
(never raised, never logged with the value)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_client import Collector
from test_client_ledger import at, clients_on

from client_sdk import wire
from tests.clock import Clock

JOINT = wire.parse_spec(
    "app.crashes",
    {
        "kind": "joint",
        "attributes": [
            {"name": "os", "domain": ["android", "ios"]},
            {"name": "crash", "domain": ["none", "oom", "anr"]},
        ],
        "epsilon": 1.5,
        "budget": {"reports_per_period": 2, "period": "day"},
    },
)


@pytest.fixture
def collector() -> Iterator[Collector]:
    yield from Collector.serving(JOINT)


@pytest.mark.parametrize("mode", ["memory", "durable"])
def test_a_tuple_is_one_report_charged_epsilon_once(
    collector: Collector, tmp_path: Path, mode: str
) -> None:
    with clients_on(collector, Clock(at(2027, 1, 13)), tmp_path, mode) as make:
        client = make(rng=random.Random(1))
        assert client.report("app.crashes", {"os": "ios", "crash": "oom"})
        assert client.report("app.crashes", ["android", "none"])
        assert client.report("app.crashes", {"os": "ios", "crash": "anr"}) is False  # budget
        assert client.stats()["dropped"]["budget"] == 1
        spent = client.privacy()["metrics"]["app.crashes"]
        assert (spent["today"]["reports"], spent["today"]["epsilon"]) == (2, 3.0)
        assert client.flush(timeout=5) is False  # one was refused
    assert len(collector.delivered) == 2
    for report in collector.delivered:
        assert JOINT.mechanism.check_payload(report["payload"]) == report["payload"]


def test_a_bad_tuple_is_dropped_as_invalid(
    collector: Collector, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with clients_on(collector, Clock(at(2027, 1, 13)), tmp_path, "memory") as make:
        client = make()
        assert client.report("app.crashes", {"os": "symbian-secret", "crash": "oom"}) is False
        assert client.report("app.crashes", {"os": "ios"}) is False
        assert client.stats()["dropped"]["invalid_value"] == 2
        assert client.privacy()["metrics"]["app.crashes"]["today"]["reports"] == 0
    assert "symbian-secret" not in caplog.text
    assert "a joint metric takes {attribute: label}" in caplog.text

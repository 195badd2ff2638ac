"""The collector's side of PRAM (specs with a matrix) and of the device-wide budget."""

from __future__ import annotations

import math
from typing import Any

import pytest
from flask.testing import FlaskClient

from collector.settings import ConfigError
from tests.collector.collector_helpers import ADMIN, define, make_app

AGES = {
    "domain": ["<18", "18-34", "35-64", "65+"],
    "mechanism": "pram",
    "options": {
        "matrix": [
            ["0.6", "0.25", "0.1", "0.05"],
            ["0.15", "0.6", "0.15", "0.1"],
            ["0.1", "0.15", "0.6", "0.15"],
            ["0.05", "0.1", "0.25", "0.6"],
        ]
    },
}
"""Age bands whose mistakes favour neighbours (the README's example); shared by the
PRAM tests."""


def test_a_pram_metric_is_created_with_epsilon_read_off_its_matrix(client: FlaskClient) -> None:
    d = define(client, "user.age", AGES)
    assert d.mechanism.name == "pram"
    assert d.mechanism.epsilon == pytest.approx(math.log(12))  # column 0: 0.6/0.05
    got = client.get("/v1/metrics/user.age").json
    assert got["mechanism"]["matrix"] == AGES["options"]["matrix"]


@pytest.mark.parametrize(
    ("matrix", "problem"),
    [
        ([["0.5", "0.5"], ["0.5", "0.5"]], "singular"),
        ([["0.6", "0.3"], ["0.3", "0.7"]], "not stochastic"),
        ([["1", "0"], ["0.5", "0.5"]], "ε = ∞"),
        ([["1e-10", "0.9999999999"], ["0.9999999999", "1e-10"]], "outside [0.0001, 20.0]"),
    ],
)
def test_a_bad_matrix_is_400_with_the_reason(
    client: FlaskClient, matrix: list[list[str]], problem: str
) -> None:
    spec = {"domain": ["a", "b"], "mechanism": "pram", "options": {"matrix": matrix}}
    response = client.put("/v1/metrics/bad.pram", json=spec, headers=ADMIN)
    assert response.status_code == 400
    assert any(problem in d for d in response.json["details"]), response.json


def test_epsilon_is_still_required_for_other_mechanisms(client: FlaskClient) -> None:
    response = client.put(
        "/v1/metrics/no.eps", json={"domain": ["a", "b"], "mechanism": "grr"}, headers=ADMIN
    )
    assert response.status_code == 400
    assert any("epsilon must be a number" in d for d in response.json["details"])


def test_the_device_budget_is_published(redis_db: Any) -> None:
    app = make_app(redis_db.url, DEVICE_EPSILON_PER_DAY=3, DEVICE_EPSILON_LIFETIME="150.5")
    client = app.test_client()
    caps = {"epsilon_per_day": 3.0, "epsilon_lifetime": 150.5}
    assert client.get("/v1/metrics").json == {"metrics": [], "device_budget": caps}
    define(client, "user.age", AGES)
    assert client.get("/v1/metrics/user.age").json["device_budget"] == caps
    # Only the daily cap: the lifetime one is null.
    one = make_app(redis_db.url, DEVICE_EPSILON_PER_DAY=2.5).test_client()
    assert one.get("/v1/metrics").json["device_budget"] == {
        "epsilon_per_day": 2.5,
        "epsilon_lifetime": None,
    }


def test_no_device_budget_leaves_the_definition_as_it_was(client: FlaskClient) -> None:
    define(client, "user.age", AGES)
    assert "device_budget" not in client.get("/v1/metrics/user.age").json


@pytest.mark.parametrize("value", [0, -1, "lots", float("inf"), True])
def test_a_bad_device_cap_stops_the_app(redis_db: Any, value: object) -> None:
    with pytest.raises(ConfigError, match="DEVICE_EPSILON_PER_DAY must be a positive number"):
        make_app(redis_db.url, DEVICE_EPSILON_PER_DAY=value)

"""Planning string metrics: σ₀ against simulated sketches, ``GET /v1/plan/strings`` and its
curve against :mod:`aggregator.stats.string_planning`, and ``ldp plan --kind string`` /
``ldp simulate --kind string``."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from aggregator.analysis.string_simulation import simulate_counts
from aggregator.analysis.vocabulary import synthetic_vocabulary
from aggregator.stats.discovery import decoys, estimate_values
from aggregator.stats.kinds import codec_for
from aggregator.stats.string_planning import (
    TRADEOFF_EPSILONS,
    collision_floor,
    detectable_curve,
    null_std,
    string_plan,
)
from aggregator.stats.strings import SketchEstimator
from client_sdk.mechanisms.strings import StringSketch
from ldp_server.app import create_server_app
from tests.cli_helpers import ldp

# -- σ₀ against simulation ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "words", "shares"),
    [
        # the LDP term: the metric's own shape at ε = 2, 2,000 equally common words (Σf² ≈ 0)
        ({"epsilon": 2.0}, 2000, np.full(2000, 1 / 2000)),
        # the collision floor: 8 rows × 16 cells and three words (Σf² = 0.38), where the
        # collision term is 96 % of σ₀²
        ({"epsilon": 4.0, "rows": 8, "cells": 16}, 3, np.array([0.5, 0.3, 0.2])),
    ],
    ids=["ldp-term", "collision-floor"],
)
def test_null_std_is_the_spread_of_an_absent_values_estimate(
    shape: dict[str, Any], words: int, shares: np.ndarray
) -> None:
    """400 sketches, each with a fresh salt and fresh noise, of 4,000 users: a full-length
    value no device sends is estimated with mean 0 and variance σ₀² (planning's formula,
    at the population's Σf²). Tolerances: 4 standard errors of the mean (s/√R) and of the
    sample variance (√((m₄ − s⁴)/R), its own fourth moment: the collision term is not
    normal)."""
    length, users, runs = 4, 4000, 400
    vocab = synthetic_vocabulary(words, length, seed=1)
    absent = decoys(length, length, 1, seed=9)
    got = []
    for run in range(runs):
        sketch = StringSketch(max_length=length, salt=f"{run + 1:04x}", **shape)
        counts, _ = simulate_counts(sketch, vocab, shares, users, np.random.default_rng(run))
        est = SketchEstimator(codec_for(sketch), counts)
        levels = [est.known(level) for level in range(length)]
        got.append(float(estimate_values(est, absent, levels).frequency[0]))
    e = np.array(got)
    var = e.var()
    m4 = ((e - e.mean()) ** 4).mean()
    sigma2 = null_std(StringSketch(max_length=length, **shape), users, float(shares @ shares)) ** 2
    assert abs(e.mean()) < 4 * np.sqrt(var / runs), (e.mean(), var)
    assert abs(var - sigma2) < 4 * np.sqrt((m4 - var**2) / runs), (var, sigma2)


def test_answers_are_consistent() -> None:
    """The users a frequency needs find it; the curve is the answer at each N and falls
    to the floor; below the floor no N suffices."""
    need = string_plan(4.0, 16, frequency=0.005, concentration=0.001)
    assert need.users is not None
    at = string_plan(4.0, 16, users=need.users, concentration=0.001)
    assert at.frequency == pytest.approx(0.005, rel=1e-5) and at.floor == need.floor
    sketch = StringSketch(epsilon=4.0)
    curve = detectable_curve(sketch, [1e2, 1e4, 1e6, 1e12], 0.001)
    assert curve == sorted(curve, reverse=True)
    assert curve[-1] == pytest.approx(collision_floor(sketch, 0.001), rel=1e-3)
    assert string_plan(4.0, 16, frequency=need.floor * 0.99, concentration=0.001).users is None
    assert collision_floor(sketch) == 0.0
    with pytest.raises(ValueError, match="exactly one"):
        string_plan(4.0, 16)


# -- the API ----------------------------------------------------------------------------------


@pytest.fixture
def client(redis_db: Any) -> Any:
    app = create_server_app(
        {"REDIS_URL": redis_db.url, "ADMIN_TOKEN": "admin-token-a-0001", "TESTING": True}
    )
    return app.test_client()


def test_plan_api_is_the_planner(client: Any) -> None:
    body = client.get("/v1/plan/strings?epsilon=4&max_length=12&frequency=0.005").json
    assert body == string_plan(4.0, 12, frequency=0.005).to_dict()
    body = client.get("/v1/plan/strings?epsilon=2&users=1000000&concentration=0.01").json
    assert body == string_plan(2.0, 16, users=1_000_000, concentration=0.01).to_dict()


def test_curve_api_is_the_planner_on_a_log_grid(client: Any) -> None:
    query = "epsilon=4&max_length=12&concentration=0.001&power=0.8"
    body = client.get(f"/v1/plan/strings/curve?{query}&points=31&n_max=1e10").json
    sketch = StringSketch(epsilon=4.0, max_length=12)
    n = np.geomspace(100, 1e10, 31)
    np.testing.assert_allclose(body["n"], n)
    np.testing.assert_allclose(body["frequency"], detectable_curve(sketch, n, 0.001, power=0.8))
    assert (body["rows"], body["cells"]) == (sketch.rows, sketch.cells)
    assert body["floor"] == pytest.approx(collision_floor(sketch, 0.001, power=0.8))
    assert body["floor"] < body["frequency"][-1] < 1.01 * body["floor"]
    # the curve at N and the answer at N agree
    at = client.get(f"/v1/plan/strings?{query}&users=100").json
    assert body["frequency"][0] == pytest.approx(at["frequency"])


@pytest.mark.parametrize(
    "query",
    [
        "max_length=16",
        "epsilon=0",
        "epsilon=x",
        "epsilon=4&max_length=0",
        "epsilon=4&max_length=3.5",
        "epsilon=4&concentration=2",
        "epsilon=4&power=1",
        "epsilon=4&points=1",
        "epsilon=4&n_min=10&n_max=5",
        "epsilon=4&n_max=1e13",
    ],
)
def test_curve_api_rejects_bad_parameters_with_json(client: Any, query: str) -> None:
    response = client.get(f"/v1/plan/strings/curve?{query}")
    assert response.status_code == 400 and response.json["error"]


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ("kind=string&max_length=8&epsilon=4", 200),
        ("kind=string", 200),
        ("kind=numeric", 400),
        ("kind=string&max_length=65", 400),
        ("kind=string&max_length=x", 400),
    ],
)
def test_the_explorer_page_opens_in_string_mode(client: Any, query: str, status: int) -> None:
    response = client.get(f"/ui/explorer?{query}")
    assert response.status_code == status
    if status == 200:
        page = response.get_data(as_text=True)
        assert 'data-kind="string"' in page and "/v1/plan/strings/curve" in page


# -- the CLI ----------------------------------------------------------------------------------


def test_ldp_plan_kind_string_finds_and_counts_users() -> None:
    code, out = ldp("plan", "--kind", "string", "-e", "4", "--max-length", "16", "--find", "0.005")
    need = string_plan(4.0, 16, frequency=0.005)
    assert code == 0, out
    assert f"{need.users:,} users find values of frequency ≥ 0.500%" in out
    assert "collision floor ignored" in out
    for e in TRADEOFF_EPSILONS:  # the table across ε
        assert f"{string_plan(e, 16, frequency=0.005).users:,}" in out
    code, out = ldp("plan", "--kind", "string", "-e", "4", "-L", "16", "--users", "1000000")
    assert code == 0 and f"{string_plan(4.0, 16, users=10**6).frequency:.3%}" in out
    code, out = ldp("plan", "--kind", "string", "-e", "3", "-n", "10000", "--concentration", "0.01")
    floor = string_plan(3.0, 16, users=10_000, concentration=0.01).floor
    assert code == 0 and f"collision floor {floor:.3%} at Σf² = 0.01" in out
    code, out = ldp("plan", "--kind", "string", "-e", "1", "-n", "100")
    assert code == 0 and "too few to find any value" in out and "none (over 100 %)" in out


def test_ldp_plan_kind_string_json_is_the_api_answer() -> None:
    args = ("-e", "2.5", "-L", "8", "--find", "0.02", "--power", "0.8", "--json")
    code, out = ldp("plan", "--kind", "string", *args)
    assert code == 0, out
    body = json.loads(out)
    want = string_plan(2.5, 8, frequency=0.02, power=0.8)
    assert {k: v for k, v in body.items() if k != "by_epsilon"} == want.to_dict()
    assert [r["epsilon"] for r in body["by_epsilon"]] == sorted({2.5, *TRADEOFF_EPSILONS})
    assert body["by_epsilon"][2] == want.to_dict()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--kind", "string", "-e", "4", "-k", "8", "--find", "0.1"), "--domain-size is not for"),
        (("--kind", "string", "-e", "4", "-w", "0.01"), "--width is not for --kind string"),
        (("--kind", "string", "-e", "4", "-n", "9", "--matrix", "[[1]]"), "--matrix is not for"),
        (("--kind", "string", "-e", "4", "-n", "9", "-b", "0.1"), "--fake-fraction is not"),
        (("--kind", "string", "-e", "4"), "exactly one of --users and --find"),
        (("--kind", "string", "-e", "4", "-n", "9", "--find", "0.1"), "exactly one of"),
        (("--kind", "string", "-e", "0", "-n", "9"), "epsilon must be finite"),
        (("--kind", "string", "-e", "4", "-L", "65", "-n", "9"), "65 is not in the range"),
        (("--kind", "string", "-e", "4", "--find", "1"), "1.0 is not in the range"),
        (("-e", "4", "-k", "8", "--find", "0.1"), "--find is for string metrics"),
        (("-e", "4", "-k", "8", "-n", "9", "-L", "8"), "--max-length is for string metrics"),
        (("-e", "4", "-n", "9"), "Missing option '--domain-size'"),
        (("--kind", "numeric", "-e", "4", "-n", "9"), "'numeric' is not one of"),
    ],
)
def test_ldp_plan_refuses_options_of_the_other_kind(args: tuple[str, ...], message: str) -> None:
    code, out = ldp("plan", *args)
    assert code == 2, out
    assert message in out and "Traceback" not in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--kind", "string", "-e", "4", "-n", "9", "-m", "oue"), "--mechanism is not for"),
        (("--kind", "string", "-e", "4", "-n", "9", "-k", "8"), "--domain-size is not for"),
        (("--kind", "string", "-e", "4", "-n", "9", "-r", "3"), "--reps is not for"),
        (("--kind", "string", "-e", "4", "-n", "9", "-L", "2"), "at least 3"),
        (("-m", "oue", "-e", "1", "-k", "8", "-n", "9", "--zipf-s", "2"), "--zipf-s is for"),
        (("-e", "1", "-k", "8", "-n", "9"), "Missing option '--mechanism'"),
        (("-m", "oue", "-e", "1", "-n", "9"), "Missing option '--domain-size'"),
    ],
)
def test_ldp_simulate_refuses_options_of_the_other_kind(
    args: tuple[str, ...], message: str
) -> None:
    code, out = ldp("simulate", *args)
    assert code == 2, out
    assert message in out and "Traceback" not in out


def test_ldp_simulate_kind_string_is_seeded_and_scored() -> None:
    args = ("-e", "6", "-L", "6", "-n", "20000", "--vocabulary", "300", "--seed", "3")
    code, out = ldp("simulate", "--kind", "string", *args, "--json")
    assert code == 0, out
    body = json.loads(out)
    again = json.loads(ldp("simulate", "--kind", "string", *args, "--json")[1])
    body.pop("discovery_seconds"), again.pop("discovery_seconds")
    assert body == again
    assert body["users"] == 20000 and body["found"] >= 1 and body["top20_precision"] >= 0.9
    code, out = ldp("simulate", "--kind", "string", *args)
    assert code == 0 and "top-20: precision" in out

"""The overview's device-wide spend, and a PRAM metric through the server app's APIs."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from test_dashboard_api import ADMIN_TOKEN, bearer, define, make

from aggregator.stats.accounting import UNBOUNDED_NAMED
from aggregator.stream.worker import Worker
from client_sdk.wire import build_report
from tests.collector.test_collector_pram_device import AGES  # the age-band matrix


def test_the_overview_adds_up_the_most_a_device_can_spend_per_day(redis_db: Any) -> None:
    client = make(redis_db.url, DEVICE_EPSILON_PER_DAY=5, DEVICE_EPSILON_LIFETIME=300).test_client()
    daily = {"reports_per_period": 2, "period": "day"}
    define(client, "a.daily", {"domain": ["x", "y"], "epsilon": 0.5, "budget": daily})
    weekly = {"reports_per_period": 3, "period": "week"}  # all 3 may fall on one day
    define(client, "a.weekly", {"domain": ["x", "y"], "epsilon": 1.0, "budget": weekly})
    memo = {
        "domain": ["x", "y", "z"],
        "epsilon": 1.0,
        "mechanism": "grr",
        "longitudinal": {"permanent_epsilon": 2.0},
        "budget": {"reports_per_period": 5, "period": "day"},
    }
    define(client, "a.memo", memo)  # 5 × 1 = 5, but at most ε∞ = 2
    overview = client.get("/v1/overview", headers=bearer(ADMIN_TOKEN)).json
    per_day = {r["name"]: r["epsilon_per_day_max"] for r in overview["metrics"]}
    assert per_day == {"a.daily": 1.0, "a.weekly": 3.0, "a.memo": 2.0}
    assert overview["device"] == {
        "epsilon_per_day_max": 6.0,
        "unbounded": [],
        "unbounded_total": 0,
        "epsilon_per_day_cap": 5.0,
        "epsilon_lifetime_cap": 300.0,
    }
    page = client.get("/", headers=bearer(ADMIN_TOKEN)).text
    assert "ε = 6" in page and "ε = 5 per day" in page and "ε = 300 per lifetime" in page
    define(client, "a.free", {"domain": ["x", "y"], "epsilon": 1.0})
    overview = client.get("/v1/overview", headers=bearer(ADMIN_TOKEN)).json
    assert overview["device"]["epsilon_per_day_max"] is None
    assert overview["device"]["unbounded"] == ["a.free"]
    page = client.get("/", headers=bearer(ADMIN_TOKEN)).text
    assert "unbounded" in page and "a.free has no budget" in page


def test_the_device_spend_names_a_few_unbounded_metrics_and_counts_them_all(
    redis_db: Any,
) -> None:
    client = make(redis_db.url).test_client()
    for i in range(UNBOUNDED_NAMED + 5):
        define(client, f"free.m{i:02d}", {"domain": ["x", "y"], "epsilon": 1.0})
    device = client.get("/v1/overview", headers=bearer(ADMIN_TOKEN)).json["device"]
    assert device["epsilon_per_day_max"] is None
    assert device["unbounded"] == [f"free.m{i:02d}" for i in range(UNBOUNDED_NAMED)]
    assert device["unbounded_total"] == UNBOUNDED_NAMED + 5
    page = client.get("/", headers=bearer(ADMIN_TOKEN)).text
    assert f"free.m{UNBOUNDED_NAMED - 1:02d} and 5 more have no budget" in page


def test_without_caps_the_overview_says_none(redis_db: Any) -> None:
    client = make(redis_db.url).test_client()
    overview = client.get("/v1/overview", headers=bearer(ADMIN_TOKEN)).json
    assert overview["device"]["epsilon_per_day_cap"] is None
    assert overview["device"]["epsilon_per_day_max"] == 0.0


def test_a_pram_metric_is_estimated_and_shown(redis_db: Any) -> None:
    client = make(redis_db.url).test_client()
    d = define(client, "user.age", AGES)
    rng = random.Random(11)
    truth = [0.1, 0.4, 0.35, 0.15]
    values = [v for v, f in enumerate(truth) for _ in range(round(f * 4000))]
    for start in range(0, len(values), 1000):
        body = {"reports": [build_report(d, v, rng) for v in values[start : start + 1000]]}
        assert client.post("/v1/reports", json=body).status_code == 202
    Worker(redis_db.client(), handle_signals=False).run(once=True)
    est = client.get("/v1/estimates/user.age", headers=bearer(ADMIN_TOKEN)).json
    assert est["n"] == 4000 and est["mechanism"] == "pram"
    assert est["estimates"][0]["cs_low"] is None and "no confidence sequence" in est["anytime_note"]
    for row, f in zip(est["estimates"], truth, strict=True):
        assert abs(row["frequency"] - f) < 4.5 * row["std_error"]
        assert row["ci_low"] < row["frequency"] < row["ci_high"]
    assert est["interval"] == "score"
    page = client.get("/ui/metric/user.age", headers=bearer(ADMIN_TOKEN))
    assert page.status_code == 200 and "pram" in page.text
    assert f"{math.log(12):.3g}" in page.text or "2.48" in page.text
    overview = client.get("/v1/overview", headers=bearer(ADMIN_TOKEN)).json
    (row,) = overview["metrics"]
    assert row["mechanism"] == "pram" and row["epsilon"] == pytest.approx(math.log(12))


def test_plan_shows_pram_when_given_its_matrix(redis_db: Any) -> None:
    import json

    client = make(redis_db.url).test_client()
    matrix = json.dumps(AGES["options"]["matrix"])
    auth = bearer(ADMIN_TOKEN)
    plain = client.get("/v1/plan?epsilon=1&k=4&users=1000", headers=auth).json
    assert all(r["mechanism"] != "pram" for r in plain["rows"])
    got = client.get(
        "/v1/plan",
        query_string={"epsilon": 1, "k": 4, "users": 1000, "matrix": matrix},
        headers=auth,
    ).json  # noqa: E501
    (row,) = [r for r in got["rows"] if r["mechanism"] == "pram"]
    assert row["auto"] is False and got["auto"] != "pram"
    from client_sdk import mechanisms

    m = mechanisms.create("pram", matrix=AGES["options"]["matrix"])
    assert row["variance_star"] == pytest.approx(m.variance_star())
    assert row["half_width"] == pytest.approx(
        1.959964 * math.sqrt(m.variance_star() / 1000), rel=1e-5
    )
    curve = client.get(
        "/v1/plan/curve",
        query_string={"epsilon": 1, "k": 4, "mechanism": "pram", "matrix": matrix},
        headers=auth,
    ).json  # noqa: E501
    (mine,) = [c for c in curve["curves"] if c["mechanism"] == "pram"]
    assert mine["current"] is True
    for k, error in ((4, "is 2×2 for 4 values"), (2, "singular")):
        bad = client.get(
            "/v1/plan",
            query_string={"epsilon": 1, "k": k, "users": 10, "matrix": "[[0.5,0.5],[0.5,0.5]]"},
            headers=auth,
        )
        assert bad.status_code == 400 and error in bad.json["error"], k
    alone = client.get("/v1/plan/curve?epsilon=1&k=4&mechanism=pram", headers=auth)
    assert alone.status_code == 400 and "needs its matrix" in alone.json["error"]
    define(client, "user.age", AGES)
    page = client.get("/ui/metric/user.age/explorer", headers=auth)
    assert page.status_code == 200 and "0.25" in page.text  # the matrix is in the page data


def test_ldp_plan_shows_pram_and_refuses_bad_matrices(tmp_path: Any) -> None:
    import json

    from click.testing import CliRunner

    from client_sdk import mechanisms
    from ldp_server.cli import main

    matrix = AGES["options"]["matrix"]
    args = ["plan", "-e", "1", "-k", "4", "-n", "1000", "--json", "--matrix", json.dumps(matrix)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    (row,) = [r for r in rows if r["name"] == "pram"]
    assert row["auto"] is False
    assert row["variance_star"] == pytest.approx(
        mechanisms.create("pram", matrix=matrix).variance_star()
    )
    path = tmp_path / "m.json"
    path.write_text(json.dumps([["0.5", "0.5"], ["0.5", "0.5"]]))
    bad = CliRunner().invoke(
        main, ["plan", "-e", "1", "-k", "2", "-n", "10", "--matrix", f"@{path}"]
    )
    assert bad.exit_code == 2 and "--matrix: pram's matrix is singular" in bad.output
    zero = CliRunner().invoke(
        main, ["plan", "-e", "1", "-k", "2", "-n", "10", "--matrix", "[[1, 0], [0.5, 0.5]]"]
    )
    assert zero.exit_code == 2 and "ε = ∞" in zero.output

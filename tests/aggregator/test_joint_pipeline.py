"""A joint metric end to end: PUT the spec, POST SDK reports, the real worker on a real
Redis, then the estimates API's marginals (JSON and CSV) from the committed counters."""

from __future__ import annotations

import csv
import io
import json
import random
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from aggregator.query.window import read_counts
from aggregator.stats.joint import estimate_marginal
from aggregator.stats.joint_codec import JointCodec
from client_sdk.wire import build_report
from ldp_server.cli import main
from tests.ingest_helpers import ADMIN, app_client, define, post_and_count

SPEC = {
    "kind": "joint",
    "attributes": [
        {"name": "os", "domain": ["android", "ios", "web"]},
        {"name": "version", "domain": ["1.0", "1.1", "2.0", "2.1"]},
        {"name": "crash", "domain": ["none", "oom", "anr"]},
    ],
    "epsilon": 2.0,
    "description": "crashes by OS and version",
}


@pytest.fixture
def web(redis_db: Any) -> Any:
    return app_client(redis_db.url)


def tuples(n: int, seed: int) -> list[dict[str, str]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        os_ = rng.choices(["android", "ios", "web"], [5, 3, 2])[0]
        version = rng.choice(["1.0", "1.1", "2.0", "2.1"])
        crash = "oom" if os_ == "android" and rng.random() < 0.4 else rng.choice(["none", "anr"])
        out.append({"os": os_, "version": version, "crash": crash})
    return out


def test_joint_metric_through_the_worker_and_estimates_api(
    redis_db: Any, web: Any, tmp_path: Any
) -> None:
    definition = define(web, "app.crashes", SPEC)
    assert definition.kind == "joint" and "pairwise" in definition.mechanism_reason
    rng = random.Random(3)
    values = tuples(3000, 5)
    reports = [build_report(definition, v, rng) for v in values]
    post_and_count(web, redis_db.client(), reports)

    # exactly the counters the codec gives for the payloads sent: nothing lost or doubled
    expected = JointCodec(definition.joint).decode([r["payload"] for r in reports])
    counts = read_counts(redis_db.client(), definition)
    assert counts.n == 3000
    assert np.array_equal(counts.support, expected)

    overview = web.get("/v1/overview")
    assert overview.status_code == 200, overview.json
    assert "app.crashes" in overview.get_data(as_text=True)
    assert web.get("/ui/metric/app.crashes").status_code == 200
    assert web.get("/").status_code == 200
    body = web.get("/v1/estimates/app.crashes").json
    assert body["kind"] == "joint" and body["n"] == 3000
    assert [m["attributes"] for m in body["marginals"]] == [["os"], ["version"], ["crash"]]
    pair = web.get("/v1/estimates/app.crashes?marginal=crash&by=os").json["marginals"]
    assert len(pair) == 1 and pair[0]["attributes"] == ["os", "crash"]
    cells = pair[0]["cells"]
    assert cells[0]["cell"] == ["android", "none"] and len(cells) == 9
    est = estimate_marginal(definition.joint, expected, (0, 2))
    assert [c["frequency"] for c in cells] == pytest.approx(est.frequencies.tolist(), rel=1e-12)
    assert [c["consistent"] for c in cells] == pytest.approx(est.consistent.tolist(), rel=1e-9)
    truth = sum(v["os"] == "android" and v["crash"] == "oom" for v in values) / 3000
    oom = cells[1]
    assert oom["ci_low"] <= truth <= oom["ci_high"]  # 95 %: fixed seed, checked once
    assert oom["cs_low"] < oom["ci_low"] < oom["ci_high"] < oom["cs_high"]  # the sequence: wider
    text = web.get("/v1/estimates/app.crashes?marginal=os,crash&format=csv").get_data(as_text=True)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 9 and rows[1]["cell"] == "android×oom"
    assert float(rows[1]["frequency"]) == pytest.approx(oom["frequency"])

    # ldp export: every cell of every 1- and 2-way marginal, the API's numbers
    out = tmp_path / "joint.csv"
    result = CliRunner().invoke(
        main, ["export", "app.crashes", "--out", str(out), "--redis-url", redis_db.url]
    )
    assert result.exit_code == 0, result.output
    exported = [r for r in csv.DictReader(out.open()) if r["window"] == "all"]
    assert len(exported) == 3 + 4 + 3 + 12 + 9 + 12  # 1-way, then os×version, os×crash, …
    row = next(r for r in exported if r["value"] == "os=android;crash=oom")
    assert float(row["estimate"]) == pytest.approx(oom["frequency"], rel=1e-12)
    assert float(row["norm_sub"]) == pytest.approx(oom["consistent"], rel=1e-9)
    assert row["kind"] == "joint" and int(row["n"]) == pair[0]["n"]
    shown = CliRunner().invoke(
        main, ["estimates", "app.crashes", "--format", "json", "--redis-url", redis_db.url]
    )
    assert shown.exit_code == 0, shown.output
    assert len(json.loads(shown.output)) == len(exported)
    table = CliRunner().invoke(main, ["estimates", "app.crashes", "--redis-url", redis_db.url])
    assert table.exit_code == 0 and "n = 3,000" in table.output
    assert "consistent estimate" in table.output


def test_bad_joint_queries_and_specs_are_4xx(web: Any) -> None:
    assert web.put("/v1/metrics/app.crashes", json=SPEC, headers=ADMIN).status_code == 201
    for query, words in (
        ("marginal=cpu", "must name attributes"),
        ("marginal=os,os", "named twice"),
        ("marginal=os,version,crash", "no estimate of a 3-way marginal"),
    ):
        got = web.get(f"/v1/estimates/app.crashes?{query}")
        assert got.status_code == 400 and words in got.json["error"], got.json
    assert web.get("/v1/estimates/app.crashes/trend").status_code == 400
    bad = {**SPEC, "attributes": [{"name": "os", "domain": ["a", "b"]}]}
    got = web.put("/v1/metrics/app.bad", json=bad, headers=ADMIN)
    assert got.status_code == 400
    assert "attributes must be a list of 2 to 8" in got.json["details"][0]
    report = {"metric": "app.crashes", "version": 1, "id": "0" * 32, "payload": {"g": 7, "v": 0}}
    got = web.post("/v1/reports", json={"reports": [report]})
    assert got.status_code == 400 and "'g' must be an int in range(0, 3)" in str(got.json)


def test_ldp_plan_for_a_joint_metric() -> None:
    result = CliRunner().invoke(
        main,
        ["plan", "--kind", "joint", "-e", "2", "--sizes", "3,4,16", "--users", "100000", "--json"],
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    auto = [r for r in rows if r["auto"]]
    assert {r["layout"] for r in auto} == {"marginals"} and len(auto) == 3 + 3
    pair = next(r for r in auto if r["attributes"] == [0, 1])
    assert pair["half_width"] == pytest.approx(
        1.959963984540054 * (pair["variance_star"] / 1e5) ** 0.5
    )
    bad = CliRunner().invoke(
        main, ["plan", "--kind", "joint", "-e", "2", "--sizes", "3", "--users", "9"]
    )
    assert bad.exit_code == 2 and "2 to 8 attributes" in bad.output

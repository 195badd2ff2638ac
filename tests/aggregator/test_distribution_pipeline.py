"""A distribution metric end to end: PUT the spec, POST SDK reports, the real worker on a
real Redis, then the estimates API's histogram, CDF band, ranges and quantiles, the CLI
and the dashboard page, from the committed counters."""

from __future__ import annotations

import json
import random
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from aggregator.query.window import read_counts
from aggregator.stats.distribution_codec import HistogramCodec
from aggregator.stream.worker import Worker
from client_sdk.wire import MetricDefinition, build_report
from ldp_server.app import create_server_app
from ldp_server.cli import main

TOKEN = "test-admin-token-distribution"
SPEC = {
    "kind": "numeric",
    "range": [1, 10000],
    "epsilon": 4.0,
    "distribution": {"bins": 64, "scale": "log"},
    "description": "page load time (ms)",
}


@pytest.fixture
def web(redis_db: Any) -> Any:
    app = create_server_app({"REDIS_URL": redis_db.url, "ADMIN_TOKEN": TOKEN, "TESTING": True})
    return app.test_client()


def test_distribution_metric_through_the_worker_and_estimates_api(redis_db: Any, web: Any) -> None:
    admin = {"Authorization": f"Bearer {TOKEN}"}
    created = web.put("/v1/metrics/page.load_ms", json=SPEC, headers=admin)
    assert created.status_code == 201, created.json
    definition = MetricDefinition.from_dict(created.json)
    assert definition.kind == "distribution" and "B = " in definition.mechanism_reason
    rng = random.Random(3)
    gen = np.random.default_rng(5)
    values = np.clip(gen.lognormal(np.log(300), 0.8, 4000), 1, 10000).tolist()
    reports = [build_report(definition, v, rng) for v in values]
    for start in range(0, len(reports), 500):
        body = {"reports": reports[start : start + 500]}
        assert web.post("/v1/reports", json=body).status_code == 202
    Worker(redis_db.client(), handle_signals=False, block_ms=10).run(once=True)

    # exactly the counters the codec gives for the payloads sent: nothing lost or doubled
    expected = HistogramCodec(definition.histogram).decode([r["payload"] for r in reports])
    counts = read_counts(redis_db.client(), definition)
    assert counts.n == 4000 and np.array_equal(counts.support, expected)

    body = web.get("/v1/estimates/page.load_ms?range=100,1000&quantiles=0.5,0.95").json
    assert body["kind"] == "distribution" and body["n"] == 4000 and body["ready"]
    assert len(body["bins"]) == 64 and len(body["cdf"]) == 63
    assert sum(b["share"] for b in body["bins"]) == pytest.approx(1.0)
    assert body["band_critical"] > 1.96
    (share,) = body["ranges"]
    low, high = share["low"], share["high"]
    assert low <= 100 and high >= 1000  # widened outward to bin edges
    truth = np.mean([low <= v < high for v in values])
    assert share["ci_low"] <= truth <= share["ci_high"]  # 95 %: fixed seed, checked once
    p50, p95 = body["quantiles"]
    for q, p in ((p50, 0.5), (p95, 0.95)):
        true = float(np.quantile(values, p))
        assert q["p"] == p and q["ci_low"] <= true <= q["ci_high"]
        assert q["ci_low"] <= q["value"] <= q["ci_high"]
    for bad in ("range=5", "range=9,1", "range=a,b", "quantiles=0.5,1", "format=csv"):
        answer = web.get(f"/v1/estimates/page.load_ms?{bad}")
        assert answer.status_code == 400, (bad, answer.json)

    assert web.get("/v1/overview").status_code == 200
    page = web.get("/ui/metric/page.load_ms")
    assert page.status_code == 200 and "p95" in page.get_data(as_text=True)
    assert web.get("/").status_code == 200

    shown = CliRunner().invoke(main, ["estimates", "page.load_ms", "--redis-url", redis_db.url])
    assert shown.exit_code == 0, shown.output
    assert "p95" in shown.output and "n = 4,000" in shown.output
    as_json = CliRunner().invoke(
        main, ["estimates", "page.load_ms", "--format", "json", "--redis-url", redis_db.url]
    )
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.output)

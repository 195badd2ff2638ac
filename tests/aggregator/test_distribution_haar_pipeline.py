"""A HaarHRR distribution metric end to end: PUT a spec declaring ``"mechanism": "haar"``,
POST SDK reports to the real collector (bad payloads refused with a message), the real
worker on a real Redis, then the estimates API's histogram, CDF band, ranges and
quantiles, read by HaarHRR's own estimator."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from aggregator.query.window import read_counts
from aggregator.stats.distribution_codec import HaarCodec
from client_sdk.mechanisms.haar import HaarHRR
from client_sdk.wire import build_report
from ldp_server.cli import main
from tests.ingest_helpers import app_client, define, load_time_spec, post_and_count

SPEC = load_time_spec(2.0, mechanism="haar")
N = 4000


@pytest.fixture
def web(redis_db: Any) -> Any:
    return app_client(redis_db.url)


def test_haar_metric_through_the_collector_worker_and_estimates_api(
    redis_db: Any, web: Any
) -> None:
    definition = define(web, "page.load_ms", SPEC)
    assert isinstance(definition.mechanism, HaarHRR) and definition.kind == "distribution"

    # the collector's strict checks: each bad payload is a 400 saying what is wrong
    good = build_report(definition, 300.0, random.Random(1))
    for payload, says in (
        ({"l": 6, "r": 0, "y": 1}, "'l'"),
        ({"l": 2, "r": 4, "y": 1}, "'r'"),
        ({"l": 2, "r": 1, "y": 2}, "'y'"),
        ({"l": 2, "r": 1, "y": True}, "'y'"),
        ({"l": 2, "r": 1}, "haar payload"),
        ({"l": 1, "b": "AA=="}, "haar payload"),
    ):
        refused = web.post("/v1/reports", json={"reports": [{**good, "payload": payload}]})
        assert refused.status_code == 400, (payload, refused.json)
        assert says in str(refused.json), (payload, refused.json)

    rng = random.Random(3)
    gen = np.random.default_rng(5)
    values = np.clip(gen.lognormal(np.log(300), 0.8, N), 1, 10000).tolist()
    reports = [build_report(definition, v, rng) for v in values]
    post_and_count(web, redis_db.client(), reports)

    # exactly the counters the codec gives for the payloads sent: nothing lost or doubled
    expected = HaarCodec(definition.mechanism).decode([r["payload"] for r in reports])
    counts = read_counts(redis_db.client(), definition)
    assert counts.n == N and np.array_equal(counts.support, expected)

    true_median = float(np.median(values))
    query = f"range=1,{true_median}&quantiles=0.5,0.95"
    answer = web.get(f"/v1/estimates/page.load_ms?{query}")
    assert answer.status_code == 200, answer.json
    body = answer.json
    assert body["kind"] == "distribution" and body["mechanism"] == "haar"
    assert body["n"] == N and body["ready"] and sum(body["n_levels"]) == N
    assert len(body["bins"]) == 64 and len(body["cdf"]) == 63
    assert sum(b["share"] for b in body["bins"]) == pytest.approx(1.0)
    assert body["band_critical"] > 1.96

    # the range [1, true median) widened outward to bin edges: its true share against the
    # estimate, within 3 standard errors of HaarHRR's exact variance (fixed seed)
    (share,) = body["ranges"]
    low, high = share["low"], share["high"]
    truth = float(np.mean([low <= v < high for v in values]))
    assert abs(share["share"] - truth) <= 3 * share["std_error"]
    c = definition.mechanism.scale_factor
    h = definition.mechanism.height
    # ≤ Σ_l c²·2·(1/2)²/n_l, n_l ≈ N/h: the variance formula's bound for any range
    assert share["std_error"] ** 2 <= h * h * c * c / 2 / N * 1.2
    assert share["ci_low"] <= truth <= share["ci_high"]

    # the p50 interval (read off the simultaneous band) covers the true median
    p50, p95 = body["quantiles"]
    for q, p in ((p50, 0.5), (p95, 0.95)):
        true = float(np.quantile(values, p))
        assert q["p"] == p and q["ci_low"] <= true <= q["ci_high"], (q, true)
        assert q["ci_low"] <= q["value"] <= q["ci_high"]
    for point in body["cdf"]:
        true_cdf = float(np.mean(np.array(values) < point["value"]))
        assert point["band_low"] <= true_cdf <= point["band_high"]

    # the trend, the dashboard page and the CLI read it with the same estimator
    trend = web.get("/v1/estimates/page.load_ms/trend?granularity=hour&quantiles=0.5")
    assert trend.status_code == 200, trend.json
    assert sum(p["n"] for p in trend.json["windows"]) == N
    page = web.get("/ui/metric/page.load_ms")
    assert page.status_code == 200 and "HaarHRR" in page.get_data(as_text=True)
    shown = CliRunner().invoke(main, ["estimates", "page.load_ms", "--redis-url", redis_db.url])
    assert shown.exit_code == 0 and "p95" in shown.output, shown.output

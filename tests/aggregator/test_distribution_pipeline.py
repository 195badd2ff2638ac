"""A distribution metric end to end: PUT the spec, POST SDK reports, the real worker on a
real Redis, then the estimates API's histogram, CDF band, ranges and quantiles, the CLI
and the dashboard page, from the committed counters."""

from __future__ import annotations

import csv
import io
import json
import random
import time
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from aggregator.query.window import read_counts
from aggregator.stats.distribution_codec import HistogramCodec
from aggregator.stream.worker import Worker
from client_sdk.wire import MetricDefinition, build_report
from ldp_server.cli import main
from ldp_store import keys
from tests.ingest_helpers import ADMIN, app_client, define, load_time_spec, post_and_count

SPEC = load_time_spec(4.0, description="page load time (ms)")


@pytest.fixture
def web(redis_db: Any) -> Any:
    return app_client(redis_db.url)


def test_distribution_metric_through_the_worker_and_estimates_api(redis_db: Any, web: Any) -> None:
    definition = define(web, "page.load_ms", SPEC)
    assert definition.kind == "distribution" and "B = " in definition.mechanism_reason
    rng = random.Random(3)
    gen = np.random.default_rng(5)
    values = np.clip(gen.lognormal(np.log(300), 0.8, 4000), 1, 10000).tolist()
    reports = [build_report(definition, v, rng) for v in values]
    post_and_count(web, redis_db.client(), reports)

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
    for bad in ("range=5", "range=9,1", "range=a,b", "quantiles=0.5,1", "format=xml"):
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


def loaded(redis_db: Any, web: Any, values: list[float]) -> MetricDefinition:
    """The metric created and ``values`` reported through the worker."""
    created = web.put("/v1/metrics/page.load_ms", json=SPEC, headers=ADMIN)
    definition = MetricDefinition.from_dict(created.json)
    rng = random.Random(7)
    reports = [build_report(definition, v, rng) for v in values]
    for start in range(0, len(reports), 500):
        assert web.post("/v1/reports", json={"reports": reports[start : start + 500]}).status_code
    Worker(redis_db.client(), handle_signals=False, block_ms=10).run(once=True)
    return definition


def test_distribution_csv_from_the_estimates_api_the_export_api_and_ldp_export(
    redis_db: Any, web: Any
) -> None:
    """The same rows three ways: quantiles, the ranges asked, every bin and the CDF with
    its simultaneous band; equal to the JSON answer's numbers, and the band holds the
    true CDF at every edge (95 % simultaneous: a fixed seed, checked once)."""
    gen = np.random.default_rng(9)
    values = np.clip(gen.lognormal(np.log(300), 0.8, 4000), 1, 10000).tolist()
    loaded(redis_db, web, values)
    query = "range=100,1000&range=1,10000&quantiles=0.5,0.95"
    body = web.get(f"/v1/estimates/page.load_ms?{query}").json
    got = web.get(f"/v1/estimates/page.load_ms?{query}&format=csv")
    assert got.status_code == 200 and got.mimetype == "text/csv"
    rows = list(csv.DictReader(io.StringIO(got.get_data(as_text=True))))
    labels = [r["value"] for r in rows]
    assert labels[:4] == ["p50", "p95", "range [100, 1000)", "range [1, 10000)"]
    assert len(rows) == 2 + 2 + 64 + 63
    assert all(label.startswith("[") for label in labels[4:68])
    assert all(label.startswith("< ") for label in labels[68:])
    for row, q in zip(rows[:2], body["quantiles"], strict=True):
        assert float(row["estimate"]) == q["value"] and float(row["ci_high"]) == q["ci_high"]
    for row, r in zip(rows[2:4], body["ranges"], strict=True):
        assert float(row["estimate"]) == r["share"] and float(row["std_error"]) == r["std_error"]
    for row, b in zip(rows[4:68], body["bins"], strict=True):
        assert float(row["estimate"]) == b["share"] and float(row["ci_low"]) == b["ci_low"]
    for row, point in zip(rows[68:], body["cdf"], strict=True):
        assert float(row["band_low"]) == point["band_low"]
        truth = np.mean(np.array(values) < point["value"])
        assert float(row["band_low"]) <= truth <= float(row["band_high"])
        # the pointwise interval lies inside the band (c ≥ z)
        assert float(row["band_low"]) <= float(row["ci_low"]) <= float(row["ci_high"])
        assert float(row["ci_high"]) <= float(row["band_high"])

    exported = web.get(f"/v1/export/page.load_ms?{query}").json
    assert [r["value"] for r in exported["rows"]] == labels
    assert [r["estimate"] for r in exported["rows"]] == [float(r["estimate"]) for r in rows]
    assert exported["rows"][-1]["band_high"] == body["cdf"][-1]["band_high"]
    for bad in ("range=9,1", "quantiles=0,0.5"):
        assert web.get(f"/v1/export/page.load_ms?{bad}").status_code == 400

    out = CliRunner().invoke(
        main,
        ["export", "page.load_ms", "--out", "-", "--redis-url", redis_db.url]
        + ["--range", "100,1000", "--range", "1,10000", "--quantiles", "0.5,0.95"],
    )
    assert out.exit_code == 0, out.output
    every = list(csv.DictReader(io.StringIO(out.stdout)))
    assert {r["window"] for r in every} >= {"all"} and len(every) % len(labels) == 0
    lines = [r for r in every if r["window"] == "all"]  # the hour and the day too
    assert [r["value"] for r in lines] == labels
    assert [float(r["estimate"]) for r in lines] == [float(r["estimate"]) for r in rows]
    assert [r["band_low"] for r in lines[68:]] == [r["band_low"] for r in rows[68:]]
    for bad in (["--range", "9,1"], ["--range", "a"], ["--quantiles", "1.5"]):
        refused = CliRunner().invoke(
            main, ["export", "page.load_ms", "--out", "-", "--redis-url", redis_db.url, *bad]
        )
        assert refused.exit_code == 2 and "Traceback" not in refused.output, refused.output


def test_quantiles_over_time_hold_each_windows_own_answer(redis_db: Any, web: Any) -> None:
    """Three hours, each its own population (medians 100, 300, 1000 ms): the trend gives
    each hour's quantiles with the point estimate of that hour's own answer and an
    interval holding that answer's (the same standard errors under Bonferroni's c, at
    least the drawn one), and each p50 interval holds that hour's true median (the band's
    95 % simultaneous coverage: fixed seeds, checked once). The dashboard page asks for
    it."""
    definition = MetricDefinition.from_dict(
        web.put("/v1/metrics/page.load_ms", json=SPEC, headers=ADMIN).json
    )
    client = redis_db.client()
    stream = keys.stream_key(definition.name, definition.version)
    rng = random.Random(11)
    gen = np.random.default_rng(13)
    now_hour = int(time.time()) // 3600 * 3600
    truth = {}
    for age, median in zip((3, 2, 1), (100.0, 300.0, 1000.0), strict=True):
        start = (now_hour - age * 3600) * 1000
        window = "hour:" + time.strftime("%Y-%m-%dT%H", time.gmtime(start / 1000))
        values = np.clip(gen.lognormal(np.log(median), 0.5, 3000), 1, 10000)
        truth[window] = float(np.quantile(values, 0.5))
        pipe = client.pipeline(transaction=False)
        for i, v in enumerate(values.tolist()):
            payload = json.dumps(build_report(definition, v, rng)["payload"], separators=(",", ":"))
            pipe.xadd(stream, {"p": payload}, id=f"{start + i}-0")
        pipe.execute()
    Worker(client, handle_signals=False, block_ms=10).run(once=True)

    trend = web.get("/v1/estimates/page.load_ms/trend?granularity=hour&quantiles=0.5,0.9")
    assert trend.status_code == 200, trend.json
    points = trend.json["windows"]
    assert [p["window"] for p in points] == sorted(truth)
    for point in points:
        assert point["n"] == 3000 and point["ready"]
        own = web.get(f"/v1/estimates/page.load_ms?window={point['window']}&quantiles=0.5,0.9")
        assert point["band_critical"] >= own.json["band_critical"]
        for mine, theirs in zip(point["quantiles"], own.json["quantiles"], strict=True):
            assert mine["value"] == pytest.approx(theirs["value"], rel=1e-12)
            assert mine["ci_low"] <= theirs["ci_low"] and theirs["ci_high"] <= mine["ci_high"]
        p50 = point["quantiles"][0]
        assert p50["ci_low"] <= truth[point["window"]] <= p50["ci_high"]
    medians = [p["quantiles"][0]["value"] for p in points]
    assert medians == sorted(medians)  # the shift is seen: 100 → 300 → 1000 ms
    days = web.get("/v1/estimates/page.load_ms/trend?granularity=day").json["windows"]
    assert sum(p["n"] for p in days) == 9000
    assert [q["p"] for q in days[-1]["quantiles"]] == [0.5, 0.9, 0.95, 0.99]
    assert web.get("/v1/estimates/page.load_ms/trend?quantiles=2").status_code == 400
    page = web.get("/ui/metric/page.load_ms").get_data(as_text=True)
    assert "quantile-trend-chart" in page and "/v1/estimates/page.load_ms/trend" in page


def test_the_quantile_trend_follows_every_window_kept(redis_db: Any, web: Any) -> None:
    """45 hour windows (more than the 30 a band per window allowed): the trend returns
    every one, oldest first, each ready with its four quantiles."""
    definition = MetricDefinition.from_dict(
        web.put("/v1/metrics/page.load_ms", json=SPEC, headers=ADMIN).json
    )
    client = redis_db.client()
    stream = keys.stream_key(definition.name, definition.version)
    rng = random.Random(3)
    now_hour = int(time.time()) // 3600 * 3600
    pipe = client.pipeline(transaction=False)
    for age in range(45, 0, -1):
        start = (now_hour - age * 3600) * 1000
        for i in range(60):
            v = rng.lognormvariate(6.0, 0.5)
            payload = build_report(definition, min(v, 9999.0), rng)["payload"]
            pipe.xadd(
                stream, {"p": json.dumps(payload, separators=(",", ":"))}, id=f"{start + i}-0"
            )
    pipe.execute()
    Worker(client, handle_signals=False, block_ms=10).run(once=True)
    points = web.get("/v1/estimates/page.load_ms/trend?granularity=hour").json["windows"]
    assert len(points) == 45
    assert [p["window"] for p in points] == sorted(p["window"] for p in points)
    assert all(p["n"] == 60 and p["ready"] and len(p["quantiles"]) == 4 for p in points)

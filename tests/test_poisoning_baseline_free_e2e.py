"""Poisoning alarms that need no baseline, through the real read side (issue 29, item 6):
real Redis, the real stream worker, ``ldp serve``'s app; crafted reports through
``POST /v1/reports``.

* A fresh GRR metric (no earlier window): 200,000 honest reports on 4 of 64 values, then
  1 % crafted for one value. The floor alarm shows on the hour window, on the all-time
  window the dashboard opens with, in ``/v1/overview``, the overview page and
  ``/metrics`` (``granularity="all"``); the honest twin raises none.
* A string metric: 66,000 honest reports, then 400 crafted sketch-cell reports (0.6 %)
  for ``=WEBSERVICE("http://x")`` in 4 of the 8 rows of each level. The value is
  discovered, and the rows alarm names it in the string metric's estimates and, once
  that discovery is made, in the overview.

The honest bulk is appended to the stream with entry ids in the current hour (the same
window as the collector's), which is faster than 200,000 reports through the collector.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from markupsafe import escape
from poisoning_helpers import alarm_gauges, append_this_hour

from aggregator.analysis.vocabulary import synthetic_vocabulary, zipf_shares
from aggregator.stats.kinds import codec_for
from aggregator.stream.worker import Worker
from client_sdk.mechanisms.strings import normalise
from client_sdk.wire import MetricDefinition, new_report_id
from ldp_server.app import create_server_app
from ldp_store import schema

ADMIN = "admin-e2e-fresh-metric-token"
K, N = 64, 200_000
FAKES = round(0.01 * N / 0.99)


def wait_for_a_whole_window() -> None:
    """Not across an hour boundary: the current window must hold all of its reports."""
    left = schema.HOUR_MS - int(time.time() * 1000) % schema.HOUR_MS
    if left < 120_000:
        time.sleep(left / 1000 + 1)


def app_and_client(redis_db: Any) -> tuple[Any, Any]:
    config = {"REDIS_URL": redis_db.url, "ADMIN_TOKEN": ADMIN, "TESTING": True}
    config.update(SOURCE_REQUESTS_PER_SECOND=0, SOURCE_REPORTS_PER_MINUTE=0)
    app = create_server_app(config)
    return app, app.test_client()


def put(web: Any, name: str, spec: dict[str, Any]) -> MetricDefinition:
    response = web.put(
        f"/v1/metrics/{name}", json=spec, headers={"Authorization": f"Bearer {ADMIN}"}
    )
    assert response.status_code in (200, 201), response.json
    return MetricDefinition.from_dict(response.json)


def post(web: Any, definition: MetricDefinition, payloads: list[dict[str, Any]]) -> None:
    for i in range(0, len(payloads), 1000):
        reports = [
            {
                "metric": definition.name,
                "version": definition.version,
                "id": new_report_id(),
                "payload": p,
            }
            for p in payloads[i : i + 1000]
        ]
        response = web.post("/v1/reports", json={"reports": reports})
        assert response.status_code == 202 and response.json["accepted"] == len(reports)


def test_crafted_grr_reports_on_a_fresh_metric_raise_the_floor_alarm(redis_db: Any) -> None:
    wait_for_a_whole_window()
    app, web = app_and_client(redis_db)
    spec = {"domain": [f"page-{i}" for i in range(K)], "epsilon": 1.0, "mechanism": "grr"}
    client = redis_db.client()
    gen = np.random.default_rng(29)
    definitions = {name: put(web, name, spec) for name in ("fresh.page", "fresh.twin")}
    for definition in definitions.values():
        codec = codec_for(definition.oracle)
        values = gen.choice(4, size=N)  # most of the domain unused, as in many metrics
        append_this_hour(client, definition, codec.to_payloads(codec.encode(values, gen)))
    post(web, definitions["fresh.page"], [{"v": K - 1}] * FAKES)
    Worker(client, handle_signals=False, block_ms=50).run(once=True)

    hour = schema.window_names(int(time.time() * 1000))[0]
    body = web.get("/v1/estimates/fresh.page").json  # the all-time window, the default
    assert body["n"] == N + FAKES
    kinds = {(a["kind"], a["window"]) for a in body["alarms"]}
    assert {("floor", "all"), ("floor", hour)} <= kinds, body["alarms"]
    alarm = next(a for a in body["alarms"] if a["window"] == "all")
    assert alarm["p_value"] <= alarm["alpha"] and alarm["statistic"] <= alarm["threshold"]
    target = next(e for e in body["estimates"] if e["value"] == f"page-{K - 1}")
    assert target["frequency"] > 0.3  # 0 % → ≈ 38 %: what the alarm is about
    twin = web.get("/v1/estimates/fresh.twin").json
    assert twin["n"] == N and twin["alarms"] == []

    gauges = alarm_gauges(web.get("/metrics").text)
    assert gauges[("fresh.page", "floor", "all")] == 1
    assert gauges[("fresh.page", "floor", "hour")] == 1
    assert sum(v for (metric, _, _), v in gauges.items() if metric == "fresh.twin") == 0
    overview = {m["name"]: m for m in web.get("/v1/overview").json["metrics"]}
    assert alarm in overview["fresh.page"]["alarms"]
    assert overview["fresh.twin"]["alarms"] == []
    assert str(escape(alarm["evidence"])) in web.get("/").text


TARGET = '=WEBSERVICE("http://x")'


def test_crafted_sketch_reports_raise_the_rows_alarm_on_a_string_metric(redis_db: Any) -> None:
    wait_for_a_whole_window()
    app, web = app_and_client(redis_db)
    definition = put(web, "search.term", {"kind": "string", "epsilon": 8.0, "max_length": 16})
    sketch = definition.sketch
    gen = np.random.default_rng(400)
    vocab = synthetic_vocabulary(5_000, 16, seed=4)
    values = vocab[gen.choice(len(vocab), size=66_000, p=zipf_shares(5_000, 1.1))]
    codec = codec_for(sketch)
    append_this_hour(redis_db.client(), definition, codec.to_payloads(codec.encode(values, gen)))
    padded = normalise(TARGET, sketch.max_length)
    crafted = [
        {"l": i % sketch.levels, "r": r, "v": sketch.cell(padded, i % sketch.levels, r)}
        for i in range(400)
        for r in [(i // sketch.levels) % 4]
    ]
    post(web, definition, crafted)
    Worker(redis_db.client(), handle_signals=False, block_ms=50).run(once=True)

    body = web.get("/v1/estimates/search.term").json
    assert body["n"] == 66_400
    label = TARGET[: sketch.max_length]
    assert label in [e["value"] for e in body["estimates"]]  # discovered
    assert [a["kind"] for a in body["alarms"]] == ["rows"], body["alarms"]
    assert body["alarms"][0]["values"][0] == label and body["alarm_rate"] > 0
    page = web.get("/ui/metric/search.term").text
    assert 'id="alarms"' in page  # the banner strings.js fills from "alarms"
    # the overview shows the alarms of the discovery the estimates API just made
    overview = {m["name"]: m for m in web.get("/v1/overview").json["metrics"]}
    assert overview["search.term"]["alarms"] == body["alarms"]
    assert str(escape(body["alarms"][0]["evidence"])) in web.get("/").text

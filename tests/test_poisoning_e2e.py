"""Poisoning alarms through the real pipeline: real Redis, the real stream worker, the
collector and read side in one app (``ldp serve``'s), fed through ``POST /v1/reports``.

Six honest hours are in the stream first (appended with explicit entry ids in the past:
a window is the entries' arrival hour, and a test cannot wait six hours), then the
current hour's reports arrive through the collector: for one metric with 1 % fakes
running the maximal-gain attack on GRR, for its twin the same number of honest reports.
The attacked metric's alarm names the target in the API, ``/metrics`` and the overview
page; the honest twin raises none.
"""

from __future__ import annotations

import random
import time
from typing import Any

import numpy as np
from markupsafe import escape
from poisoning_helpers import alarm_gauges, append_past_hours, zipf_population

from aggregator.stream.worker import Worker
from client_sdk.wire import MetricDefinition, build_report
from ldp_server.app import create_server_app
from ldp_store import schema

ADMIN = "admin-e2e-token-01"
K, N = 16, 40_000
FAKES = N // 100
TARGET = "page-11"
PAST_HOURS = 6


def domain() -> list[str]:
    return [f"page-{i}" for i in range(K)]


def post_current_hour(web: Any, definition: MetricDefinition, fakes: int, seed: int) -> None:
    """N honest reports from the SDK's encoder, plus ``fakes`` crafted ones, via the API."""
    rng = random.Random(seed)
    gen = np.random.default_rng(seed)
    values = gen.choice(K, size=N, p=zipf_population(K))
    reports = [build_report(definition, int(v), rng) for v in values]
    for _ in range(fakes):  # skip the randomizer: always report the target
        fake = build_report(definition, 0, rng)
        fake["payload"] = {"v": domain().index(TARGET)}
        reports.append(fake)
    rng.shuffle(reports)
    for i in range(0, len(reports), 1000):
        response = web.post("/v1/reports", json={"reports": reports[i : i + 1000]})
        assert response.status_code == 202 and response.json["accepted"] == len(
            reports[i : i + 1000]
        )


def test_the_maximal_gain_attack_raises_an_alarm_in_its_window_and_honest_traffic_none(
    redis_db: Any,
) -> None:
    # Not across an hour boundary: the current window must hold all of its reports.
    left = schema.HOUR_MS - int(time.time() * 1000) % schema.HOUR_MS
    if left < 90_000:
        time.sleep(left / 1000 + 1)
    config = {"REDIS_URL": redis_db.url, "ADMIN_TOKEN": ADMIN, "TESTING": True}
    # One test client is one source: its 82 uploads of 80,800 reports in a few seconds
    # are beyond the per-source limits (20 a second, 20,000 reports a minute), which are
    # not what this test is about (tests/test_admission_gunicorn.py).
    config.update(SOURCE_REQUESTS_PER_SECOND=0, SOURCE_REPORTS_PER_MINUTE=0)
    app = create_server_app(config)
    web = app.test_client()
    spec = {"domain": domain(), "epsilon": 1.0, "mechanism": "grr"}
    definitions = {}
    for name in ("shop.page", "shop.page-twin"):
        response = web.put(
            f"/v1/metrics/{name}", json=spec, headers={"Authorization": f"Bearer {ADMIN}"}
        )
        assert response.status_code in (200, 201)
        definitions[name] = MetricDefinition.from_dict(response.json)
    client = redis_db.client()
    for seed, definition in enumerate(definitions.values()):
        append_past_hours(client, definition, seed, N, PAST_HOURS)
    post_current_hour(web, definitions["shop.page"], FAKES, seed=101)
    post_current_hour(web, definitions["shop.page-twin"], 0, seed=102)
    Worker(client, handle_signals=False, block_ms=50).run(once=True)

    hour, _, _, _ = schema.window_names(int(time.time() * 1000))
    attacked = web.get("/v1/estimates/shop.page", query_string={"window": hour}).json
    assert attacked["n"] == N + FAKES
    assert [a["kind"] for a in attacked["alarms"]] == ["shift"]
    alarm = attacked["alarms"][0]
    assert alarm["window"] == hour and alarm["values"][0] == TARGET
    assert alarm["p_value"] <= alarm["alpha"] and alarm["statistic"] > alarm["threshold"]
    assert TARGET in alarm["evidence"]
    assert web.get("/v1/estimates/shop.page").json["alarms"][0] == alarm  # window all: the newest
    twin = web.get("/v1/estimates/shop.page-twin", query_string={"window": hour}).json
    assert twin["n"] == N and twin["alarms"] == []
    for back in range(1, PAST_HOURS + 1):  # the honest past hours of both raise none
        past = schema.window_names(int(time.time() * 1000) - back * schema.HOUR_MS)[0]
        for name in definitions:
            body = web.get(f"/v1/estimates/{name}", query_string={"window": past}).json
            assert body["n"] == N and body["alarms"] == [], (name, past)

    gauges = alarm_gauges(web.get("/metrics").text)
    assert gauges[("shop.page", "shift", "hour")] == 1
    assert sum(v for (metric, _, _), v in gauges.items() if metric == "shop.page-twin") == 0

    overview = {m["name"]: m for m in web.get("/v1/overview").json["metrics"]}
    assert overview["shop.page"]["alarms"][0] == alarm
    assert overview["shop.page-twin"]["alarms"] == []
    page = web.get("/").text
    assert str(escape(alarm["evidence"])) in page  # the banner, as the template renders it

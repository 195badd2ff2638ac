"""A retire is in force in every collector process once it returns (issue 36, item 4).

Two apps on one Redis stand for two gunicorn workers: each caches the registry's state of
a metric for ``CURRENT_TTL``. The one that answers the retire forgets its own; the other
refuses the metric's reports all the same, on every path that takes reports (plain
batches, the report-by-report path, sharded versions, the Oblivious HTTP gateway with
and without shuffle pools), because the append script reads the versions' retirement
marks. An unretire is in force at once too. ``tests/test_lifecycle_retire_delete.py``
checks the same with a real multi-worker ``ldp serve``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from collector_helpers import ADMIN, THEME_SPEC, define, make_app, reports
from flask import Flask
from flask.testing import FlaskClient
from relay_helpers import sealed_reports

from client_sdk.ohttp import bhttp
from client_sdk.ohttp.keys import GATEWAY_PATH, REQUEST_MEDIA_TYPE, decode_key_configs
from client_sdk.wire import MetricDefinition
from collector.context import services
from ldp_store import keys, streams


def post(client: FlaskClient, body: list[Any]) -> Any:
    return client.post("/v1/reports", json={"reports": body})


def relayed(client: FlaskClient, body: list[Any]) -> tuple[int, Any]:
    """``body`` through the app's Oblivious HTTP gateway: the inner answer."""
    config = decode_key_configs(client.get(GATEWAY_PATH).data)[0]
    sealed, context = sealed_reports(config, body)
    answer = client.post(GATEWAY_PATH, data=sealed, headers={"Content-Type": REQUEST_MEDIA_TYPE})
    assert answer.status_code == 200, answer.data
    opened = bhttp.decode_response(context.decapsulate_response(answer.data))
    return opened.status, json.loads(opened.content)


def held(app: Flask, d: MetricDefinition) -> int:
    """Reports of ``d`` in its streams and shuffle pools, every shard."""
    r = services(app).redis
    return sum(
        streams.held(r, d.name, d.version, shard) + r.xlen(keys.pool_key(d.name, d.version, shard))
        for shard in range(d.shards)
    )


@pytest.fixture
def workers(redis_db: Any) -> tuple[Flask, Flask]:
    """Two collector processes' apps on one Redis (relayed reports go straight to the
    streams: B = 1)."""
    return make_app(redis_db.url, SHUFFLE_MIN_BATCH=1), make_app(redis_db.url, SHUFFLE_MIN_BATCH=1)


@pytest.mark.parametrize("shards", [1, 3])
def test_a_retire_answered_by_one_worker_is_in_force_in_the_other(
    workers: tuple[Flask, Flask], shards: int
) -> None:
    one, other = (app.test_client() for app in workers)
    theme = define(one, "app.theme", {**THEME_SPEC, "shards": shards})
    kept = define(one, "app.kept", THEME_SPEC)
    assert post(other, reports(theme, 3)).status_code == 202  # its cache: not retired
    assert one.post("/v1/metrics/app.theme/retire", headers=ADMIN).status_code == 200

    # 12 requests of one report each (the plain path), then 12 reports in one request
    for seed in range(12):
        answer = post(other, reports(theme, 1, seed=100 + seed))
        assert answer.status_code == 410, answer.json
        assert "app.theme was retired on" in answer.json["error"]
    answer = post(other, reports(theme, 12, seed=200))
    assert answer.status_code == 410
    assert [r["index"] for r in answer.json["rejected"]] == list(range(12))
    assert all("stop reporting it" in r["error"] for r in answer.json["rejected"])

    # The report-by-report path (a bad report beside them), with another metric's report
    mixed = [*reports(theme, 2, seed=300), {"metric": "app.kept"}, *reports(kept, 1, seed=301)]
    answer = post(other, mixed)
    assert answer.status_code == 202, answer.json
    assert answer.json["accepted"] == 1
    assert [(r["index"], "was retired on" in r["error"]) for r in answer.json["rejected"]] == [
        (0, True),
        (1, True),
        (2, False),
    ]
    assert [r["metric"] for r in answer.json["retired"]] == ["app.theme"]
    assert held(workers[1], theme) == 3

    # Unretired by one: the other takes the reports at once (its cache said retired)
    assert one.post("/v1/metrics/app.theme/unretire", headers=ADMIN).status_code == 200
    answer = post(other, reports(theme, 4, seed=400))
    assert answer.status_code == 202 and answer.json["accepted"] == 4
    assert other.get("/v1/metrics/app.theme").json.get("retired_at") is None
    assert held(workers[1], theme) == 7


@pytest.mark.parametrize("min_batch", [1, 100])
def test_a_relayed_report_is_refused_too(redis_db: Any, min_batch: int) -> None:
    """Through the gateway, to the stream (B = 1) or to a shuffle pool (B = 100)."""
    apps = [make_app(redis_db.url, SHUFFLE_MIN_BATCH=min_batch) for _ in range(2)]
    one, other = (app.test_client() for app in apps)
    theme = define(one, "app.theme", THEME_SPEC)
    assert relayed(other, reports(theme, 2))[0] == 202  # its cache: not retired
    assert one.post("/v1/metrics/app.theme/retire", headers=ADMIN).status_code == 200
    for seed in range(12):
        status, body = relayed(other, reports(theme, 1, seed=10 + seed))
        assert status == 410, body
    assert held(apps[1], theme) == 2

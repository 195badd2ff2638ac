"""PRAM and the device-wide budget through the whole system as `ldp serve` runs it.

Real gunicorn, aggregator workers and redis-server; the SDK's Client uploads. A PRAM
metric's reports are counted exactly (compared with the reports the client sent) and
estimated through ``/v1/estimates``; the collector's published device-wide cap
(``LDP_DEVICE_EPSILON_PER_DAY``) reaches a client, which refuses past it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import redis
from test_pipeline_e2e import get, offline_counts, pipeline, recorded_client, wait_counted

from aggregator.query.window import read_counts
from client_sdk import Client
from ldp_server.serve import Server
from ldp_store.registry import Registry
from tests.collector.test_collector_pram_device import AGES  # the age-band matrix

LOUD = {"domain": ["a", "b"], "epsilon": 20.0, "mechanism": "grr"}
PER_DAY = 4000.0
"""The published daily cap: room for the 1,500 PRAM reports one test client sends for
all its simulated devices (ε = ln 12 ≈ 2.48 each: 3,727), and exactly 200 reports at ε = 20."""


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    monkeypatch.setenv("LDP_SOURCE_REQUESTS_PER_SECOND", "0")
    monkeypatch.setenv("LDP_SOURCE_REPORTS_PER_MINUTE", "0")
    monkeypatch.setenv("LDP_DEVICE_EPSILON_PER_DAY", str(PER_DAY))
    with pipeline(tmp_path / "data", {"user.age": AGES, "app.loud": LOUD}, aggregators=1) as s:
        yield s


def test_pram_through_the_pipeline_and_the_device_cap(server: Server) -> None:
    assert get(server, "/v1/metrics")["device_budget"] == {
        "epsilon_per_day": PER_DAY,
        "epsilon_lifetime": None,
    }
    recorder, client = recorded_client(server.url, 9)
    truth = np.array([0.1, 0.4, 0.35, 0.15])
    values = [v for v, f in enumerate(truth) for _ in range(round(f * 1500))]
    random.Random(10).shuffle(values)
    for v in values:
        assert client.report("user.age", AGES["domain"][v])
    assert client.flush(timeout=60)
    r = redis.Redis.from_url(server.redis_url or "")
    definition = Registry(r).get("user.age")
    assert definition is not None and definition.mechanism.name == "pram"
    wait_counted(r, [definition], {"user.age": len(values)})
    counts = read_counts(r, definition)
    sent = list(recorder.sent.values())
    assert counts.n == len(sent) == len(values)
    np.testing.assert_array_equal(counts.support, offline_counts(definition, sent))
    body = get(server, "/v1/estimates/user.age")
    assert body["mechanism"] == "pram" and body["n"] == len(values)
    assert body["epsilon"] == pytest.approx(math.log(12))
    for row, f in zip(body["estimates"], truth, strict=True):
        assert abs(row["frequency"] - f) < 4.5 * row["std_error"]  # ~7e-6 per value
    spent = client.privacy()["device_budget"]
    assert spent["epsilon_per_day"] == PER_DAY
    assert spent["spent_today"] == pytest.approx(len(values) * math.log(12), rel=1e-9)
    client.shutdown(timeout=5)

    # A fresh device with no cap of its own learns the collector's and refuses past it.
    device = Client(server.url, flush_at=10_000, flush_interval=3600.0)
    accepted = sum(device.report("app.loud", "a") for _ in range(210))
    assert accepted == int(PER_DAY // 20)
    assert device.stats()["dropped"]["device_budget"] == 210 - accepted
    assert device.privacy()["device_budget"]["remaining_today"] == 0.0
    device.shutdown(timeout=5)

"""A numeric metric through the whole system as `ldp serve` runs it.

gunicorn, two aggregator workers and an embedded redis-server as real processes; the
SDK's own ``Client`` reports minutes per session over real HTTP. The server's sums are
compared with those computed offline, in exact arithmetic, from exactly the reports the
client sent; the estimates API's mean is compared with the true mean.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import pytest
import redis
from test_pipeline_e2e import get, pipeline, recorded_client

from aggregator.query.window import read_numeric
from aggregator.stats.numeric import NumericStats
from client_sdk.mechanisms.numeric import SCALE
from ldp_server.serve import Server
from ldp_store.registry import Registry

SPEC = {"kind": "numeric", "range": [0, 120], "epsilon": 1.0, "description": "minutes"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    with pipeline(tmp_path / "data", {"session.minutes": SPEC}) as s:
        yield s


def test_session_minutes_end_to_end(server: Server) -> None:
    recorder, client = recorded_client(server.url, 12)
    assert client.report("session.minutes", 12.5)
    truth = [12.5]
    picker = random.Random(13)
    for _ in range(5999):
        minutes = min(120.0, picker.expovariate(1 / 20))
        assert client.report("session.minutes", minutes)
        truth.append(minutes)
    # Outside the range, or not a number: dropped on the device, counted, never sent.
    assert not client.report("session.minutes", 500)
    assert not client.report("session.minutes", -0.5)
    assert not client.report("session.minutes", "twelve")  # type: ignore[arg-type]
    assert client.stats()["dropped"]["invalid_value"] == 3
    assert client.flush(timeout=120) is False  # all sent but those three
    assert client.stats()["queued"] == 0
    sent = list(recorder.sent.values())
    assert len(sent) == len(truth) == 6000

    r = redis.Redis.from_url(server.redis_url or "")
    definition = Registry(r).get("session.minutes")
    assert definition is not None and definition.kind == "numeric"
    units = [Fraction(report["payload"]["y"]) * SCALE for report in sent]
    assert all(u.denominator == 1 for u in units)
    want = NumericStats(len(units), int(sum(units)), int(sum(u * u for u in units)))
    deadline = time.monotonic() + 120
    while read_numeric(r, definition).n < want.n and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(0.5)  # anything summed twice would show up now
    assert read_numeric(r, definition) == want  # exact: nothing lost, nothing twice

    body = get(server, "/v1/estimates/session.minutes")
    assert body["kind"] == "numeric" and body["n"] == 6000 and body["range"] == [0.0, 120.0]
    assert body["mechanism"] == "hybrid" and body["epsilon"] == 1.0
    mean = sum(truth) / len(truth)
    assert abs(body["mean"] - mean) < 4 * body["std_error"]
    assert body["ci_low"] < body["mean"] < body["ci_high"]
    assert body["std_error"] <= body["std_error_worst_case"]
    trend = get(server, "/v1/estimates/session.minutes/trend?granularity=hour")
    assert sum(p["n"] for p in trend["windows"]) == 6000
    assert server.check() is None

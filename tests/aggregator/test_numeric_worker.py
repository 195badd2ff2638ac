"""Numeric metrics through the real worker and estimates API, on real Redis servers.

Every expected sum is computed offline, in exact rational arithmetic, from exactly the
payload strings appended (each made by the SDK's ``perturb`` with a seeded generator):
a sum above it would be a double count, below it a loss, and any rounding would show.
"""

from __future__ import annotations

import csv
import io
import json
import random
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
import redis

from aggregator.query.window import lag_details, list_windows, read_counts, read_numeric
from aggregator.stats.numeric import NumericCodec, NumericStats, estimate_mean
from aggregator.stream.worker import Worker, ensure_group
from client_sdk.mechanisms.numeric import SCALE
from client_sdk.wire import MAX_RETENTION_SECONDS, MetricDefinition
from ldp_server.app import create_server_app
from ldp_store import keys
from ldp_store.registry import Registry
from ldp_store.retention import RetentionPolicy
from ldp_store.schema import window_names
from tests.aggregator.test_worker import stream

GROUP = keys.GROUP

MECHANISMS = [("duchi", 0.5), ("pm", 1e-4), ("hybrid", 2.0), ("pm", 20.0)]
"""pm at ε = 10⁻⁴ has the largest reports there are (|y| < 2⁴⁶ units): Σy² overflows one
64-bit field within a batch, so its limbs are exercised for real."""


KEEP = RetentionPolicy(hour=MAX_RETENTION_SECONDS, day=MAX_RETENTION_SECONDS)
"""A retention that keeps the windows of 2024 these tests write."""


def make_metric(
    client: redis.Redis,
    name: str,
    mechanism: str,
    epsilon: float,
    low: float = 0,
    high: float = 120,
) -> MetricDefinition:
    spec = {"kind": "numeric", "range": [low, high], "epsilon": epsilon, "mechanism": mechanism}
    return Registry(client).put(name, spec).definition


def perturbed(d: MetricDefinition, values: Sequence[float], seed: int) -> list[str]:
    """SDK reports of these true values (in the metric's units), as compact JSON."""
    rng = random.Random(seed)
    m = d.numeric
    return [json.dumps(m.perturb(d.scaled(v), rng), separators=(",", ":")) for v in values]


def offline(payloads: Sequence[str]) -> NumericStats:
    """n, Σy, Σy² in units, from the payload text, in exact rational arithmetic."""
    units = []
    for payload in payloads:
        exact = Fraction(json.loads(payload)["y"]) * SCALE
        assert exact.denominator == 1
        units.append(int(exact))
    return NumericStats(len(units), sum(units), sum(u * u for u in units))


def append_ids(client: redis.Redis, d: MetricDefinition, payloads: Sequence[str]) -> list[bytes]:
    pipe = client.pipeline(transaction=False)
    for payload in payloads:
        pipe.xadd(stream(d), {"p": payload})
    return list(pipe.execute())


def worker(client: redis.Redis, **kwargs: Any) -> Worker:
    kwargs.setdefault("handle_signals", False)
    return Worker(client, **kwargs)


def test_burst_mode_sums_numeric_reports_exactly(any_redis: Any) -> None:
    client = any_redis.client()
    expected: dict[str, tuple[MetricDefinition, list[str], list[bytes]]] = {}
    for seed, (mech, epsilon) in enumerate(MECHANISMS):
        d = make_metric(client, f"app.{mech}.{seed}", mech, epsilon)
        rng = random.Random(seed)
        payloads = perturbed(d, [rng.uniform(0, 120) for _ in range(1500)], seed)
        expected[d.name] = (d, payloads, append_ids(client, d, payloads))
    stats = worker(client, batch_size=700).run(once=True)
    assert stats.counted == 1500 * len(MECHANISMS) and stats.dead_lettered == 0
    for d, payloads, ids in expected.values():
        want = offline(payloads)
        assert read_numeric(client, d) == want
        assert read_counts(client, d).n == want.n == 1500  # what the dashboard's overview reads
        fields = {k.decode() for k in client.hkeys(keys.counts_key(d.name, d.version))}
        assert fields <= {"n"} | {f"s:{i}" for i in range(4)} | {f"s2:{i}" for i in range(5)}
        hours = Counter(window_names(int(i.split(b"-")[0]))[0] for i in ids)
        days = Counter(window_names(int(i.split(b"-")[0]))[2] for i in ids)
        for window, n in (hours + days).items():
            assert read_numeric(client, d, window).n == n
        assert set(list_windows(client, d)) == {"all", *hours, *days}
        assert lag_details(client, d).pending == 0 and client.xlen(stream(d)) == 0
    big = expected["app.pm.1"][0]
    assert read_numeric(client, big).total_sq >= 2**63  # needed more than one field


def test_sums_do_not_depend_on_batching_or_order(redis_db: Any) -> None:
    client = redis_db.client()
    d = make_metric(client, "app.order", "hybrid", 1.0)
    payloads = perturbed(d, [float(v % 121) for v in range(3000)], seed=3)
    append_ids(client, d, payloads)
    worker(client, batch_size=97).run(once=True)
    first = read_numeric(client, d)
    client.flushall()
    d = make_metric(client, "app.order", "hybrid", 1.0)
    append_ids(client, d, list(reversed(payloads)))
    worker(client, batch_size=3000).run(once=True)
    assert read_numeric(client, d) == first == offline(payloads)


def test_an_hour_boundary_splits_the_sums(redis_db: Any) -> None:
    client = redis_db.client()
    d = make_metric(client, "app.hours", "pm", 2.0)
    payloads = perturbed(d, [10.0, 20.0, 30.0, 40.0], seed=5)
    start = 1704153599998  # 2024-01-01T23:59:59.998
    for i, ms in enumerate([start, start + 1, start + 2, start + 3600002]):
        client.xadd(stream(d), {"p": payloads[i]}, id=f"{ms}-{i}")
    # windows of 2024 are kept (else past the default retention, they are not written)
    worker(client, retention=KEEP).run(once=True)
    assert read_numeric(client, d) == offline(payloads)
    assert read_numeric(client, d, "hour:2024-01-01T23") == offline(payloads[:2])
    assert read_numeric(client, d, "hour:2024-01-02T00") == offline(payloads[2:3])
    assert read_numeric(client, d, "day:2024-01-02") == offline(payloads[2:])


def test_the_commit_script_adds_numeric_sums_once(any_redis: Any) -> None:
    client = any_redis.client()
    d = make_metric(client, "app.idem", "pm", 1e-4)
    payloads = perturbed(d, [0.0, 120.0, 60.0, 1.0, 119.0], seed=8)
    append_ids(client, d, payloads)
    w = worker(client, name="w")
    ensure_group(client, stream(d))
    entries = client.xreadgroup(GROUP, "w", {stream(d): ">"}, count=10)[0][1]
    ids = [entry_id for entry_id, _ in entries]
    codec = NumericCodec(d.numeric)
    batch = codec.parse([json.loads(fields[b"p"]) for _, fields in entries])
    client.xack(stream(d), GROUP, ids[0])  # another worker counted the first one
    assert w.commit(d, ids, batch) == (0, ids[1:])
    assert read_numeric(client, d) == NumericStats.zeros()
    rest = batch.take(np.arange(1, 5))
    assert w.commit(d, ids[1:], rest) == (4, [])
    assert read_numeric(client, d) == offline(payloads[1:])
    before = client.hgetall(keys.counts_key(d.name, d.version))
    for _ in range(3):
        assert w.commit(d, ids[1:], rest) == (0, [])
    assert client.hgetall(keys.counts_key(d.name, d.version)) == before


def test_bad_numeric_entries_are_dead_lettered_and_the_rest_summed(redis_db: Any) -> None:
    client = redis_db.client()
    d = make_metric(client, "app.bad", "hybrid", 2.0)
    good = perturbed(d, [float(v) for v in range(0, 120, 3)], seed=2)
    bad = ['{"y":1}', '{"y":0.1}', '{"y":NaN}', '{"y":1e999}', '{"y":"0.5"}', '{"v":1}', "{"]
    append_ids(client, d, good[:20] + bad + good[20:])
    stats = worker(client, batch_size=64).run(once=True)
    assert read_numeric(client, d) == offline(good)
    dead = client.xrange(keys.dead_key(d.name, d.version))
    assert stats.dead_lettered == len(dead) == len(bad)
    reasons = {f[b"p"].decode(): f[b"reason"].decode() for _, f in dead}
    assert set(reasons) == set(bad)
    assert "'y' must be a float, got int" in reasons['{"y":1}']
    assert "not a report hybrid can produce" in reasons['{"y":0.1}']
    assert "outside" in reasons['{"y":NaN}'] and "outside" in reasons['{"y":1e999}']
    assert reasons["{"].startswith("invalid JSON")


# -- the estimates API ------------------------------------------------------------------------


@pytest.fixture
def api(redis_db: Any) -> Any:
    app = create_server_app(
        {"REDIS_URL": redis_db.url, "ADMIN_TOKEN": "admin-token-t-0001", "TESTING": True}
    )
    return app.test_client()


def test_the_estimates_api_answers_the_mean_with_its_interval(redis_db: Any, api: Any) -> None:
    client = redis_db.client()
    d = make_metric(client, "session.minutes", "hybrid", 1.0)
    rng = random.Random(4)
    values = [rng.choice([5.0, 12.5, 30.0, 90.0]) for _ in range(4000)]
    payloads = perturbed(d, values, seed=4)
    append_ids(client, d, payloads)
    worker(client).run(once=True)
    body = api.get("/v1/estimates/session.minutes").json
    est = estimate_mean(d, offline(payloads))
    assert body["kind"] == "numeric" and body["metric"] == "session.minutes"
    assert body["version"] == d.version and body["window"] == "all"
    assert body["mechanism"] == "hybrid" and body["epsilon"] == 1.0
    assert body["n"] == 4000 and body["range"] == [0.0, 120.0]
    assert body["confidence"] == 0.95
    for key in ("mean", "std_error", "ci_low", "ci_high", "std_error_worst_case"):
        assert body[key] == pytest.approx(getattr(est, key), rel=1e-12)
    truth = sum(values) / len(values)
    assert abs(body["mean"] - truth) < 4 * body["std_error"]
    assert body["ci_low"] < body["mean"] < body["ci_high"]
    assert "mean_clipped" in body and "post_processing" in body
    narrow = api.get("/v1/estimates/session.minutes?confidence=0.5").json
    assert narrow["ci_high"] - narrow["ci_low"] < body["ci_high"] - body["ci_low"]
    text = api.get("/v1/estimates/session.minutes?format=csv").get_data(as_text=True)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 1 and float(rows[0]["mean"]) == pytest.approx(body["mean"])
    assert rows[0]["range_high"] == "120.0" and rows[0]["n"] == "4000"
    day = window_names(int(client.xinfo_stream(stream(d))["last-generated-id"].split(b"-")[0]))[2]
    assert api.get(f"/v1/estimates/session.minutes?window={day}").json["n"] == 4000
    trend = api.get("/v1/estimates/session.minutes/trend?granularity=day").json
    assert [p["window"] for p in trend["windows"]] == [day]
    point = trend["windows"][0]
    assert set(point) == {
        "window",
        "n",
        "mean",
        "std_error",
        "ci_low",
        "ci_high",
        "cs_low",
        "cs_high",
    }
    assert point["cs_low"] < point["ci_low"] < point["ci_high"] < point["cs_high"]
    watching = estimate_mean(d, offline(payloads), anytime=True)
    assert (body["cs_low"], body["cs_high"]) == pytest.approx(
        (watching.ci_low, watching.ci_high), rel=1e-12
    )
    assert "t score interval" in body["interval"] and "every look" in body["anytime_note"]
    assert "distinguishable" not in body["anytime_note"]  # a mean has no such flags
    assert point["n"] == 4000 and point["mean"] == pytest.approx(body["mean"])


def test_a_numeric_metric_without_reports_answers_nulls(redis_db: Any, api: Any) -> None:
    make_metric(redis_db.client(), "session.minutes", "pm", 2.0)
    body = api.get("/v1/estimates/session.minutes").json
    assert body["n"] == 0 and body["mean"] is None and body["ci_low"] is None
    text = api.get("/v1/estimates/session.minutes?format=csv").get_data(as_text=True)
    assert text.splitlines()[1].endswith(",,,,")


def test_categorical_estimates_are_unchanged_beside_numeric_ones(redis_db: Any, api: Any) -> None:
    client = redis_db.client()
    make_metric(client, "session.minutes", "pm", 2.0)
    spec = {"domain": ["a", "b", "c"], "epsilon": 1.0, "mechanism": "grr"}
    theme = Registry(client).put("app.theme", spec).definition
    rng = random.Random(1)
    append_ids(
        client,
        theme,
        [json.dumps(theme.oracle.perturb(rng.randrange(3), rng)) for _ in range(50)],
    )
    worker(client).run(once=True)
    body = api.get("/v1/estimates/app.theme").json
    assert "kind" not in body and [e["value"] for e in body["estimates"]] == ["a", "b", "c"]
    assert body["n"] == 50

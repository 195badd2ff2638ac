"""Trends over months (issue 43): every window the retention keeps, the values a chart
shows, each window's numbers as its own answer has them.

Counts are written straight into a real Redis (the windows' hashes and the windows set),
months of hourly windows in one pipeline; the app reads them as the worker leaves them.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
import redis
from flask.testing import FlaskClient

from client_sdk.wire import MetricDefinition
from ldp_server.app import create_server_app
from ldp_store import keys, schema
from ldp_store.registry import Registry

ADMIN = "admin-token-4343"
K = 12
SPEC = {"domain": [f"v{i:02d}" for i in range(K)], "epsilon": 1.0, "mechanism": "oue"}
HOURS_KEPT = 90 * 86_400
"""The hourly retention of these tests: 90 days (the default keeps 14)."""
START = int(time.time()) // 3600 * 3600 - 60 * 86_400
"""The first window's start: 60 days ago, on the hour."""


def hour_name(t: int) -> str:
    return "hour:" + np.datetime64(t, "s").astype("datetime64[h]").item().strftime("%Y-%m-%dT%H")


def write_hours(client: redis.Redis, d: MetricDefinition, hours: int, seed: int = 43) -> list[str]:
    """``hours`` hourly windows of counts from START on (n 40–400, OUE-like support);
    returns their names, oldest first."""
    rng = np.random.default_rng(seed)
    names = []
    with client.pipeline(transaction=False) as pipe:
        for h in range(hours):
            start = START + 3600 * h
            name = hour_name(start)
            n = int(rng.integers(40, 400))
            shares = np.linspace(0.9, 0.2, K)  # value i supported by share_i of reports
            support = rng.binomial(n, shares)
            fields = {"n": n, **{f"c:{v}": int(c) for v, c in enumerate(support)}}
            pipe.hset(keys.counts_key(d.name, d.version, name), mapping=fields)
            pipe.zadd(keys.windows_key(d.name, d.version), {name: start * 1000})
            names.append(name)
        pipe.execute()
    return names


@pytest.fixture
def web(redis_db: Any, monkeypatch: pytest.MonkeyPatch) -> FlaskClient:
    monkeypatch.setenv("LDP_RETENTION_HOUR_SECONDS", str(HOURS_KEPT))
    app = create_server_app({"REDIS_URL": redis_db.url, "ADMIN_TOKEN": ADMIN, "TESTING": True})
    return app.test_client()


def define(redis_db: Any, spec: dict[str, Any] = SPEC, name: str = "app.months") -> Any:
    registry = Registry(redis_db.client(), clock=lambda: START - 86_400)
    return registry.put(name, spec).definition


def test_a_trend_holds_every_window_kept_beyond_two_weeks(redis_db: Any, web: FlaskClient) -> None:
    d = define(redis_db)
    names = write_hours(redis_db.client(), d, 24 * 21)  # three weeks of hours
    trend = web.get("/v1/estimates/app.months/trend?granularity=hour&format=json").json
    assert [p["window"] for p in trend["windows"]] == names  # every one, oldest first
    assert trend["values_total"] == K and trend["shown"] == "top"
    shown = [[r["value"] for r in p["estimates"]] for p in trend["windows"]]
    assert shown[0] == [f"v{i:02d}" for i in range(8)]  # the 8 largest over the windows
    assert all(values == shown[0] for values in shown)
    assert all(p["rest"]["values"] == K - 8 for p in trend["windows"])
    compact = web.get("/v1/estimates/app.months/trend?granularity=hour").json  # the default
    assert compact["windows"] == [] and compact["compact"]["window"] == names
    assert compact["compact"]["values"] == shown[0] and compact["shown"] == "top"


@pytest.mark.parametrize(
    "query",
    ["", "&multiplicity=simultaneous", "&multiplicity=fdr", "&estimand=population"],
)
def test_each_point_is_the_window_s_own_answer(redis_db: Any, web: FlaskClient, query: str) -> None:
    d = define(redis_db)
    names = write_hours(redis_db.client(), d, 30, seed=7)
    trend = web.get(f"/v1/estimates/app.months/trend?granularity=hour&format=json{query}").json
    for point in (trend["windows"][0], trend["windows"][17], trend["windows"][-1]):
        values = ",".join(r["value"] for r in point["estimates"])
        window = web.get(f"/v1/estimates/app.months?window={point['window']}{query}").json
        asked = web.get(
            f"/v1/estimates/app.months?window={point['window']}&values={values}{query}"
        ).json
        assert point["estimates"] == asked["estimates"]  # bit for bit
        assert point["n"] == window["n"]
        full = web.get(f"/v1/estimates/app.months?window={point['window']}&values=all{query}").json[
            "estimates"
        ]
        hidden = [r for r in full if r["value"] not in values.split(",")]
        assert point["rest"]["frequency"] == pytest.approx(sum(r["frequency"] for r in hidden))
        assert point["rest"]["norm_sub"] == pytest.approx(sum(r["norm_sub"] for r in hidden))
    assert [p["window"] for p in trend["windows"]] == names


def test_values_asked_and_the_column_form(redis_db: Any, web: FlaskClient) -> None:
    d = define(redis_db)
    names = write_hours(redis_db.client(), d, 40, seed=3)
    rows = web.get("/v1/estimates/app.months/trend?values=v11,v03&format=json").json
    assert rows["shown"] == "values"
    assert all([r["value"] for r in p["estimates"]] == ["v11", "v03"] for p in rows["windows"])
    columns = web.get("/v1/estimates/app.months/trend?values=v11,v03&format=columns").json
    assert columns["windows"] == []
    table = columns["columns"]
    assert table["window"] == names and table["values"] == ["v11", "v03"]
    for field in ("frequency", "std_error", "ci_low", "ci_high", "cs_low", "cs_high"):
        for i in range(2):
            assert table[field][i] == [p["estimates"][i][field] for p in rows["windows"]]
    assert table["n"] == [p["n"] for p in rows["windows"]]
    assert table["rest_frequency"] == [p["rest"]["frequency"] for p in rows["windows"]]
    every = web.get("/v1/estimates/app.months/trend?values=all&format=json").json
    assert every["shown"] == "all" and len(every["windows"][0]["estimates"]) == K
    assert every["windows"][0]["rest"] is None


def test_a_small_domain_shows_every_value(redis_db: Any, web: FlaskClient) -> None:
    spec = {"domain": ["a", "b", "c"], "epsilon": 1.0, "mechanism": "grr"}
    d = define(redis_db, spec, "app.small")
    client = redis_db.client()
    name = hour_name(START)
    client.hset(keys.counts_key(d.name, d.version, name), mapping={"n": 5, "c:0": 3, "c:2": 2})
    client.zadd(keys.windows_key(d.name, d.version), {name: START * 1000})
    trend = web.get("/v1/estimates/app.small/trend?format=json").json
    assert trend["shown"] == "all"
    [point] = trend["windows"]
    assert [r["value"] for r in point["estimates"]] == ["a", "b", "c"]
    assert point["rest"] is None


@pytest.mark.parametrize(
    "query",
    ["values=nope", "top=0", "format=xml", "top=2&values=v01", "fields=mean", "fields=,"],
)
def test_bad_trend_queries_are_400(redis_db: Any, web: FlaskClient, query: str) -> None:
    define(redis_db)
    answer = web.get(f"/v1/estimates/app.months/trend?{query}")
    assert answer.status_code == 400, answer.json
    assert answer.json["error"]


@pytest.mark.parametrize(
    "query",
    ["", "&multiplicity=simultaneous", "&multiplicity=fdr", "&estimand=population"],
)
def test_the_compact_form_is_the_full_one_rounded_within_its_errors(
    redis_db: Any, web: FlaskClient, query: str
) -> None:
    """Every number of the compact form is the full answer's, rounded to the second
    significant digit u of its standard error: u ≤ SE/10, so |error| ≤ u/2 ≤ SE/20."""
    d = define(redis_db)
    write_hours(redis_db.client(), d, 48, seed=11)
    full = web.get(f"/v1/estimates/app.months/trend?format=columns{query}").json["columns"]
    every = "frequency,std_error,ci_low,ci_high,cs_low,cs_high,norm_sub"
    compact = web.get(f"/v1/estimates/app.months/trend?fields={every}{query}").json["compact"]
    assert compact["window"] == full["window"] and compact["values"] == full["values"]
    assert compact["fields"] == every.split(",")
    se = np.array(full["std_error"], dtype=float)
    shares = web.get(f"/v1/estimates/app.months/trend?format=json{query}").json["windows"]
    full["norm_sub"] = [[p["estimates"][i]["norm_sub"] for p in shares] for i in range(8)]
    for field in every.split(","):
        error = np.abs(np.array(compact[field], dtype=float) - np.array(full[field], dtype=float))
        assert np.all(error <= se / 20 * (1 + 1e-9)), field
        assert np.max(error / se) > 0.01, field  # rounded, not copied
    digits = [
        len(f"{x:.15g}".lstrip("-0.").replace(".", "")) for x in np.ravel(compact["std_error"])
    ]
    assert max(digits) <= 2  # a standard error keeps two significant digits
    rest = np.array(compact["rest_frequency"], dtype=float) - np.array(full["rest_frequency"])
    assert np.all(np.abs(rest) <= se.min(axis=0) / 20 * (1 + 1e-9))


def test_a_compact_trend_gives_the_estimate_and_interval_unless_asked(
    redis_db: Any, web: FlaskClient
) -> None:
    d = define(redis_db)
    write_hours(redis_db.client(), d, 5, seed=5)
    body = web.get("/v1/estimates/app.months/trend?values=v02,v07").json
    compact = body["compact"]
    assert compact["fields"] == ["frequency", "ci_low", "ci_high"]
    assert set(compact) == {
        "window",
        "n",
        "values",
        "fields",
        "frequency",
        "ci_low",
        "ci_high",
        "rest_frequency",
    }
    assert compact["values"] == ["v02", "v07"] and len(compact["frequency"][0]) == 5
    every = web.get("/v1/estimates/app.months/trend?values=all&fields=cs_low,frequency").json
    assert set(every["compact"]) == {"window", "n", "values", "fields", "cs_low", "frequency"}
    assert every["compact"]["fields"] == ["cs_low", "frequency"]  # in the order asked


@pytest.mark.parametrize("estimand", ["reporters", "population"])
def test_a_numeric_trend_is_each_window_s_own_mean(
    redis_db: Any, web: FlaskClient, estimand: str
) -> None:
    """A numeric trend answers windows in every format: each window's mean, standard error
    and interval as its own answer has them, its confidence sequence within the root
    finder's tolerance (computed for every window in one pass)."""
    spec = {"kind": "numeric", "range": [0, 120], "epsilon": 1.0, "mechanism": "pm"}
    d = define(redis_db, spec, "app.minutes")
    rng = np.random.default_rng(9)
    units = int(d.mechanism.bound_units)
    with redis_db.client().pipeline(transaction=False) as pipe:
        for h in range(30):
            name, n = hour_name(START + 3600 * h), int(rng.integers(0, 300))
            ys = [int(y) for y in rng.integers(-units, units + 1, n)]
            fields = schema.numeric_increments(n, sum(ys), sum(y * y for y in ys))
            pipe.hset(
                keys.counts_key(d.name, d.version, name),
                mapping=dict(zip(fields[::2], fields[1::2], strict=True)),
            )
            pipe.zadd(keys.windows_key(d.name, d.version), {name: (START + 3600 * h) * 1000})
        pipe.execute()
    trend = web.get(f"/v1/estimates/app.minutes/trend?estimand={estimand}").json
    assert "compact" not in trend and len(trend["windows"]) == 30
    assert web.get(f"/v1/estimates/app.minutes/trend?format=json&estimand={estimand}").json == trend
    for point in trend["windows"]:
        own = web.get(f"/v1/estimates/app.minutes?window={point['window']}&estimand={estimand}")
        for key in ("n", "mean", "std_error", "ci_low", "ci_high"):
            assert point[key] == own.json[key], key
        half = (own.json["cs_high"] - own.json["cs_low"]) / 2
        assert point["cs_low"] == pytest.approx(own.json["cs_low"], abs=2e-5 * half)
        assert point["cs_high"] == pytest.approx(own.json["cs_high"], abs=2e-5 * half)

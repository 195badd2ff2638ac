"""Admission limits and implausible reports, on the real app over a real Redis.

A source that empties its bucket gets 429 with ``Retry-After`` while other sources keep
getting 202; nothing of a refused request is stored; the bucket refills with time (an
injected clock); the source key rotates and takes the buckets with it; nothing of a
source's identity reaches Redis, a log or ``/metrics``. An all-ones OUE report is refused
with a message that says why, and counted.
"""

from __future__ import annotations

import base64
import logging
from typing import Any

import pytest
from collector_helpers import THEME_SPEC, define, make_app, reports, scan_redis
from flask import Flask, request
from flask.testing import FlaskClient
from prometheus_client.parser import text_string_to_metric_families

from client_sdk.wire import MetricDefinition, new_report_id
from collector.context import services
from collector.settings import ConfigError
from ldp_edge.admission import MAX_SOURCES, Admission, TooManyRequests
from ldp_store import keys, streams
from tests.clock import Clock

FLOODER = "203.0.113.66"
OTHER = "198.51.100.23"


def _clocked(app: Flask) -> Clock:
    """Give the app's limiter a clock the test moves (and a key made under it)."""
    clock = Clock(1000.0)
    admission = services(app).admission
    admission.clock = clock
    admission.rotate()
    return clock


def _post(client: FlaskClient, batch: list[Any], peer: str, **headers: str) -> Any:
    return client.post(
        "/v1/reports",
        json={"reports": batch},
        headers=headers,
        environ_base={"REMOTE_ADDR": peer},
    )


def samples(client: FlaskClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = client.get("/metrics").data.decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _stored(redis_db: Any, definition: MetricDefinition) -> int:
    return int(
        streams.length(redis_db.client(), keys.stream_key(definition.name, definition.version))
    )


def test_a_flood_from_one_source_gets_429_while_others_get_202(redis_db: Any) -> None:
    app = make_app(redis_db.url, SOURCE_REQUESTS_PER_SECOND=5)
    clock = _clocked(app)
    client = app.test_client()
    theme = define(client, "app.theme", THEME_SPEC)
    statuses = [_post(client, reports(theme, 1, seed=i), FLOODER).status_code for i in range(8)]
    assert statuses == [202] * 5 + [429] * 3  # the bucket holds 5; the clock stands still
    refused = _post(client, reports(theme, 1, seed=99), FLOODER)
    assert refused.headers["Retry-After"] == "1"  # one token comes back in 1/5 s: 1 s
    assert refused.json["error"] == "too many requests from this source"
    assert "at most 5 requests per second per source" in refused.json["details"][0]
    for seed in range(5):  # the other source has its own bucket
        assert _post(client, reports(theme, 1, seed=100 + seed), OTHER).status_code == 202
    assert _stored(redis_db, theme) == 10  # nothing of the refused requests
    clock.now += 1.0  # five tokens again
    assert [
        _post(client, reports(theme, 1, seed=200 + i), FLOODER).status_code for i in range(6)
    ] == [202] * 5 + [429]
    found = samples(client)
    assert found[("ldp_collector_rate_limited_total", (("limit", "requests"),))] == 5
    assert found[("ldp_collector_rate_limited_total", (("limit", "reports"),))] == 0
    assert (
        found[("ldp_collector_responses_total", (("endpoint", "/v1/reports"), ("status", "429")))]
        == 5
    )


def test_reports_are_counted_per_source_and_a_refused_batch_is_stored_whole_later(
    redis_db: Any,
) -> None:
    app = make_app(redis_db.url, SOURCE_REPORTS_PER_MINUTE=1000)
    clock = _clocked(app)
    client = app.test_client()
    theme = define(client, "app.theme", THEME_SPEC)
    first, second = reports(theme, 600, seed=1), reports(theme, 600, seed=2)
    assert _post(client, first, FLOODER).json["accepted"] == 600
    refused = _post(client, second, FLOODER)
    assert refused.status_code == 429
    assert refused.headers["Retry-After"] == "12"  # 200 reports missing at 1000/min
    assert "at most 1000 reports per minute per source" in refused.json["details"][0]
    assert _stored(redis_db, theme) == 600  # the first batch stays, none of the second
    assert _post(client, second[:400], OTHER).json["accepted"] == 400
    clock.now += 11.9
    assert _post(client, second, FLOODER).status_code == 429
    clock.now += 0.1
    result = _post(client, second, FLOODER).json
    assert (result["accepted"], result["duplicates"]) == (200, 400)  # once each
    assert _stored(redis_db, theme) == 1200
    found = samples(client)
    assert found[("ldp_collector_rate_limited_total", (("limit", "reports"),))] == 2


def test_a_trusted_header_names_the_source_and_only_its_last_value(redis_db: Any) -> None:
    app = make_app(redis_db.url, SOURCE_REQUESTS_PER_SECOND=2, SOURCE_HEADER="X-Forwarded-For")
    _clocked(app)
    client = app.test_client()
    theme = define(client, "app.theme", THEME_SPEC)

    def post(forwarded: str, seed: int) -> int:
        return int(
            _post(
                client, reports(theme, 1, seed=seed), "10.0.0.1", **{"X-Forwarded-For": forwarded}
            ).status_code
        )

    # The proxy appends the peer's address; what the client wrote before it is not trusted.
    assert [post(f"{i}.1.1.1, {FLOODER}", i) for i in range(3)] == [202, 202, 429]
    assert [post(f"{FLOODER}, {OTHER}", 10 + i) for i in range(3)] == [202, 202, 429]
    # Without the header the peer's address is the source.
    assert _post(client, reports(theme, 1, seed=20), "10.0.0.1").status_code == 202


def test_the_key_rotates_daily_and_takes_the_buckets_with_it() -> None:
    clock = Clock(1000.0)
    admission = Admission(1, 0, clock=clock)
    environ = {"REMOTE_ADDR": FLOODER}
    first = admission.source(environ)
    assert admission.source(environ) == first  # stable within a day
    assert admission.source({"REMOTE_ADDR": OTHER}) != first
    admission.admit_request(first)
    with pytest.raises(TooManyRequests):
        admission.admit_request(first)
    clock.now += 86_399.0
    assert admission.source(environ) == first
    clock.now += 1.0
    second = admission.source(environ)
    assert second != first  # a new key: the hashes of two days cannot be linked
    assert len(admission) == 0  # the buckets went with the old key
    admission.admit_request(second)  # a full bucket again


def test_forgotten_sources_are_the_least_recent_and_the_table_is_bounded() -> None:
    clock = Clock(1000.0)
    admission = Admission(1, 0, clock=clock, max_sources=3)
    names = [admission.source({"REMOTE_ADDR": f"10.0.0.{i}"}) for i in range(5)]
    for name in names[:3]:
        admission.admit_request(name)
    with pytest.raises(TooManyRequests):
        admission.admit_request(names[0])  # seen: names[0] is now the most recent
    admission.admit_request(names[3])  # the table is full: names[1] goes
    assert len(admission) == 3
    admission.admit_request(names[1])  # forgotten, so a full bucket (names[2] goes)
    with pytest.raises(TooManyRequests):
        admission.admit_request(names[0])  # still remembered, still empty
    assert MAX_SOURCES == 65_536


def test_nothing_of_the_source_reaches_redis_logs_or_metrics(
    redis_db: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    app = make_app(redis_db.url, SOURCE_REQUESTS_PER_SECOND=2, SOURCE_HEADER="X-Real-IP")
    _clocked(app)
    client = app.test_client()
    theme = define(client, "app.theme", THEME_SPEC)
    for i in range(4):
        _post(client, reports(theme, 3, seed=i), "10.0.0.1", **{"X-Real-IP": FLOODER})
    admission = services(app).admission
    digest = admission.source({"HTTP_X_REAL_IP": FLOODER})
    assert len(admission) == 1  # the flooder is remembered, by this hash
    traces = [FLOODER.encode(), digest, digest.hex().encode(), repr(digest).encode()]
    stored = scan_redis(redis_db)
    assert stored
    for key, values in stored:
        for item in (key, *values):
            assert not any(t in item for t in traces), (key, item)
    assert caplog.records  # the requests were logged
    logs = "\n".join(r.getMessage() + repr(r.__dict__) for r in caplog.records)
    assert not any(t.decode("latin-1") in logs for t in traces)
    metrics = client.get("/metrics").data
    assert b"ldp_collector_rate_limited_total" in metrics
    assert not any(t in metrics for t in traces)


def test_the_app_sees_neither_the_address_nor_the_trusted_header(redis_db: Any) -> None:
    app = make_app(redis_db.url, SOURCE_REQUESTS_PER_SECOND=1, SOURCE_HEADER="Fly-Client-IP")
    _clocked(app)
    seen: list[dict[str, Any]] = []

    @app.get("/_echo")
    def echo() -> dict[str, Any]:
        seen.append({k: str(v) for k, v in request.environ.items()})
        return {}

    client = app.test_client()
    client.get("/_echo", headers={"Fly-Client-IP": FLOODER}, environ_base={"REMOTE_ADDR": OTHER})
    (environ,) = seen
    assert "HTTP_FLY_CLIENT_IP" not in environ and "REMOTE_ADDR" not in environ
    assert FLOODER not in repr(environ) and OTHER not in repr(environ)
    # ... while the limiter named the source by that header (hashed).
    theme = define(client, "app.theme", THEME_SPEC)
    first = _post(client, reports(theme, 1, seed=1), OTHER, **{"Fly-Client-IP": FLOODER})
    again = _post(client, reports(theme, 1, seed=2), "10.9.9.9", **{"Fly-Client-IP": FLOODER})
    assert (first.status_code, again.status_code) == (202, 429)


def test_limits_are_settings_with_checked_values(redis_db: Any) -> None:
    off = make_app(redis_db.url, SOURCE_REQUESTS_PER_SECOND="0", SOURCE_REPORTS_PER_MINUTE=0)
    assert not services(off).admission.enabled
    default = services(make_app(redis_db.url)).admission
    assert (default.requests_per_second, default.reports_per_minute) == (20, 20_000)
    assert default.header_key is None
    bad: list[dict[str, Any]] = [
        {"SOURCE_REQUESTS_PER_SECOND": -1},
        {"SOURCE_REQUESTS_PER_SECOND": 1.5},
        {"SOURCE_REPORTS_PER_MINUTE": 999},  # below MAX_REPORTS: a full batch never passes
        {"SOURCE_REPORTS_PER_MINUTE": 100, "MAX_REPORTS": 101},
        {"SOURCE_HEADER": "X Real IP"},
        {"SOURCE_HEADER": 7},
    ]
    for config in bad:
        with pytest.raises(ConfigError, match=next(iter(config))):
            make_app(redis_db.url, **config)
    assert services(make_app(redis_db.url, SOURCE_REPORTS_PER_MINUTE=100, MAX_REPORTS=100))


# -- implausible reports -------------------------------------------------------------------


def _all_ones(definition: MetricDefinition) -> dict[str, Any]:
    nbytes = (definition.k + 7) // 8
    return {
        "metric": definition.name,
        "version": definition.version,
        "id": new_report_id(),
        "payload": {"b": base64.b64encode(b"\xff" * nbytes).decode()},
    }


def test_an_all_ones_oue_report_is_refused_as_implausible_and_counted(redis_db: Any) -> None:
    app = make_app(redis_db.url)
    client = app.test_client()
    spec = {"domain": [f"page-{i}" for i in range(128)], "epsilon": 1.0, "mechanism": "oue"}
    pages = define(client, "app.pages", spec)
    alone = _post(client, [_all_ones(pages)], OTHER)
    assert alone.status_code == 400
    assert alone.json["error"] == "no valid report in the request"
    (detail,) = alone.json["details"]
    assert detail.startswith("reports[0]: oue payload")
    assert "implausible under oue: 128 of 128 bits are set" in detail
    assert "an honest report at epsilon 1 sets 8 to 67" in detail
    assert alone.json["rejected"] == [{"index": 0, "error": detail.removeprefix("reports[0]: ")}]
    # Beside honest reports it is rejected alone, in the 202's list (as an invalid one is).
    honest = reports(pages, 5, seed=3)
    mixed = _post(client, [honest[0], _all_ones(pages), *honest[1:]], OTHER)
    assert mixed.status_code == 202
    assert mixed.json["accepted"] == 5 and [r["index"] for r in mixed.json["rejected"]] == [1]
    assert "implausible" in mixed.json["rejected"][0]["error"]
    assert _stored(redis_db, pages) == 5
    zeros = {**_all_ones(pages), "id": new_report_id()}
    zeros["payload"] = {"b": base64.b64encode(bytes(16)).decode()}
    assert _post(client, [zeros], OTHER).status_code == 400
    found = samples(client)
    implausible = "ldp_collector_reports_implausible_total"
    assert found[(implausible, (("metric", "app.pages"), ("reason", "too_many_ones")))] == 2
    assert found[(implausible, (("metric", "app.pages"), ("reason", "too_few_ones")))] == 1
    assert found[("ldp_collector_reports_rejected_total", (("reason", "implausible"),))] == 3


def test_a_small_domain_refuses_nothing_its_mechanism_may_send(redis_db: Any) -> None:
    client = make_app(redis_db.url).test_client()
    spec = {"domain": [f"page-{i}" for i in range(8)], "epsilon": 1.0, "mechanism": "oue"}
    pages = define(client, "app.pages", spec)
    response = _post(client, [_all_ones(pages)], OTHER)  # probability 0.5·q⁷ ≈ 5·10⁻⁵
    assert (response.status_code, response.json["accepted"]) == (202, 1)

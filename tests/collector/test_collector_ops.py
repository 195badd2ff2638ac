"""Health, readiness, Prometheus metrics (the OpenAPI document: test_collector_openapi)."""

from __future__ import annotations

import time
from typing import Any

from collector_helpers import THEME_SPEC, TOKEN, define, make_app, reports
from flask.testing import FlaskClient
from prometheus_client.parser import text_string_to_metric_families

from client_sdk.wire import MetricDefinition
from collector import create_app


def samples(client: FlaskClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``/metrics``, by name and labels."""
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.mimetype == "text/plain"
    found = {}
    for family in text_string_to_metric_families(response.data.decode()):
        for s in family.samples:
            found[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return found


def test_healthz_and_readyz(client: FlaskClient) -> None:
    assert client.get("/healthz").json == {"status": "ok"}
    assert client.get("/readyz").json == {"status": "ready", "refused": []}


def test_prometheus_counts_accepted_rejected_duplicates_and_latency(
    client: FlaskClient, theme: MetricDefinition
) -> None:
    batch = reports(theme, 10)
    bad: list[Any] = [{**batch[0], "payload": {"v": 9}}, {"x": 1}, {**batch[0], "version": 5}]
    client.post("/v1/reports", json={"reports": batch + bad})
    client.post("/v1/reports", json={"reports": batch[:4]})
    client.post("/v1/reports", json={"reports": [{**batch[0], "id": "zz"}]})
    client.get("/nowhere/123")
    found = samples(client)
    assert found[("ldp_collector_reports_accepted_total", (("metric", "app.theme"),))] == 10
    assert found[("ldp_collector_reports_duplicate_total", (("metric", "app.theme"),))] == 4
    rejected = {
        labels[0][1]: value
        for (name, labels), value in found.items()
        if name == "ldp_collector_reports_rejected_total"
    }
    assert rejected == {
        "payload": 1,
        "shape": 1,
        "unknown_metric": 1,
        "field": 1,
        "implausible": 0,
        "retired": 0,
    }
    count = ("ldp_collector_request_duration_seconds_count",)
    assert found[(*count, (("endpoint", "/v1/reports"), ("method", "POST")))] == 3
    responses = {
        (dict(labels)["endpoint"], dict(labels)["status"]): value
        for (name, labels), value in found.items()
        if name == "ldp_collector_responses_total"
    }
    assert responses[("/v1/reports", "202")] == 2
    assert responses[("/v1/reports", "400")] == 1
    assert responses[("<unmatched>", "404")] == 1  # no label from the client's path


def test_each_app_has_its_own_metrics(redis_db: Any) -> None:
    first, second = make_app(redis_db.url).test_client(), make_app(redis_db.url).test_client()
    theme = define(first, "app.theme", THEME_SPEC)
    first.post("/v1/reports", json={"reports": reports(theme, 3)})
    key = ("ldp_collector_reports_accepted_total", (("metric", "app.theme"),))
    assert samples(first)[key] == 3
    assert key not in samples(second)


def test_a_bug_of_ours_is_a_json_500(redis_db: Any) -> None:
    app = make_app(redis_db.url, TESTING=False)  # TESTING re-raises instead

    @app.get("/_boom")
    def boom() -> None:
        raise RuntimeError("a bug")

    response = app.test_client().get("/_boom")
    assert response.status_code == 500
    assert response.json == {"error": "internal error (logged; please report it)", "details": []}


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_metrics_want_the_read_token_once_one_is_set(redis_db: Any) -> None:
    """Per-metric counts are read data: with LDP_READ_TOKEN set, /metrics is not open."""
    client = make_app(redis_db.url, READ_TOKEN="read-secret-012345").test_client()
    for headers in ({}, _bearer("wrong"), {"Authorization": "Basic cmVhZC1zZWNyZXQ="}):
        response = client.get("/metrics", headers=headers)
        assert response.status_code == 401, headers
        assert response.headers["WWW-Authenticate"].startswith("Bearer ")
        assert response.json["error"] == "a metrics token is required"
        assert b"ldp_collector" not in response.data
    for token in ("read-secret-012345", TOKEN):  # the admin token grants reads too
        response = client.get("/metrics", headers=_bearer(token))
        assert response.status_code == 200 and b"ldp_collector_responses" in response.data
    assert client.get("/healthz").status_code == 200  # probes stay open


def test_metrics_have_a_token_of_their_own(redis_db: Any) -> None:
    client = make_app(redis_db.url, METRICS_TOKEN="scrape-secret-0123").test_client()
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers=_bearer("scrape-secret-0123")).status_code == 200
    both = make_app(
        redis_db.url, METRICS_TOKEN="scrape-token-012345", READ_TOKEN="read-token-0123456"
    ).test_client()
    for token in ("scrape-token-012345", "read-token-0123456", TOKEN):
        assert both.get("/metrics", headers=_bearer(token)).status_code == 200, token
    assert both.get("/metrics", headers=_bearer("other")).status_code == 401


def test_metrics_token_from_the_environment(redis_db: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("REDIS_URL", redis_db.url)
    monkeypatch.setenv("LDP_READ_TOKEN", "1234567890123456")  # JSON-looking: still a string
    client = create_app().test_client()
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers=_bearer("1234567890123456")).status_code == 200


def test_prometheus_exports_redis_memory_per_metric_and_the_total(redis_db: Any) -> None:
    """Gauges for alerting: a metric's keys' memory, used_memory and maxmemory."""
    from ldp_store.lifecycle import measure_memory

    redis_db.client().config_set("maxmemory", str(512 * 1024 * 1024))
    try:
        app = make_app(redis_db.url)
        client = app.test_client()
        theme = define(client, "app.theme", THEME_SPEC)
        assert client.post("/v1/reports", json={"reports": reports(theme, 10)}).status_code == 202
        found = samples(client)  # the first scrape: the totals, the SCAN under way
        assert found[("ldp_redis_maxmemory_bytes", ())] == 512 * 1024 * 1024
        for _ in range(200):  # until the process's first SCAN is done
            found = samples(client)
            if ("ldp_redis_memory_bytes", (("metric", "app.theme"),)) in found:
                break
            time.sleep(0.05)
        expected = measure_memory(redis_db.client())
        size = found[("ldp_redis_memory_bytes", (("metric", "app.theme"),))]
        assert size == expected.by_metric["app.theme"] > 0
        assert found[("ldp_redis_maxmemory_bytes", ())] == 512 * 1024 * 1024
        assert found[("ldp_redis_used_memory_bytes", ())] > size
        assert found[("ldp_redis_memory_scan_partial", ())] == 0
    finally:
        redis_db.client().config_set("maxmemory", "0")

"""Health, readiness, Prometheus metrics (the OpenAPI document: test_collector_openapi)."""

from __future__ import annotations

from typing import Any

from collector_helpers import THEME_SPEC, define, make_app, reports
from flask.testing import FlaskClient
from prometheus_client.parser import text_string_to_metric_families

from client_sdk.wire import MetricDefinition


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
    assert client.get("/readyz").json == {"status": "ready"}


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
    assert rejected == {"payload": 1, "shape": 1, "unknown_metric": 1, "field": 1}
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

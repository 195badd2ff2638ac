"""Health, readiness, Prometheus metrics and the OpenAPI document (kept in sync)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from collector_helpers import THEME_SPEC, define, make_app, reports
from flask import Flask
from flask.testing import FlaskClient
from prometheus_client.parser import text_string_to_metric_families

from client_sdk.wire import MetricDefinition
from collector.openapi import OPENAPI


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


# -- OpenAPI ------------------------------------------------------------------------------

IGNORED_METHODS = {"HEAD", "OPTIONS"}  # Flask adds these to every rule


def routes(app: Flask) -> dict[str, set[str]]:
    """Every URL rule of ``app`` as an OpenAPI path, with its methods."""
    found: dict[str, set[str]] = {}
    for rule in app.url_map.iter_rules():
        path = re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", rule.rule)
        found.setdefault(path, set()).update(m.lower() for m in rule.methods or ())
    return {path: methods - {m.lower() for m in IGNORED_METHODS} for path, methods in found.items()}


def documented() -> dict[str, set[str]]:
    verbs = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}
    return {path: set(item) & verbs for path, item in OPENAPI["paths"].items()}


def test_openapi_documents_every_route_with_its_methods(app: Flask) -> None:
    assert routes(app) == documented()


def test_openapi_is_served_and_well_formed(client: FlaskClient) -> None:
    doc = client.get("/openapi.json").json
    assert doc == OPENAPI
    assert doc["openapi"].startswith("3.1")
    refs = re.findall(r'"\$ref": "#/components/schemas/([^"]+)"', str(doc).replace("'", '"'))
    assert refs and set(refs) <= set(doc["components"]["schemas"])
    for path, item in doc["paths"].items():
        params = {p["name"] for p in item.get("parameters", [])}
        assert set(re.findall(r"{([^}]+)}", path)) <= params, path
        for verb, operation in item.items():
            if verb == "parameters":
                continue
            assert operation["responses"], (path, verb)
            for status in operation["responses"]:
                assert re.fullmatch(r"[1-5]\d\d", status), (path, verb, status)


@pytest.mark.parametrize("path", sorted(OPENAPI["paths"]))
def test_every_documented_path_exists(client: FlaskClient, path: str) -> None:
    concrete = path.replace("{name}", "app.none")
    for verb in documented()[path]:
        response = client.open(concrete, method=verb.upper())
        assert response.status_code not in (404, 405) or response.json.get("error", "").startswith(
            "unknown metric"
        ), (path, verb, response.status_code)


def test_a_bug_of_ours_is_a_json_500(redis_db: Any) -> None:
    app = make_app(redis_db.url, TESTING=False)  # TESTING re-raises instead

    @app.get("/_boom")
    def boom() -> None:
        raise RuntimeError("a bug")

    response = app.test_client().get("/_boom")
    assert response.status_code == 500
    assert response.json == {"error": "internal error (logged; please report it)", "details": []}

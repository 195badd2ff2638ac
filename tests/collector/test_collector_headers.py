"""Every answer says ``X-Content-Type-Options: nosniff``; every JSON one ``no-store``."""

from __future__ import annotations

from typing import Any

from collector_helpers import ADMIN, THEME_SPEC, TOKEN, define, reports
from flask import Flask
from flask.testing import FlaskClient

from ldp_server.app import create_server_app


def _check(response: Any, what: str) -> None:
    assert response.headers.get("X-Content-Type-Options") == "nosniff", what
    if response.is_json:
        assert response.headers.get("Cache-Control") == "no-store", what


def _exchanges(client: FlaskClient) -> list[tuple[str, Any]]:
    theme = define(client, "app.theme", THEME_SPEC)
    big = b"{" + b" " * (2 << 20) + b"}"
    return [
        ("healthz", client.get("/healthz")),
        ("readyz", client.get("/readyz")),
        ("metrics list", client.get("/v1/metrics")),
        ("metric", client.get("/v1/metrics/app.theme")),
        ("unknown metric", client.get("/v1/metrics/app.nothing")),
        ("put", client.put("/v1/metrics/app.theme", json=THEME_SPEC, headers=ADMIN)),
        ("put without token", client.put("/v1/metrics/app.theme", json=THEME_SPEC)),
        ("accepted", client.post("/v1/reports", json={"reports": reports(theme, 3)})),
        ("malformed", client.post("/v1/reports", data=b"{", content_type="application/json")),
        ("too large", client.post("/v1/reports", data=big, content_type="application/json")),
        ("not json", client.post("/v1/reports", data=b"x", content_type="text/plain")),
        ("no route", client.get("/nowhere")),
        ("wrong method", client.delete("/v1/reports")),
        ("prometheus", client.get("/metrics")),
        ("openapi", client.get("/openapi.json")),
    ]


def test_every_collector_answer_has_the_headers(app: Flask, client: FlaskClient) -> None:
    seen = _exchanges(client)
    assert sum(response.is_json for _, response in seen) >= 13  # the check reached JSON
    assert {r.status_code for _, r in seen} >= {200, 202, 400, 401, 404, 405, 413, 415}
    for what, response in seen:
        _check(response, what)


def test_every_server_answer_has_the_headers(redis_db: Any) -> None:
    client = create_server_app({"REDIS_URL": redis_db.url, "ADMIN_TOKEN": TOKEN}).test_client()
    seen = _exchanges(client)
    seen += [
        ("estimates", client.get("/v1/estimates/app.theme")),
        ("no estimates", client.get("/v1/estimates/app.nothing")),
        ("overview", client.get("/v1/overview")),
        ("dashboard", client.get("/")),
        ("plan", client.get("/v1/plan?epsilon=1&k=3&users=100")),
    ]
    for what, response in seen:
        _check(response, what)
    assert client.get("/v1/overview").headers["Cache-Control"] == "no-store"

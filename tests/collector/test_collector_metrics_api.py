"""``/v1/metrics``: reading definitions, and changing them with the admin token."""

from __future__ import annotations

from typing import Any

import pytest
from collector_helpers import ADMIN, PAGES_SPEC, THEME_SPEC, TOKEN, define, make_app
from flask.testing import FlaskClient

from client_sdk.wire import MetricDefinition


def put(client: FlaskClient, name: str, spec: Any, **headers: str) -> Any:
    return client.put(f"/v1/metrics/{name}", json=spec, headers=headers)


# -- authorization ----------------------------------------------------------------------


def test_put_without_a_token_is_401(client: FlaskClient) -> None:
    response = put(client, "app.theme", THEME_SPEC)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert response.json["error"] == "an admin token is required"


@pytest.mark.parametrize(
    "header", ["", TOKEN, f"Basic {TOKEN}", "Bearer", "Bearer   ", f"Token {TOKEN}"]
)
def test_put_with_a_malformed_header_is_401(client: FlaskClient, header: str) -> None:
    assert put(client, "app.theme", THEME_SPEC, Authorization=header).status_code == 401


@pytest.mark.parametrize("token", ["wrong", TOKEN + "x", TOKEN[:-1], "é" * 5])
def test_put_with_a_wrong_token_is_403(client: FlaskClient, token: str) -> None:
    response = client.put(
        "/v1/metrics/app.theme",
        json=THEME_SPEC,
        headers=[("Authorization", f"Bearer {token}".encode().decode("latin-1"))],
    )
    assert response.status_code == 403
    assert response.json["error"] == "the admin token is not valid"
    assert client.get("/v1/metrics/app.theme").status_code == 404  # nothing was written


@pytest.mark.parametrize("configured", [None, ""])
def test_put_without_a_configured_token_is_disabled(redis_db: Any, configured: Any) -> None:
    client = make_app(redis_db.url, ADMIN_TOKEN=configured).test_client()
    response = put(client, "app.theme", THEME_SPEC, Authorization=f"Bearer {TOKEN}")
    assert response.status_code == 403
    assert "disabled" in response.json["error"]


def test_auth_is_checked_before_the_body(client: FlaskClient) -> None:
    response = client.put("/v1/metrics/x", data="not json", content_type="text/plain")
    assert response.status_code == 401


# -- versions -----------------------------------------------------------------------------


def test_create_is_201_with_version_1_and_a_location(client: FlaskClient) -> None:
    response = put(client, "app.theme", THEME_SPEC, **ADMIN)
    assert response.status_code == 201
    body = response.json
    assert (body["name"], body["version"], body["domain"]) == ("app.theme", 1, THEME_SPEC["domain"])
    assert body["mechanism"] == {"mechanism": "grr", "epsilon": 1.0, "domain_size": 3}
    assert response.headers["Location"] == "/v1/metrics/app.theme?version=1"
    assert MetricDefinition.from_dict(body).version == 1


def test_the_same_spec_again_is_200_and_keeps_the_version(client: FlaskClient) -> None:
    put(client, "app.theme", THEME_SPEC, **ADMIN)
    again = put(client, "app.theme", THEME_SPEC, **ADMIN)
    assert again.status_code == 200 and again.json["version"] == 1


def test_a_description_change_keeps_the_version(client: FlaskClient) -> None:
    put(client, "app.theme", THEME_SPEC, **ADMIN)
    changed = put(client, "app.theme", {**THEME_SPEC, "description": "UI theme"}, **ADMIN)
    assert changed.status_code == 200
    assert (changed.json["version"], changed.json["description"]) == (1, "UI theme")
    assert client.get("/v1/metrics/app.theme").json["description"] == "UI theme"


@pytest.mark.parametrize(
    "change",
    [
        {"epsilon": 0.5},
        {"domain": ["light", "dark"]},
        {"mechanism": "oue"},
    ],
    ids=["epsilon", "domain", "mechanism"],
)
def test_a_parameter_change_makes_a_new_version(
    client: FlaskClient, change: dict[str, Any]
) -> None:
    put(client, "app.theme", THEME_SPEC, **ADMIN)
    response = put(client, "app.theme", {**THEME_SPEC, **change}, **ADMIN)
    assert response.status_code == 201 and response.json["version"] == 2
    assert client.get("/v1/metrics/app.theme").json["version"] == 2
    old = client.get("/v1/metrics/app.theme?version=1").json
    assert old["version"] == 1 and old["mechanism"]["epsilon"] == 1.0
    assert old["domain"] == THEME_SPEC["domain"]


def test_auto_is_resolved_and_explained(client: FlaskClient) -> None:
    body = put(client, "app.big", {"domain": [str(i) for i in range(64)], "epsilon": 1}, **ADMIN)
    assert body.status_code == 201
    assert body.json["mechanism"]["mechanism"] != "auto"
    assert body.json["mechanism_reason"]


@pytest.mark.parametrize(
    ("spec", "problems"),
    [
        ({"domain": ["a"], "epsilon": 1.0}, ["between 2 and"]),
        ({"domain": ["a", "a"], "epsilon": 1.0}, ["duplicate"]),
        ({"domain": ["a", ""], "epsilon": 1.0}, ["domain[1]"]),
        ({"domain": ["a", "b"], "epsilon": 0}, ["epsilon must be finite and in"]),
        ({"domain": ["a", "b"], "epsilon": 1e9}, ["epsilon"]),
        ({"domain": ["a", "b"], "epsilon": "1"}, ["epsilon must be a number"]),
        ({"domain": ["a", "b"], "epsilon": 1, "mechanism": "magic"}, ["mechanism must be"]),
        ({"domain": ["a", "b"], "epsilon": 1, "ttl": 3}, ["unknown fields"]),
        ({"domain": ["a", "b"], "epsilon": 1, "retention": 3}, ["retention must be"]),
        (
            {"domain": ["a", "b"], "epsilon": 1, "retention": {"hour": 1, "week": 1}},
            ["retention must be"],
        ),
        (
            {"domain": ["a", "b"], "epsilon": 1, "retention": {"hour": 1.5}},
            ["retention.hour must be a whole number of seconds"],
        ),
        (
            {"domain": ["a", "b"], "epsilon": 1, "retention": {"day": 0}},
            ["retention.day must be a whole number of seconds in [1,"],
        ),
        ({"domain": "ab", "epsilon": 1, "options": []}, ["domain must be", "options must be"]),
        ({"epsilon": 1, "description": 5}, ["domain must be", "description must be"]),
        ({"domain": ["a", "b", "c"], "epsilon": 1, "mechanism": "rr"}, ["mechanism:"]),
        ([1, 2], ["JSON object"]),
    ],
)
def test_a_bad_spec_is_400_with_every_problem(
    client: FlaskClient, spec: Any, problems: list[str]
) -> None:
    response = put(client, "app.x", spec, **ADMIN)
    assert response.status_code == 400
    assert response.json["error"] == "invalid metric definition"
    details = response.json["details"]
    for problem in problems:
        assert any(problem in d for d in details), (problem, details)
    assert client.get("/v1/metrics/app.x").status_code == 404


def test_a_bad_name_is_400(client: FlaskClient) -> None:
    response = put(client, "App Theme!", THEME_SPEC, **ADMIN)
    assert response.status_code == 400
    assert any("metric name" in d for d in response.json["details"])


# -- reading ----------------------------------------------------------------------------


def test_list_returns_the_current_definitions(client: FlaskClient) -> None:
    assert client.get("/v1/metrics").json == {"metrics": [], "device_budget": None}
    define(client, "app.theme", THEME_SPEC)
    define(client, "app.pages", PAGES_SPEC)
    define(client, "app.theme", {**THEME_SPEC, "epsilon": 3.0})
    listed = client.get("/v1/metrics").json["metrics"]
    assert [(m["name"], m["version"]) for m in listed] == [("app.pages", 1), ("app.theme", 2)]
    for item in listed:  # what the SDK reads back
        assert MetricDefinition.from_dict(item).to_dict() == item


def test_get_one_by_name_and_version(client: FlaskClient) -> None:
    define(client, "app.theme", THEME_SPEC)
    define(client, "app.theme", {**THEME_SPEC, "epsilon": 3.0})
    assert client.get("/v1/metrics/app.theme").json["version"] == 2
    assert client.get("/v1/metrics/app.theme?version=1").json["mechanism"]["epsilon"] == 1.0
    missing = client.get("/v1/metrics/app.theme?version=3")
    assert missing.status_code == 404
    assert missing.json["error"] == "unknown metric 'app.theme' version 3"
    assert client.get("/v1/metrics/app.other").status_code == 404


def test_reads_need_no_token_and_are_json(client: FlaskClient) -> None:
    define(client, "app.theme", THEME_SPEC)
    response = client.get("/v1/metrics/app.theme")
    assert response.status_code == 200 and response.mimetype == "application/json"

"""CORS: a page on an allowed origin may fetch definitions and post reports; nothing else
answers another origin, and nothing does by default."""

from __future__ import annotations

from typing import Any

import pytest
from collector_helpers import ADMIN, THEME_SPEC, define, make_app, reports

from collector.settings import ConfigError

APP = "https://app.example"


@pytest.fixture
def cors_client(redis_db: Any) -> Any:
    return make_app(redis_db.url, CORS_ORIGINS=f"{APP}, https://other.example:8443").test_client()


def test_by_default_no_route_answers_another_origin(client: Any, theme: Any) -> None:
    r = client.get("/v1/metrics/app.theme", headers={"Origin": APP})
    assert r.status_code == 200
    assert "Access-Control-Allow-Origin" not in r.headers
    pre = client.options(
        "/v1/reports", headers={"Origin": APP, "Access-Control-Request-Method": "POST"}
    )
    assert "Access-Control-Allow-Origin" not in pre.headers


def test_an_allowed_origin_gets_definitions_and_posts_reports(cors_client: Any) -> None:
    theme = define(cors_client, "app.theme", THEME_SPEC)
    for path in ("/v1/metrics", "/v1/metrics/app.theme"):
        r = cors_client.get(path, headers={"Origin": APP})
        assert r.status_code == 200
        assert r.headers["Access-Control-Allow-Origin"] == APP
        assert "Origin" in r.headers["Vary"]
        assert "Access-Control-Allow-Credentials" not in r.headers
    pre = cors_client.options(
        "/v1/reports",
        headers={
            "Origin": APP,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type",
        },
    )
    assert pre.status_code == 200
    assert pre.headers["Access-Control-Allow-Origin"] == APP
    assert pre.headers["Access-Control-Allow-Methods"] == "POST"
    assert pre.headers["Access-Control-Allow-Headers"] == "Content-Type, Authorization"
    assert pre.headers["Access-Control-Max-Age"] == "86400"
    posted = cors_client.post(
        "/v1/reports", json={"reports": reports(theme, 3)}, headers={"Origin": APP}
    )
    assert posted.status_code == 202, posted.json
    assert posted.headers["Access-Control-Allow-Origin"] == APP
    # the SDK's backoff reads Retry-After, which a page only sees when it is exposed
    assert posted.headers["Access-Control-Expose-Headers"] == "Retry-After"


def test_other_origins_and_other_routes_are_refused(cors_client: Any) -> None:
    define(cors_client, "app.theme", THEME_SPEC)
    evil = {"Origin": "https://evil.example"}
    assert "Access-Control-Allow-Origin" not in cors_client.get("/v1/metrics", headers=evil).headers
    # the admin routes: no preflight passes, no answer is readable
    for method, path in (
        ("PUT", "/v1/metrics/app.theme"),
        ("DELETE", "/v1/metrics/app.theme"),
        ("POST", "/v1/metrics/app.theme/retire"),
    ):
        pre = cors_client.options(
            path, headers={"Origin": APP, "Access-Control-Request-Method": method}
        )
        assert "Access-Control-Allow-Origin" not in pre.headers, path
        assert "Access-Control-Allow-Methods" not in pre.headers, path
    keys = cors_client.get("/v1/metrics/app.theme/keys", headers={"Origin": APP, **ADMIN})
    assert "Access-Control-Allow-Origin" not in keys.headers
    put = cors_client.put(
        "/v1/metrics/app.theme", json=THEME_SPEC, headers={"Origin": APP, **ADMIN}
    )
    assert "Access-Control-Allow-Origin" not in put.headers


@pytest.mark.parametrize("bad", ["app.example", "ftp://app.example", "https://app.example/path"])
def test_a_malformed_origin_is_a_configuration_error(redis_db: Any, bad: str) -> None:
    with pytest.raises(ConfigError, match="CORS_ORIGINS"):
        make_app(redis_db.url, CORS_ORIGINS=bad)

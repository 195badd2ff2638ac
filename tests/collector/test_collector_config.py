"""``create_app``: defaults, the environment, the test mapping, and refusing bad settings."""

from __future__ import annotations

from typing import Any

import pytest
from collector_helpers import THEME_SPEC, TOKEN

from collector import create_app, settings
from collector.context import Services, services
from collector.settings import ConfigError

ENV = ("REDIS_URL", "LDP_REDIS_URL", "LDP_ADMIN_TOKEN", "LDP_MAX_REPORTS", "LDP_MAX_BACKLOG")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


def test_defaults(redis_db: Any) -> None:
    app = create_app({"REDIS_URL": redis_db.url})
    assert app.config["MAX_BODY_BYTES"] == settings.MAX_BODY_BYTES == 1 << 20
    assert app.config["MAX_REPORTS"] == 1000
    assert app.config["MAX_BACKLOG"] == 5_000_000
    assert app.config["RETRY_AFTER"] == 5
    assert app.config["ADMIN_TOKEN"] is None
    ext = services(app)
    assert isinstance(ext, Services)
    assert ext.registry.redis is ext.redis  # one client, shared


def test_environment(monkeypatch: pytest.MonkeyPatch, redis_db: Any) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    monkeypatch.setenv("LDP_REDIS_URL", redis_db.url)  # the prefixed one wins
    monkeypatch.setenv("LDP_ADMIN_TOKEN", "1234567890123456")  # JSON-looking: still a string
    monkeypatch.setenv("LDP_MAX_REPORTS", "7")
    app = create_app()
    assert app.config["REDIS_URL"] == redis_db.url
    assert app.config["ADMIN_TOKEN"] == "1234567890123456"
    assert app.config["MAX_REPORTS"] == 7
    client = app.test_client()
    response = client.put(
        "/v1/metrics/app.theme",
        json=THEME_SPEC,
        headers={"Authorization": "Bearer 1234567890123456"},
    )
    assert response.status_code == 201


def test_plain_redis_url(monkeypatch: pytest.MonkeyPatch, redis_db: Any) -> None:
    monkeypatch.setenv("REDIS_URL", redis_db.url)
    assert create_app().test_client().get("/readyz").status_code == 200


def test_the_test_mapping_ignores_the_environment(
    monkeypatch: pytest.MonkeyPatch, redis_db: Any
) -> None:
    monkeypatch.setenv("LDP_ADMIN_TOKEN", "from-the-environment")
    app = create_app({"REDIS_URL": redis_db.url, "ADMIN_TOKEN": TOKEN})
    assert app.config["ADMIN_TOKEN"] == TOKEN


def test_a_missing_redis_url_is_refused_at_construction() -> None:
    with pytest.raises(ConfigError, match="REDIS_URL is not set"):
        create_app({})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("MAX_REPORTS", 0),
        ("MAX_BODY_BYTES", -1),
        ("MAX_BACKLOG", "many"),
        ("RETRY_AFTER", 1.5),
        ("GUARD_BUDGET", 51),  # the backlog needs the rest
        ("GUARD_BUDGET", 0),
    ],
)
def test_bad_limits_are_refused_at_construction(redis_db: Any, key: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=key):
        create_app({"REDIS_URL": redis_db.url, key: value})


def test_sign_in_settings_come_from_the_environment_as_written(
    monkeypatch: pytest.MonkeyPatch, redis_db: Any
) -> None:
    monkeypatch.setenv("LDP_REDIS_URL", redis_db.url)
    monkeypatch.setenv("LDP_OIDC_ISSUER", "https://idp.example/realms/acme")
    monkeypatch.setenv("LDP_OIDC_CLIENT_ID", "12345")  # digits: still text
    monkeypatch.setenv("LDP_OIDC_CLIENT_SECRET", "null")  # JSON-looking: still text
    monkeypatch.setenv("LDP_OIDC_ROLES", '{"ldp-owners": {"default": "owner"}}')
    monkeypatch.setenv("LDP_TRUST_FORWARDED_PROTO", "true")
    app = create_app()
    assert app.config["OIDC_CLIENT_ID"] == "12345"
    assert app.config["OIDC_CLIENT_SECRET"] == "null"
    assert app.config["OIDC_ROLES"] == {"ldp-owners": {"default": "owner"}}
    assert app.config["TRUST_FORWARDED_PROTO"] is True


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({}, "LDP_OIDC_CLIENT_ID"),
        ({"OIDC_CLIENT_ID": "c", "OIDC_ROLES": {"g": {"default": "root"}}}, "LDP_OIDC_ROLES"),
        ({"OIDC_CLIENT_ID": "c", "SESSION_SECONDS": 0}, "LDP_SESSION_SECONDS"),
        ({"OIDC_CLIENT_ID": "c", "TRUST_FORWARDED_PROTO": "maybe"}, "TRUST_FORWARDED_PROTO"),
    ],
)
def test_bad_sign_in_settings_are_refused_at_construction(
    redis_db: Any, extra: dict[str, Any], named: str
) -> None:
    config = {"REDIS_URL": redis_db.url, "OIDC_ISSUER": "https://idp.example"}
    with pytest.raises(ConfigError, match=named):
        create_app(config | extra)

"""Tokens are text of at least 16 characters, read from the environment as written.

Flask's ``from_prefixed_env`` parses every value as JSON: ``LDP_READ_TOKEN=null`` became
None (estimates, dashboard and ``/metrics`` open), ``0``/``false`` were falsy (``/metrics``
open), ``LDP_ADMIN_TOKEN=1e999`` became ``inf``. Each such value, and a short one, must
stop the app factory and ``ldp serve`` with a message; an empty one means unset.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from collector import settings
from collector.settings import ConfigError
from ldp_server.app import create_server_app
from tests.process_helpers import stop

BAD_VALUES = ["null", "0", "false", "1e999", "short-token"]
"""What JSON parsing turned into None, falsy values or inf, and a plain short token."""

TOKENS = ("LDP_ADMIN_TOKEN", "LDP_READ_TOKEN", "LDP_METRICS_TOKEN")
GOOD = "a-good-token-of-24-chars"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*TOKENS, "REDIS_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("variable", TOKENS)
@pytest.mark.parametrize("value", BAD_VALUES)
def test_the_app_factory_refuses_json_looking_and_short_tokens(
    redis_db: Any, monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv("LDP_REDIS_URL", redis_db.url)
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError, match=variable) as refused:
        create_server_app()
    assert str(settings.MIN_TOKEN_LENGTH) in str(refused.value)
    assert value not in str(refused.value).replace(variable, "")  # a secret is not echoed


def test_an_empty_token_means_unset(redis_db: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Compose passes ``LDP_READ_TOKEN: ${LDP_READ_TOKEN:-}``: empty is "not set"."""
    monkeypatch.setenv("LDP_REDIS_URL", redis_db.url)
    for variable in TOKENS:
        monkeypatch.setenv(variable, "")
    app = create_server_app()
    assert [app.config[k] for k in settings.TOKEN_SETTINGS] == [None, None, None]
    client = app.test_client()
    assert client.get("/v1/overview").status_code == 200  # reads open, as documented
    assert client.put("/v1/metrics/a.b", json={}).status_code in (401, 403)  # changes not


def test_a_long_json_looking_token_is_the_text_written(
    redis_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LDP_REDIS_URL", redis_db.url)
    monkeypatch.setenv("LDP_READ_TOKEN", "1e999999999999999")  # JSON: inf
    app = create_server_app()
    assert app.config["READ_TOKEN"] == "1e999999999999999"
    client = app.test_client()
    assert client.get("/metrics").status_code == 401
    assert client.get("/v1/overview").status_code == 401
    bearer = {"Authorization": "Bearer 1e999999999999999"}
    assert client.get("/v1/overview", headers=bearer).status_code == 200
    assert client.get("/v1/overview", headers={"Authorization": "Bearer inf"}).status_code == 401


def test_a_token_in_the_test_mapping_must_be_long_text_too(redis_db: Any) -> None:
    for value in ("short", 12345, float("inf")):
        with pytest.raises(ConfigError, match="LDP_READ_TOKEN"):
            create_server_app({"REDIS_URL": redis_db.url, "READ_TOKEN": value})


def _ldp_serve(tmp_path: Path, variable: str, value: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in (*TOKENS, "REDIS_URL")}
    env[variable] = value
    if variable != "LDP_ADMIN_TOKEN":
        env["LDP_ADMIN_TOKEN"] = GOOD
    argv = [sys.executable, "-m", "ldp_server", "serve", "--port", "0"]
    argv += ["--data-dir", str(tmp_path / "data")]
    try:
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:  # it started serving with the bad token
        pytest.fail(f"ldp serve started with {variable}={value!r} instead of refusing it")


@pytest.mark.parametrize(
    ("variable", "value"),
    [("LDP_READ_TOKEN", v) for v in BAD_VALUES] + [("LDP_ADMIN_TOKEN", "1e999")],
)
def test_ldp_serve_refuses_them_with_a_message(tmp_path: Path, variable: str, value: str) -> None:
    done = _ldp_serve(tmp_path, variable, value)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "could not start" in done.stderr and variable in done.stderr, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert not (tmp_path / "data" / "redis").exists()  # refused before anything started


def test_ldp_serve_takes_an_empty_read_token_as_unset(tmp_path: Path) -> None:
    """Compose's ``${LDP_READ_TOKEN:-}``: ``ldp serve`` starts, and reads are open."""
    env = {k: v for k, v in os.environ.items() if k not in (*TOKENS, "REDIS_URL")}
    env.update(LDP_READ_TOKEN="", LDP_METRICS_TOKEN="", LDP_ADMIN_TOKEN=GOOD, COLUMNS="200")
    argv = [sys.executable, "-m", "ldp_server", "serve", "--port", "0"]
    argv += ["--data-dir", str(tmp_path / "data"), "--aggregators", "1", "--web-workers", "1"]
    serve = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert serve.stdout is not None
        line = ""
        while "dashboard" not in line:  # the URLs follow the "running" line
            line = serve.stdout.readline()
            assert line, serve.stderr.read() if serve.stderr else ""
        base = line.split()[-1].rstrip("/")
        with urllib.request.urlopen(base + "/v1/overview", timeout=30) as answer:
            assert answer.status == 200
        with urllib.request.urlopen(base + "/metrics", timeout=30) as answer:
            assert answer.status == 200
    finally:
        stop(serve, signal.SIGINT, 60)

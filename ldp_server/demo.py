"""``ldp demo``: a simulated population through the real system, estimates beside the truth.

The demo defines a few realistic metrics, then N simulated users — each a real SDK
``Client`` perturbing on the "device" with the CSPRNG and uploading over real HTTP, in
several processes at once — report one value of each. It waits until the aggregator has
counted every accepted report and prints each estimate with its interval beside the true
share, marking the intervals that missed (about 5 % should).
"""

from __future__ import annotations

import fcntl
import multiprocessing
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import redis

from aggregator.query.window import read_counts
from aggregator.stats.frequency import FrequencyEstimate, estimate_from_counts
from aggregator.stats.lazy import scipy_stats
from client_sdk.bundle import load_metrics_file, split_version
from client_sdk.wire import MetricDefinition
from ldp_store.embedded import private_folder
from ldp_store.registry import Registry

__all__ = [
    "DEMO_METRICS",
    "DEMO_REGISTRY",
    "DemoResult",
    "define_metrics",
    "fresh_run_folder",
    "run_population",
    "wait_for_counts",
]

RUN_PREFIX = "run-"
"""Each demo run's embedded Redis lives in ``<data-dir>/run-<UTC time>``: its counts are
its own population's, and earlier runs' folders are removed when the next starts."""


def _zipf(k: int, s: float = 1.1) -> list[float]:
    w = [1 / (i + 1) ** s for i in range(k)]
    total = sum(w)
    return [x / total for x in w]


DEMO_REGISTRY = Path(__file__).with_name("demo_registry.toml")
"""The demo's metrics as a registry (``ldp lint`` checks it; docs/guides/metrics-as-code.md)."""

_SHARES: dict[str, list[float]] = {
    "app.theme": [0.52, 0.35, 0.11, 0.02],
    "user.country": _zipf(30, 1.0),  # 30 countries
    "app.version": [
        x / sum(0.75**i for i in range(12)) for x in (0.75 ** (11 - i) for i in range(12))
    ],
    "feature.first_used": _zipf(256, 1.2),
}
"""The simulated population's true shares of each metric's values."""


def _simulated(spec: dict[str, Any]) -> dict[str, Any]:
    """A registry spec as the demo registers it: without the per-device ``budget``. One
    simulated process's SDK client stands in for thousands of devices, and its ledger
    would refuse the second device's report; the budget decodes nothing (it is not part
    of the version), so the estimates are the same."""
    return {key: value for key, value in spec.items() if key != "budget"}


DEMO_METRICS: dict[str, dict[str, Any]] = {
    name: {"spec": _simulated(split_version(name, table)[0]), "shares": _SHARES[name]}
    for name, table in load_metrics_file(DEMO_REGISTRY).items()
}
"""Each demo metric's spec (from :data:`DEMO_REGISTRY`, see :func:`_simulated`) and its
true shares."""


def fresh_run_folder(data_dir: str | Path) -> tuple[Path, list[Path]]:
    """A new, empty folder for this run's data, after removing earlier runs' folders.

    Only ``run-*`` folders the demo made are removed, and none that a running demo holds
    (its ``.lock``, as :class:`~ldp_server.serve.Server` takes it).

    Returns:
        (the new folder, the earlier folders removed).
    """
    root = Path(data_dir)
    private_folder(root)
    removed = []
    for old in sorted(root.glob(f"{RUN_PREFIX}*")):
        if not old.is_dir() or _in_use(old):
            continue
        shutil.rmtree(old, ignore_errors=True)
        removed.append(old)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    folder = root / f"{RUN_PREFIX}{stamp}"
    suffix = 1
    while folder.exists():  # two runs within a second
        suffix += 1
        folder = root / f"{RUN_PREFIX}{stamp}-{suffix}"
    folder.mkdir(mode=0o700)
    return folder, removed


def _in_use(folder: Path) -> bool:
    """Whether a running server holds ``folder``'s lock."""
    lock = folder / ".lock"
    if not lock.exists():
        return False
    with open(lock, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
    return False


def define_metrics(registry: Registry) -> list[MetricDefinition]:
    """Create (or keep) the demo metrics; returns their current definitions."""
    return [registry.put(name, entry["spec"]).definition for name, entry in DEMO_METRICS.items()]


@dataclass
class ShardResult:
    """What one simulating process did."""

    truth: dict[str, list[int]]
    stats: dict[str, Any]
    seconds: float


def _simulate_shard(args: tuple[str, int, int]) -> ShardResult:
    url, users, seed = args
    from client_sdk import Client  # noqa: PLC0415 - imported in the child process

    start = time.perf_counter()
    picker = random.Random(seed)  # which true value each simulated user has
    client = Client(url, flush_at=500, max_queue=max(10_000, 4 * users))
    truth: dict[str, list[int]] = {}
    choices = {}
    for name, entry in DEMO_METRICS.items():
        labels = entry["spec"]["domain"]
        truth[name] = [0] * len(labels)
        choices[name] = (labels, entry["shares"])
    for _ in range(users):
        for name, (labels, shares) in choices.items():
            index = picker.choices(range(len(labels)), shares)[0]
            if client.report(name, labels[index]):
                truth[name][index] += 1
    client.flush(timeout=600)
    stats = client.stats()
    client.shutdown()
    return ShardResult(truth, stats, time.perf_counter() - start)


@dataclass
class DemoResult:
    """The population, what was accepted, and the estimates."""

    truth: dict[str, np.ndarray]
    accepted: int
    dropped: dict[str, int]
    simulate_seconds: float
    aggregate_seconds: float
    estimates: dict[str, FrequencyEstimate] = field(default_factory=dict)

    def expected_misses(self, confidence: float = 0.95) -> tuple[float, int, int]:
        """Misses to expect if every interval covers with ``confidence``: the mean, and
        the range holding 95 % of runs (binomial; the intervals of one metric are not
        independent, so take the range as a guide, not a test)."""
        total = sum(len(self.truth[name]) for name in self.estimates)
        low, high = scipy_stats().binom.interval(0.95, total, 1 - confidence)
        return (1 - confidence) * total, int(low), int(high)

    def misses(self) -> tuple[int, int]:
        """(intervals that missed the true share, intervals)."""
        missed = total = 0
        for name, est in self.estimates.items():
            share = self.truth[name] / max(1, self.truth[name].sum())
            missed += int(np.sum((share < est.ci_low) | (share > est.ci_high)))
            total += len(share)
        return missed, total


def run_population(
    url: str, users: int, processes: int, seed: int = 2017
) -> tuple[dict[str, np.ndarray], int, dict[str, int], float]:
    """Simulate ``users`` devices in ``processes`` processes; returns truth and delivery."""
    base, extra = divmod(users, processes)
    shards = [(url, base + (1 if i < extra else 0), seed + i) for i in range(processes)]
    start = time.perf_counter()
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(processes) as pool:
        results = pool.map(_simulate_shard, [s for s in shards if s[1] > 0])
    seconds = time.perf_counter() - start
    truth = {
        name: np.zeros(len(e["spec"]["domain"]), dtype=np.int64) for name, e in DEMO_METRICS.items()
    }
    accepted = 0
    dropped: dict[str, int] = {}
    for r in results:
        for name, counts in r.truth.items():
            truth[name] += np.array(counts, dtype=np.int64)
        accepted += int(r.stats.get("accepted", 0)) + int(r.stats.get("duplicates", 0))
        for reason, n in r.stats.get("dropped", {}).items():
            if n:  # stats list every reason, most of them at 0
                dropped[reason] = dropped.get(reason, 0) + int(n)
    return truth, accepted, dropped, seconds


def wait_for_counts(
    client: redis.Redis,
    definitions: list[MetricDefinition],
    expected: dict[str, int],
    timeout: float = 600.0,
    progress: Callable[[int], None] | None = None,
) -> float:
    """Wait until the aggregator's n of every metric reaches ``expected``; returns seconds.

    Raises:
        TimeoutError: not all reports counted in time.
    """
    start = time.perf_counter()
    seen = 0
    while True:
        counted = {d.name: read_counts(client, d).n for d in definitions}
        total = sum(counted.values())
        if progress and total > seen:
            progress(total - seen)
            seen = total
        if all(counted[name] >= n for name, n in expected.items()):
            return time.perf_counter() - start
        if time.perf_counter() - start > timeout:
            raise TimeoutError(f"aggregator counted {counted}, expected {expected}")
        time.sleep(0.2)


def estimates_for(
    client: redis.Redis, definitions: list[MetricDefinition]
) -> dict[str, FrequencyEstimate]:
    """Current estimates of each metric."""
    return {
        d.name: estimate_from_counts(d.oracle, read_counts(client, d), labels=d.domain)
        for d in definitions
    }

"""What a primary's failover costs the acknowledged reports, with and without waiting for a
replica (``LDP_REPLICA_ACKS``), and what waiting costs when nothing fails.

Run on purpose, not as a test (about 25 s per failover)::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_failover.py            # 5 runs each
    PYTHONPATH=. .venv/bin/python benchmarks/bench_failover.py --runs 2

1. **Loss table.** :func:`tests.failover_helpers.run_failover` ``--runs`` times per
   setting, alternating: a local Redis Cluster of 3 primaries and 3 replicas
   (``cluster-node-timeout`` 1 s), two collector apps, two workers, four SDK devices at
   150 reports/s each; the primary of the hot metric's first shard is killed -9 two
   seconds in. Per run: reports acknowledged, acknowledged reports the failover lost
   (found by sending every acknowledged report again: a lost one is appended anew),
   reports counted twice, 503 answers, seconds until a replica took over. Twice: with a
   healthy replica (on loopback microseconds behind), and with one that lags: stopped
   for ``LAG`` seconds before the kill, 32 MB written past it so that the kernel's socket
   buffers cannot hold the writes for it.
2. **Cost of waiting.** On a healthy cluster of the same shape, one collector app per
   setting, interleaved: ``--uploads`` uploads of 100 fresh reports of a 3-shard metric
   (one script call per shard, each followed by its ``WAIT`` with replicas on): median
   and p99 seconds per upload, and reports per second through one thread.

The machine is shared: the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from client_sdk.wire import MetricDefinition, build_report  # noqa: E402
from tests.cluster_helpers import LocalCluster  # noqa: E402
from tests.failover_helpers import (  # noqa: E402
    HOT,
    NODE_TIMEOUT_MS,
    SPEC,
    TOKEN,
    collector_app,
    run_failover,
)
from tests.test_cluster_failover import LAG  # noqa: E402


def loss_table(runs: int) -> None:
    print(f"{'replica':>8} {'acks':>4} {'run':>3} {'acked':>6} {'lost':>5} {'double':>6} "
          f"{'503s':>5} {'failover s':>10}")  # fmt: skip
    totals: dict[tuple[str, int], list[int]] = {}
    for lag in (0.0, LAG):
        replica = "lagging" if lag else "healthy"
        for run in range(runs):
            for acks in (0, 1):
                with tempfile.TemporaryDirectory() as tmp:
                    o = run_failover(
                        Path(tmp) / "cluster", acks, seed=run * 2 + acks, replica_lag=lag
                    )
                totals.setdefault((replica, acks), []).append(o.lost)
                row = f"{replica:>8} {acks:>4} {run:>3} {o.acked:>6} {o.lost:>5} {o.double:>6} "
                print(row + f"{o.statuses.get(503, 0):>5} {o.failover_seconds:>10.2f}", flush=True)
                assert o.double == 0, "double counting"
    for (replica, acks), lost in totals.items():
        print(f"{replica} replica, REPLICA_ACKS={acks}: acknowledged reports lost per failover "
              f"{lost} (mean {statistics.mean(lost):.1f})")  # fmt: skip


def waiting_cost(uploads: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cluster = LocalCluster(Path(tmp), 3, replicas=1, node_timeout=NODE_TIMEOUT_MS).start()
        try:
            apps = {acks: collector_app(cluster.url, acks) for acks in (0, 1)}
            answer = (
                apps[0]
                .test_client()
                .put(f"/v1/metrics/{HOT}", json=SPEC, headers={"Authorization": f"Bearer {TOKEN}"})
            )
            hot = MetricDefinition.from_dict(answer.json)
            rng = random.Random(5)
            took: dict[int, list[float]] = {0: [], 1: []}
            for i in range(uploads):
                for acks in (0, 1) if i % 2 else (1, 0):
                    batch = [build_report(hot, rng.choice(hot.domain), rng) for _ in range(100)]
                    client = apps[acks].test_client()
                    start = time.perf_counter()
                    r = client.post("/v1/reports", json={"reports": batch})
                    took[acks].append(time.perf_counter() - start)
                    assert r.status_code == 202 and r.json["accepted"] == 100, r.json
        finally:
            cluster.stop()
    print(f"{'replica acks':>12} {'median ms':>10} {'p99 ms':>8} {'reports/s':>10}")
    for acks, seconds in took.items():
        seconds.sort()
        p99 = seconds[int(0.99 * (len(seconds) - 1))]
        rate = 100 * len(seconds) / sum(seconds)
        print(f"{acks:>12} {statistics.median(seconds) * 1e3:>10.2f} {p99 * 1e3:>8.2f} "
              f"{rate:>10.0f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="failovers per setting")
    parser.add_argument("--uploads", type=int, default=1000, help="uploads per setting")
    args = parser.parse_args()
    print(f"load average at the start {os.getloadavg()[0]:.2f}")
    waiting_cost(args.uploads)
    print(f"load average {os.getloadavg()[0]:.2f}")
    loss_table(args.runs)
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

"""What a dead primary refuses: its own slots' reports only, or every upload; with one
replica per primary or two (``LDP_REPLICA_ACKS=1``).

Run on purpose, not as a test (about 30 s per run)::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_shard_down.py             # 2 runs each
    PYTHONPATH=. .venv/bin/python benchmarks/bench_shard_down.py --runs 1 --restart 30

Per run: a local Redis Cluster of 3 primaries with 1 or 2 replicas each
(``cluster-node-timeout`` 1 s; ``cluster-require-full-coverage`` yes, Redis's default, or
no: ``coverage`` full or partial), one collector app (``REPLICA_ACKS=1``), two workers, four
SDK devices at 100 reports/s each over a 3-shard hot metric and six small ones (batches
of about 20 mixed reports). Three seconds in, the primary of the hot metric's first
shard is killed -9; once a replica is promoted it is restarted ``--restart`` seconds
later, as a supervisor would, and rejoins as a replica. Two SDKs, interleaved:

* ``per report``: the SDK as it is: a 503 that lists ``retry`` positions keeps only those;
* ``whole batch``: the same SDK shown the 503 without ``retry`` (its transport drops the
  field), as every SDK was answered before: the batch is refused and sent again whole.

Figures: the share of reports whose slot the victim served; the **outage** of its slots
(kill → the first of their reports stored again); the **refusal window** of uploads
(kill → the first upload answered 202); and the share of the reports first sent during
the outage that were acknowledged to the device before it ended. Each device's backoff
is capped at 1 s (``Retry-After`` is 1 s), so that windows are seen to the second. The
workers' counts are checked against the distinct reports made (``double``: counted
twice, negative: lost). The machine is shared: the load average is printed with each run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


from aggregator.query.window import Lag, lag_details, read_counts  # noqa: E402
from aggregator.stream.worker import Worker  # noqa: E402
from client_sdk import Client  # noqa: E402
from client_sdk.transport import CallableTransport, Response  # noqa: E402
from tests.cluster_helpers import LocalCluster  # noqa: E402
from tests.failover_helpers import (  # noqa: E402
    HOT,
    NODE_TIMEOUT_MS,
    as_sdk_response,
    stop_workers,
)
from tests.shard_down_helpers import OTHERS, SPECS, start_workload  # noqa: E402

DEVICES = 4
RATE = 100.0
KILL_AFTER = 3.0
FIGURES = ("outage", "refusal", "acked_share")
AFTER_REJOIN = 3.0
"""Seconds the devices go on reporting once the old primary is back as a replica."""


class Recorder:
    """A device's transport into the collector app: every upload's reports and fate."""

    def __init__(self, app: Any, strip_retry: bool) -> None:
        self.app = app
        self.strip_retry = strip_retry
        self.first_sent: dict[str, float] = {}
        self.acked: dict[str, float] = {}
        self.answers: list[tuple[float, float, int, list[dict[str, Any]], set[int]]] = []
        """(when sent, when answered, status, reports, positions stored) of every upload."""
        self.lock = threading.Lock()

    def __call__(self, method: str, path: str, body: bytes | None) -> Response:
        client = self.app.test_client()
        if method == "GET":
            r = client.get(path)
            return as_sdk_response(r)
        sent = time.monotonic()
        r = client.post(path, data=body, content_type="application/json")
        now = time.monotonic()
        reports = json.loads(body or b"{}")["reports"]
        answer = r.json if isinstance(r.json, dict) else {}
        later = {x["index"] for x in answer.get("retry", [])} if r.status_code == 503 else set()
        stored = set(range(len(reports))) - later if r.status_code in (202, 503) else set()
        if r.status_code == 503 and "retry" not in answer:
            stored = set()  # nothing stored (a whole-batch refusal)
        data = r.data
        if self.strip_retry and r.status_code == 503 and "retry" in answer:
            data = json.dumps({"error": answer["error"], "details": answer["details"]}).encode()
        with self.lock:
            for report in reports:
                self.first_sent.setdefault(report["id"], sent)
            acked = range(len(reports)) if r.status_code == 202 else ()
            if not self.strip_retry and r.status_code == 503:
                acked = sorted(stored)
            for i in acked:
                self.acked.setdefault(reports[i]["id"], now)
            self.answers.append((sent, now, r.status_code, reports, stored))
        return as_sdk_response(r, data)


def run(
    replicas: int, coverage: bool, strip_retry: bool, restart_after: float, seed: int
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        cluster = LocalCluster(
            Path(tmp), 3, replicas=replicas, node_timeout=NODE_TIMEOUT_MS, full_coverage=coverage
        )
        return _run(cluster.start(), strip_retry, restart_after, seed)


def _run(
    cluster: LocalCluster, strip_retry: bool, restart_after: float, seed: int
) -> dict[str, Any]:
    workers: list[Worker] = []
    threads: list[threading.Thread] = []
    errors: list[str] = []
    over = threading.Event()
    try:
        app, work, client = start_workload(cluster, workers, threads, errors)
        definitions, victim_port, on_victim = work.definitions, work.victim_port, work.on_victim
        recorders = [Recorder(app, strip_retry) for _ in range(DEVICES)]
        start = time.monotonic()
        names = [HOT, HOT, HOT, *OTHERS]

        def device(i: int) -> None:
            sdk = Client(
                "http://collector.invalid",
                transport=CallableTransport(recorders[i]),
                flush_at=20,
                flush_interval=0.2,
                max_queue=1_000_000,
                rng=random.Random(seed * 100 + i),
                sleep=lambda delay: time.sleep(min(delay, 1.0)),
            )
            picker = random.Random(seed * 100 + 50 + i)
            sent = 0
            while not over.is_set():
                name = picker.choice(names)
                sdk.report(name, picker.choice(SPECS[name]["domain"]))
                sent += 1
                lag = start + sent / RATE - time.monotonic()
                if lag > 0:
                    time.sleep(lag)
            sdk.flush(timeout=120)
            sdk.shutdown()

        fleet = [threading.Thread(target=device, args=(i,)) for i in range(DEVICES)]
        for t in fleet:
            t.start()
        time.sleep(KILL_AFTER)
        load = os.getloadavg()[0]
        killed = time.monotonic()
        victim = cluster.server_at(victim_port)
        victim.kill()
        while victim_port in cluster.primary_ports():
            time.sleep(0.05)
        promoted = time.monotonic() - killed
        time.sleep(restart_after)
        victim.start()
        while victim.client().info("replication").get("master_link_status") != "up":
            time.sleep(0.05)
        rejoined = time.monotonic() - killed
        time.sleep(AFTER_REJOIN)
        over.set()
        for t in fleet:
            t.join(300)

        answers = sorted(a for r in recorders for a in r.answers)
        after = sorted((a for a in answers if a[0] > killed), key=lambda a: a[1])
        victim_back = next(
            (when for _, when, _, reports, stored in after
             if any(on_victim(reports[i]) for i in stored)),
            float("nan"),
        )  # fmt: skip
        first_202 = next((when for _, when, status, _, _ in after if status == 202), float("nan"))
        outage = victim_back - killed
        made = {k: v for r in recorders for k, v in r.first_sent.items()}
        acked = {k: v for r in recorders for k, v in r.acked.items()}
        during = [k for k, when in made.items() if killed <= when < victim_back]
        acked_during = sum(1 for k in during if acked.get(k, float("inf")) < victim_back)
        reports = {r["id"]: r for a in answers for r in a[3]}
        share_victim = sum(map(on_victim, reports.values())) / max(1, len(reports))
        by_metric: dict[str, int] = {}
        for r in reports.values():
            by_metric[r["metric"]] = by_metric.get(r["metric"], 0) + 1
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not all(
            lag_details(client, definitions[m]) == Lag(0, 0)
            and read_counts(client, definitions[m]).n >= n
            for m, n in by_metric.items()
        ):
            time.sleep(0.2)
        double = sum(read_counts(client, definitions[m]).n - n for m, n in by_metric.items())
        return {
            "load": load,
            "promoted": promoted,
            "rejoined": rejoined,
            "victim_share": share_victim,
            "outage": outage,
            "refusal": first_202 - killed,
            "during": len(during),
            "acked_share": acked_during / max(1, len(during)),
            "double": double,
            "errors": errors,
        }
    finally:
        over.set()
        stop_workers(workers, threads)
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument(
        "--restart", type=float, default=10.0, help="seconds from the promotion to the restart"
    )
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    print(f"{'replicas':>8} {'coverage':>8} {'SDK answer':>11} {'run':>3} {'load':>5} "
          f"{'victim %':>8} {'promoted s':>10} {'rejoined s':>10} {'outage s':>8} "
          f"{'refusal s':>9} {'sent in outage':>14} {'acked %':>7} {'double':>6}")  # fmt: skip
    table: dict[tuple[int, str, str], list[dict[str, Any]]] = {}
    for run_ in range(args.runs):
        for replicas, coverage in ((1, True), (2, True), (2, False)):
            for strip in (True, False):
                mode = "whole batch" if strip else "per report"
                full = "full" if coverage else "partial"
                o = run(
                    replicas, coverage, strip, args.restart, seed=run_ * 8 + replicas * 2 + strip
                )
                table.setdefault((replicas, full, mode), []).append(o)
                print(f"{replicas:>8} {full:>8} {mode:>11} {run_:>3} {o['load']:>5.1f} "
                      f"{100 * o['victim_share']:>8.1f} {o['promoted']:>10.1f} "
                      f"{o['rejoined']:>10.1f} {o['outage']:>8.1f} {o['refusal']:>9.1f} "
                      f"{o['during']:>14} {100 * o['acked_share']:>7.1f} {o['double']:>6}"
                      + (f"  errors: {o['errors']}" if o["errors"] else ""),
                      flush=True)  # fmt: skip
    print("\nmedians")
    for (replicas, full, mode), rows in table.items():
        med = {k: statistics.median(r[k] for r in rows) for k in FIGURES}
        acked = 100 * med["acked_share"]
        print(f"{replicas:>8} {full:>8} {mode:>11}  outage {med['outage']:.1f} s  refusal "
              f"{med['refusal']:.1f} s  acked in the outage {acked:.1f} %")  # fmt: skip
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()

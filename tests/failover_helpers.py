"""A failover under load, on a real local Redis Cluster with replicas: the scenario the
failover test asserts on and ``benchmarks/bench_failover.py`` measures several times.

Three primaries with one replica each (``cluster-node-timeout`` 1 s), two collector apps,
two aggregator workers (threads) and a few SDK devices reporting steadily through the
apps; every report a collector answered 202 is remembered. Part-way, the primary holding
the hot metric's first shard is killed with SIGKILL (optionally after its replica was
stopped for a moment, so that it lags behind): its replica is promoted, the
collectors answer 503 + ``Retry-After`` meanwhile and the SDK retries. The dead node is
then restarted, as a supervisor would, and rejoins as the new primary's replica.

Afterwards every acknowledged report is sent again: the replay guard is written by the
same script as the stream entry, so a report the new primary still has comes back as a
duplicate and one the failover lost is appended now. That count is the **loss**. Then
every acknowledged report is in the streams exactly once, and the aggregator's ``n`` and
support counts must equal those computed offline from them: anything above is a
**double count**, anything below a report the workers lost.
"""

from __future__ import annotations

import json
import random
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from flask import Flask

from aggregator.query.window import Lag, lag_details, read_counts
from aggregator.stream.worker import Worker
from client_sdk import Client
from client_sdk.transport import CallableTransport, Response
from client_sdk.wire import MetricDefinition
from collector import create_app
from ldp_store import keys
from ldp_store.connection import connect
from tests.cluster_helpers import LocalCluster

TOKEN = "failover-admin-token"
HOT = "app.hot"
SPEC = {"domain": [f"screen-{i}" for i in range(16)], "epsilon": 1.0, "mechanism": "oue",
        "shards": 3}  # fmt: skip
NODE_TIMEOUT_MS = 1000
"""``cluster-node-timeout``: a killed primary is marked failed after about this long,
and its replica promoted within about as long again."""


UNREPLICATED = 20
"""Reports acknowledged while the replica lags, at least, with ``REPLICA_ACKS=0``: one
device's batch (``flush_at``), so the kill surely loses some."""

BALLAST_VALUES = 4
BALLAST_BYTES = 8 << 20
"""32 MB written to the victim while its replica is stopped: more than loopback TCP's
send and receive buffers together (a few MB each), under the primary's 256 MB output
buffer limit for a replica."""


def as_sdk_response(r: Any, data: bytes | None = None) -> Response:
    """A Flask test client's answer as the SDK's transport returns it (``data`` instead
    of its body when given)."""
    body = r.data if data is None else data
    return Response(r.status_code, {k.lower(): v for k, v in r.headers.items()}, body)


def collector_app(url: str, replica_acks: int) -> Flask:
    """A collector on ``url``: 503s say ``Retry-After: 1``; one address is many devices."""
    return create_app(
        {
            "REDIS_URL": url,
            "ADMIN_TOKEN": TOKEN,
            "TESTING": True,
            "RETRY_AFTER": 1,
            "REPLICA_ACKS": replica_acks,
            "SOURCE_REQUESTS_PER_SECOND": 0,
            "SOURCE_REPORTS_PER_MINUTE": 0,
        }
    )


class Tracker:
    """The SDK's transport into a collector app, remembering what was acknowledged (a
    202's reports, and those a 503 that lists ``retry`` positions stored)."""

    def __init__(self, app: Flask) -> None:
        self.app = app
        self.acked: dict[str, dict[str, Any]] = {}
        self.statuses: Counter[int] = Counter()
        self.latencies: list[tuple[float, float]] = []
        """(when, seconds) of every upload answered 202."""
        self.answered: list[tuple[float, int]] = []
        """(when sent, status) of every upload."""
        self.retry_after_missing = 0
        self.raised: list[str] = []
        """Exceptions the app let out (with TESTING on they are raised, not 500)."""
        self.lock = threading.Lock()

    def __call__(self, method: str, path: str, body: bytes | None) -> Response:
        client = self.app.test_client()
        start = time.monotonic()
        try:
            if method == "GET":
                r = client.get(path)
            else:
                r = client.post(path, data=body, content_type="application/json")
        except Exception as exc:  # a bug escaping the app's error handlers
            with self.lock:
                self.raised.append(f"{type(exc).__name__}: {exc}")
            raise
        took = time.monotonic() - start
        with self.lock:
            if method == "POST":
                self.statuses[r.status_code] += 1
                self.answered.append((start, r.status_code))
                if r.status_code == 503 and not r.headers.get("Retry-After"):
                    self.retry_after_missing += 1
                reports = json.loads(body or b"{}")["reports"]
                if r.status_code == 202:
                    self.latencies.append((start, took))
                    for report in reports:
                        self.acked[report["id"]] = report
                answer = r.json if r.status_code == 503 and isinstance(r.json, dict) else {}
                if isinstance(answer.get("retry"), list):  # the rest was stored (and acked)
                    left = {x["index"] for x in answer["retry"] + answer["rejected"]}
                    for i, report in enumerate(reports):
                        if i not in left:
                            self.acked[report["id"]] = report
        return as_sdk_response(r)


@dataclass
class Outcome:
    """What one failover did to the acknowledged reports."""

    replica_acks: int
    acked: int
    lost: int
    double: int
    statuses: dict[int, int]
    retry_after_missing: int
    failover_seconds: float
    latencies_before: list[float] = field(default_factory=list)
    """Seconds per acknowledged upload before the kill (the cost of waiting)."""
    load_seconds: float = 0.0
    acked_before: int = 0
    workers_alive: bool = True
    worker_errors: list[str] = field(default_factory=list)
    raised: list[str] = field(default_factory=list)
    """Exceptions a collector app let out instead of answering."""


def device_client(tracker: Tracker, seed: int) -> Client:
    """A device's SDK client uploading through ``tracker`` (small, frequent batches; retry
    waits capped at 0.3 s), its randomness seeded."""
    return Client(
        "http://collector.invalid",
        transport=CallableTransport(tracker),
        flush_at=20,
        flush_interval=0.2,
        max_queue=1_000_000,
        rng=random.Random(seed),
        sleep=lambda delay: time.sleep(min(delay, 0.3)),
    )


def offline_support(d: MetricDefinition, reports: list[dict[str, Any]]) -> list[int]:
    """The support counts ``reports`` must give."""
    counts = np.zeros(d.k, dtype=np.int64)
    for r in reports:
        for u in d.mechanism.support(r["payload"]):
            counts[u] += 1
    return counts.tolist()


def _wait(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def start_workers(
    url: str,
    workers: list[Worker],
    threads: list[threading.Thread],
    errors: list[str],
    batch_size: int,
    block_ms: int,
) -> None:
    """Two aggregator workers on the cluster at ``url``, each in a thread, appended to
    ``workers`` and ``threads``; what ends a worker is appended to ``errors``."""
    for i in range(2):
        worker = Worker(connect(url), name=f"w{i}", handle_signals=False,
                        batch_size=batch_size, block_ms=block_ms)  # fmt: skip
        workers.append(worker)

        def work(w: Worker = worker) -> None:
            try:
                w.run()
            except BaseException as exc:  # noqa: BLE001 - the caller reports it
                errors.append(f"{type(exc).__name__}: {exc}")

        threads.append(threading.Thread(target=work, daemon=True))
    for t in threads:
        t.start()


def stop_workers(workers: list[Worker], threads: list[threading.Thread]) -> None:
    """Stop what :func:`start_workers` started, and wait for their threads."""
    for w in workers:
        w.stop()
    for t in threads:
        t.join(10)


def run_failover(
    base: Path,
    replica_acks: int,
    *,
    seconds: float = 6.0,
    kill_after: float = 2.0,
    devices: int = 4,
    rate: float = 150.0,
    seed: int = 0,
    replica_lag: float = 0.0,
) -> Outcome:
    """One failover under load (see the module docstring).

    Args:
        base: a fresh directory for the cluster's nodes.
        replica_acks: the collectors' ``REPLICA_ACKS``.
        seconds: how long the devices report at least (they go on until the killed
            primary is back as a replica).
        kill_after: when (seconds into the load) the primary is killed.
        devices: SDK clients, half on each collector.
        rate: reports a second per device.
        seed: the devices' randomness.
        replica_lag: seconds the victim's replica is stopped (SIGSTOP) just before the
            kill, then continued: a replica that lags behind (a slow link, a busy host)
            when its primary dies. 0: a healthy replica (on loopback, microseconds
            behind).
    """
    cluster = LocalCluster(base, 3, replicas=1, node_timeout=NODE_TIMEOUT_MS).start()
    workers: list[Worker] = []
    threads: list[threading.Thread] = []
    errors: list[str] = []
    # Set once the old primary is back: the devices report at least until then, so the
    # outage meets uploads however slow the machine (a fixed span did not always).
    over = threading.Event()
    try:
        url = cluster.url
        apps = [collector_app(url, replica_acks) for _ in range(2)]
        answer = (
            apps[0]
            .test_client()
            .put(f"/v1/metrics/{HOT}", json=SPEC, headers={"Authorization": f"Bearer {TOKEN}"})
        )
        assert answer.status_code in (200, 201), answer.json
        hot = MetricDefinition.from_dict(answer.json)
        client = connect(url)
        victim_port = int(client.get_node_from_key(keys.stream_key(HOT, hot.version, 0)).port)

        start_workers(url, workers, threads, errors, batch_size=200, block_ms=200)

        trackers = [Tracker(apps[i % 2]) for i in range(devices)]
        start = time.monotonic()
        stop_at = start + seconds

        def device(i: int) -> None:
            sdk = device_client(trackers[i], seed * 100 + i)
            picker = random.Random(seed * 100 + 50 + i)
            sent = 0
            while time.monotonic() < stop_at or not over.is_set():
                assert sdk.report(HOT, picker.choice(SPEC["domain"]))
                sent += 1
                lag = start + sent / rate - time.monotonic()
                if lag > 0:
                    time.sleep(lag)
            assert sdk.flush(timeout=60), sdk.stats()
            sdk.shutdown()

        fleet = [threading.Thread(target=device, args=(i,)) for i in range(devices)]
        for t in fleet:
            t.start()
        time.sleep(kill_after)
        killed_at = time.monotonic()
        acked_before = sum(len(t.acked) for t in trackers)
        replica = next(
            r for r in cluster.servers[cluster.primaries :]
            if int(r.client().info("replication").get("master_port", 0)) == victim_port
        )  # fmt: skip
        if replica_lag:
            assert replica.process is not None
            replica.process.send_signal(signal.SIGSTOP)
            # Fill the socket buffers between the two (the kernel would otherwise hold
            # the writes for the stopped replica and deliver them after): what follows
            # stays in the primary's memory, as behind a slow link.
            tag = next(
                t for t in (f"{{ballast-{i}}}" for i in range(10_000))
                if int(client.get_node_from_key(t).port) == victim_port
            )  # fmt: skip
            victim_node = cluster.server_at(victim_port).client()
            for i in range(BALLAST_VALUES):
                victim_node.set(f"{tag}{i}", b"\0" * BALLAST_BYTES)
            unreplicated = sum(len(t.acked) for t in trackers)
            time.sleep(replica_lag)
            if not replica_acks:
                # What is acknowledged from now on is on the primary alone: the loss the
                # test expects. A fixed lag is a race against the load (a slow machine may
                # acknowledge nothing in it): wait for an upload's worth as well.
                _wait(
                    lambda: sum(len(t.acked) for t in trackers) >= unreplicated + UNREPLICATED,
                    120,
                    "uploads acknowledged while the replica lags",
                )
        cluster.server_at(victim_port).kill()
        if replica_lag:
            assert replica.process is not None
            replica.process.send_signal(signal.SIGCONT)
        # The replica's promotion, as the survivors see it.
        _wait(lambda: victim_port not in cluster.primary_ports(), 120, "a replica promoted")
        failover_seconds = time.monotonic() - killed_at
        # The dead node comes back, as a supervisor would restart it: it learns it was
        # failed over and rejoins as the new primary's replica. Until then a collector
        # that waits for a replica answers 503 for that shard (nothing to wait for).
        victim = cluster.server_at(victim_port)
        victim.start()
        try:
            _wait(lambda: victim.client().info("replication").get("master_link_status") == "up",
                  120, "the old primary back as a replica")  # fmt: skip
        finally:
            over.set()
        for t in fleet:
            t.join(300)
            assert not t.is_alive(), "a device never got its reports acknowledged"
        cluster.wait_ready(120)

        acked: dict[str, dict[str, Any]] = {}
        for t in trackers:
            acked.update(t.acked)
        reports = list(acked.values())
        lost = 0
        for i in range(0, len(reports), 1000):
            chunk = reports[i : i + 1000]
            for _ in range(100):
                r = apps[0].test_client().post("/v1/reports", json={"reports": chunk})
                if r.status_code == 202:
                    lost += r.json["accepted"]
                    break
                assert r.status_code == 503, r.json
                time.sleep(0.2)
            else:
                raise AssertionError("the collector never took the replayed reports")

        def counted() -> int:
            return read_counts(client, hot).n

        def drained() -> bool:  # every entry counted and trimmed: nothing more can count
            return lag_details(client, hot) == Lag(0, 0)

        _wait(lambda: counted() >= len(reports) and drained(), 300, "every report counted")
        counts = read_counts(client, hot)
        double = counts.n - len(reports)
        if double == 0:
            assert counts.support.tolist() == offline_support(hot, reports)
        statuses: Counter[int] = Counter()
        for t in trackers:
            statuses.update(t.statuses)
        before = [took for t in trackers for when, took in t.latencies if when < killed_at]
        return Outcome(
            replica_acks=replica_acks,
            acked=len(reports),
            lost=lost,
            double=double,
            statuses=dict(statuses),
            retry_after_missing=sum(t.retry_after_missing for t in trackers),
            failover_seconds=failover_seconds,
            latencies_before=before,
            load_seconds=kill_after,
            acked_before=acked_before,
            workers_alive=all(t.is_alive() for t in threads),
            worker_errors=errors,
            raised=[e for t in trackers for e in t.raised],
        )
    finally:
        over.set()
        stop_workers(workers, threads)
        cluster.stop()

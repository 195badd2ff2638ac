"""A cluster that degrades per shard: a primary killed -9 refuses only its own slots'
reports, on a real local Redis Cluster (3 primaries, one replica each,
``LDP_REPLICA_ACKS=1``).

An SDK device's batch mixes metrics and shards. While the victim's slots have no primary
that can take writes (until its replica is promoted and, with one replica, until the old
node rejoins as the new primary's replica), the collector stores the other shards'
reports and answers 503 with their positions in ``retry``; the SDK sends only those
again, until they are stored. Afterwards the workers' counts equal those computed offline
from exactly the reports made: each one counted once.
"""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path
from typing import Any

from aggregator.query.window import Lag, lag_details, read_counts
from aggregator.stream.worker import Worker
from client_sdk import Client
from client_sdk.transport import CallableTransport, Response
from tests.cluster_helpers import LocalCluster
from tests.failover_helpers import (
    HOT,
    NODE_TIMEOUT_MS,
    as_sdk_response,
    offline_support,
    stop_workers,
)
from tests.shard_down_helpers import OTHERS, SPECS, start_workload


def _wait(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


class Recorder:
    """The SDK's transport into a collector app, keeping every upload and its answer."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.uploads: list[tuple[list[dict[str, Any]], int, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def __call__(self, method: str, path: str, body: bytes | None) -> Response:
        client = self.app.test_client()
        if method == "GET":
            r = client.get(path)
        else:
            r = client.post(path, data=body, content_type="application/json")
            with self.lock:
                self.uploads.append((json.loads(body or b"{}")["reports"], r.status_code, r.json))
        return as_sdk_response(r)


def test_a_dead_primary_refuses_only_its_shards_and_the_sdk_resends_only_those(
    tmp_path: Path,
) -> None:
    cluster = LocalCluster(tmp_path / "cluster", 3, replicas=1, node_timeout=NODE_TIMEOUT_MS)
    cluster.start()
    workers: list[Worker] = []
    threads: list[threading.Thread] = []
    errors: list[str] = []
    try:
        app, work, client = start_workload(cluster, workers, threads, errors)
        definitions, victim_port, on_victim = work.definitions, work.victim_port, work.on_victim
        recorder = Recorder(app)
        sdk = Client(
            "http://collector.invalid",
            transport=CallableTransport(recorder),
            flush_at=10**6,
            flush_interval=3600.0,
            rng=random.Random(7),
            sleep=lambda delay: time.sleep(min(delay, 0.3)),
        )
        picker = random.Random(8)
        made: list[str] = []
        for i in range(20):  # a first batch, while every node is up
            made.append(HOT if i % 2 else OTHERS[i % len(OTHERS)])
            assert sdk.report(made[-1], picker.choice(SPECS[made[-1]]["domain"]))
        assert sdk.flush(timeout=60)
        for i in range(120):
            made.append(HOT if i % 2 else OTHERS[i % len(OTHERS)])
            assert sdk.report(made[-1], picker.choice(SPECS[made[-1]]["domain"]))

        cluster.server_at(victim_port).kill()
        sdk.flush(timeout=0.5)  # the first try, refused in part
        _wait(lambda: victim_port not in cluster.primary_ports(), 120, "a replica promoted")
        victim = cluster.server_at(victim_port)
        victim.start()  # back, as a supervisor would restart it: the new primary's replica
        _wait(lambda: victim.client().info("replication").get("master_link_status") == "up",
              120, "the old primary back as a replica")  # fmt: skip
        assert sdk.flush(timeout=120), sdk.stats()
        sdk.shutdown()

        uploads = recorder.uploads
        assert uploads[0][1] == 202
        batch, status, first = uploads[1]
        assert status == 503 and len(batch) == 120, (status, first)
        down = [i for i, r in enumerate(batch) if on_victim(r)]
        assert 0 < len(down) < len(batch)
        # The healthy shards' reports were stored at once; the dead primary's were listed.
        assert [r["index"] for r in first["retry"]] == down, first
        assert first["accepted"] == len(batch) - len(down) and first["rejected"] == []
        # Later uploads hold nothing but what was refused, until it was stored.
        refused = {batch[i]["id"] for i in down}
        for reports, _, _ in uploads[2:]:
            assert {r["id"] for r in reports} <= refused
        assert uploads[-1][1] == 202
        stats = sdk.stats()
        assert stats["sent"] == len(made) and stats["dropped"]["rejected"] == 0

        # Every report made is counted exactly once, by the workers that outlived it all.
        reports = [r for reports, _, _ in uploads for r in reports]
        unique = {r["id"]: r for r in reports}
        assert len(unique) == len(made)
        by_metric: dict[str, list[dict[str, Any]]] = {}
        for r in unique.values():
            by_metric.setdefault(r["metric"], []).append(r)

        def counted() -> bool:
            return all(
                read_counts(client, definitions[m]).n >= len(rs)
                and lag_details(client, definitions[m]) == Lag(0, 0)
                for m, rs in by_metric.items()
            )

        _wait(counted, 300, "every report counted")
        for name, rs in by_metric.items():
            counts = read_counts(client, definitions[name])
            assert counts.n == len(rs), f"{name}: {counts.n} counted, {len(rs)} made"
            assert counts.support.tolist() == offline_support(definitions[name], rs)
        assert all(t.is_alive() for t in threads) and not errors, errors
    finally:
        stop_workers(workers, threads)
        cluster.stop()

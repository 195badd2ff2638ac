"""Resharding under load on a real local Redis Cluster: a hot metric's slots move to
another primary while reports flow.

The slots of every shard of the metric (its streams, counts, replay guard, claim fence:
each shard's keys share one hash tag, so one slot) are moved the way
``redis-cli --cluster reshard`` moves them: ``CLUSTER SETSLOT … IMPORTING`` on the
target, ``MIGRATING`` on the source, ``MIGRATE … KEYS`` a few keys at a time (with
pauses, so that requests land mid-move), then ``SETSLOT … NODE`` everywhere. Two
collectors and two workers keep running: redis-py follows ``ASK`` and ``MOVED``. A
script of several keys on a slot mid-move gets ``TRYAGAIN`` from the source node as long
as one of its keys is missing there, and the append script always names one that is
(yesterday's replay guard, or a bucket not yet written): redis-py retries for about
0.4 s, then the collector answers 503 + ``Retry-After`` and the SDK retries after the
move; the worker waits it out likewise.
Afterwards the counts equal those computed offline from the acknowledged reports: none
lost, none counted twice, and every key of each shard's slot is on the new node.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from aggregator.query.window import lag_details, read_counts
from aggregator.stream.worker import Worker
from client_sdk.wire import MetricDefinition
from ldp_store import keys
from ldp_store.connection import connect
from tests.cluster_helpers import LocalCluster
from tests.failover_helpers import (
    HOT,
    TOKEN,
    Tracker,
    collector_app,
    device_client,
    offline_support,
    start_workers,
    stop_workers,
)

SPEC = {"domain": [f"screen-{i}" for i in range(16)], "epsilon": 1.0, "mechanism": "oue",
        "shards": 2}  # fmt: skip
KEYS_PER_MIGRATE = 2
"""Keys per MIGRATE: few, so the slot spends a while half moved."""
PAUSE = 0.05
"""Seconds between MIGRATE calls, for requests to arrive mid-move."""


def _id(node: Any) -> str:
    raw = node.execute_command("CLUSTER MYID")
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def move_slot(cluster: LocalCluster, slot: int, source_port: int, target_port: int) -> int:
    """Move ``slot`` as ``redis-cli --cluster reshard`` does; returns the keys moved."""
    source = cluster.server_at(source_port).client()
    target = cluster.server_at(target_port).client()
    source_id, target_id = _id(source), _id(target)
    target.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", source_id)
    source.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", target_id)
    moved = 0
    while True:
        names = source.execute_command("CLUSTER GETKEYSINSLOT", slot, KEYS_PER_MIGRATE)
        if not names:
            break
        # No REPLACE: a key both nodes hold would be a bug, and must fail loudly.
        source.execute_command("MIGRATE", "127.0.0.1", target_port, "", 0, 5000, "KEYS", *names)
        moved += len(names)
        time.sleep(PAUSE)
    for node in [target, source] + [s.client() for s in cluster.servers
                                    if s.port not in (source_port, target_port)]:  # fmt: skip
        node.execute_command("CLUSTER SETSLOT", slot, "NODE", target_id)
    return moved


def test_a_hot_metric_s_slots_move_to_another_primary_under_load(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "cluster", 3).start()
    workers: list[Worker] = []
    threads: list[threading.Thread] = []
    errors: list[str] = []
    try:
        url = cluster.url
        apps = [collector_app(url, 0) for _ in range(2)]
        answer = (
            apps[0]
            .test_client()
            .put(f"/v1/metrics/{HOT}", json=SPEC, headers={"Authorization": f"Bearer {TOKEN}"})
        )
        hot = MetricDefinition.from_dict(answer.json)
        client = connect(url)
        streams = [keys.stream_key(HOT, hot.version, s) for s in range(hot.shards)]
        slots = [client.keyslot(s) for s in streams]  # type: ignore[attr-defined]
        homes = [int(client.get_node_from_key(s).port) for s in streams]  # type: ignore[attr-defined]
        target = next(p for p in cluster.ports if p != homes[0])
        assert set(homes) != {target}

        start_workers(url, workers, threads, errors, batch_size=100, block_ms=100)

        trackers = [Tracker(apps[i % 2]) for i in range(4)]
        moving = threading.Event()
        moved_at: list[float] = []

        def device(i: int) -> None:
            sdk = device_client(trackers[i], 300 + i)
            picker = random.Random(400 + i)
            start, sent = time.monotonic(), 0
            # Report until the move is over, and a second more.
            while not moved_at or time.monotonic() < moved_at[0] + 1:
                assert sdk.report(HOT, picker.choice(SPEC["domain"]))
                sent += 1
                if sent == 150:
                    moving.set()
                lag = start + sent / 150 - time.monotonic()
                if lag > 0:
                    time.sleep(lag)
                if time.monotonic() - start > 60:
                    raise AssertionError("the move never finished")
            assert sdk.flush(timeout=60), sdk.stats()
            sdk.shutdown()

        fleet = [threading.Thread(target=device, args=(i,)) for i in range(4)]
        for t in fleet:
            t.start()
        assert moving.wait(30)
        before = sum(len(t.acked) for t in trackers)
        moved, move_started = 0, time.monotonic()
        for slot, home in zip(slots, homes, strict=True):
            if home != target:
                moved += move_slot(cluster, slot, home, target)
        move_ended = time.monotonic()
        moved_at.append(move_ended)
        for t in fleet:
            t.join(120)
            assert not t.is_alive()
        cluster.wait_ready(30)

        acked = [r for t in trackers for r in t.acked.values()]
        assert len(acked) > before > 0  # reports flowed before, during and after the move
        assert moved >= 3 * len(slots) - 1  # stream, counts, guard... of each shard
        during = Counter(status for t in trackers for when, status in t.answered
                         if move_started <= when <= move_ended)  # fmt: skip
        assert sum(during.values()) >= 3, "no upload was answered while the slots moved"
        statuses: dict[int, int] = {}
        for t in trackers:
            for status, n in t.statuses.items():
                statuses[status] = statuses.get(status, 0) + n
        assert set(statuses) <= {202, 503}, statuses  # never a 500
        assert sum(t.retry_after_missing for t in trackers) == 0
        assert not [e for t in trackers for e in t.raised]  # nothing escaped the app

        deadline = time.monotonic() + 60
        while read_counts(client, hot).n < len(acked) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # anything counted twice shows up now
        assert not errors and all(t.is_alive() for t in threads), errors
        counts = read_counts(client, hot)
        assert counts.n == len(acked), f"counted {counts.n}, acknowledged {len(acked)}"
        assert counts.support.tolist() == offline_support(hot, acked)
        assert lag_details(client, hot).pending == 0
        # Every key of each shard's slot is on the new node now, none left behind: the
        # commit and append scripts kept running on keys of one slot there.
        source_nodes = {h for h in homes if h != target}
        for slot in slots:
            assert int(client.nodes_manager.slots_cache[slot][0].port) == target  # type: ignore[attr-defined]
            here = cluster.server_at(target).client()
            assert here.execute_command("CLUSTER COUNTKEYSINSLOT", slot) >= 3
            for port in source_nodes:
                there = cluster.server_at(port).client()
                assert there.execute_command("CLUSTER COUNTKEYSINSLOT", slot) == 0
    finally:
        stop_workers(workers, threads)
        cluster.stop()

"""A mixed workload for a dead primary (``tests/test_cluster_shard_down.py``,
``benchmarks/bench_shard_down.py``): a hot 3-shard metric and six small ones defined on a
collector app, and which reports the primary of the hot metric's first shard serves."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flask import Flask
from redis.crc import key_slot

from client_sdk.wire import MetricDefinition
from ldp_store import keys
from ldp_store.connection import connect
from tests.cluster_helpers import LocalCluster
from tests.failover_helpers import HOT, SPEC, TOKEN, collector_app, start_workers

OTHERS = [f"app.m{i}" for i in range(6)]
"""Small metrics beside the hot one: their slots spread over the three primaries."""

SPECS: dict[str, dict[str, Any]] = {
    HOT: SPEC,
    **{m: {"domain": ["a", "b", "c"], "epsilon": 1.0} for m in OTHERS},
}


@dataclass
class Workload:
    """The metrics defined, and the victim: the primary of the hot metric's shard 0."""

    definitions: dict[str, MetricDefinition]
    victim_port: int
    on_victim: Callable[[dict[str, Any]], bool]
    """Whether a report (as sent) goes to a slot the victim serves (as it did at the start)."""


def define_workload(cluster: LocalCluster, app: Flask) -> Workload:
    """Define :data:`SPECS` through ``app`` and find the victim on ``cluster``."""
    definitions: dict[str, MetricDefinition] = {}
    for name, spec in SPECS.items():
        answer = app.test_client().put(
            f"/v1/metrics/{name}", json=spec, headers={"Authorization": f"Bearer {TOKEN}"}
        )
        assert answer.status_code in (200, 201), answer.json
        definitions[name] = MetricDefinition.from_dict(answer.json)
    hot = definitions[HOT]
    client = connect(cluster.url)
    victim_port = int(client.get_node_from_key(keys.stream_key(HOT, hot.version, 0)).port)
    victim_slots = {
        slot
        for lo, hi, port in cluster._slot_map(cluster.servers[0].client())
        if port == victim_port
        for slot in range(lo, hi + 1)
    }

    def on_victim(report: dict[str, Any]) -> bool:
        d = definitions[report["metric"]]
        shard = keys.shard_of(bytes.fromhex(report["id"]), d.shards)
        return key_slot(keys.stream_key(d.name, d.version, shard).encode()) in victim_slots

    return Workload(definitions, victim_port, on_victim)


def start_workload(
    cluster: LocalCluster, workers: list[Any], threads: list[Any], errors: list[str]
) -> tuple[Flask, Workload, Any]:
    """A collector app on ``cluster`` (one replica's acknowledgement), :data:`SPECS`
    defined through it, workers started (into ``workers``, ``threads``, ``errors``), and a
    client of the cluster."""
    app = collector_app(cluster.url, replica_acks=1)
    work = define_workload(cluster, app)
    start_workers(cluster.url, workers, threads, errors, batch_size=200, block_ms=200)
    return app, work, connect(cluster.url)

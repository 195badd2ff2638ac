"""Failover on a real local Redis Cluster: 3 primaries, 3 replicas, a primary killed -9.

The scenario is :func:`tests.failover_helpers.run_failover` (two collectors, two workers,
SDK devices reporting steadily); ``benchmarks/bench_failover.py`` runs it several times
per setting and prints the loss table. Here one run per setting asserts what holds in
every run: the collectors answer only 202 or 503 + ``Retry-After`` (never 500), the SDK
gets every report acknowledged, the workers outlive the failover, nothing is counted
twice, and with ``REPLICA_ACKS=1`` no acknowledged report is lost.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from redis.exceptions import (
    ClusterDownError,
    ClusterError,
    ConnectionError,
    RedisClusterException,
    ResponseError,
    SlotNotCoveredError,
    TryAgainError,
)

from ldp_store.connection import unavailable
from tests.failover_helpers import run_failover

LAG = 0.5
"""Seconds the victim's replica is stopped before the kill: the reports acknowledged
meanwhile (about 300 at the scenario's 600 a second) exist on the primary alone."""


@pytest.mark.parametrize("replica_acks", [0, 1])
def test_a_primary_killed_under_load_fails_over_without_double_counting(
    tmp_path: Path, replica_acks: int
) -> None:
    outcome = run_failover(tmp_path / "cluster", replica_acks, seed=replica_acks, replica_lag=LAG)
    assert outcome.acked > 1_000, outcome
    assert set(outcome.statuses) <= {202, 503}, outcome.statuses  # never a 500
    assert outcome.statuses.get(503, 0) > 0, "the failover was not felt: nothing tested"
    assert outcome.retry_after_missing == 0 and not outcome.raised, outcome.raised
    assert outcome.workers_alive and not outcome.worker_errors, outcome.worker_errors
    assert outcome.double == 0, f"{outcome.double} reports counted twice"
    if replica_acks:
        # Uploads during the lag waited for the replica in vain: 503, retried later.
        assert outcome.lost == 0, f"{outcome.lost} acknowledged reports lost"
    else:
        # Acknowledged by the primary alone, gone with it: the loss the setting prevents
        # (and proof that the replay probe finds one).
        assert 0 < outcome.lost <= outcome.acked_before


def test_every_error_of_a_failover_or_a_move_is_an_outage_not_a_bug() -> None:
    """What redis-py raises while a primary fails over or a slot moves: retried by the
    worker, 503 + Retry-After from the collector; a command that is wrong stays a bug."""
    transient = [
        ClusterDownError("CLUSTERDOWN The cluster is down"),
        TryAgainError("TRYAGAIN Multiple keys request during rehashing of slot"),
        ClusterError("TTL exhausted."),  # MOVED/ASK storms past redis-py's redirections
        ConnectionError("Error 111 connecting to 127.0.0.1:7000. Connection refused."),
        SlotNotCoveredError("Command # 1 (XADD) requires a slot that is not covered"),
        RedisClusterException(
            "Redis Cluster cannot be connected. Please provide at least "
            "one reachable node: Error 111"
        ),  # fmt: skip
        RedisClusterException(
            "All slots are not covered after query all startup_nodes. 10923 of 16384 covered..."
        ),  # fmt: skip
    ]
    assert [unavailable(e) for e in transient] == [True] * len(transient)
    assert not unavailable(RedisClusterException("CROSSSLOT Keys don't hash to one slot"))
    assert not unavailable(ResponseError("WRONGTYPE Operation against a key"))

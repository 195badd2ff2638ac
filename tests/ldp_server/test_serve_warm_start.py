"""A read worker of ``ldp serve`` warms its lane's recorded reads when it starts (issue 43
item 2): gunicorn's ``post_fork`` names the worker's lane, its ``post_worker_init`` starts
the warmer, whose first pass reads the lane's record before any request. Observed through
Redis, against the real server (gunicorn, gevent, embedded Redis): a worker replaced
drops its lane's members it cannot read again, and keeps the one it can. Whether a read
is then served warm is asserted in tests/aggregator/test_warm_reads.py (memo.stats) and
measured in benchmarks/bench_read_side.py (restart).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from test_pipeline_e2e import put_metric

from aggregator.query.warm import spec_text
from ldp_server.serve import Server
from ldp_store import keys

TIMEOUT = 120.0
"""Seconds to wait for gunicorn's new workers and their first pass (the machine is
shared): generous, never a measure."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    mp = pytest.MonkeyPatch()
    for name in ("LDP_READ_TOKEN", "LDP_WORKER_CLASS"):
        mp.delenv(name, raising=False)  # the default worker: gevent
    data = tmp_path_factory.mktemp("warm-start")
    try:
        with Server(port=0, data_dir=data, web_workers=1, aggregators=1, quiet=True) as s:
            put_metric(s, "warm.small", {"domain": ["a", "b", "c"], "epsilon": 1.0})
            yield s
    finally:
        mp.undo()


def children(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit():
                stat = (entry / "stat").read_text().rpartition(")")[2].split()
                if int(stat[1]) == pid:
                    found.add(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


def test_a_read_worker_started_reads_its_lanes_record(server: Server) -> None:
    client = redis.Redis.from_url(server.redis_url or "")
    good = spec_text(
        {
            "read": "window",
            "metric": "warm.small",
            "version": 1,
            "window": "all",
            "confidence": 0.95,
            "simultaneous": False,
            "estimand": "reporters",
            "multiplicity": None,
            "marginals": [],
        }
    )
    bad = ["not json", json.dumps({"metric": "warm.gone", "version": 1})]
    lanes = [keys.warm_reads_key(lane) for lane in ("light", "heavy")]
    for key in lanes:
        client.zadd(key, {member: time.time() for member in [good, *bad]})
    assert server.read is not None
    old = children(server.read.pid)
    assert old
    for pid in old:
        os.kill(pid, signal.SIGTERM)  # gunicorn forks new workers of both lanes
    deadline = time.monotonic() + TIMEOUT
    while any(client.zcard(key) != 1 for key in lanes):
        assert time.monotonic() < deadline, [client.zrange(key, 0, -1) for key in lanes]
        time.sleep(0.2)
    for key in lanes:
        assert client.zrange(key, 0, -1) == [good.encode()]  # read, kept, computed
    assert not children(server.read.pid) & old

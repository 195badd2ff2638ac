"""The drain harness bench_dimensions.py and bench_joint.py share: one embedded Redis,
each metric created and loaded with the same number of SDK payloads, then drained by one
``ldp aggregate --once`` (bench_aggregator's ``drain``); reports/s and CPU µs per report
of Redis and the worker, the worker's start-up (an empty drain) subtracted.
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_aggregator import _LOADER, LOAD_CHUNK, POOL, _children_cpu, _redis_cpu, drain

from aggregator.query.window import read_counts, read_numeric, read_segments
from client_sdk.wire import MetricDefinition
from ldp_store import keys
from ldp_store.embedded import EmbeddedRedis
from ldp_store.registry import Registry

Payloads = Callable[[MetricDefinition, random.Random, int], list[dict[str, Any]]]
"""Makes a metric's pool: ``count`` SDK payloads (as stored) from a seeded generator."""


def run_drains(
    metrics: list[tuple[str, dict[str, Any]]],
    prefix: str,
    reports: int,
    payloads: Payloads,
    workers: int = 1,
) -> list[dict[str, Any]]:
    """Create each ``(label, spec)`` as ``{prefix}.{i}``, append ``reports`` payloads
    (round-robin over a pool of :data:`~bench_aggregator.POOL` from ``payloads``), drain
    it with ``workers`` burst-mode workers at once and print its row; returns the rows
    (metric, reports, seconds, redis_us, worker_us: the workers' CPU summed).

    Every report must be counted (and, with dimensions, the segments must add up).
    """
    rows: list[dict[str, Any]] = []
    print(
        f"{'metric':>26} {'reports':>9} {'wall s':>7} {'reports/s':>10} "
        f"{'redis µs/rep':>12} {'worker µs/rep':>13}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedRedis(tmp).start()
        try:
            client = redis.Redis.from_url(server.url)
            loader = client.register_script(_LOADER)
            before = _children_cpu()
            drain(server.url, workers, None)  # nothing to drain: the workers' start-up alone
            startup = _children_cpu() - before
            print(f"worker start-up (subtracted below): {startup:.2f} s CPU")
            for i, (label, spec) in enumerate(metrics):
                name = f"{prefix}.{i}"
                definition = Registry(client).put(name, spec).definition
                pool = [
                    json.dumps(payload, separators=(",", ":"))
                    for payload in payloads(definition, random.Random(7), POOL)
                ]
                stream = keys.stream_key(name, definition.version)
                for start in range(0, reports, LOAD_CHUNK):
                    stop = min(reports, start + LOAD_CHUNK)
                    loader(keys=[stream], args=[pool[j % POOL] for j in range(start, stop)])
                redis0, workers0 = _redis_cpu(client), _children_cpu()
                elapsed = drain(server.url, workers, None)
                redis_cpu = _redis_cpu(client) - redis0
                worker_cpu = _children_cpu() - workers0 - startup
                n = (read_numeric if definition.kind == "numeric" else read_counts)(
                    client, definition
                ).n
                assert n == reports, f"{label}: counted {n} of {reports}"
                if definition.dimensions:
                    segments = read_segments(client, definition)
                    assert sum(s.n for s in segments.values()) == n, "segments do not add up"
                rows.append(
                    {
                        "metric": label,
                        "reports": n,
                        "seconds": elapsed,
                        "redis_us": redis_cpu / n * 1e6,
                        "worker_us": worker_cpu / n * 1e6,
                    }
                )
                print(
                    f"{label:>26} {n:>9,} {elapsed:>7.2f} {n / elapsed:>10,.0f} "
                    f"{redis_cpu / n * 1e6:>12.2f} {worker_cpu / n * 1e6:>13.2f}",
                    flush=True,
                )
        finally:
            server.stop()
    return rows

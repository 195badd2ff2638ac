"""Drain throughput of a metric with public dimensions against the same metric without.

One embedded Redis; each metric is loaded with the same number of stored entries (SDK
payloads; with dimensions, as the collector stores them: the payload with its segment
index, ``ldp_store.schema.SEGMENT_KEY``) and drained by one ``ldp aggregate --once``
(bench_aggregator's), in one run: reports/s and CPU µs per report of Redis and the
worker; the worker's start-up (an empty drain) is subtracted. The yardstick is the same
metric without dimensions, measured in the same run. Prints the load average before and
after. Run: ``python benchmarks/bench_dimensions.py --reports 300000``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_aggregator import _LOADER, LOAD_CHUNK, POOL, _children_cpu, _redis_cpu, drain

from aggregator.query.window import read_counts, read_numeric, read_segments
from client_sdk.wire import build_report, segment_labels
from ldp_store import keys, schema
from ldp_store.embedded import EmbeddedRedis
from ldp_store.registry import Registry

DIMENSIONS = [
    {"name": "platform", "values": ["ios", "android", "web"]},
    {"name": "app_version", "values": ["1.0", "1.1", "2.0", "2.1"]},
]
DOMAIN = [f"v{i}" for i in range(12)]
METRICS: list[tuple[str, dict[str, Any]]] = [
    ("GRR k=12, no dimensions", {"domain": DOMAIN, "epsilon": 2.0, "mechanism": "grr"}),
    (
        "GRR k=12, 12 segments",
        {"domain": DOMAIN, "epsilon": 2.0, "mechanism": "grr", "dimensions": DIMENSIONS},
    ),
    (
        "OUE k=64, no dimensions",
        {"domain": [f"v{i}" for i in range(64)], "epsilon": 2.0, "mechanism": "oue"},
    ),
    (
        "OUE k=64, 12 segments",
        {
            "domain": [f"v{i}" for i in range(64)],
            "epsilon": 2.0,
            "mechanism": "oue",
            "dimensions": DIMENSIONS,
        },
    ),
    ("numeric, no dimensions", {"kind": "numeric", "range": [0, 100], "epsilon": 1.0}),
    (
        "numeric, 12 segments",
        {"kind": "numeric", "range": [0, 100], "epsilon": 1.0, "dimensions": DIMENSIONS},
    ),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reports", type=int, default=300_000, help="per metric")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    reports = args.reports
    print(
        f"load average (1, 5, 15 min) at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
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
            drain(server.url, 1, None)  # nothing to drain: the worker's start-up alone
            startup = _children_cpu() - before
            print(f"worker start-up (subtracted below): {startup:.2f} s CPU")
            for i, (label, spec) in enumerate(METRICS):
                name = f"bench.dims.{i}"
                definition = Registry(client).put(name, spec).definition
                rng = random.Random(7)
                pool = []
                for _ in range(POOL):
                    value: Any = (
                        rng.uniform(0, 100)
                        if definition.kind == "numeric"
                        else rng.randrange(len(definition.domain))
                    )
                    if definition.dimensions:
                        segment = rng.randrange(definition.segments)
                        dims = segment_labels(definition.dimensions, segment)
                        payload = build_report(definition, value, rng, None, dims)["payload"]
                        payload = {**payload, schema.SEGMENT_KEY: segment}  # as stored
                    else:
                        payload = build_report(definition, value, rng)["payload"]
                    pool.append(json.dumps(payload, separators=(",", ":")))
                stream = keys.stream_key(name, definition.version)
                for start in range(0, reports, LOAD_CHUNK):
                    stop = min(reports, start + LOAD_CHUNK)
                    loader(keys=[stream], args=[pool[j % POOL] for j in range(start, stop)])
                redis0, workers0 = _redis_cpu(client), _children_cpu()
                elapsed = drain(server.url, 1, None)
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
    for plain, dims in zip(rows[0::2], rows[1::2], strict=True):
        print(
            f"{dims['metric']} ÷ {plain['metric']}: wall {dims['seconds'] / plain['seconds']:.2f}, "
            f"Redis CPU {dims['redis_us'] / plain['redis_us']:.2f}, "
            f"worker CPU {dims['worker_us'] / plain['worker_us']:.2f}"
        )
    print(
        f"load average (1, 5, 15 min) at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

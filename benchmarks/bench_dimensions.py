"""Drain throughput of a metric with public dimensions against the same metric without.

One embedded Redis; each metric is loaded with the same number of stored entries (SDK
payloads; with dimensions, as the collector stores them: the payload with its segment
index, ``ldp_store.schema.SEGMENT_KEY``) and drained by one ``ldp aggregate --once``
(drain_harness.py), in one run: reports/s and CPU µs per report of Redis and the
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
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from drain_harness import run_drains

from client_sdk.wire import MetricDefinition, build_report, segment_labels
from ldp_store import schema

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


def payloads(definition: MetricDefinition, rng: random.Random, count: int) -> list[dict[str, Any]]:
    """``count`` SDK payloads; with dimensions, as the collector stores them."""
    pool = []
    for _ in range(count):
        value: Any = (
            rng.uniform(0, 100)
            if definition.kind == "numeric"
            else rng.randrange(len(definition.domain))
        )
        if definition.dimensions:
            segment = rng.randrange(definition.segments)
            dims = segment_labels(definition.dimensions, segment)
            payload = build_report(definition, value, rng, None, dims)["payload"]
            pool.append({**payload, schema.SEGMENT_KEY: segment})  # as stored
        else:
            pool.append(build_report(definition, value, rng)["payload"])
    return pool


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reports", type=int, default=300_000, help="per metric")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    reports = args.reports
    print(
        f"load average (1, 5, 15 min) at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    rows = run_drains(METRICS, "bench.dims", reports, payloads)
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

"""The worker's drain of one-report entries (``p``) against batch entries (``s``/``b``).

    python benchmarks/bench_batch_entries.py --reports 200000 --rounds 2

The same SDK payloads (GRR k = 16 and OUE k = 1,024 by default) are appended to a fresh
metric's stream in each form — one ``XADD … p`` per report, as collectors before batch
entries wrote, or entries of ``ENTRY_REPORTS`` reports with their batched count, as the
append script writes them — and drained by one ``ldp aggregate --once`` process. The
forms take turns ``--rounds`` times in one run on one embedded Redis; it prints wall
seconds, reports/s, and CPU µs per report of Redis and of the worker (its start-up, an
empty drain, subtracted), then batch ÷ one-report ratios. The yardstick is the
one-report form drained by the same code in the same run. Figures:
docs/benchmarks/performance.md ("Ingest", "Against the bare endpoint").
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_aggregator import _LOADER, LOAD_CHUNK, POOL, _children_cpu, _redis_cpu, drain

from aggregator.query.window import read_counts
from ldp_store import keys
from ldp_store.embedded import EmbeddedRedis
from ldp_store.registry import Registry

_BATCH_LOADER = """
-- ARGV: 1 reports an entry, then payloads; writes batch entries and their batched count
local per, extra = tonumber(ARGV[1]), 0
for c = 2, #ARGV, per do
  local e = math.min(#ARGV, c + per - 1)
  local sizes = {}
  for i = c, e do sizes[#sizes + 1] = #ARGV[i] end
  redis.call('XADD', KEYS[1], '*', 's', table.concat(sizes, ','),
             'b', table.concat(ARGV, ',', c, e))
  extra = extra + (e - c)
end
if extra > 0 then redis.call('INCRBY', KEYS[2], extra) end
return #ARGV - 1
"""


def _load(client: redis.Redis, name: str, spec: dict[str, object], form: str, n: int) -> int:
    """Create ``name`` and append ``n`` payloads in ``form``; returns the stream's entries."""
    definition = Registry(client).put(name, spec).definition
    rng = random.Random(7)
    pool = [
        json.dumps(
            definition.mechanism.perturb(rng.randrange(definition.k), rng), separators=(",", ":")
        )
        for _ in range(POOL)
    ]
    payloads = [pool[i % POOL] for i in range(n)]
    stream = keys.stream_key(name, definition.version)
    batched = keys.batched_key(name, definition.version)
    plain, batch = client.register_script(_LOADER), client.register_script(_BATCH_LOADER)
    for i in range(0, n, LOAD_CHUNK):
        chunk = payloads[i : i + LOAD_CHUNK]
        if form == "p":
            plain(keys=[stream], args=chunk)
        else:
            batch(keys=[stream, batched], args=[keys.ENTRY_REPORTS, *chunk])
    return int(client.xlen(stream))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    metrics = {
        "grr k=16": {"domain": [f"v{i}" for i in range(16)], "epsilon": 1.0, "mechanism": "grr"},
        "oue k=1024": {
            "domain": [f"v{i}" for i in range(1024)],
            "epsilon": 1.0,
            "mechanism": "oue",
        },
    }
    print(f"load average (1, 5, 15 min) {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{args.reports:,} reports a drain; one ldp aggregate --once; forms take turns")
    print(
        f"{'metric':>11} {'form':>6} {'entries':>8} {'wall s':>7} {'reports/s':>10} "
        f"{'redis µs':>9} {'worker µs':>10}"
    )
    rows: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedRedis(tmp).start()
        try:
            client = redis.Redis.from_url(server.url)
            before = _children_cpu()
            drain(server.url, 1, None)
            startup = _children_cpu() - before
            run = 0
            for _ in range(args.rounds):
                for label, spec in metrics.items():
                    for form in ("p", "batch"):
                        run += 1
                        name = f"bench.entries.{run}"
                        entries = _load(client, name, spec, form, args.reports)
                        redis0, worker0 = _redis_cpu(client), _children_cpu()
                        start = time.perf_counter()
                        drain(server.url, 1, None)
                        wall = time.perf_counter() - start
                        redis_us = (_redis_cpu(client) - redis0) / args.reports * 1e6
                        worker_us = (_children_cpu() - worker0 - startup) / args.reports * 1e6
                        definition = Registry(client).get(name)
                        assert definition is not None
                        assert read_counts(client, definition).n == args.reports
                        assert not client.exists(keys.batched_key(name, 1))
                        rows.setdefault((label, form), []).append((wall, redis_us, worker_us))
                        print(
                            f"{label:>11} {form:>6} {entries:>8,} {wall:>7.2f} "
                            f"{args.reports / wall:>10,.0f} {redis_us:>9.2f} {worker_us:>10.2f}"
                        )
        finally:
            server.stop()
    print("medians, batch ÷ one-report (below 1: batch entries cost less):")
    for label in metrics:
        p, b = rows[(label, "p")], rows[(label, "batch")]
        for i, what in enumerate(("wall", "redis CPU", "worker CPU")):
            ratio = statistics.median(x[i] for x in b) / statistics.median(x[i] for x in p)
            print(f"  {label}: {what} {ratio:.2f}")
    print(f"load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

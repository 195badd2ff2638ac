"""Drain throughput of the aggregator worker: pre-load N reports, time ``ldp aggregate --once``.

    python benchmarks/bench_aggregator.py --reports 1000000 --mechanism oue -k 64
    python benchmarks/bench_aggregator.py --reports 1000000 --mechanism grr -k 16 --batch-size 20000

Payloads come from the real SDK (``perturb`` with a seeded generator) as a pool of
distinct reports appended round-robin, so loading a million takes seconds, not minutes.
Without ``--redis-url`` an embedded redis-server (AOF on, as ``ldp serve`` runs it) is
started in a temporary folder. The worker runs as a subprocess, exactly as deployed.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aggregator.counts import read_counts  # noqa: E402
from aggregator.embedded_redis import EmbeddedRedis  # noqa: E402
from collector import keys  # noqa: E402
from collector.registry import Registry  # noqa: E402

POOL = 10_000
"""Distinct SDK payloads per run: enough variety, cheap to make (SDK perturb is ~15 µs)."""

LOAD_CHUNK = 5_000
"""Payloads per loader script call: large enough to amortise the round trip."""

_LOADER = """
for i = 1, #ARGV do redis.call('XADD', KEYS[1], '*', 'p', ARGV[i]) end
return #ARGV
"""


def load(client: redis.Redis, name: str, mechanism: str, k: int, reports: int) -> None:
    """Create the metric and append ``reports`` payloads to its stream."""
    definition = (
        Registry(client)
        .put(name, {"domain": [f"v{i}" for i in range(k)], "epsilon": 1.0, "mechanism": mechanism})
        .definition
    )
    rng = random.Random(2024)
    pool = [
        json.dumps(definition.mechanism.perturb(rng.randrange(k), rng=rng), separators=(",", ":"))
        for _ in range(POOL)
    ]
    stream = keys.stream_key(name, definition.version)
    loader = client.register_script(_LOADER)
    for start in range(0, reports, LOAD_CHUNK):
        stop = min(reports, start + LOAD_CHUNK)
        loader(keys=[stream], args=[pool[i % POOL] for i in range(start, stop)])


def main() -> None:
    """Parse arguments, load, drain, print reports/s."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--reports", "-n", type=int, default=1_000_000)
    ap.add_argument("--mechanism", "-m", default="oue")
    ap.add_argument("--domain-size", "-k", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=None)
    ap.add_argument("--redis-url", default=None, help="default: an embedded redis-server")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        server = None
        url = args.redis_url
        if url is None:
            server = EmbeddedRedis(tmp).start()
            url = server.url
        try:
            client = redis.Redis.from_url(url)
            name = f"bench.{args.mechanism}.{int(time.time())}"
            t0 = time.perf_counter()
            load(client, name, args.mechanism, args.domain_size, args.reports)
            loaded = time.perf_counter() - t0
            print(
                f"loaded {args.reports:,} {args.mechanism} k={args.domain_size} in {loaded:.1f} s"
            )
            cmd = [sys.executable, "-m", "aggregator.cli", "aggregate", "--once"]
            cmd += ["--redis-url", url, "--name", "bench"]
            if args.batch_size:
                cmd += ["--batch-size", str(args.batch_size)]
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, cwd=ROOT)
            elapsed = time.perf_counter() - t0
            definition = Registry(client).get(name)
            assert definition is not None
            counted = read_counts(client, definition).n
            print(
                f"drained {counted:,} reports in {elapsed:.2f} s: "
                f"{counted / elapsed:,.0f} reports/s (process start included)"
            )
        finally:
            if server is not None:
                server.stop()


if __name__ == "__main__":
    main()

"""Drain throughput of the aggregator, per mechanism: pre-load N reports, time the workers.

    python benchmarks/bench_aggregator.py --reports 1000000 --workers 2
    python benchmarks/bench_aggregator.py -n 1000000 -m oue,grr -k 64 --workers 1,2

For each mechanism a metric is created, N payloads are appended to its stream, and W
``ldp aggregate --once`` processes (exactly as deployed) drain it; the table gives wall
reports/s, and the CPU each side spent per report: Redis (``INFO cpu`` of the server)
and the workers (their rusage, process start included). On one machine they share the
cores; Redis µs/report bounds what any number of workers can reach, 10⁶ / (Redis µs per
report) reports/s, since one Redis runs on one core.

Payloads come from the real SDK (``perturb`` with a seeded generator) as a pool of
distinct reports appended round-robin, so loading a million takes seconds, not minutes
(``python -m loadtests.firehose`` makes every report distinct, vectorized). Without
``--redis-url`` an embedded redis-server (AOF on, as ``ldp serve`` runs it) is started in
a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aggregator.query.window import read_counts  # noqa: E402
from ldp_store import keys  # noqa: E402
from ldp_store.embedded import EmbeddedRedis  # noqa: E402
from ldp_store.registry import Registry  # noqa: E402

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


def _redis_cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def drain(url: str, workers: int, batch_size: int | None) -> float:
    """Run ``workers`` burst-mode workers at once; return the wall seconds until all exit."""
    cmd = [sys.executable, "-m", "ldp_server", "aggregate", "--once", "--redis-url", url]
    if batch_size:
        cmd += ["--batch-size", str(batch_size)]
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            [*cmd, "--name", f"bench-{i}"],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for i in range(workers)
    ]
    codes = [p.wait() for p in procs]
    elapsed = time.perf_counter() - t0
    if any(codes):
        raise SystemExit(f"a worker failed: exit codes {codes}")
    return elapsed


def main() -> None:
    """Parse arguments; load, drain and report each mechanism and worker count."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--reports", "-n", type=int, default=1_000_000)
    ap.add_argument("--mechanisms", "-m", default="grr,oue,sue,olh,hr,ss,rr")
    ap.add_argument("--domain-size", "-k", type=int, default=64)
    ap.add_argument("--workers", "-w", default="2", help="comma-separated worker counts")
    ap.add_argument("--batch-size", type=int, default=None)
    ap.add_argument("--redis-url", default=None, help="default: an embedded redis-server")
    args = ap.parse_args()

    loadavg = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average (1, 5, 15 min) at the start: {loadavg}; {os.cpu_count()} CPUs")
    print(f"{'mechanism':>9} {'k':>5} {'workers':>7} {'reports':>10} {'wall s':>7} "
          f"{'reports/s':>10} {'redis µs/rep':>12} {'workers µs/rep':>14}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        server = None
        url = args.redis_url
        if url is None:
            server = EmbeddedRedis(tmp).start()
            url = server.url
        try:
            client = redis.Redis.from_url(url)
            for mechanism in args.mechanisms.split(","):
                k = 2 if mechanism == "rr" else args.domain_size
                for workers in map(int, args.workers.split(",")):
                    name = f"bench.{mechanism}.w{workers}.{int(time.time())}"
                    load(client, name, mechanism, k, args.reports)
                    redis0, workers0 = _redis_cpu(client), _children_cpu()
                    elapsed = drain(url, workers, args.batch_size)
                    redis_cpu = _redis_cpu(client) - redis0
                    worker_cpu = _children_cpu() - workers0
                    definition = Registry(client).get(name)
                    assert definition is not None
                    n = read_counts(client, definition).n
                    if n != args.reports:
                        raise SystemExit(f"{mechanism}: counted {n:,} of {args.reports:,}")
                    print(
                        f"{mechanism:>9} {k:>5} {workers:>7} {n:>10,} {elapsed:>7.2f} "
                        f"{n / elapsed:>10,.0f} {redis_cpu / n * 1e6:>12.2f} "
                        f"{worker_cpu / n * 1e6:>14.2f}",
                        flush=True,
                    )
                    client.delete(*keys.window_keys(name, definition.version))
        finally:
            if server is not None:
                server.stop()
    loadavg = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average (1, 5, 15 min) at the end: {loadavg}")


if __name__ == "__main__":
    main()

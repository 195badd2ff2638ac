"""Collector throughput under gunicorn: accepted reports/s and request latency.

    python benchmarks/bench_collector.py --reports 200000 --batch 500 --clients 4
    python benchmarks/bench_collector.py --mechanism oue -k 64 --web-workers 2

Starts the web service exactly as ``ldp serve`` does (gunicorn with
``collector/gunicorn_conf.py``, an embedded redis-server with AOF), creates one metric,
pre-builds the reports with the real SDK (``client_sdk.wire.build_report``, fresh ids),
then posts them in SDK-sized batches from several client processes over keep-alive
HTTP. Prints accepted reports/s and p50/p95/p99 of the request latency. The clients run
on the same 2 cores as the server: the figure is a lower bound of what the collector
does on a machine of its own.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from aggregator.serve import Server  # noqa: E402
from client_sdk.transport import HTTPTransport  # noqa: E402
from client_sdk.wire import MetricDefinition, build_report  # noqa: E402
from collector.registry import Registry  # noqa: E402


def _post_all(args: tuple[str, list[bytes]]) -> tuple[int, list[float]]:
    url, bodies = args
    transport = HTTPTransport(url, timeout=30)
    accepted, latencies = 0, []
    for body in bodies:
        start = time.perf_counter()
        response = transport.post("/v1/reports", body)
        latencies.append(time.perf_counter() - start)
        if response.status != 202:
            raise SystemExit(f"unexpected {response.status}: {response.body[:200]!r}")
        accepted += response.json()["accepted"]
    return accepted, latencies


def main() -> None:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reports", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=500, help="reports per request (SDK default)")
    parser.add_argument("--clients", type=int, default=4, help="client processes")
    parser.add_argument("--web-workers", type=int, default=2)
    parser.add_argument("--mechanism", default="grr")
    parser.add_argument("-k", type=int, default=16)
    parser.add_argument("--epsilon", type=float, default=1.0)
    args = parser.parse_args()

    with (
        tempfile.TemporaryDirectory() as tmp,
        Server(
            port=0, data_dir=tmp, web_workers=args.web_workers, aggregators=1, quiet=True
        ) as server,
    ):
        spec = {
            "domain": [f"v{i}" for i in range(args.k)],
            "epsilon": args.epsilon,
            "mechanism": args.mechanism,
        }
        transport = HTTPTransport(server.url)

        definition = (
            Registry(redis.Redis.from_url(server.redis_url or ""))
            .put("bench.metric", spec)
            .definition
        )
        assert isinstance(definition, MetricDefinition)
        start = time.perf_counter()
        reports = [build_report(definition, i % args.k) for i in range(args.reports)]
        bodies = [
            json.dumps({"reports": reports[i : i + args.batch]}, separators=(",", ":")).encode()
            for i in range(0, len(reports), args.batch)
        ]
        built = time.perf_counter() - start
        shards = [(server.url, bodies[i :: args.clients]) for i in range(args.clients)]
        start = time.perf_counter()
        with multiprocessing.get_context("fork").Pool(args.clients) as pool:
            results = pool.map(_post_all, shards)
        seconds = time.perf_counter() - start
        transport.close()
    accepted = sum(r[0] for r in results)
    latencies = sorted(x for r in results for x in r[1])
    pct = statistics.quantiles(latencies, n=100)
    print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}")
    print(
        f"{args.mechanism} k={args.k}: {len(reports):,} reports built with the SDK "
        f"in {built:.1f} s "
        f"({len(bodies[0])} bytes per {args.batch}-report body)"
    )
    print(
        f"collector (gunicorn, {args.web_workers} workers, AOF on), {args.clients} client "
        f"processes, batches of {args.batch}: {accepted:,} accepted in {seconds:.2f} s = "
        f"{accepted / seconds:,.0f} reports/s"
    )
    print(
        f"request latency: p50 {pct[49] * 1000:.1f} ms, p95 {pct[94] * 1000:.1f} ms, "
        f"p99 {pct[98] * 1000:.1f} ms ({len(latencies)} requests)"
    )


if __name__ == "__main__":
    main()

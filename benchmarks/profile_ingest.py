"""Where the collector's CPU goes per report: its ingest path timed phase by phase, in one process.

    python benchmarks/profile_ingest.py                      # GRR k=16, OUE k=1024, string
    python benchmarks/profile_ingest.py --requests 40 --batch 500 --cprofile grr

For each metric it sends ``--requests`` bodies of ``--batch`` reports built with the SDK
(fresh ids) through the collector's own functions, against an embedded redis-server (AOF
on, as ``ldp serve`` runs it), and prints the µs per report of each phase:

* **parse**: ``collector.body.parse_json`` of the raw body (strict JSON);
* **validate**: ``collector.ingest.validate`` (the SDK's ``check_report``, plausibility,
  the stored form of each report); these two are the path of a batch that is not plain;
* **plain decode** and **plain validate**: the same batch as the collector takes it,
  ``collector.plain.decode`` and ``collector.plain.validate`` (the same items);
* **marshal**: building the append script's call (``ldp_store.scripts.append_call``:
  the guard's keys and per-report arguments);
* **redis call**: the script's round trip as the web worker waits for it (redis-py
  packing the command, the socket, Redis, the reply);
* **redis CPU**: Redis's own time for the script (``INFO commandstats``: ``usec`` of
  ``evalsha``), of which the round trip above is mostly made;
* **whole request**: ``POST /v1/reports`` through the Flask test client (everything
  above plus Flask, admission, telemetry and the answer's serialisation).

With ``--cprofile NAME`` it also prints the top functions of the whole requests of that
metric by cumulative time (figures: docs/benchmarks/performance.md, "Ingest").
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from client_sdk.wire import MetricDefinition, build_report  # noqa: E402
from collector import create_app, plain  # noqa: E402
from collector.body import parse_json  # noqa: E402
from collector.context import services  # noqa: E402
from collector.ingest import MAX_VERSIONS_PER_REQUEST, validate  # noqa: E402
from ldp_store import guard, scripts  # noqa: E402
from ldp_store.embedded import EmbeddedRedis  # noqa: E402

TOKEN = "profile-admin-token"
SPECS: dict[str, dict[str, Any]] = {
    "grr": {"domain": [f"v{i}" for i in range(16)], "epsilon": 1.0, "mechanism": "grr"},
    "oue": {"domain": [f"v{i}" for i in range(1024)], "epsilon": 1.0, "mechanism": "oue"},
    "string": {"kind": "string", "max_length": 8, "epsilon": 4.0},
}


def values(name: str, n: int) -> list[Any]:
    """``n`` true values for the metric ``name``."""
    if name == "string":
        return [f"w{i % 97}" for i in range(n)]
    k = len(SPECS[name]["domain"])
    return [i % k for i in range(n)]


def evalsha_usec(client: Any) -> tuple[int, int]:
    """(calls, µs) of ``evalsha`` and ``eval`` so far, from ``INFO commandstats``."""
    stats = client.info("commandstats")
    calls = usec = 0
    for cmd in ("cmdstat_evalsha", "cmdstat_eval"):
        if cmd in stats:
            calls += stats[cmd]["calls"]
            usec += stats[cmd]["usec"]
    return calls, usec


def profile(name: str, args: argparse.Namespace, server: EmbeddedRedis) -> None:
    """Time each phase for one metric and print the µs per report."""
    app = create_app(
        {
            "REDIS_URL": server.url,
            "ADMIN_TOKEN": TOKEN,
            "TESTING": True,
            # per-source limits off, as bench_collector.py runs the collector by default
            "SOURCE_REQUESTS_PER_SECOND": 0,
            "SOURCE_REPORTS_PER_MINUTE": 0,
        }
    )
    ctx = services(app)
    http = app.test_client()
    metric = f"profile.{name}"
    answer = http.put(
        f"/v1/metrics/{metric}", json=SPECS[name], headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert answer.status_code in (200, 201), answer.json
    definition = MetricDefinition.from_dict(answer.json or {})
    encode = json.JSONEncoder(separators=(",", ":")).encode

    def bodies() -> list[bytes]:
        out = []
        for _ in range(args.requests):
            chunk = [build_report(definition, v) for v in values(name, args.batch)]
            out.append(encode({"reports": chunk}).encode())
        return out

    n = args.requests * args.batch
    phases = dict.fromkeys(
        ("parse", "validate", "plain decode", "plain validate", "marshal", "redis call"), 0.0
    )
    admin = server.client()
    calls0, usec0 = evalsha_usec(admin)
    for raw in bodies():
        t0 = time.process_time()
        body = parse_json(raw)
        t1 = time.process_time()
        batch = validate(body["reports"], ctx.registry.lookup, ctx.registry.retired)
        t2 = time.process_time()
        phases["parse"] += t1 - t0
        phases["validate"] += t2 - t1
        t0 = time.process_time()
        fast = plain.decode(raw, args.batch)
        t1 = time.process_time()
        assert fast is not None
        found = plain.validate(
            fast, ctx.registry.lookup, ctx.registry.retired, MAX_VERSIONS_PER_REQUEST
        )
        t2 = time.process_time()
        phases["plain decode"] += t1 - t0
        phases["plain validate"] += t2 - t1
        assert found is not None and found[0] == batch.groups, "the two paths disagree"
        now = datetime.now(UTC)
        for (mname, version), items in batch.groups.items():
            layout = ctx.appender._layouts.get((mname, version, 0, guard.day_pair(now)))
            layout = layout or guard.Layout(mname, version, 0, guard.day_pair(now))
            shares = ctx.appender.memory.shares(now)  # a reading now and then: not marshalling
            t3 = time.process_time()
            call = scripts.append_call(
                ctx.redis,
                layout=layout,
                reports=items,
                max_backlog=10**9,
                now=now.timestamp(),
                shares=shares,
            )
            t4 = time.process_time()
            w4 = time.perf_counter()
            reply = scripts.AppendReply.of(call.run())
            w5 = time.perf_counter()
            phases["marshal"] += t4 - t3
            phases["redis call"] += w5 - w4
            if reply.layout is not None:  # first call of the day: retry with the layout
                ctx.appender.append(mname, version, items, now)
    calls1, usec1 = evalsha_usec(admin)
    phases["redis CPU (evalsha)"] = (usec1 - usec0) / 1e6

    requests = bodies()
    profiler = cProfile.Profile() if args.cprofile == name else None
    t0 = time.process_time()
    if profiler:
        profiler.enable()
    for raw in requests:
        answered = http.post("/v1/reports", data=raw, content_type="application/json")
        assert answered.status_code == 202, answered.json
    if profiler:
        profiler.disable()
    phases["whole request (CPU)"] = time.process_time() - t0
    print(f"{name}: {n:,} reports in {args.requests} requests of {args.batch}")
    for phase, seconds in phases.items():
        print(f"  {phase:<22} {seconds / n * 1e6:7.2f} µs/report")
    if profiler:
        stats = pstats.Stats(profiler)
        stats.sort_stats("cumulative").print_stats(35)
        stats.sort_stats("tottime").print_stats(25)


def main() -> None:
    """Profile each metric named on the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("metrics", nargs="*", help=f"of {list(SPECS)} (default: all)")
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--cprofile", default="", help="print a cProfile of this metric")
    args = parser.parse_args()
    print(f"load average (1, 5, 15 min) {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp, EmbeddedRedis(Path(tmp) / "redis") as server:
        for name in args.metrics or list(SPECS):
            profile(name, args, server)
    print(f"load average (1, 5, 15 min) {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

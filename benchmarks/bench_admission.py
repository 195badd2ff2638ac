"""What the per-source limiter costs: CPU per request, and memory per remembered source.

    python benchmarks/bench_admission.py
    python benchmarks/bench_admission.py --requests 200000 --sources 65536

Measures, in one process, :class:`ldp_edge.admission.Admission` as a request meets it:
the keyed hash of the address (``source``), one request token and a batch's report
tokens; for one source again and again (a flood: every look-up a hit) and for
``--sources`` distinct ones in turn (every look-up a different entry, the table full).
Then the memory the table takes at ``MAX_SOURCES`` entries (tracemalloc). Throughput of
the whole collector with the limiter on and off is ``bench_collector.py --admission
off,on``; this one isolates the limiter, whose cost is too small to see there.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ldp_edge.admission import MAX_SOURCES, Admission  # noqa: E402

HUGE = 10**12
"""Limits no load here reaches: every check is made, nothing is refused."""


def per_request(admission: Admission, environs: list[dict[str, str]], batch: int) -> float:
    """Mean µs for source() + admit_request() + admit_reports(batch) over ``environs``."""
    start = time.perf_counter()
    for environ in environs:
        source = admission.source(environ)
        admission.admit_request(source)
        admission.admit_reports(source, batch)
    return (time.perf_counter() - start) / len(environs) * 1e6


def main() -> None:
    """Run the measurements and print them."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=200_000)
    parser.add_argument("--sources", type=int, default=MAX_SOURCES)
    parser.add_argument("--batch", type=int, default=500, help="reports per request")
    args = parser.parse_args()
    print(
        f"{os.cpu_count()} cores; python {sys.version.split()[0]}; load average "
        f"{os.getloadavg()[0]:.2f}"
    )
    addresses = [f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}" for i in range(args.sources)]
    flood = [{"REMOTE_ADDR": "203.0.113.7"}] * args.requests
    spread = [{"REMOTE_ADDR": addresses[i % len(addresses)]} for i in range(args.requests)]
    for name, environs in (("one source", flood), (f"{args.sources:,} sources", spread)):
        admission = Admission(HUGE, HUGE)
        per_request(admission, environs[: min(len(environs), args.sources)], args.batch)  # warm
        us = per_request(admission, environs, args.batch)
        print(
            f"{name:>16}: {us:.2f} µs per request ({us / args.batch * 1000:.1f} ns per report "
            f"of a {args.batch}-report batch)"
        )
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    admission = Admission(HUGE, HUGE)
    per_request(admission, [{"REMOTE_ADDR": a} for a in addresses], args.batch)
    after = tracemalloc.take_snapshot()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
    tracemalloc.stop()
    print(
        f"memory: {grown / 2**20:.1f} MiB for {len(admission):,} sources "
        f"({grown / len(admission):.0f} bytes each; the table holds at most {MAX_SOURCES:,})"
    )
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

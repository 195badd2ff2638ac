"""What refusing duplicate keys costs the collector's JSON parsing, per report.

    python benchmarks/bench_json_body.py [--batch 500] [--repeat 7]

For SDK batches of every mechanism (built with ``client_sdk.wire.build_report``, sent as
the SDK sends them), times ``collector.body.parse_json`` (strict: finite numbers, bounded
integers, unique keys through an ``object_pairs_hook``) against the same strict parse
without the hook (what it was before duplicate keys were refused) and plain
``json.loads``. Best of ``--repeat`` runs, in µs per report; the load average is printed
before and after (the machine is shared: compare the columns of one run).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import timeit
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from client_sdk.wire import build_report, parse_spec  # noqa: E402
from collector import body  # noqa: E402

SDK_MECHANISMS = ("rr", "grr", "sue", "oue", "olh", "blh", "hr", "ss")
"""The frequency oracles, each with its own payload shape (one integer, a bit string, ...)."""


def _per_report(run: Callable[[], object], batch: int, repeat: int) -> float:
    """Best of ``repeat`` timings of ``run``, in µs per report of a ``batch``-report body."""
    number = max(1, 20_000 // batch)
    return min(timeit.repeat(run, number=number, repeat=repeat)) / number / batch * 1e6


def _strict_without_hook(raw: bytes) -> object:
    """parse_json as it was before duplicate keys were refused (same strict options)."""
    return json.loads(
        raw.decode("utf-8"), parse_constant=body._no_constants, parse_float=body._finite_float
    )


def main() -> None:
    """Print µs per report for each mechanism and parser."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=500, help="reports per body")
    parser.add_argument("--repeat", type=int, default=7, help="timed runs; the best counts")
    parser.add_argument("-k", type=int, default=64, help="domain size (rr: 2)")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}; {args.batch}-report bodies, k={args.k}")
    print(f"{'mechanism':<10} {'json.loads':>10} {'before':>8} {'now':>8} {'hook':>6}  µs/report")
    for name in SDK_MECHANISMS:
        k = 2 if name == "rr" else args.k
        spec = {"domain": [f"v{i}" for i in range(k)], "epsilon": 1.0, "mechanism": name}
        definition = replace(parse_spec("bench.metric", spec), version=1)
        batch = [build_report(definition, i % k) for i in range(args.batch)]
        raw = json.dumps({"reports": batch}).encode()
        plain = _per_report(partial(json.loads, raw.decode()), args.batch, args.repeat)
        before = _per_report(partial(_strict_without_hook, raw), args.batch, args.repeat)
        now = _per_report(partial(body.parse_json, raw), args.batch, args.repeat)
        print(f"{name:<10} {plain:>10.2f} {before:>8.2f} {now:>8.2f} {now - before:>+6.2f}")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

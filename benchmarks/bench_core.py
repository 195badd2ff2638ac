"""Benchmarks of the privacy core: SDK ``perturb`` and server decoding, per mechanism.

Run on purpose, not as a test (numbers go to docs/benchmarks/performance.md)::

    .venv/bin/python benchmarks/bench_core.py            # n = 10⁶ reports, a few minutes
    .venv/bin/python benchmarks/bench_core.py --quick    # n = 10⁵, well under a minute
    .venv/bin/python benchmarks/bench_core.py --only olh,oue --json results.json

(a) ``perturb``: µs per report of ``m.perturb(v)`` with the default CSPRNG (no ``rng``
argument), over a pre-drawn list of true values. (b) decode: µs per report of
``codec.parse(payloads)``, of ``codec.count(batch)`` and of both together
(``codec.decode(payloads)``, the real aggregator path), at n reports in one batch.
Payloads are made vectorized (``codec.encode`` + ``codec.to_payloads``): the same dicts
the SDK produces, in seconds rather than minutes. Each figure is timed with
``time.perf_counter`` several times; the table shows the best and the median.

The machine is shared and its speed drifts (up to 2× within minutes): the speed probe
(``sum(range(1000))``) printed before and after tells how fast it was during the run.
Compare figures from one run; across runs, compare ratios.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import statistics
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aggregator.stats.codecs import FrequencyCodec  # noqa: E402
from aggregator.stats.kinds import codec_for  # noqa: E402
from client_sdk import mechanisms  # noqa: E402
from client_sdk.mechanisms import FrequencyOracle  # noqa: E402

CORE = [("rr", 2, 1.0)] + [
    (name, k, 1.0) for name in ("grr", "sue", "oue", "olh", "hr", "ss") for k in (16, 1024)
]
"""(mechanism, k, ε) measured for both perturb and decode."""

DECODE_ONLY = [(name, 1024, eps) for name in ("olh", "hr", "oue") for eps in (0.5, 2.0, 4.0)]
"""Decoding cost that depends on ε: OLH's g = round(e^ε) + 1, HR's and OUE's bit density."""

BATCH_INTS = 1 << 23
"""Python ints per batch of payloads: ss at k = 1024 lists 275 values a report, and 10⁶ such
reports (275 M ints, ~10 GB) do not fit; it is decoded in batches of ~30 000."""

GOALS = {
    "olh_count_k1024_us": 5.0,
    "oue_perturb_k1024_us": 20.0,
}
"""The goals on the 2-core benchmark machine (µs per report)."""


@dataclass
class Timing:
    """Best and median of repeated measurements, µs per report."""

    best: float
    median: float

    def __str__(self) -> str:
        return f"{self.best:9.3f} {self.median:9.3f}"


def timing(samples: Sequence[float]) -> Timing:
    """Summarise per-report times in µs."""
    return Timing(best=min(samples), median=statistics.median(samples))


def build(name: str, k: int, eps: float) -> FrequencyOracle:
    """The mechanism object under test."""
    return mechanisms.create(name, epsilon=eps, domain_size=None if name == "rr" else k)


def machine() -> dict[str, Any]:
    """Where and when the figures were taken."""
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": affinity or os.cpu_count(),
        "cpu": model,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "platform": platform.platform(),
    }


def speed_probe() -> dict[str, float]:
    """Reference costs that show how fast the shared machine is right now."""
    loop = min(_repeat(lambda: sum(range(1000)), 200, 15))
    urandom = min(_repeat(lambda: os.urandom(4096), 100, 15)) / 4
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return {"sum_range_1000_us": loop, "urandom_per_kib_us": urandom, "load_1min": load}


def _repeat(fn: Callable[[], object], number: int, repeat: int) -> list[float]:
    """µs per call of ``fn``, ``repeat`` times over ``number`` calls."""
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        out.append((time.perf_counter() - start) / number * 1e6)
    return out


def bench_perturb(m: FrequencyOracle, reports: int, repeat: int) -> Timing:
    """µs per ``m.perturb(v)`` with the default CSPRNG, v drawn uniformly."""
    rnd = random.Random(1)
    values = [rnd.randrange(m.domain_size) for _ in range(reports)]
    perturb = m.perturb
    for v in values[:50]:  # warm-up: caches, first buffer fill
        perturb(v)
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for v in values:
            perturb(v)
        samples.append((time.perf_counter() - start) / reports * 1e6)
    return timing(samples)


def payload_batches(codec: FrequencyCodec, n: int, batch_size: int, seed: int) -> list[list[Any]]:
    """``n`` payloads of uniformly distributed true values, in batches, made vectorized."""
    gen = np.random.default_rng(seed)
    out = []
    for start in range(0, n, batch_size):
        size = min(batch_size, n - start)
        values = gen.integers(0, codec.k, size)
        out.append(codec.to_payloads(codec.encode(values, gen)))
    return out


def bench_decode(codec: FrequencyCodec, batches: list[list[Any]], repeat: int) -> dict[str, Timing]:
    """µs per report of parse, count and decode (= parse + count) over all batches."""
    n = sum(len(b) for b in batches)
    parsed = [codec.parse(b) for b in batches]  # warm-up, and the batches for count
    reference = sum(codec.count(b) for b in parsed)
    parse, count, decode = [], [], []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        for b in batches:
            codec.parse(b)
        parse.append((time.perf_counter() - start) / n * 1e6)
        start = time.perf_counter()
        for pb in parsed:
            codec.count(pb)
        count.append((time.perf_counter() - start) / n * 1e6)
        gc.collect()
        start = time.perf_counter()
        total = sum(codec.decode(b).support for b in batches)
        decode.append((time.perf_counter() - start) / n * 1e6)
        assert np.array_equal(total, reference)
    return {"parse": timing(parse), "count": timing(count), "decode": timing(decode)}


def decode_size(m: FrequencyOracle, n: int) -> tuple[int, int]:
    """(reports, batch size) for decoding ``m``: all n in one batch unless payloads are big."""
    ints = getattr(m, "s", 1) if m.name == "ss" else 1
    if ints * n <= BATCH_INTS:
        return n, n
    return max(1, n // 10), max(1, BATCH_INTS // ints)  # ss at large k: 10× fewer reports


def _perturb_table(only: set[str] | None, reports: int, repeat: int) -> list[dict[str, Any]]:
    """(a): each mechanism's perturbation with the CSPRNG, printed and returned."""
    print(
        f"(a) SDK perturb, default CSPRNG: µs/report over {reports} reports, "
        f"best and median of {repeat}"
    )
    print(f"{'mechanism':9} {'k':>5} {'eps':>4} {'best':>9} {'median':>9}")
    rows = []
    for name, k, eps in CORE:
        if only and name not in only:
            continue
        t = bench_perturb(build(name, k, eps), reports, repeat)
        rows.append({"mechanism": name, "k": k, "epsilon": eps, **asdict(t)})
        print(f"{name:9} {k:5d} {eps:4g} {t}", flush=True)
    return rows


def _decode_table(only: set[str] | None, n: int, repeat: int) -> list[dict[str, Any]]:
    """(b): each mechanism's parse, count and decode of ``n`` reports, printed and returned."""
    print(
        f"\n(b) server decode: µs/report, best and median of {repeat}; "
        "decode = parse + count in one call"
    )
    print(
        f"{'mechanism':9} {'k':>5} {'eps':>4} {'reports':>8} {'batch':>8} "
        f"{'parse':>9} {'(med)':>9} {'count':>9} {'(med)':>9} {'decode':>9} {'(med)':>9}"
    )
    rows = []
    for name, k, eps in CORE + DECODE_ONLY:
        if only and name not in only:
            continue
        m = build(name, k, eps)
        codec = codec_for(m)
        reports, batch = decode_size(m, n)
        seed = zlib.crc32(f"{name} {k} {eps}".encode())
        batches = payload_batches(codec, reports, batch, seed)
        t = bench_decode(codec, batches, repeat)
        del batches
        row = {
            "mechanism": name,
            "k": k,
            "epsilon": eps,
            "reports": reports,
            "batch": min(batch, reports),
        }
        row.update({part: asdict(v) for part, v in t.items()})
        rows.append(row)
        print(
            f"{name:9} {k:5d} {eps:4g} {reports:8d} {min(batch, reports):8d} "
            f"{t['parse']} {t['count']} {t['decode']}",
            flush=True,
        )
    return rows


def _print_goals(perturb_rows: list[dict[str, Any]], decode_rows: list[dict[str, Any]]) -> None:
    """Each goal that was measured, met or missed."""
    goals = []
    for r in decode_rows:
        if r["mechanism"] == "olh" and r["k"] == 1024 and r["epsilon"] == 1.0:
            goals.append(("OLH count, k=1024, ε=1", r["count"], GOALS["olh_count_k1024_us"]))
            break
    oue = next((r for r in perturb_rows if r["mechanism"] == "oue" and r["k"] == 1024), None)
    if oue:
        goals.append(("OUE perturb, k=1024, ε=1", oue, GOALS["oue_perturb_k1024_us"]))
    if goals:
        print("\ngoals (µs/report):")
    for label, t_dict, goal in goals:
        verdict = "met" if t_dict["best"] <= goal else "MISSED"
        print(
            f"  {label:26} best {t_dict['best']:.3f}, median {t_dict['median']:.3f} "
            f"(goal ≤ {goal:g}): {verdict}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmarks and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="n = 10⁵, fewer repeats")
    parser.add_argument("--reports", type=int, help="reports to decode (default 10⁶; quick 10⁵)")
    parser.add_argument("--only", help="comma-separated mechanism names")
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    args = parser.parse_args(argv)
    n = args.reports or (100_000 if args.quick else 1_000_000)
    perturb_reports, perturb_repeat = (300, 3) if args.quick else (2000, 7)
    decode_repeat = 2 if args.quick else 3
    only = set(args.only.split(",")) if args.only else None

    info = machine()
    probe_before = speed_probe()
    print(
        f"ldp-telemetry core benchmarks — {info['date']}\n"
        f"nproc {info['nproc']}, {info['cpu']}, Python {info['python']}, numpy {info['numpy']}"
        f"\n{info['platform']}\n"
        f"speed probe: sum(range(1000)) {probe_before['sum_range_1000_us']:.1f} µs, "
        f"os.urandom {probe_before['urandom_per_kib_us']:.2f} µs/KiB, "
        f"load average {probe_before['load_1min']:.2f}\n"
    )
    results: dict[str, Any] = {"machine": info, "probe_before": probe_before, "n": n}
    results["perturb"] = _perturb_table(only, perturb_reports, perturb_repeat)
    results["decode"] = _decode_table(only, n, decode_repeat)
    probe_after = speed_probe()
    results["probe_after"] = probe_after
    print(
        f"\nspeed probe after: sum(range(1000)) {probe_after['sum_range_1000_us']:.1f} µs, "
        f"os.urandom {probe_after['urandom_per_kib_us']:.2f} µs/KiB, "
        f"load average {probe_after['load_1min']:.2f}"
    )
    _print_goals(results["perturb"], results["decode"])
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

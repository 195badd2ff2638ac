"""Distributions: interval coverage over a grid, range-query MSE against baselines, costs.

    .venv/bin/python benchmarks/bench_distributions.py [coverage|mse|cost|latency|all]
        [--reps R] [--quick]

* ``coverage``: ε ∈ {0.5, 1, 2, 4, 8} × n ∈ {10³, 10⁴, 10⁵, 10⁶} × five distributions
  (uniform, normal, lognormal heavy tail, a point mass, a bimodal mix), 64 bins in a
  tree of B = 4 (three levels; auto would pick a flat histogram at 64 bins); each rep
  draws the window's counters exactly (levels uniform, OUE bits independent:
  :meth:`HistogramCodec.sample_counters`) from a fixed population and checks
  whether two ranges' intervals and the p50/p95 intervals cover the truth. A cell's
  coverage has a binomial standard error √(p(1−p)/R); the pooled row over the grid
  ±0.3 % at R = 40 per cell.
* ``mse``: the mean squared error of every range query of a workload against
  Cormode–Kulkarni–Srivastava (VLDB 2019)'s baselines, reimplemented here with the same
  frequency oracle (OUE) and the same reports: a flat histogram (one level, D leaves),
  HH_B with each range read off its minimal B-adic decomposition of raw level estimates
  (no consistency), HH_B with Hay et al.'s constrained inference under equal weights (the
  paper's "HHc"), and ours (weights per level). Their default ε = 1.1 and D = 2⁸ … 2¹⁰,
  N = 2²⁰ devices, a Cauchy population, the workload every range (D ≤ 256) or 10⁴ random
  ones.
* ``compare``: HaarHRR (Cormode–Kulkarni–Srivastava §5) against the hierarchical
  histogram auto picks, over ε ∈ {0.25 … 8}, D = 256, N = 2^20, every range;
  ``coverage-haar``: the coverage grid for HaarHRR (a binary tree, B = 2). Both draw a
  window's counters from their exact law given the population (multinomial splits into
  levels and rows, binomial kept bits: no draw per report), so n = 10⁶ costs what 10³
  does; ``--sizes 1e5,1e6`` picks the n.
* ``cost``: SDK cost per report (µs, the Python SDK's ``build_report`` with the CSPRNG),
  server decode (reports/s through the codec's parse + count, one process: two workers
  run two of them), estimate time for 1,024 bins (fit, bin errors, the CDF band,
  quantiles), wall and CPU time of each stage (CPU time is what the machine's load does
  not inflate), and the floor the band's Gaussian draws set.
* ``decode``: server decode throughput with two real workers (``ldp aggregate --once``
  twice at once, benchmarks/drain_harness.py) for hh and haar at 1,024 log bins, a GRR
  metric the yardstick; reports/s and CPU µs per report of Redis and the workers.
* ``trend``: quantiles over 90 days of hour windows at 1,024 bins, in one pass
  (:func:`aggregator.stats.distribution_series.quantile_series`): time, the answer's
  bytes, and a window's own answer (its band drawn) for scale.
* ``latency``: a heavy-tailed latency sample (a lognormal with median 1.2 s and p95 4.0 s,
  near published web page-load percentiles), p50/p95 with intervals at ε = 1, 2, 4 and
  n = 10⁵, 10⁶; the table, and a figure drawn with matplotlib (offline, Agg) into
  ``docs/benchmarks/distributions-latency.png``.

numpy's generator drives the simulations (not a CSPRNG; the same laws as the SDK's).
Prints the load average before each section: the machine is shared.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from aggregator.stats.distribution import estimate_distribution
from aggregator.stats.distribution_codec import HaarCodec, HistogramCodec
from aggregator.stats.distribution_haar import (
    estimate_haar,
    sample_haar_counters,
)
from client_sdk.mechanisms.distribution import (
    HierarchicalHistogram,
    choose_distribution,
)
from client_sdk.mechanisms.haar import HaarHRR
from client_sdk.wire import build_report, parse_spec

ROOT = Path(__file__).resolve().parents[1]

SHAPES = ("uniform", "normal", "lognormal", "point", "bimodal")


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"(load average {one:.2f} / {five:.2f}, {os.cpu_count()} cores)"


def values(shape: str, n: int, gen: np.random.Generator) -> np.ndarray:
    """n values in [0, 1) of a named distribution."""
    if shape == "uniform":
        x = gen.random(n)
    elif shape == "normal":
        x = gen.normal(0.45, 0.12, n)
    elif shape == "lognormal":
        x = gen.lognormal(-2.8, 1.0, n)
    elif shape == "point":
        x = np.full(n, 0.4031)
    else:
        x = np.where(gen.random(n) < 0.65, gen.normal(0.25, 0.05, n), gen.normal(0.78, 0.04, n))
    return np.clip(x, 0.0, 1.0 - 1e-12)


def _windows(mechanism: str, eps: float, d: int, edges: np.ndarray) -> tuple[Any, int]:
    """A window's estimate from a population's bins (drawn exactly), and the tree's B."""
    if mechanism == "haar":
        haar = HaarHRR(eps, d)
        return (
            lambda bins, gen: estimate_haar(haar, sample_haar_counters(haar, bins, gen), edges)
        ), 2
    m = HierarchicalHistogram(eps, d, 4)  # the tree (auto: flat at 64 bins)
    codec = HistogramCodec(m)
    return (
        lambda bins, gen: estimate_distribution(m, codec.sample_counters(bins, gen), edges)
    ), m.branching


def coverage(
    reps: int, quick: bool, mechanism: str = "hh", sizes: tuple[int, ...] | None = None
) -> None:
    print(f"## Coverage of 95 % intervals, {mechanism} {load()}")
    d = 64
    edges = np.linspace(0.0, 1.0, d + 1)
    epsilons = (0.5, 1.0, 2.0, 4.0, 8.0)
    if sizes is None:
        sizes = (1_000, 10_000) if quick else (1_000, 10_000, 100_000, 1_000_000)
    ranges = ((0.25, 0.5), (0.05, 0.95))
    print("| ε | n | shape | B | range [.25,.5) | range [.05,.95) | p50 | p95 |")
    print("|---|---|---|---|---|---|---|---|")
    pooled = {"range": [0, 0], "quantile": [0, 0]}
    worst = 1.0
    for eps in epsilons:
        window, branching = _windows(mechanism, eps, d, edges)
        for n in sizes:
            for s, shape in enumerate(SHAPES):
                gen = np.random.default_rng(1000 * s + n % 997 + int(eps * 10))
                bins = (values(shape, n, gen) * d).astype(np.int64)
                truth = np.bincount(bins, minlength=d) / n
                below = np.concatenate(([0.0], np.cumsum(truth)))
                hits = [0, 0, 0, 0]
                for _ in range(reps):
                    est = window(bins, gen)
                    for i, (a, b) in enumerate(ranges):
                        r = est.range_share(a, b)
                        lo, hi = round(r.low * d), round(r.high * d)
                        hits[i] += r.ci_low <= below[hi] - below[lo] <= r.ci_high
                    for i, p in enumerate((0.5, 0.95)):
                        found = est.quantile(p)
                        j = int(np.searchsorted(below, p, "left"))
                        hits[2 + i] += (
                            found.ci_low <= edges[j - 1] and edges[j] <= found.ci_high + 1e-12
                        )
                rates = [h / reps for h in hits]
                worst = min(worst, *rates)
                pooled["range"][0] += hits[0] + hits[1]
                pooled["range"][1] += 2 * reps
                pooled["quantile"][0] += hits[2] + hits[3]
                pooled["quantile"][1] += 2 * reps
                cells = " | ".join(f"{r:.0%}" for r in rates)
                print(f"| {eps:g} | {n:,} | {shape} | {branching} | {cells} |", flush=True)
    for name, (hit, total) in pooled.items():
        rate = hit / total
        print(
            f"pooled {name} coverage: {rate:.2%} ± {math.sqrt(rate * (1 - rate) / total):.2%} "
            f"over {total:,} intervals"
        )
    print(
        f"lowest cell: {worst:.0%} of {reps} (a cell's binomial s.e. at 95 %: "
        f"{math.sqrt(0.95 * 0.05 / reps):.1%})"
    )


def _raw_levels(m: HierarchicalHistogram, counters: np.ndarray) -> list[np.ndarray]:
    out = []
    for i, o in enumerate(m.oracles):
        start, size = m.offsets[i], m.level_size(i + 1)
        out.append((counters[start : start + size] / counters[i] - o.q) / (o.p - o.q))
    return out


def _decomposition_answer(m: HierarchicalHistogram, raw: list[np.ndarray], a: int, b: int) -> float:
    """Σ of raw node estimates over the minimal B-adic cover of leaves [a, b)."""
    h, base = m.height, m.branching
    total = 0.0
    level, lo, hi = h, a, b
    while lo < hi:
        if level == 0:  # the root: the whole range, known to be 1
            return total + 1.0
        while lo < hi and lo % base:
            total += raw[level - 1][lo]
            lo += 1
        while lo < hi and hi % base:
            hi -= 1
            total += raw[level - 1][hi]
        lo, hi, level = lo // base, hi // base, level - 1
    return total


def _uniform_consistency(m: HierarchicalHistogram, raw: list[np.ndarray]) -> np.ndarray:
    """Hay et al.'s constrained inference with equal weights per node (CKS's HHc)."""
    counters = np.concatenate(
        [[1] * m.height, *[np.zeros(m.level_size(lv)) for lv in range(1, m.height + 1)]]
    )
    est = estimate_distribution(m, counters, np.linspace(0, 1, m.bins + 1))
    est.__dict__["_weights"] = np.ones(m.height)  # equal weights
    est.__dict__["_raw"] = raw
    return est.histogram


def mse(reps: int, quick: bool) -> None:
    print(f"## Range-query MSE (×10⁶; lower is better) {load()}")
    n = 1 << 20
    eps = 1.1
    print(
        f"ε = {eps}, N = 2^20 = {n:,} devices, Cauchy population (location D/2, scale D/20), "
        f"{reps} reps; same reports for every estimator of a tree"
    )
    print(
        "| D | workload | flat (OUE) | HH_B raw | HH_B + uniform CI (HHc) | ours: weighted CI "
        "| HaarHRR |"
    )
    print("|---|---|---|---|---|---|---|")
    for d in (256,) if quick else (256, 1024):
        gen = np.random.default_rng(d)
        x = gen.standard_cauchy(n) * (d / 20) + d / 2
        bins = np.clip(x, 0, d - 1).astype(np.int64)
        truth = np.concatenate(([0.0], np.cumsum(np.bincount(bins, minlength=d) / n)))
        if d <= 256:
            pairs = np.array([(a, b) for a in range(d) for b in range(a + 1, d + 1)])
            workload = "all ranges"
        else:
            a = gen.integers(0, d, 10_000)
            b = gen.integers(0, d, 10_000)
            pairs = np.stack([np.minimum(a, b), np.maximum(a, b) + 1], axis=1)
            workload = "10⁴ random ranges"
        true_answers = truth[pairs[:, 1]] - truth[pairs[:, 0]]
        tree = choose_distribution(eps, d).mechanism
        flat = HierarchicalHistogram(eps, d, d)
        errors = {"flat": [], "raw": [], "hhc": [], "ours": [], "haar": []}
        haar = HaarHRR(eps, d)
        for _ in range(reps):
            c_flat = HistogramCodec(flat).sample_counters(bins, gen)
            f = estimate_distribution(flat, c_flat, np.arange(d + 1)).histogram
            errors["flat"].append(
                np.mean(
                    (
                        np.cumsum(np.r_[0, f])[pairs[:, 1]]
                        - np.cumsum(np.r_[0, f])[pairs[:, 0]]
                        - true_answers
                    )
                    ** 2
                )
            )
            counters = HistogramCodec(tree).sample_counters(bins, gen)
            raw = _raw_levels(tree, counters)
            sample = pairs if len(pairs) <= 4000 else pairs[:: len(pairs) // 4000]
            sample_truth = truth[sample[:, 1]] - truth[sample[:, 0]]
            answers = np.array([_decomposition_answer(tree, raw, a, b) for a, b in sample])
            errors["raw"].append(np.mean((answers - sample_truth) ** 2))
            c_haar = sample_haar_counters(haar, bins, gen)
            for key, hist in (
                ("hhc", _uniform_consistency(tree, raw)),
                ("ours", estimate_distribution(tree, counters, np.arange(d + 1)).histogram),
                ("haar", estimate_haar(haar, c_haar, np.arange(d + 1)).histogram),
            ):
                cdf = np.cumsum(np.r_[0, hist])
                errors[key].append(
                    np.mean((cdf[pairs[:, 1]] - cdf[pairs[:, 0]] - true_answers) ** 2)
                )
        cells = " | ".join(
            f"{1e6 * np.mean(errors[k]):.3g}" for k in ("flat", "raw", "hhc", "ours", "haar")
        )
        print(
            f"| 2^{d.bit_length() - 1} (B = {tree.branching}) | {workload} | {cells} |", flush=True
        )


def compare(reps: int, quick: bool) -> None:
    """HaarHRR against the hierarchical histogram (auto's B) over ε: CKS find HaarHRR
    better at small ε; the same population, workload and N as ``mse``."""
    print(f"## HaarHRR against the hierarchical histogram over ε (MSE ×10⁶) {load()}")
    n, d = 1 << 20, 256
    gen = np.random.default_rng(d)
    x = gen.standard_cauchy(n) * (d / 20) + d / 2
    bins = np.clip(x, 0, d - 1).astype(np.int64)
    truth = np.concatenate(([0.0], np.cumsum(np.bincount(bins, minlength=d) / n)))
    pairs = np.array([(a, b) for a in range(d) for b in range(a + 1, d + 1)])
    true_answers = truth[pairs[:, 1]] - truth[pairs[:, 0]]
    print(f"D = {d}, N = 2^20, Cauchy population, every range, {reps} reps")
    print("| ε | HH (auto B) | HaarHRR | HaarHRR / HH | mean se of [D/4, D/2): HH, HaarHRR |")
    print("|---|---|---|---|---|")
    for eps in (0.5, 1.1, 2.0) if quick else (0.25, 0.5, 1.1, 2.0, 4.0, 8.0):
        tree = choose_distribution(eps, d).mechanism
        haar = HaarHRR(eps, d)
        mse_of: dict[str, list[float]] = {"hh": [], "haar": []}
        se_of: dict[str, list[float]] = {"hh": [], "haar": []}
        for _ in range(reps):
            for key, est in (
                (
                    "hh",
                    estimate_distribution(
                        tree, HistogramCodec(tree).sample_counters(bins, gen), np.arange(d + 1)
                    ),
                ),
                (
                    "haar",
                    estimate_haar(haar, sample_haar_counters(haar, bins, gen), np.arange(d + 1)),
                ),
            ):
                cdf = np.cumsum(np.r_[0, est.histogram])
                mse_of[key].append(
                    float(np.mean((cdf[pairs[:, 1]] - cdf[pairs[:, 0]] - true_answers) ** 2))
                )
                se_of[key].append(est.range_share(d / 4, d / 2).std_error)
        hh, hr = 1e6 * np.mean(mse_of["hh"]), 1e6 * np.mean(mse_of["haar"])
        print(
            f"| {eps:g} | {hh:.3g} (B = {tree.branching}) | {hr:.3g} | {hr / hh:.2f} | "
            f"{np.mean(se_of['hh']):.2e}, {np.mean(se_of['haar']):.2e} |",
            flush=True,
        )


def cost(quick: bool) -> None:
    print(f"## Costs {load()}")
    spec = {
        "kind": "numeric",
        "range": [1, 60000],
        "epsilon": 1.0,
        "distribution": {"bins": 1024, "scale": "log"},
    }
    d = parse_spec("page.load_ms", spec)
    count = 300 if quick else 2000
    rng = random.Random(1)
    vals = [rng.uniform(1, 60000) for _ in range(count)]
    start = time.perf_counter()
    reports = [build_report(d, v) for v in vals]
    per = (time.perf_counter() - start) / count * 1e6
    print(f"SDK (Python, CSPRNG) build_report, 1,024 log bins, B = 4: {per:.0f} µs per report")
    numeric = parse_spec("m", {"kind": "numeric", "range": [1, 60000], "epsilon": 1.0})
    start = time.perf_counter()
    for v in vals:
        build_report(numeric, v)
    print(
        f"  yardstick: a numeric (mean) report, same run: "
        f"{(time.perf_counter() - start) / count * 1e6:.0f} µs"
    )
    haar_d = parse_spec("page.load_ms", {**spec, "mechanism": "haar"})
    start = time.perf_counter()
    haar_reports = [build_report(haar_d, v) for v in vals]
    print(
        f"  HaarHRR (Python, CSPRNG) build_report, 1,024 log bins: "
        f"{(time.perf_counter() - start) / count * 1e6:.0f} µs per report"
    )
    haar_codec = HaarCodec(haar_d.histogram)
    haar_payloads = [r["payload"] for r in haar_reports] * (10 if quick else 50)
    start = time.perf_counter()
    haar_codec.decode(haar_payloads)
    print(
        f"server decode, HaarHRR (parse + count, one process): "
        f"{len(haar_payloads) / (time.perf_counter() - start):,.0f} reports/s"
    )
    gen = np.random.default_rng(5)
    haar_counters = sample_haar_counters(haar_d.histogram, gen.integers(0, 1024, 1_000_000), gen)
    for _ in range(1 if quick else 3):
        est = estimate_haar(haar_d.histogram, haar_counters, haar_d.bin_edges())
        wall, cpu = time.perf_counter(), time.process_time()
        [est.quantile(p) for p in (0.5, 0.9, 0.95, 0.99)], est.bin_std_errors
        print(
            f"estimate, HaarHRR, 1,024 bins (n = 10⁶; fit, bin and CDF errors, band, "
            f"quantiles): {time.perf_counter() - wall:.2f} s wall, "
            f"{time.process_time() - cpu:.2f} s CPU {load()}"
        )
    codec = HistogramCodec(d.histogram)
    payloads = [r["payload"] for r in reports] * (10 if quick else 50)
    start = time.perf_counter()
    codec.decode(payloads)
    rate = len(payloads) / (time.perf_counter() - start)
    print(
        f"server decode (parse + count, one process): {rate:,.0f} reports/s "
        f"({len(payloads):,} reports); 2 workers ≈ {2 * rate:,.0f}/s on 2 free cores"
    )
    gen = np.random.default_rng(3)
    counters = codec.sample_counters(gen.integers(0, 1024, 1_000_000), gen)
    for _ in range(1 if quick else 3):  # the machine is shared: wall and CPU time, each run
        est = estimate_distribution(d.histogram, counters, d.bin_edges())
        stages = []
        wall, cpu = time.perf_counter(), time.process_time()
        for what, call in (
            ("fit", lambda e: e.histogram),
            ("bin errors", lambda e: e.bin_std_errors),
            ("CDF errors", lambda e: e.cdf_std_errors),
            ("band", lambda e: e.band_critical),
            ("quantiles", lambda e: [e.quantile(p) for p in (0.5, 0.9, 0.95, 0.99)]),
        ):
            w, c = time.perf_counter(), time.process_time()
            call(est)
            took = (time.perf_counter() - w, time.process_time() - c)
            stages.append(f"{what} {1e3 * took[0]:.0f}/{1e3 * took[1]:.0f}")
        print(
            f"estimate, 1,024 bins (n = 10⁶), ms wall/CPU: {', '.join(stages)}; in all "
            f"{time.perf_counter() - wall:.2f} s wall, {time.process_time() - cpu:.2f} s CPU "
            f"{load()}"
        )
    gen = np.random.default_rng(1)
    start = time.process_time()
    for _ in range(4):
        for _ in range(d.histogram.height):
            gen.standard_normal((512, 1024))
    print(
        f"  floor: the band's 2,000 × 5 × 1,024 Gaussian draws alone, "
        f"{time.process_time() - start:.2f} s CPU"
    )


def decode(reports: int) -> None:
    """Server decode throughput: ``reports`` SDK payloads of each metric appended to its
    stream, drained by two real ``ldp aggregate --once`` workers at once
    (benchmarks/drain_harness.py); a GRR metric (k = 16) is the same run's yardstick."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from drain_harness import run_drains

    print(f"## Server decode, 2 workers {load()}")
    hh = {"kind": "numeric", "range": [1, 60000], "epsilon": 1.0,
          "distribution": {"bins": 1024, "scale": "log"}}  # fmt: skip
    metrics = [
        ("grr k=16 (yardstick)", {"domain": [f"v{i}" for i in range(16)], "epsilon": 1.0,
                                  "mechanism": "grr"}),
        ("hh 1,024 log bins", hh),
        ("haar 1,024 log bins", {**hh, "mechanism": "haar"}),
    ]  # fmt: skip

    def payloads(d: Any, rng: random.Random, count: int) -> list[dict[str, Any]]:
        if d.kind == "distribution":
            values: list[Any] = [rng.lognormvariate(7.0, 1.0) for _ in range(count)]
            values = [min(max(v, 1.0), 60000.0) for v in values]
        else:
            values = [rng.choice(d.domain) for _ in range(count)]
        return [build_report(d, v, rng)["payload"] for v in values]

    run_drains(metrics, "bench.decode", reports, payloads, workers=2)
    print(f"  {load()}")


def trend(quick: bool) -> None:
    """Quantiles over 90 days of hour windows (2,160) at 1,024 bins: the trend's one pass
    over every window (each window's fit and CDF standard errors, Bonferroni's band)
    beside a band drawn per window (the window's own answer), and the answer's bytes."""
    from aggregator.query.answers import DistributionTrendPoint, QuantileAnswer
    from aggregator.stats.distribution_series import quantile_series

    print(f"## Quantiles over time: 90 days of hours, 1,024 bins {load()}")
    hours = 24 * (7 if quick else 90)
    for name in ("hh", "haar"):
        d = parse_spec(
            "page.load_ms",
            {
                "kind": "numeric",
                "range": [1, 60000],
                "epsilon": 1.0,
                "distribution": {"bins": 1024, "scale": "log"},
                "mechanism": name,
            },
        )
        m = d.histogram
        gen = np.random.default_rng(4)
        rows = []
        for _ in range(hours):
            n = int(gen.integers(2_000, 20_000))
            bins = np.clip(gen.normal(600, 120, n), 0, 1023).astype(np.int64)
            rows.append(
                sample_haar_counters(m, bins, gen)
                if isinstance(m, HaarHRR)
                else HistogramCodec(m).sample_counters(bins, gen)
            )
        table = np.array(rows)
        edges = np.array(d.bin_edges())
        wall, cpu = time.perf_counter(), time.process_time()
        series = quantile_series(m, edges, table, (0.5, 0.9, 0.95, 0.99))
        took = (time.perf_counter() - wall, time.process_time() - cpu)
        points = [
            DistributionTrendPoint(
                window=f"hour:{w}",
                n=int(series.n[w]),
                ready=bool(series.ready[w]),
                band_critical=series.band_critical,
                quantiles=[QuantileAnswer(**q.__dict__) for q in series.quantiles[w]],
            ).model_dump_json()
            for w in range(hours)
        ]
        size = sum(len(p) for p in points) + hours
        own = []
        for w in range(3):
            c = time.process_time()
            est = (estimate_haar if isinstance(m, HaarHRR) else estimate_distribution)(
                m,
                table[w],
                edges,  # type: ignore[arg-type]
            )
            [est.quantile(p) for p in (0.5, 0.9, 0.95, 0.99)]
            own.append(time.process_time() - c)
        print(
            f"{name}: {hours:,} windows in {took[0]:.2f} s wall, {took[1]:.2f} s CPU "
            f"({1e3 * took[1] / hours:.2f} ms CPU per window); the windows' JSON "
            f"{size / 1e6:.2f} MB ({size / hours:.0f} B per window); band c = "
            f"{series.band_critical:.2f} (Bonferroni) against the window's own drawn "
            f"{est.band_critical:.2f}; a window's own answer: {1e3 * min(own):.0f} ms CPU "
            f"(× {hours:,} = {min(own) * hours:.0f} s) {load()}",
            flush=True,
        )


PLOT = ROOT / "docs" / "benchmarks" / "distributions-latency.png"
"""Where ``latency`` draws its figure (embedded in docs/benchmarks/distributions.md)."""


def latency(quick: bool) -> None:
    from aggregator.analysis.plots import plot_latency_quantiles

    print(f"## A heavy-tailed latency sample {load()}")
    median, p95 = 1.2, 4.0  # seconds
    sigma = math.log(p95 / median) / 1.6448536269514722
    spec = {
        "kind": "numeric",
        "range": [0.05, 60.0],
        "epsilon": 1.0,
        "distribution": {"bins": 256, "scale": "log"},
    }
    setting = (
        f"lognormal, median {median} s, p95 {p95} s (σ = {sigma:.3f}), range [0.05, 60] s, "
        "256 log bins"
    )
    print(setting)
    print("| ε | n | true p50 | p50 [interval] | true p95 | p95 [interval] |")
    print("|---|---|---|---|---|---|")
    rows: list[dict[str, Any]] = []
    for eps in (1.0, 2.0, 4.0):
        d = parse_spec("page.load", {**spec, "epsilon": eps})
        m = d.histogram
        codec = HistogramCodec(m)
        edges = np.array(d.bin_edges())
        for n in (100_000,) if quick else (100_000, 1_000_000):
            gen = np.random.default_rng(int(eps) * 7 + n % 13)
            x = np.clip(gen.lognormal(math.log(median), sigma, n), 0.05, 60.0)
            bins = np.clip(np.floor(np.log(x / 0.05) / math.log(60 / 0.05) * m.bins), 0, m.bins - 1)
            est = estimate_distribution(m, codec.sample_counters(bins.astype(np.int64), gen), edges)
            row = [f"{eps:g}", f"{n:,}"]
            for p in (0.5, 0.95):
                found = est.quantile(p)
                truth = float(np.quantile(x, p))
                rows.append(
                    {"epsilon": eps, "n": n, "p": p, "truth": truth, "value": found.value,
                     "ci_low": found.ci_low, "ci_high": found.ci_high}
                )  # fmt: skip
                row += [
                    f"{truth:.3f}",
                    f"{found.value:.3f} [{found.ci_low:.3f}, {found.ci_high:.3f}]",
                ]
            print("| " + " | ".join(row) + " |", flush=True)
    plot_latency_quantiles(rows, PLOT, "A heavy-tailed latency sample: " + setting)
    print(f"figure: {PLOT.relative_to(ROOT)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "what",
        nargs="?",
        default="all",
        choices=(
            "coverage",
            "coverage-haar",
            "mse",
            "compare",
            "cost",
            "latency",
            "trend",
            "decode",
            "all",
        ),
    )
    parser.add_argument("--reps", type=int, default=40)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reports", type=int, default=None, help="decode: per metric")
    parser.add_argument(
        "--sizes", default=None, help="coverage: the n of the grid, comma-separated (1e5,1e6)"
    )
    args = parser.parse_args()
    sizes = tuple(int(float(x)) for x in args.sizes.split(",")) if args.sizes else None
    if args.what in ("cost", "all"):
        cost(args.quick)
    if args.what in ("decode", "all"):
        decode(args.reports or 200_000)
    if args.what in ("trend", "all"):
        trend(args.quick)
    if args.what in ("latency", "all"):
        latency(args.quick)
    if args.what in ("mse", "all"):
        mse(max(3, args.reps // 8), args.quick)
    if args.what in ("compare", "all"):
        compare(max(3, args.reps // 8), args.quick)
    if args.what in ("coverage", "all"):
        coverage(args.reps, args.quick, sizes=sizes)
    if args.what in ("coverage-haar", "all"):
        coverage(args.reps, args.quick, "haar", sizes)


if __name__ == "__main__":
    main()

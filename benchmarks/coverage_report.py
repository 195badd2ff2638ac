"""Coverage of the intervals, before and after issue 11: the table for the closing note.

    .venv/bin/python benchmarks/coverage_report.py [--quick]

Each row puts the old rule (restated here: Wald intervals with the plug-in variance,
one-report variance for memoized pools, per-value "interval excludes 0" flags) beside
what the public API answers now, on the same draws. Small-n coverage is exact (summed
over the support count's distribution); the memoized and FDR rows simulate with fixed
seeds (numpy, not a CSPRNG: a simulation) and print the simulation's standard error.
The numeric-mean and confidence-sequence rows come from their own modules' checks
(``aggregator.stats.numeric``, ``aggregator.stats.anytime``) when those are present.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

import numpy as np
from scipy.stats import binom

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aggregator import Counts, estimate_from_counts  # noqa: E402
from aggregator.stats.intervals import z_value  # noqa: E402
from aggregator.stats.kinds import codec_for  # noqa: E402
from client_sdk.mechanisms import Memoized, create  # noqa: E402

Z = z_value(0.95)


def count_pmf(n: int, f: float, p: float, q: float) -> np.ndarray:
    inside = round(n * f)
    return np.convolve(
        binom.pmf(np.arange(inside + 1), inside, p),
        binom.pmf(np.arange(n - inside + 1), n - inside, q),
    )


def small_n(name: str, k: int, n: int) -> tuple[float, float, int, int]:
    """(old lowest, new lowest, old points < 93 %, new points < 93 %) over 51 f."""
    m = create(name, epsilon=1.0, domain_size=k)
    p, q = float(m.p), float(m.q)
    c = np.arange(n + 1)
    f_hat = m.debias(c, n)
    old_half = Z * np.sqrt(m.variance(n, np.clip(f_hat, 0, 1)))
    new_low, new_high = [], []
    for start in range(0, n + 1, k):
        chunk = np.arange(start, start + k).clip(max=n)
        est = estimate_from_counts(m, Counts(n, chunk))
        new_low.extend(est.ci_low.tolist())
        new_high.extend(est.ci_high.tolist())
    lo, hi = np.array(new_low[: n + 1]), np.array(new_high[: n + 1])
    old, new = [], []
    for j in range(0, n + 1, max(1, n // 50)):
        f = j / n
        pmf = count_pmf(n, f, p, q)
        old.append(float(pmf[np.abs(f_hat - f) <= old_half].sum()))
        new.append(float(pmf[(lo <= f) & (f <= hi)].sum()))
    return min(old), min(new), sum(x < 0.93 for x in old), sum(x < 0.93 for x in new)


def memoized(name: str, k: int, reports: int, runs: int) -> tuple[float, float]:
    """Coverage at f = 0.5 of pools with ``reports`` per device: (one-report, with r)."""
    m = create(name, epsilon=1.0, domain_size=k, permanent_epsilon=4.0)
    assert isinstance(m, Memoized)
    p1, q1 = float(m.permanent.p), float(m.permanent.q)
    gap = (float(m.p) - float(m.q)) / (p1 - q1)
    q2 = float(m.p) - p1 * gap
    p2 = q2 + gap
    devices, f = 400, 0.5
    gen = np.random.default_rng(11)
    prr = np.concatenate(
        [gen.random((runs, devices // 2)) < p1, gen.random((runs, devices // 2)) < q1], axis=1
    )
    support = gen.binomial(reports, np.where(prr, p2, q2)).sum(axis=1)
    n = devices * reports
    hits = {1: 0, reports: 0}
    for start in range(0, runs, k):
        counts = Counts(n, support[start : start + k].astype(np.int64))
        for r in hits:
            est = estimate_from_counts(m, counts, reports_per_device=r)
            hits[r] += int(((est.ci_low <= f) & (f <= est.ci_high)).sum())
    return hits[1] / runs, hits[reports] / runs


def fdr(name: str, runs: int, n: int) -> tuple[float, float, float, float]:
    """k = 1024, 512 absent: (old false flags, old FDR, new false flags, new FDR).

    The old flag: the Wald interval f̂ ± 1.96·se excludes 0 (either side), per value."""
    k = 1024
    m = create(name, epsilon=2.0, domain_size=k)
    weights = np.zeros(k)
    weights[:512] = np.linspace(3.0, 1.0, 512)
    truth = np.floor(n * weights / weights.sum()).astype(np.int64)
    truth[0] += n - truth.sum()
    absent = truth == 0
    gen = np.random.default_rng(5)
    codec = codec_for(m)
    old_f, old_p, new_f, new_p = [], [], [], []
    for _ in range(runs):
        counts = Counts(n, codec.sample_support_counts(truth, gen))
        est = estimate_from_counts(m, counts, multiplicity="fdr")
        old = np.abs(est.frequencies) > Z * est.std_errors
        new = ~est.indistinguishable_from_zero()
        for flags, count, share in ((old, old_f, old_p), (new, new_f, new_p)):
            count.append(int((flags & absent).sum()))
            share.append((flags & absent).sum() / max(int(flags.sum()), 1))
    return (
        float(np.mean(old_f)),
        float(np.mean(old_p)),
        float(np.mean(new_f)),
        float(np.mean(new_p)),
    )


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer simulated runs")
    args = parser.parse_args()
    runs = 1024 if args.quick else 4096
    print(f"load average {os.getloadavg()[0]:.2f} (figures are exact or simulated: no timing)")
    print("\n3. small n (k = 16, ε = 1, n = 100; exact coverage over 51 true frequencies)")
    print(
        f"   {'mechanism':10} {'old lowest':>11} {'new lowest':>11} {'old <93%':>9} {'new <93%':>9}"
    )
    for name in ("grr", "oue", "olh"):
        a, b, c, d = small_n(name, 16, 100)
        print(f"   {name:10} {a:>11.1%} {b:>11.1%} {c:>9} {d:>9}")
    print(f"\n1. memoized pools, 30 reports per device, f = 0.5 ({runs} simulated pools)")
    sigma = math.sqrt(0.95 * 0.05 / runs)
    print(
        f"   {'mechanism':10} {'old (r = 1)':>12} {'new (r = 30)':>13}   (± {sigma:.1%} simulation)"
    )
    for name, k in (("memo-oue", 16), ("memo-sue", 16), ("memo-grr", 8)):
        old, new = memoized(name, k, 30, runs)
        print(f"   {name:10} {old:>12.1%} {new:>13.1%}")
    fdr_runs = 60 if args.quick else 200
    print(f"\n4. many values: k = 1024, 512 absent, ε = 2 ({fdr_runs} snapshots each)")
    head = ("old false flags", "old FDR", "new false flags", "new FDR")
    print(f"   {'mechanism':10} {'n':>9} {head[0]:>16} {head[1]:>8} {head[2]:>16} {head[3]:>8}")
    for n in (200_000, 4_000_000):  # the held values barely visible, then clearly
        for name in ("oue", "olh"):
            a, b, c, d = fdr(name, fdr_runs, n)
            print(f"   {name:10} {n:>9,} {a:>16.1f} {b:>8.1%} {c:>16.2f} {d:>8.2%}")


if __name__ == "__main__":
    main()

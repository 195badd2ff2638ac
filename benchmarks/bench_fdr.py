"""False discovery rate of the "distinguishable from zero" flags where counts are small.

    .venv/bin/python benchmarks/bench_fdr.py [--snapshots S] [--quick]

k = 1024 values, 512 of them held by nobody (the others: weights 3 down to 1), at
expected counts under f = 0 (n·q*) from about 10, where the intervals switch from exact to
score, to about 100. Each row simulates S snapshots of the support counts (numpy with a
fixed seed: a simulation, not a CSPRNG) and prints, for the flags the API serves and for
the same flags from the normal-tail p-value the score regime used before (restated here:
Φ(−f̂/√V(0)), the binomial tail below the switch), the false discovery rate (the mean share
of flagged values that nobody holds) with the simulation's standard error, and the share of
held values flagged (power). Benjamini–Hochberg promises FDR ≤ π₀·5 %, π₀ the share of
absent values: 2.5 % where n is large enough to hold 512 values (below n ≈ 2,000 fewer
are held and the promise is printed per row).

The last column puts the simultaneous (Bonferroni) intervals' coverage of all k true
shares beside their promise of 95 %.

A second table is about whose share: devices drawn from a population holding v at a share
π, so each report supports v with probability μ = q* + π(p* − q*) and C ~ Bin(n, μ); the
exact coverage of π (summed over C) by the intervals for the reporters' share (the
default) and for the population's (``estimand="population"``).
"""

from __future__ import annotations

import argparse
import math
import os
from typing import Any

import numpy as np
from scipy.special import ndtr
from scipy.stats import binom

from aggregator import Counts, estimate_from_counts
from aggregator.stats.intervals import (
    ESTIMANDS,
    SCORE,
    benjamini_hochberg,
    frequency_intervals,
    interval_method,
)
from aggregator.stats.kinds import codec_for
from client_sdk.mechanisms import create

K = 1024
ALPHA = 0.05


def population(n: int) -> np.ndarray:
    """True-value counts: 512 values held (weights 3 down to 1), 512 held by nobody."""
    weights = np.zeros(K)
    weights[: K // 2] = np.linspace(3.0, 1.0, K // 2)
    truth = np.floor(n * weights / weights.sum()).astype(np.int64)
    truth[0] += n - truth.sum()
    return truth


def old_p_values(m: Any, n: int, support: np.ndarray, served: np.ndarray) -> np.ndarray:
    """The score regime's former p-value: the normal tail with the variance at f = 0."""
    if interval_method(m, n) != SCORE:
        return served
    f = m.debias(support.astype(np.float64), n)
    return np.asarray(ndtr(-f / math.sqrt(float(m.variance(n, 0.0)))))


def run(name: str, epsilon: float, n: int, snapshots: int, seed: int = 7) -> dict[str, float]:
    """FDR and power of the old and served flags, and the simultaneous coverage."""
    m = create(name, epsilon=epsilon, domain_size=K)
    truth = population(n)
    absent = truth == 0
    f_true = truth / n
    gen = np.random.default_rng(seed)
    codec = codec_for(m)
    fdp: dict[str, list[float]] = {"old": [], "new": []}
    power: dict[str, list[float]] = {"old": [], "new": []}
    covered = 0
    for _ in range(snapshots):
        support = codec.sample_support_counts(truth, gen)
        est = estimate_from_counts(m, Counts(n, support), multiplicity="fdr")
        assert est.p_values is not None
        flags = {
            "old": benjamini_hochberg(old_p_values(m, n, support, est.p_values), ALPHA),
            "new": ~est.indistinguishable_from_zero(),
        }
        for rule, flagged in flags.items():
            fdp[rule].append((flagged & absent).sum() / max(int(flagged.sum()), 1))
            power[rule].append(float((flagged & ~absent).mean() / (~absent).mean()))
        low, high = est.conf_int(ALPHA, simultaneous=True)
        covered += bool(np.all((low <= f_true) & (f_true <= high)))
    out = {
        "expected": n * min(float(m.q), 1.0 - float(m.p)),
        "promise": ALPHA * float(absent.mean()),
        "simultaneous": covered / snapshots,
    }
    for rule in ("old", "new"):
        out[f"{rule}_fdr"] = float(np.mean(fdp[rule]))
        out[f"{rule}_se"] = float(np.std(fdp[rule]) / math.sqrt(snapshots))
        out[f"{rule}_power"] = float(np.mean(power[rule]))
    return out


SETTINGS = [
    ("grr", 1.0, 12_000),
    ("grr", 1.0, 30_000),
    ("grr", 1.0, 100_000),
    ("grr", 4.0, 12_000),
    ("grr", 4.0, 30_000),
    ("grr", 4.0, 100_000),
    ("oue", 4.0, 600),
    ("oue", 4.0, 1_600),
    ("oue", 4.0, 5_500),
    ("sue", 4.0, 100),
    ("sue", 4.0, 250),
    ("sue", 4.0, 850),
    ("hr", 4.0, 600),
    ("hr", 4.0, 1_600),
    ("olh", 4.0, 1_600),
    ("ss", 4.0, 1_600),
]
"""(mechanism, ε, n): n·q* (n·(1 − p*) for hr) from about 10 to 100."""


def population_coverage(name: str, k: int, epsilon: float, n: int, share: float) -> list[float]:
    """Exact coverage of a population's share by each estimand's 95 % interval."""
    m = create(name, epsilon=epsilon, domain_size=k)
    mu = float(m.q) + share * (float(m.p) - float(m.q))
    support = np.arange(n + 1)
    pmf = binom.pmf(support, n, mu)
    out = []
    for estimand in ESTIMANDS:
        low, high, _ = frequency_intervals(m, n, support, 0.95, estimand=estimand)
        out.append(float(pmf[(low <= share) & (share <= high)].sum()))
    return out


WHOSE = [("grr", 2, 4.0), ("sue", 4, 4.0), ("oue", 4, 4.0), ("grr", 16, 1.0)]
SHARES = (0.02, 0.1, 0.3, 0.5)


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--snapshots", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="200 snapshots, GRR only")
    args = parser.parse_args()
    snapshots = 200 if args.quick else args.snapshots
    settings = [s for s in SETTINGS if s[0] == "grr"] if args.quick else SETTINGS
    print(f"load average {os.getloadavg()[0]:.2f} (figures are simulated: no timing)")
    print(f"k = {K}, 512 absent (or more), BH at {ALPHA:.0%}, {snapshots} snapshots")
    print(
        f"{'mech':5} {'ε':>3} {'n':>8} {'small':>6} {'promise':>8} "
        f"{'normal-tail FDR':>15} {'served FDR':>14} {'normal pow':>10} {'served pow':>10} "
        f"{'simult. cov':>12}"
    )
    for name, epsilon, n in settings:
        r = run(name, epsilon, n, snapshots)
        print(
            f"{name:5} {epsilon:>3g} {n:>8,} {r['expected']:>6.1f} {r['promise']:>8.2%} "
            f"{r['old_fdr']:>8.2%} ±{r['old_se']:.2%} {r['new_fdr']:>7.2%} ±{r['new_se']:.2%} "
            f"{r['old_power']:>10.1%} {r['new_power']:>10.1%} {r['simultaneous']:>12.1%}"
        )
    print("\nwhose share: exact coverage of a population's share π, reporters → population")
    head = " ".join(f"{'π = ' + str(p):>15}" for p in SHARES)
    print(f"{'mech':5} {'k':>3} {'ε':>3} {'n':>7} {head}")
    for name, k, epsilon in WHOSE:
        for n in (100, 1000, 10_000):
            cells = [population_coverage(name, k, epsilon, n, p) for p in SHARES]
            print(
                f"{name:5} {k:>3} {epsilon:>3g} {n:>7,} "
                + " ".join(f"{a:>6.1%} → {b:>6.1%}" for a, b in cells)
            )
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

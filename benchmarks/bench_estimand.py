"""Whose share (or mean): coverage of the devices' and the population's by each estimand.

    .venv/bin/python benchmarks/bench_estimand.py [--reps R] [--quick]

A population is fixed (a joint distribution over the cells, or a distribution of a
numeric value); each rep draws n devices from it at random, perturbs their values with
numpy (a simulation, not a CSPRNG; the same laws as the SDK's), and estimates. For each
estimand's 95 % interval it counts how often it covers the *devices'* share (the n
devices drawn) and the *population's* share (the distribution they were drawn from). A
joint row pools one cell per rep and marginal (the cell rotates), over every 1-way
marginal and the first 2-way one; the binomial standard error of a coverage p over R
reps is √(p(1 − p)/R) (±0.5 % at 95 % and R = 2,000). Fixed seeds; no timing.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from itertools import combinations
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aggregator.stats.joint import estimate_marginal  # noqa: E402
from aggregator.stats.joint_codec import JointCodec  # noqa: E402
from aggregator.stats.numeric import NumericCodec, estimate_mean  # noqa: E402
from client_sdk.mechanisms.joint import choose_joint  # noqa: E402
from client_sdk.wire import parse_spec  # noqa: E402

ESTIMANDS = ("reporters", "population")

JOINT = [  # (sizes, ε, n)
    ((2, 2), 4.0, 1_000),
    ((2, 2, 2), 4.0, 1_000),
    ((2, 2), 1.0, 1_000),
    ((3, 4), 2.0, 5_000),
    ((2, 2, 2), 4.0, 10_000),
    ((4, 8, 16), 2.0, 20_000),  # auto: pairwise marginals, each group a part of the reports
]
NUMERIC = [  # (mechanism, ε, n)
    ("duchi", 1.0, 1_000),
    ("pm", 4.0, 1_000),
    ("hybrid", 4.0, 1_000),
    ("pm", 8.0, 200),
    ("duchi", 4.0, 100),
]


def joint_population(sizes: tuple[int, ...], seed: int) -> np.ndarray:
    """A fixed distribution over the joint cells: Dirichlet(2) with correlated margins."""
    gen = np.random.default_rng(seed)
    return np.asarray(gen.dirichlet(np.full(int(np.prod(sizes)), 2.0)))


def joint_row(sizes: tuple[int, ...], epsilon: float, n: int, reps: int) -> dict[str, float]:
    """Coverage of the devices' and the population's shares by each estimand."""
    m = choose_joint(epsilon, sizes).mechanism
    codec = JointCodec(m)
    pi = joint_population(sizes, seed=36)
    table = pi.reshape(sizes)
    d = len(sizes)
    marginals = [(a,) for a in range(d)] + [next(iter(combinations(range(d), 2)))]
    truth = {}
    for attrs in marginals:
        drop = tuple(a for a in range(d) if a not in attrs)
        truth[attrs] = table.sum(axis=drop).ravel() if drop else table.ravel()
    gen = np.random.default_rng(int(epsilon * 1000) + n + d)
    hits = {(e, w): 0 for e in ESTIMANDS for w in ("devices", "population")}
    total = 0
    for rep in range(reps):
        cells = gen.choice(pi.size, size=n, p=pi)
        values = np.stack(np.unravel_index(cells, sizes), axis=1)
        counts = codec.count(codec.encode(values, gen))
        for attrs in marginals:
            k = len(truth[attrs])
            cell = rep % k
            shape = tuple(sizes[a] for a in attrs)
            flat = np.ravel_multi_index(tuple(values[:, a] for a in attrs), shape)
            devices = np.bincount(flat, minlength=k)[cell] / n
            for estimand in ESTIMANDS:
                est = estimate_marginal(m, counts, attrs, estimand=estimand)
                lo, hi = est.ci_low[cell], est.ci_high[cell]
                hits[(estimand, "devices")] += bool(lo <= devices <= hi)
                hits[(estimand, "population")] += bool(lo <= truth[attrs][cell] <= hi)
            total += 1
    return {f"{e}->{w}": h / total for (e, w), h in hits.items()} | {
        "cells": float(total),
        "layout": 0.0 if m.method == "joint" else 1.0,
    }


def numeric_row(name: str, epsilon: float, n: int, reps: int) -> dict[str, float]:
    """Coverage of the devices' and the population's mean (both estimands: one interval)."""
    spec = {"kind": "numeric", "range": [0, 100], "epsilon": epsilon, "mechanism": name}
    definition = parse_spec("app.minutes", spec)
    codec = NumericCodec(definition.mechanism)  # type: ignore[arg-type]
    gen = np.random.default_rng(int(epsilon * 100) + n)
    population_mean = 2.0 / 7.0  # Beta(2, 5) on [0, 1]
    covered = {"devices": 0, "population": 0}
    for _ in range(reps):
        x = gen.beta(2.0, 5.0, n)
        stats = codec.stats(codec.encode(2.0 * x - 1.0, gen))
        est = estimate_mean(definition, stats)
        lo, hi = est.ci_low / 100.0, est.ci_high / 100.0
        covered["devices"] += bool(lo <= x.mean() <= hi)
        covered["population"] += bool(lo <= population_mean <= hi)
    return {k: v / reps for k, v in covered.items()}


def main() -> None:
    """Print both tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--quick", action="store_true", help="300 reps")
    args = parser.parse_args()
    reps = 300 if args.quick else args.reps
    print(f"load average {os.getloadavg()[0]:.2f} (figures are simulated: no timing)")
    print(f"95 % intervals, {reps} reps per row, binomial se ≈ {math.sqrt(0.0475 / reps):.2%}")
    print("\njoint marginals: coverage of the devices' share / the population's share")
    print(
        f"{'sizes':>8} {'ε':>3} {'n':>7} {'layout':>9} {'cells':>6}  "
        f"{'reporters: devices':>18} {'population':>10}  "
        f"{'population: devices':>19} {'population':>10}"
    )
    for sizes, eps, n in JOINT:
        r = joint_row(sizes, eps, n, reps)
        layout = "marginals" if r["layout"] else "joint"
        print(
            f"{'×'.join(map(str, sizes)):>8} {eps:>3g} {n:>7,} {layout:>9} {int(r['cells']):>6}  "
            f"{r['reporters->devices']:>18.1%} {r['reporters->population']:>10.1%}  "
            f"{r['population->devices']:>19.1%} {r['population->population']:>10.1%}"
        )
    print("\nnumeric means (one interval for both estimands): coverage of the mean of")
    print(f"{'mech':>7} {'ε':>3} {'n':>6}  {'the devices':>11} {'the population':>14}")
    for name, eps, n in NUMERIC:
        r = numeric_row(name, eps, n, reps)
        print(f"{name:>7} {eps:>3g} {n:>6,}  {r['devices']:>11.1%} {r['population']:>14.1%}")


if __name__ == "__main__":
    main()

"""The price of watching: confidence sequences against the fixed-n interval.

Run on purpose, not as a test::

    .venv/bin/python benchmarks/bench_anytime.py              # 2000 streams, a few seconds
    .venv/bin/python benchmarks/bench_anytime.py --quick      # 500 streams
    .venv/bin/python benchmarks/bench_anytime.py --streams 5000 --k 16

(a) Widths: for OUE, GRR and OLH at ε ∈ {0.5, 1, 2} and n ∈ {10³, 10⁴, 10⁵, 10⁶}, the
half-width of :func:`~aggregator.stats.anytime.frequency_cs` (95 %, raw, at the expected
count of a value with f = 0) against the fixed-n 95 % half-width z·√Var(n, 0), and their
ratio: what an operator pays for the right to look as often as they like.

(b) Ever-miss: the same mechanisms at f = 0 and f = 0.5; many independent streams, each
looked at 200 times at n from 100 to 10⁶ (geometric), the support count grown between
looks with numpy binomials; a stream "ever misses" when any look's interval excludes the
truth. The CS should stay at or below 5 %; the fixed-n interval f̂ ± z·√Var(n, f̂) does not.

(c) Which boundary: the half-width ratio of each of the module's boundaries at n = 10⁴ and
10⁶, for frequencies (ε = 1) and the numeric mechanisms (x = 0.9, ε ∈ {0.5, 1, 2, 4}), the
measurements behind the choices in ``aggregator/stats/anytime.py``'s docstring.

The machine is shared: the load average is printed before and after, and only the timing
line depends on it (every other number is deterministic for a seed).
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np

from aggregator.stats.anytime import (
    METHODS,
    T_OPT,
    Method,
    anytime_p_value,
    cs_bounded_mean,
    frequency_cs,
    mean_cs,
    method_for,
)
from aggregator.stats.intervals import z_value
from client_sdk import mechanisms
from client_sdk.mechanisms.numeric import SCALE

ALPHA = 0.05
Z = z_value(1 - ALPHA)
NAMES = ("oue", "grr", "olh")
EPSILONS = (0.5, 1.0, 2.0)
SIZES = (10**3, 10**4, 10**5, 10**6)


def load() -> str:
    if not hasattr(os, "getloadavg"):
        return "load average: n/a"
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def widths(k: int) -> None:
    print(f"\n(a) 95 % half-widths at f = 0, k = {k}: confidence sequence vs fixed-n")
    print(f"{'mech':>5} {'ε':>4} {'n':>10} {'CS half':>10} {'fixed half':>11} {'ratio':>6}")
    for name in NAMES:
        for eps in EPSILONS:
            m = mechanisms.create(name, epsilon=eps, domain_size=k)
            for n in SIZES:
                lo, hi = frequency_cs(m, n, round(n * m.q), ALPHA, clip=False)
                fixed = Z * math.sqrt(m.variance(n, 0.0))
                half = (hi - lo) / 2
                row = f"{name:>5} {eps:>4g} {n:>10,} {half:>10.5f} {fixed:>11.5f}"
                print(f"{row} {half / fixed:>6.2f}")


def ever_miss(
    m: mechanisms.FrequencyOracle, f: float, streams: int, gen: np.random.Generator
) -> tuple[float, float]:
    looks = np.unique(np.round(np.geomspace(100, 1_000_000, 200)).astype(np.int64))
    mu = m.q + f * (m.p - m.q)
    steps = np.diff(looks, prepend=0)[:, None]
    counts = np.cumsum(gen.binomial(steps, mu, size=(len(looks), streams)), axis=0)
    n = looks[:, None].astype(np.float64)
    p_values = anytime_p_value(n, counts, counts, 0.0, 1.0, mu)
    f_hat = m.debias(counts, n)
    se = np.sqrt(m.variance(n, np.clip(f_hat, 0.0, 1.0)))
    fixed = np.any(np.abs(f_hat - f) > Z * se, axis=0)
    return float(np.any(p_values <= ALPHA, axis=0).mean()), float(fixed.mean())


def misses(k: int, streams: int, seed: int) -> None:
    sd = math.sqrt(ALPHA * (1 - ALPHA) / streams)
    print(
        f"\n(b) ever missed over 200 looks (n = 100 … 10⁶), {streams} streams, k = {k}; "
        f"a true 5 % would read 5.0 % ± {sd:.1%}"
    )
    print(f"{'mech':>5} {'ε':>4} {'f':>4} {'CS':>7} {'fixed-n':>8}")
    gen = np.random.default_rng(seed)
    for name in NAMES:
        for eps in EPSILONS:
            m = mechanisms.create(name, epsilon=eps, domain_size=k)
            for f in (0.0, 0.5):
                cs, fixed = ever_miss(m, f, streams, gen)
                print(f"{name:>5} {eps:>4g} {f:>4g} {cs:>7.2%} {fixed:>8.1%}")


def frequency_ratio(
    m: mechanisms.FrequencyOracle, n: int, method: Method, design: float | None
) -> float:
    count = round(n * m.q)
    lo, hi = cs_bounded_mean(
        n, count, count, 0.0, 1.0, ALPHA, method=method, design_variance=design
    )
    return (hi - lo) / 2 / (m.p - m.q) / (Z * math.sqrt(m.variance(n, 0.0)))


def numeric_ratio(mech: mechanisms.NumericMechanism, n: int, x: float, method: Method) -> float:
    total = round(n * x * SCALE)
    total_sq = round(n * mech.second_moment(x) * SCALE * SCALE)
    lo, hi = mean_cs(mech, n, total, total_sq, ALPHA, method=method, clip=False)
    return (hi - lo) / 2 / (Z * math.sqrt(mech.variance(n, x)))


def boundaries() -> None:
    print(f"\n(c) CS / fixed-n half-width by boundary, n = 10⁴ → 10⁶ (tuned at T_OPT = {T_OPT:,})")
    heads = ["bernoulli", "emp-bern", "emp-bern*", "hoeffding"]
    print(f"{'case':>22} " + " ".join(f"{h:>12}" for h in heads))
    for name, k in (("grr", 16), ("grr", 64), ("oue", 64), ("olh", 64)):
        m = mechanisms.create(name, epsilon=1.0, domain_size=k)
        cells = []
        cases: tuple[tuple[Method, float | None], ...] = (
            ("bernoulli", None),
            ("empirical-bernstein", None),
            ("empirical-bernstein", m.q * (1 - m.q)),
            ("hoeffding", None),
        )
        for method, design in cases:
            a, b = (frequency_ratio(m, n, method, design) for n in (10**4, 10**6))
            cells.append(f"{a:.2f} → {b:.2f}")
        print(f"{f'{name} k={k} ε=1 f=0':>22} " + " ".join(f"{c:>12}" for c in cells))
    print("  emp-bern: tuned for the range's variance ¼; emp-bern*: for q*(1 − q*), f = 0's")
    print(f"{'case':>22} " + " ".join(f"{h:>12}" for h in METHODS) + "   default")
    for eps in (0.5, 1.0, 2.0, 4.0):
        for mech in (
            mechanisms.DuchiMechanism(eps),
            mechanisms.PiecewiseMechanism(eps),
            mechanisms.HybridMechanism(eps),
        ):
            cells = []
            for method in METHODS:
                a, b = (numeric_ratio(mech, n, 0.9, method) for n in (10**4, 10**6))
                cells.append(f"{a:.2f} → {b:.2f}")
            label = f"{mech.name} ε={eps:g} x=0.9"
            print(f"{label:>22} " + " ".join(f"{c:>12}" for c in cells) + f"   {method_for(mech)}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=2000, help="independent streams per case")
    parser.add_argument("--k", type=int, default=64, help="domain size")
    parser.add_argument("--seed", type=int, default=2021)
    parser.add_argument("--quick", action="store_true", help="500 streams")
    args = parser.parse_args(argv)
    streams = 500 if args.quick else args.streams
    print(f"bench_anytime: α = {ALPHA}, T_OPT = {T_OPT:,}; {load()}")
    started = time.perf_counter()
    widths(args.k)
    misses(args.k, streams, args.seed)
    boundaries()
    print(f"\n{time.perf_counter() - started:.1f} s; {load()}")


if __name__ == "__main__":
    main()

"""What a noise defence of hidden groups would cost: a design study (no such defence ships).

    .venv/bin/python benchmarks/bench_segment_noise.py [--reps R]

docs/statistics/suppression.md ("Reports an attacker posts") says what a sound defence
against injected reports needs: noise on every released figure of a group, calibrated to
what one report can change. This computes its cost for the worked example's metric (GRR,
k = 3, ε = 2, true shares 60/30/10 %) under the most favourable assumptions: finished
windows only (no continual release), one dimension, Gaussian noise of the analytic
Gaussian mechanism (Balle & Wang 2018, Theorem 8) at central (ε_c, δ = 10⁻⁶) for the
relabelling of one report, which moves n and one support count (GRR) in two groups of
each of three windows (hour, day, all time): L2 sensitivity √(3 · 2 · 2) = √12.

For each group size n: the 95 % half-width of the mechanism alone, of the mechanism plus
the noise (its variance added, delta method through C̃/ñ), their ratio, and the
simulated coverage of the widened interval over R reps (numpy's generator: a
simulation, not a CSPRNG; binomial standard error √(p(1 − p)/R)). Fixed seed; no timing.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

import numpy as np
from scipy.stats import norm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from client_sdk.mechanisms.rr import GeneralizedRR  # noqa: E402

K, EPSILON, SHARES = 3, 2.0, np.array([0.6, 0.3, 0.1])
DELTA = 1e-6
SENSITIVITY = math.sqrt(3 * 2 * 2)
SIZES = (50, 100, 300, 1_000, 5_000)
Z = float(norm.ppf(0.975))


def analytic_sigma(central: float, delta: float, sensitivity: float) -> float:
    """The least σ of Gaussian noise that is (ε_c, δ)-DP (central) at this L2 sensitivity
    (bisection on Balle & Wang's exact condition)."""
    ratio = math.exp(central)

    def leak(sigma: float) -> float:
        a, b = sensitivity / (2 * sigma), central * sigma / sensitivity
        return float(norm.cdf(a - b) - ratio * norm.cdf(-a - b))

    low, high = 1e-3, 1e4
    for _ in range(200):
        mid = math.sqrt(low * high)
        low, high = (mid, high) if leak(mid) > delta else (low, mid)
    return high


def row(n: int, sigma: float, reps: int, gen: np.random.Generator) -> dict[str, float]:
    grr = GeneralizedRR(epsilon=EPSILON, domain_size=K)
    p, q = grr.p, grr.q
    f = SHARES[-1]  # the smallest share, where noise weighs most
    r = f * (p - q) + q
    mech = math.sqrt(r * (1 - r) / n) / (p - q)
    noise = sigma * math.sqrt(1 + r * r) / (n * (p - q))
    covered = 0
    for _ in range(reps):
        values = gen.choice(K, n, p=SHARES)
        devices = float(np.mean(values == K - 1))
        keep = gen.random(n) < p - q  # GRR: the true value with p, else uniform over k
        reported = np.where(keep, values, gen.integers(0, K, n))
        c = float(np.sum(reported == K - 1)) + gen.normal(0, sigma)
        m = n + gen.normal(0, sigma)
        if m <= 0:
            continue  # never shown: no interval to cover
        rr = c / m
        est = (rr - q) / (p - q)
        var = max(rr * (1 - rr), 0.0) / m / (p - q) ** 2 + sigma**2 * (1 + rr * rr) / (
            m * m * (p - q) ** 2
        )
        covered += abs(est - devices) <= Z * math.sqrt(var)
    return {
        "mech": Z * mech,
        "wide": Z * math.sqrt(mech**2 + noise**2),
        "coverage": covered / reps,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2_000)
    args = parser.parse_args()
    gen = np.random.default_rng(45)
    print(f"GRR k={K} ε={EPSILON:g}, share {SHARES[-1]:.0%}; δ={DELTA:g}, Δ₂=√12; reps {args.reps}")
    print("ε_c | σ (reports) | n | 95 % ± mechanism (pp) | ± with noise (pp) | × | coverage")
    for eps_c in (1.0, 4.0):
        sigma = analytic_sigma(eps_c, DELTA, SENSITIVITY)
        for n in SIZES:
            got = row(n, sigma, args.reps, gen)
            print(
                f"{eps_c:g} | {sigma:.1f} | {n:,} | {100 * got['mech']:.1f} | "
                f"{100 * got['wide']:.1f} | {got['wide'] / got['mech']:.1f} | "
                f"{100 * got['coverage']:.1f} %"
            )
    print(f"load average {os.getloadavg()[0]:.2f} (no timing)")


if __name__ == "__main__":
    main()

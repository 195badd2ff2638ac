"""Statistical correctness: unbiased estimates, MSE = exact variance, nominal coverage.

Tolerances come from the theory, for a fixed seed:
* unbiasedness: per value, z = Σ_runs error / √(Σ_runs exact variance); |z| < 4.5 for
  every value (N(0,1): P(|z| > 4.5) = 6.8·10⁻⁶, so < 0.5 % over all values tested);
* MSE / exact expected MSE (both variance terms) in [0.9, 1.1] with ≥ 3,200 estimates:
  the ratio's relative sd is ≈ √(2/(runs·k)) ≤ 2.5 %, so ±10 % is ≥ 4 sd;
* coverage of 95 % intervals within 95 % ± 1.5 % over ≥ 3,200 intervals: the binomial
  sd is ≤ √(0.95·0.05/3200) = 0.39 %, so ±1.5 % is ≥ 3.9 sd.
"""

from __future__ import annotations

import math
import random
import zlib

import numpy as np
import pytest

from aggregator import estimate
from aggregator.analysis.simulation import distribution, simulate, simulate_counts
from aggregator.stats.frequency import estimate_from_counts
from aggregator.stats.kinds import codec_for
from client_sdk.mechanisms import create


def check(errors: np.ndarray, variances: np.ndarray, covered: np.ndarray) -> None:
    """errors, variances, covered: (runs, k) arrays."""
    z = errors.sum(axis=0) / np.sqrt(variances.sum(axis=0))
    assert np.max(np.abs(z)) < 4.5, f"biased: z = {np.round(z, 2)}"
    ratio = np.sum(errors**2) / np.sum(variances)
    assert 0.9 <= ratio <= 1.1, f"MSE / exact variance = {ratio:.3f}"
    assert covered.size >= 3200
    coverage = covered.mean()
    assert abs(coverage - 0.95) <= 0.015, f"coverage {coverage:.4f} over {covered.size}"


# (mechanism, k, ε, users, runs): runs·k ≥ 3,200 intervals (rr: the two intervals of a
# run always agree, so it gets 3,200 runs).
SIM_CASES = [
    ("rr", 2, 1.0, 5_000, 3_200),
    ("rr", 2, 0.2, 20_000, 3_200),
    ("grr", 4, 2.0, 10_000, 800),
    ("grr", 16, 1.0, 20_000, 200),
    ("grr", 64, 4.0, 20_000, 50),
    ("sue", 16, 1.0, 20_000, 200),
    ("sue", 64, 0.5, 50_000, 50),
    ("oue", 16, 1.0, 20_000, 200),
    ("oue", 64, 3.0, 10_000, 50),
    ("oue", 1024, 1.0, 100_000, 4),
    ("olh", 16, 1.0, 20_000, 200),
    ("olh", 64, 3.0, 20_000, 50),
    ("olh", 1024, 1.0, 100_000, 4),
    ("hr", 16, 1.0, 20_000, 200),
    ("hr", 100, 0.5, 50_000, 40),
    ("ss", 16, 1.0, 20_000, 200),
    ("ss", 64, 2.0, 20_000, 50),
]


def run_simulation(m, users: int, runs: int, seed: int, method: str, dist: str = "zipf"):  # type: ignore[no-untyped-def]
    gen = np.random.default_rng(seed)
    probs = distribution(dist, m.domain_size)
    errors, variances, covered = [], [], []
    for _ in range(runs):
        true_counts = gen.multinomial(users, probs)
        truth = true_counts / users
        est = estimate_from_counts(m, simulate_counts(m, true_counts, gen, method))
        errors.append(est.frequencies - truth)
        variances.append(m.variance(users, truth))
        covered.append((est.ci_low <= truth) & (truth <= est.ci_high))
    return np.array(errors), np.array(variances), np.array(covered)


@pytest.mark.parametrize(("name", "k", "eps", "users", "runs"), SIM_CASES)
def test_sufficient_statistic_simulation(
    name: str, k: int, eps: float, users: int, runs: int
) -> None:
    m = create(name, epsilon=eps, domain_size=k)
    check(*run_simulation(m, users, runs, seed=k * 1000 + int(eps * 10), method="counts"))


@pytest.mark.parametrize(
    ("name", "k", "eps", "users", "runs"),
    [
        ("grr", 16, 1.0, 5_000, 200),
        ("oue", 32, 1.0, 5_000, 100),
        ("olh", 32, 1.0, 5_000, 100),
        ("hr", 16, 2.0, 5_000, 200),
        ("ss", 16, 1.0, 5_000, 200),
        ("sue", 16, 1.0, 5_000, 200),
    ],
)
def test_vectorized_report_simulation(name: str, k: int, eps: float, users: int, runs: int) -> None:
    m = create(name, epsilon=eps, domain_size=k)
    check(*run_simulation(m, users, runs, seed=7, method="reports", dist="geometric"))


PER_REPORT = [
    ("rr", 2, 1.0, 500, 3_200),  # its two intervals always agree: 3,200 independent runs
    ("grr", 16, 1.0, 2_000, 200),
    ("sue", 16, 1.0, 2_000, 200),
    ("oue", 16, 1.0, 2_000, 200),
    ("olh", 16, 1.0, 2_000, 200),
    ("blh", 16, 1.0, 2_000, 200),
    ("hr", 16, 1.0, 2_000, 200),
    ("ss", 16, 1.0, 2_000, 200),
    # Large domains take other sampling paths: unary bits one random byte per lane
    # (k > 64); subsets by independent marks plus a uniform fix-up when s ≥ k/10 (and at
    # k = 16 above), by rejection of repeats below (s = 12 of 256 at ε = 3).
    ("oue", 128, 1.0, 2_000, 50),
    ("sue", 100, 2.0, 2_000, 40),
    ("ss", 256, 0.5, 1_000, 20),
    ("ss", 256, 3.0, 1_000, 20),
]


@pytest.mark.parametrize(("name", "k", "eps", "users", "runs"), PER_REPORT)
def test_real_perturb_path(name: str, k: int, eps: float, users: int, runs: int) -> None:
    """The SDK's own perturb, report by report, decoded by ``estimate``."""
    m = create(name, epsilon=eps, domain_size=k)
    rng = random.Random(zlib.crc32(f"{name}-{k}-{eps}".encode()))  # fixed across runs
    weights = list(distribution("zipf", k))
    values = range(k)
    errors, variances, covered = [], [], []
    for _ in range(runs):
        truth_values = rng.choices(values, weights, k=users)
        truth = np.bincount(truth_values, minlength=k) / users
        est = estimate(m, [m.perturb(v, rng) for v in truth_values])
        errors.append(est.frequencies - truth)
        variances.append(m.variance(users, truth))
        covered.append((est.ci_low <= truth) & (truth <= est.ci_high))
    check(np.array(errors), np.array(variances), np.array(covered))


def test_simulate_at_ten_million_users_matches_theory() -> None:
    m = create("oue", epsilon=1.0, domain_size=1024)
    result = simulate(m, 10_000_000, reps=4, seed=1)
    # 4 runs × 1024 values: relative sd of the MSE ratio ≈ √(2/4096) = 2.2 %.
    assert 0.9 <= result.mse_ratio <= 1.1
    assert abs(result.coverage - 0.95) <= 0.015
    assert result.intervals == 4096


def test_simultaneous_band_covers_all_values_at_the_nominal_rate() -> None:
    """Bonferroni over k: all k intervals hold together in ≥ 95 % of runs."""
    m = create("oue", epsilon=1.0, domain_size=32)
    gen = np.random.default_rng(5)
    probs = distribution("zipf", 32)
    runs, all_covered = 1_000, 0
    for _ in range(runs):
        true_counts = gen.multinomial(10_000, probs)
        truth = true_counts / 10_000
        est = estimate_from_counts(m, simulate_counts(m, true_counts, gen), simultaneous=True)
        all_covered += bool(np.all((est.ci_low <= truth) & (truth <= est.ci_high)))
    # Bonferroni is conservative: joint coverage ≥ 95 %, binomial sd 0.69 % at 95 %.
    assert all_covered / runs >= 0.95 - 4 * math.sqrt(0.95 * 0.05 / runs)


def test_norm_sub_lowers_mse_on_zipf_at_k_1024() -> None:
    m = create("oue", epsilon=1.0, domain_size=1024)
    result = simulate(m, 100_000, reps=10, dist="zipf", seed=3)
    gain = result.norm_sub_gain()
    assert gain is not None
    # docs/concepts/formulas.md: 1.5–9× lower MSE on Zipf data at k = 1024.
    assert gain >= 1.5, f"Norm-Sub MSE gain {gain:.2f}"


def test_marginal_only_codecs_are_flagged() -> None:
    for name in ("olh", "ss"):
        m = create(name, epsilon=1.0, domain_size=64)
        assert not codec_for(m).exact_joint
        assert simulate(m, 1000, seed=1).norm_sub_gain() is None
        assert simulate(m, 1000, seed=1, method="reports").norm_sub_gain() is not None

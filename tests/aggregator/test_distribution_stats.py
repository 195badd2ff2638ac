"""Distribution estimates: the consistent histogram sums to 1 and is unbiased, a range's
variance is exact (against the empirical spread), and the range and quantile intervals
cover at their level on a small grid (fixed seeds, a binomial bound). The full grid is
benchmarks/bench_distributions.py's."""

from __future__ import annotations

import math

import numpy as np
import pytest

from aggregator.stats.distribution import estimate_distribution
from aggregator.stats.distribution_codec import HistogramCodec
from client_sdk.mechanisms.distribution import HierarchicalHistogram

D = 64
EDGES = np.linspace(0.0, 1.0, D + 1)


def population(shape: str, n: int, gen: np.random.Generator) -> np.ndarray:
    """n values' bins of a named distribution over [0, 1)."""
    if shape == "normal":
        x = gen.normal(0.4, 0.12, n)
    elif shape == "lognormal":
        x = gen.lognormal(-2.5, 0.9, n)
    elif shape == "point":
        x = np.full(n, 0.503)
    else:  # bimodal
        x = np.where(gen.random(n) < 0.7, gen.normal(0.25, 0.05, n), gen.normal(0.8, 0.04, n))
    return np.clip((x * D).astype(np.int64), 0, D - 1)


def lowest_count(trials: int, level: float, tail: float = 1e-3) -> int:
    """The least number of successes in ``trials`` at true rate ``level`` that a one-sided
    binomial test at ``tail`` accepts (successes below it have probability < tail)."""
    total = 0.0
    for k in range(trials + 1):
        total += math.comb(trials, k) * level**k * (1 - level) ** (trials - k)
        if total >= tail:
            return k
    return trials


def test_the_histogram_is_consistent_unbiased_and_its_variance_exact() -> None:
    m = HierarchicalHistogram(2.0, D, 4)
    codec = HistogramCodec(m)
    gen = np.random.default_rng(11)
    bins = population("bimodal", 20_000, gen)
    truth = np.bincount(bins, minlength=D) / len(bins)
    query = np.zeros((1, D))
    query[0, 10:40] = 1.0
    errors, variances = [], []
    for _ in range(200):
        est = estimate_distribution(m, codec.sample_counters(bins, gen), EDGES)
        assert est.histogram.sum() == pytest.approx(1.0, abs=1e-12)
        errors.append(float(query[0] @ (est.histogram - truth)))
        variances.append(float(est.variances(query)[0]))
    errors_a = np.array(errors)
    sd = math.sqrt(np.mean(variances))
    assert abs(errors_a.mean()) < 4 * sd / math.sqrt(len(errors))  # unbiased
    # the empirical variance within its sampling error (χ² with 199 df: ±30 % at 3σ)
    assert errors_a.var() / sd**2 == pytest.approx(1.0, abs=0.3)


@pytest.mark.parametrize(
    ("epsilon", "shape"),
    [(1.0, "normal"), (4.0, "lognormal"), (2.0, "point"), (8.0, "bimodal")],
)
def test_range_and_quantile_intervals_cover(epsilon: float, shape: str) -> None:
    m = HierarchicalHistogram(epsilon, D, 4)
    codec = HistogramCodec(m)
    gen = np.random.default_rng(int(epsilon * 10) + len(shape))
    bins = population(shape, 10_000, gen)
    truth = np.bincount(bins, minlength=D) / len(bins)
    below = np.concatenate(([0.0], np.cumsum(truth)))  # share below each edge
    ranges = [(0.25, 0.5), (0.1, 0.9)]
    ps = (0.5, 0.95)
    # Ranges need no band (cheap): more reps; quantiles read the band: fewer.
    range_reps, quantile_reps = 100, 40
    covered_ranges = [0] * len(ranges)
    covered_quantiles = [0] * len(ps)
    for rep in range(range_reps):
        est = estimate_distribution(m, codec.sample_counters(bins, gen), EDGES)
        for k, (a, b) in enumerate(ranges):
            r = est.range_share(a, b)
            i, j = round(r.low * D), round(r.high * D)
            covered_ranges[k] += r.ci_low <= below[j] - below[i] <= r.ci_high
        if rep >= quantile_reps:
            continue
        for k, p in enumerate(ps):
            q = est.quantile(p)
            j = int(np.searchsorted(below, p, "left"))  # F(t_{j-1}) < p <= F(t_j)
            covered_quantiles[k] += q.ci_low <= EDGES[j - 1] and EDGES[j] <= q.ci_high + 1e-12
    # each interval's reps are independent: a binomial bound per interval
    assert min(covered_ranges) >= lowest_count(range_reps, 0.95), covered_ranges
    assert min(covered_quantiles) >= lowest_count(quantile_reps, 0.95), covered_quantiles

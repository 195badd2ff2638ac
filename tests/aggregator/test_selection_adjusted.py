"""Selection-adjusted intervals (aggregator.stats.selection) on their model: draws of
X ~ N(μ, σ(μ)²) kept only when X ≥ a, the event discovery selects on."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from aggregator.stats.selection import log_normal_sf, selection_adjusted, truncated_cdf

SELECTED = 2000
"""Selected draws per μ: a coverage of 0.95 is then known to ±4·√(0.95·0.05/2000) =
±0.019 (four binomial standard deviations; 0.975 to ±0.014), a median to ±4·√(¼/2000) =
±0.045."""

V0, SLOPE, CUT = 1.0, 0.5, 3.0
"""σ(μ)² = 1 + μ/2 (the variance grows with the frequency, as a GRR cell's does) and the
value is selected when X ≥ 3 (about Benjamini–Hochberg's cutoff of a few hundred tests)."""


def _selected(mu: float, gen: np.random.Generator) -> np.ndarray:
    sd = math.sqrt(V0 + SLOPE * mu)
    out: list[np.ndarray] = []
    while sum(len(x) for x in out) < SELECTED:
        x = gen.normal(mu, sd, 400_000)
        out.append(x[x >= CUT])
    return np.concatenate(out)[:SELECTED]


@pytest.mark.parametrize("mu", [0.0, 1.0, 3.0, 6.0])
def test_adjusted_intervals_cover_at_their_level_given_selection(mu: float) -> None:
    """At each μ — absent (0), below the cutoff (1), at it (3), above (6) — the adjusted
    95 % interval covers μ in its level ± four binomial standard deviations of the selected
    draws: 97.5 % up to the cutoff (the upper tail alone is rejected there), 95 % above
    it; and the adjusted estimate is median-unbiased."""
    gen = np.random.default_rng(int(10 * mu) + 1)
    x = _selected(mu, gen)
    var = V0 + SLOPE * np.maximum(x, 0.0)  # the plug-in variance at x, as discovery reports
    got = selection_adjusted(x, var, np.full(len(x), V0), np.full(len(x), CUT), 0.95)
    covered = float(np.mean((got.low <= mu) & (mu <= got.high)))
    level = 0.975 if mu <= CUT else 0.95
    bound = 4 * math.sqrt(level * (1 - level) / SELECTED)
    assert abs(covered - level) <= bound, covered
    assert np.all(got.low >= 0) and np.all(got.low <= got.frequency)
    assert np.all(got.frequency <= got.high)
    if mu > 0:
        below = float(np.mean(got.frequency < mu))
        assert abs(below - 0.5) <= 4 * math.sqrt(0.25 / SELECTED), below


def test_far_above_the_cutoff_the_adjusted_interval_is_the_plain_one() -> None:
    """Where selection had probability 1 to double precision, the answer is f̂ ± z·σ
    exactly (so a discovered value reads the same as when asked for by name)."""
    x, var = np.array([50.0, 9.0]), np.array([4.0, 1.0])
    got = selection_adjusted(x, var, np.array([1.0, 1.0]), np.array([3.0, 3.0]), 0.95)
    assert got.frequency[0] == 50.0
    z = NormalDist().inv_cdf(0.975)
    assert got.low[0] == 50.0 - z * 2 and got.high[0] == 50.0 + z * 2
    # nearer the cutoff the interval moves down and the estimate with it
    assert got.frequency[1] < 9.0 and got.high[1] < 9.0 + 1.96


def test_log_tail_and_truncated_cdf() -> None:
    z = np.array([-3.0, 0.0, 2.0, 29.9, 30.0, 40.0, 200.0])
    want = [math.log(0.5 * math.erfc(v / math.sqrt(2))) for v in z[:5]]
    assert np.allclose(log_normal_sf(z[:5]), want, rtol=1e-9, atol=0)
    assert np.all(np.isfinite(log_normal_sf(z))) and np.all(np.diff(log_normal_sf(z)) < 0)
    # F_μ(a) = 0, F_μ(∞) = 1, and at a → −∞ the plain normal CDF
    assert truncated_cdf(np.array([3.0]), np.array([1.0]), np.array([1.0]), np.array([3.0]))[0] == 0
    f = truncated_cdf(np.array([1.5]), np.array([1.0]), np.array([1.0]), np.array([-40.0]))
    assert f[0] == pytest.approx(0.5 * math.erfc(-0.5 / math.sqrt(2)), rel=1e-12)
    # deep in the tail (μ 60σ below the cut) it stays finite and in [0, 1]
    f = truncated_cdf(np.array([60.01]), np.array([0.0]), np.array([1.0]), np.array([60.0]))
    assert f[0] == pytest.approx(1 - math.exp(-60.0 * 0.01), rel=1e-2)  # exponential tail


def test_bad_inputs_give_nan_not_errors() -> None:
    got = selection_adjusted(
        np.array([np.nan, 1.0, 2.0]),
        np.array([1.0, np.nan, 1.0]),
        np.array([1.0, 1.0, 0.0]),
        np.array([0.0, 0.0, 0.0]),
        0.95,
    )
    assert np.all(np.isnan(got.frequency)) and np.all(np.isnan(got.low))
    empty = selection_adjusted(np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0), 0.95)
    assert len(empty.frequency) == 0


def test_a_value_just_over_its_cutoff_keeps_an_interval_with_plausible_values() -> None:
    """The case seen on real English (ε = 4, n = 10⁶): 'come', true share 0.066 %, was
    called present with its estimate a hair above its selection cutoff and reported as
    [0, 5·10⁻⁶]: with equal tails every μ ≥ 0 put x in the lower 2.5 % of its truncated
    law. The selection event is built here directly (σ ≈ 3.7·10⁻⁴ as at that setting, the
    cutoff a = 0.0015 about 4σ, x = a + 10⁻⁶); the interval must hold the truth and reach
    at least to the cutoff (a value just over it is at most about that frequent), and still
    hold the estimate."""
    a = np.array([0.0015])
    x = a + 1e-6
    var, null_var = np.array([3.7e-4**2]), np.array([3.5e-4**2])
    got = selection_adjusted(x, var, null_var, a, 0.95)
    assert got.low[0] <= 0.00066 <= got.high[0], (got.low, got.high)
    assert got.high[0] >= a[0] and got.low[0] <= got.frequency[0] <= got.high[0]
    # and at every distance from the cutoff the interval has width and holds the estimate
    xs = a[0] + np.array([0.0, 1e-9, 1e-6, 1e-4, 3.7e-4, 1e-3, 2e-3, 5e-3])
    n = len(xs)
    got = selection_adjusted(
        xs, np.full(n, var[0]), np.full(n, null_var[0]), np.full(n, a[0]), 0.95
    )
    assert np.all(got.high - got.low > 3.7e-4), (got.low, got.high)
    assert np.all((got.low <= got.frequency) & (got.frequency <= got.high))

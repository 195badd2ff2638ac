"""Amplification by shuffling: the clones bound against its authors' published values."""

from __future__ import annotations

import itertools
import math

import pytest
from scipy.stats import binom

from aggregator.stats.shuffling import (
    TOLERANCE,
    amplification,
    closed_form_epsilon,
    hockey_stick,
    shuffled_epsilon,
)

# (ε₀, n, δ) → (lower, upper) bracket of the clones bound's ε from the authors' code,
# apple/ml-shuffling-amplification (commit 993d285), computeamplification.numericalanalysis.
# The first row is the value their README publishes (10 bisection steps, step = 100:
# "eps between 0.1675385583317841 and 0.172790550755978"); the others are that code's
# output with 20 bisection steps and step = 1, whose lower end is the exact value to 10⁻⁶.
PUBLISHED = [
    ((4.0, 100_000, 1e-6), (0.1675385583317841, 0.172790550755978)),
    ((1.0, 10_000, 1e-6), (0.053005403126148556, 0.055561684182607915)),
    ((0.5, 1_000, 1e-6), (0.07052227507297357, 0.0737838600436111)),
]
FINE = {(1.0, 10_000, 1e-6), (0.5, 1_000, 1e-6)}


@pytest.mark.parametrize(("setting", "bracket"), PUBLISHED)
def test_the_numerical_bound_matches_the_authors_values(
    setting: tuple[float, int, float], bracket: tuple[float, float]
) -> None:
    eps0, n, delta = setting
    low, high = bracket
    eps = shuffled_epsilon(eps0, n, delta)
    assert low <= eps <= high
    if setting in FINE:  # an upper bound within the bisection's tolerance of the exact value
        assert eps <= low + 2 * TOLERANCE


def test_the_published_closed_form() -> None:
    """README of the reference code: "eps is at most 0.5378040242374512"."""
    assert closed_form_epsilon(4.0, 100_000, 1e-6) == pytest.approx(0.5378040242374512, rel=1e-9)
    assert closed_form_epsilon(8.0, 1000, 1e-6) is None  # outside its regime


def _pair_divergence(eps0: float, n: int, eps: float) -> float:
    """D_(e^ε)(P‖Q) of the clones pair by enumerating every (c, x): no tails, no blocks."""
    alpha = 1 / (1 + math.exp(-eps0))
    total = 0.0
    for c in range(n):
        pc = binom.pmf(c, n - 1, math.exp(-eps0))
        b = [binom.pmf(a, c, 0.5) for a in range(c + 1)] + [0.0]
        for x in range(c + 2):
            below = b[x - 1] if x >= 1 else 0.0
            p = alpha * below + (1 - alpha) * b[x]
            q = (1 - alpha) * below + alpha * b[x]
            total += pc * max(p - math.exp(eps) * q, 0.0)
    return total


@pytest.mark.parametrize(("eps0", "n", "eps"), [(1.0, 30, 0.3), (2.0, 60, 0.5), (0.5, 12, 0.1)])
def test_the_tail_formula_equals_the_enumerated_divergence(eps0: float, n: int, eps: float) -> None:
    # Few enough c for one block each: the bound is the exact divergence (to 10⁻¹² for e^ε
    # shaded down by the SDK's 10⁻¹²).
    assert hockey_stick(eps, eps0, n) == pytest.approx(_pair_divergence(eps0, n, eps), abs=1e-10)


def test_more_reports_never_weaken_the_bound() -> None:
    eps = [shuffled_epsilon(2.0, n, 1e-6) for n in (10**3, 10**4, 10**5, 10**6)]
    assert all(a > b for a, b in itertools.pairwise(eps))
    assert all(e < 2.0 for e in eps)
    assert eps[-1] < closed_form_epsilon(2.0, 10**6, 1e-6)  # type: ignore[operator]


def test_too_few_reports_amplify_nothing() -> None:
    assert shuffled_epsilon(1.0, 1, 1e-6) == 1.0
    assert amplification(1.0, 0).epsilon == 1.0
    with pytest.raises(ValueError, match="0 < δ < 1"):
        shuffled_epsilon(1.0, 100, 0.0)


def test_r_reports_per_device_compose_before_amplifying() -> None:
    one = amplification(1.0, 100_000)
    three = amplification(1.0, 300_000, reports_per_device=3)
    assert one.delta == three.delta == 1e-10  # δ = 1/N², N = 10⁵ devices
    assert three.local_epsilon == 3.0 and three.devices == 100_000
    assert three.epsilon == pytest.approx(shuffled_epsilon(3.0, 100_000, 1e-10))
    assert one.epsilon < three.epsilon < 3.0
    assert "at most 3 of these reports" in three.condition
    assert "Redis" in one.condition and "one of these reports" in one.condition

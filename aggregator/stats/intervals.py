"""What every interval shares: the normal and Student-t quantiles, and statistics as JSON has them.

The t quantile is computed here rather than taken from scipy, which the aggregator's
processes do not load (``tests/test_architecture.py``): the regularized incomplete beta
function by its continued fraction, inverted by safeguarded Newton steps, and the
Cornish–Fisher expansion for large degrees of freedom.

References:
    M. Abramowitz, I. A. Stegun. *Handbook of Mathematical Functions* (1964): 26.7.1 (the
    t distribution through the incomplete beta function), 26.5.8 (its continued fraction),
    26.7.5 (the Cornish–Fisher expansion of the t quantile).
    W. H. Press et al. *Numerical Recipes*, 3rd ed. (2007), §6.4 (``betacf``, modified
    Lentz's method).
"""

from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist

__all__ = ["json_float", "t_value", "z_value"]


def json_float(x: float) -> float | None:
    """A statistic as JSON has it: NaN (no reports yet) becomes None (``null``)."""
    return None if math.isnan(x) else float(x)


def z_value(confidence: float, comparisons: int = 1) -> float:
    """Two-sided normal quantile for ``confidence``, Bonferroni-corrected over ``comparisons``."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    alpha = (1.0 - confidence) / comparisons
    return NormalDist().inv_cdf(1.0 - alpha / 2.0)


CORNISH_FISHER_DF = 1000
"""From this many degrees of freedom on, the t quantile is the Cornish–Fisher expansion to
the ν⁻⁴ term: its error is O(ν⁻⁵), below 10⁻¹² relative at ν = 1000 for confidence ≤
1 − 10⁻⁹ (checked against scipy in the tests). Below it, the incomplete beta function's
continued fraction converges in O(√ν) terms, a few dozen at most."""

_CF_TERMS = 10_000
"""Continued-fraction terms before giving up: at ν < 1000 and x < (a+1)/(a+b+2) it needs
far fewer (Numerical Recipes: O(√max(a, b)))."""

_TINY = 1e-300
"""Lentz's guard against a zero denominator."""


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b) (A&S 26.5.8), by the modified Lentz method."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _CF_TERMS):
        for num in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + num / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < 1e-16:
            return h
    raise ArithmeticError(f"incomplete beta fraction did not converge (a={a}, b={b}, x={x})")


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), 0 ≤ x ≤ 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1.0 - x) / b


def _t_tail(t: float, df: float) -> float:
    """Pr[|T| > t] for T ~ Student t with ``df`` degrees of freedom, t ≥ 0 (A&S 26.7.1)."""
    return _incomplete_beta(df / 2.0, 0.5, df / (df + t * t))


def _t_density(t: float, df: float) -> float:
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(log_c - (df + 1) / 2 * math.log1p(t * t / df))


def _cornish_fisher(z: float, df: float) -> float:
    """The t quantile from the normal one, to the ν⁻⁴ term (A&S 26.7.5)."""
    z2 = z * z
    g1 = (z2 + 1) * z / 4
    g2 = ((5 * z2 + 16) * z2 + 3) * z / 96
    g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384
    g4 = ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160
    return z + (g1 + (g2 + (g3 + g4 / df) / df) / df) / df


@lru_cache(maxsize=4096)
def t_value(confidence: float, df: int) -> float:
    """Two-sided Student-t quantile: Pr[|T| ≤ t] = ``confidence`` for T with ``df`` df.

    Args:
        confidence: the level, in (0, 1).
        df: degrees of freedom, a positive integer (n − 1 for a mean of n reports).

    Returns:
        The quantile t_{df}(1 − α/2), α = 1 − confidence; about 10⁻¹² relative accuracy.

    Raises:
        ValueError: a bad confidence or df.
    """
    z = z_value(confidence)
    if isinstance(df, bool) or not isinstance(df, int) or df < 1:
        raise ValueError(f"degrees of freedom must be a positive int, got {df!r}")
    guess = _cornish_fisher(z, df)
    if df >= CORNISH_FISHER_DF:
        return guess
    alpha = 1.0 - confidence
    # Bracket the root of tail(t) = α (tail decreases in t), then Newton, bisecting
    # whenever a step leaves the bracket.
    low, high = z, max(guess, z) * 2.0
    while _t_tail(high, df) > alpha:
        low, high = high, high * 2.0
    t = min(max(guess, low), high)
    for _ in range(200):
        gap = _t_tail(t, df) - alpha
        if gap > 0:
            low = t
        else:
            high = t
        step = gap / (2.0 * _t_density(t, df))  # d tail / dt = −2·density
        nxt = t + step
        if not low < nxt < high:
            nxt = (low + high) / 2.0
        if abs(nxt - t) <= 1e-15 * t or high - low <= 1e-15 * t:
            return nxt
        t = nxt
    return t  # pragma: no cover - Newton converges in a handful of steps

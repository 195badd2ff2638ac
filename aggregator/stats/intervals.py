"""Intervals and tests for frequencies that stay honest at small n and across many values.

In full: ``docs/statistics/intervals.md``.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from functools import lru_cache
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt

from aggregator.stats.accounting import checked_reports_per_device
from aggregator.stats.arrays import FloatArray
from aggregator.stats.lazy import scipy_special, scipy_stats
from client_sdk.numbers import is_count

__all__ = [
    "ESTIMANDS",
    "EXACT",
    "MIN_EXPECTED",
    "POPULATION",
    "REPORTERS",
    "REPORTERS_ONLY",
    "SCORE",
    "Z_95",
    "check_confidence",
    "check_estimand",
    "exact_zero_p",
    "min_expected",
    "needs_exact",
    "benjamini_hochberg",
    "frequency_intervals",
    "interval_method",
    "interval_zero_p",
    "json_float",
    "population_refused",
    "score_zero_p",
    "t_value",
    "variance_coefficients",
    "z_value",
    "zero_p_values",
    "zero_test",
]


MIN_EXPECTED = 10.0
"""Expected support (and non-support) count below which the normal approximation is not
trusted: n·min(q*, 1 − p*) < 10 switches to the exact interval. The usual rule of thumb
(≥ 5–10 expected per cell); with 10 the lowest exact coverage over the grid in the module
docstring is 93.4 %, with 5 it is 92.5 % (RR at n = 20)."""

SCORE = "score"
EXACT = "exact"

REPORTERS = "reporters"
"""The default estimand: the share among the n devices that reported (a finite
population; the intervals above)."""
POPULATION = "population"
"""The share in a larger population the reporting devices are a random sample of: the
sampling variance f(1 − f)/n is added (r·f(1 − f)/n with up to r reports per device)."""
ESTIMANDS = (REPORTERS, POPULATION)

REPORTERS_ONLY = {
    "string": "a discovered value's interval is for the share among the devices that reported",
    "distribution": "the shares are among the devices that reported",
}
"""The metric kinds whose intervals are the reporters' only (:data:`POPULATION` is not
offered), and why."""


def population_refused(kind: str, estimand: str) -> str | None:
    """Why ``estimand`` is not offered for a metric of ``kind`` (None: it is)."""
    return REPORTERS_ONLY.get(kind) if estimand == POPULATION else None


def json_float(x: float) -> float | None:
    """A statistic as JSON has it: NaN (no reports yet) becomes None (``null``)."""
    return None if math.isnan(x) else float(x)


def check_confidence(confidence: float) -> float:
    """``confidence`` if it is a level in (0, 1) (else ValueError saying so)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    return confidence


def z_value(confidence: float, comparisons: int = 1) -> float:
    """Two-sided normal quantile for ``confidence``, Bonferroni-corrected over ``comparisons``."""
    check_confidence(confidence)
    alpha = (1.0 - confidence) / comparisons
    # The lower tail's quantile, negated: 1 − α/2 rounds to 1.0 once α < 2.2e-16 (a
    # confidence of 0.9999999999999999, or many comparisons), where inv_cdf has no answer.
    return -NormalDist().inv_cdf(alpha / 2.0)


def _variance(mechanism: Any, n: Any, f: Any, r: float) -> Any:
    if r == 1:
        return mechanism.variance(n, f)
    return mechanism.variance(n, f, reports_per_device=r)


def variance_coefficients(mechanism: Any, n: Any, r: float = 1) -> tuple[Any, Any, Any]:
    """(a, b, c) with V(f) = a·f² + b·f + c: the mechanism's exact variance as a polynomial.

    Read off ``mechanism.variance`` at f = 0, ½, 1 (it is at most quadratic in f). Floats
    for one n; arrays shaped as ``n`` for an array of them (a trend's windows).
    """
    v0, vh, v1 = (
        np.asarray(_variance(mechanism, n, f, r), dtype=np.float64) for f in (0.0, 0.5, 1.0)
    )
    a = 2.0 * (v1 - 2.0 * vh + v0)
    if np.ndim(a) == 0:
        return float(a), float(v1 - v0 - a), float(v0)
    return a, v1 - v0 - a, v0


def checked_choice(what: str, value: str, choices: Collection[str], allowed: str) -> str:
    """``value`` if it is one of ``choices``.

    Raises:
        ValueError: "``what`` must be ``allowed``", with the value given.
    """
    if value not in choices:
        raise ValueError(f"{what} must be {allowed}, got {value!r}")
    return value


def check_estimand(estimand: str) -> str:
    """``estimand`` if it is one of :data:`ESTIMANDS` (else ValueError naming them)."""
    return checked_choice("estimand", estimand, ESTIMANDS, "'reporters' or 'population'")


def sampling_coefficients(n: float, r: float = 1) -> tuple[float, float, float]:
    """(a, b, c) of the sampling variance r·f(1 − f)/n that :data:`POPULATION` adds to
    :func:`variance_coefficients` (law of total variance: the reporters' share f is itself
    the share of n/r devices drawn from the population's)."""
    return -r / n, r / n, 0.0


def design_effect(mechanism: Any, r: float) -> float:
    """The largest ratio of the r-reports variance to the one-report variance over f."""
    if r == 1:
        return 1.0
    return max(
        float(_variance(mechanism, 1, f, r) / _variance(mechanism, 1, f, 1)) for f in (0.0, 1.0)
    )


Z_95 = 1.959963984540054
"""The two-sided 95 % normal quantile, the level :data:`MIN_EXPECTED` was set for."""


def min_expected(z: float = Z_95) -> float:
    """The smallest n·min(q*, 1 − p*) for a score interval that reads the normal quantile z.

    :data:`MIN_EXPECTED` at 95 %; beyond, scaled by ((z² − 1)/(1.96² − 1))² so that the
    count's skewness moves the quantile (Cornish–Fisher: by (z² − 1)/(6·√(n·q*)) standard
    deviations) no more than it does at 95 % with 10 expected: about 300 for the
    Bonferroni level of k = 1024 values (z = 4.06), where the normal tail is light enough
    to leave simultaneous coverage at 81–93 % between 10 and 100 expected.
    """
    return MIN_EXPECTED * max(1.0, ((z * z - 1.0) / (Z_95 * Z_95 - 1.0)) ** 2)


def interval_method(mechanism: Any, n: int, r: float = 1, z: float = Z_95) -> str:
    """:data:`SCORE`, or :data:`EXACT` when n·min(q*, 1 − p*) is below
    :func:`min_expected` for the quantile z the interval reads (:data:`MIN_EXPECTED` at
    95 %)."""
    return EXACT if bool(needs_exact(mechanism, n, r, z)) else SCORE


def needs_exact(mechanism: Any, n: Any, r: float = 1, z: float = Z_95) -> np.ndarray:
    """Whether :func:`interval_method` is :data:`EXACT` at each of ``n`` (an array of
    windows' reports, or one)."""
    effective = np.asarray(n) / design_effect(mechanism, r)
    small = effective * min(float(mechanism.q), 1.0 - float(mechanism.p))
    return np.asarray(small < min_expected(z), dtype=bool)


def _score(
    f: FloatArray, coefficients: tuple[float, float, float], z: float
) -> tuple[FloatArray, FloatArray]:
    """The roots of (f̂ − f)² = z²·(a f² + b f + c), lower and upper."""
    a, b, c = coefficients
    qa = 1.0 - z * z * a
    qb = -(2.0 * f + z * z * b)
    qc = f * f - z * z * c
    root = np.sqrt(np.maximum(qb * qb - 4.0 * qa * qc, 0.0))
    return (-qb - root) / (2.0 * qa), (-qb + root) / (2.0 * qa)


_DISTINCT_FROM = 64
"""Counts above which the incomplete beta functions are evaluated once per distinct count
(elementwise, so the same numbers): fewer calls where k is large, no sort where it is
small."""


def _exact(
    mechanism: Any, n: Any, support: FloatArray, alpha: Any, once: bool = False
) -> tuple[FloatArray, FloatArray]:
    """Clopper–Pearson on μ = C/n, mapped to f (n and C may be deflated: floats; α one
    for all, or one per value)."""
    betaincinv = scipy_special().betaincinv
    if not once and np.size(support) > _DISTINCT_FROM and np.ndim(alpha) == 0 and np.ndim(n) == 0:
        distinct, at = np.unique(support, return_inverse=True)
        low, high = _exact(mechanism, n, distinct, alpha, once=True)
        shape = np.shape(support)
        return low[at].reshape(shape), high[at].reshape(shape)
    low_mu = np.where(
        support > 0, betaincinv(np.maximum(support, 1e-12), n - support + 1, alpha / 2), 0.0
    )
    high_mu = np.where(
        support < n,
        betaincinv(support + 1, np.maximum(n - support, 1e-12), 1 - alpha / 2),
        1.0,
    )
    p, q = float(mechanism.p), float(mechanism.q)
    return (low_mu - q) / (p - q), (high_mu - q) / (p - q)


def frequency_intervals(
    mechanism: Any,
    n: Any,
    support: npt.ArrayLike,
    confidence: float,
    comparisons: int = 1,
    reports_per_device: float = 1,
    estimand: str = REPORTERS,
    method: str | None = None,
) -> tuple[FloatArray, FloatArray, str]:
    """Two-sided intervals for the k frequencies from n reports and their support counts.

    Args:
        mechanism: the frequency oracle the reports were made with.
        n: reports (n ≥ 1); or, with ``method`` given, a column of them (W, 1), one per
            row of ``support`` (a trend's windows, :mod:`aggregator.stats.series`).
        support: C(v) for each value.
        confidence: the level of each interval (of all together with ``comparisons`` = k:
            Bonferroni).
        comparisons: how many intervals must hold at once.
        reports_per_device: the most reports of one device in the pool (memoized metrics).
        estimand: :data:`REPORTERS` (the share among the devices that reported) or
            :data:`POPULATION` (the share in a population they are a random sample of:
            the score interval with the sampling variance added; the exact interval is
            the binomial's, already valid for it).
        method: :data:`SCORE` or :data:`EXACT` whatever the counts (default: chosen by
            :func:`interval_method` for this level), so that intervals read at several
            levels of one answer are built alike (:mod:`aggregator.stats.multiplicity`).

    Returns:
        (low, high, method), method :data:`SCORE` or :data:`EXACT` (see the module).

    Raises:
        ValueError: an unknown estimand.
    """
    population = check_estimand(estimand) == POPULATION
    counts = np.asarray(support, dtype=np.float64)
    alpha = (1.0 - confidence) / comparisons
    r = checked_reports_per_device(reports_per_device)
    z = z_value(confidence, comparisons)
    method = method or interval_method(mechanism, n, r, z)
    if method == SCORE:
        f = np.asarray(mechanism.debias(counts, n), dtype=np.float64)
        coefficients = variance_coefficients(mechanism, n, r)
        if population:
            extra = sampling_coefficients(n, r)
            coefficients = (
                coefficients[0] + extra[0],
                coefficients[1] + extra[1],
                coefficients[2] + extra[2],
            )
        low, high = _score(f, coefficients, z)
        # A memoized pool's variance reaches 0 a little below f = 0: an estimate beyond
        # that point has no f that explains it, and the quadratic has no real roots.
        # Those values (far in the tail) take the exact interval instead.
        lost = ~((low <= f) & (f <= high) & (low < high))
        if lost.any():
            deff = design_effect(mechanism, r)
            at = n if np.ndim(n) == 0 else np.broadcast_to(n, counts.shape)[lost]
            exact_low, exact_high = _exact(mechanism, at / deff, counts[lost] / deff, alpha)
            low, high = np.array(low), np.array(high)
            low[lost], high[lost] = exact_low, exact_high
    else:
        deff = design_effect(mechanism, r)
        low, high = _exact(mechanism, n / deff, counts / deff, alpha)
    return np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64), method


def score_zero_p(f: npt.ArrayLike, variance_at_zero: npt.ArrayLike) -> FloatArray:
    """The two-sided p-value of f = 0 that the score interval inverts: 2·Φ(−|f̂|/√V(0)).

    The score interval at level 1 − a holds 0 exactly when f̂² ≤ z²·V(0), z the
    quantile of 1 − a/2 (:func:`_score` at f = 0), so this is ≤ a exactly when the
    interval misses 0.
    """
    ndtr = scipy_special().ndtr
    scale = np.sqrt(np.maximum(np.asarray(variance_at_zero, dtype=np.float64), 1e-300))
    return np.asarray(np.minimum(1.0, 2.0 * ndtr(-np.abs(f) / scale)), dtype=np.float64)


def _binomial_tails(
    n: Any, support: Any, rate: Any, once: bool = False
) -> tuple[FloatArray, FloatArray]:
    """P(X ≥ C) and P(X ≤ C) for X ~ Bin(n, rate), n and C possibly deflated (floats),
    through the regularized incomplete beta function as :func:`_exact` inverts it. Each
    count's tails are computed once (a few hundred distinct counts where k is 65,536)."""
    betainc = scipy_special().betainc
    counts = np.asarray(support, dtype=np.float64)
    if not once and counts.size > _DISTINCT_FROM and np.ndim(n) == 0 and np.ndim(rate) == 0:
        distinct, at = np.unique(counts, return_inverse=True)
        upper, lower = _binomial_tails(n, distinct, rate, once=True)
        return upper[at].reshape(counts.shape), lower[at].reshape(counts.shape)
    upper = np.where(counts > 0, betainc(np.maximum(counts, 1e-12), n - counts + 1, rate), 1.0)
    lower = np.where(
        counts < n, 1.0 - betainc(counts + 1, np.maximum(n - counts, 1e-12), rate), 1.0
    )
    return np.asarray(upper, dtype=np.float64), np.asarray(lower, dtype=np.float64)


def exact_zero_p(mechanism: Any, n: float, support: npt.ArrayLike) -> FloatArray:
    """The two-sided p-value of f = 0 that the exact interval inverts (n and the counts
    deflated by the design effect where :func:`_exact` is): 2·min(P(X ≥ C), P(X ≤ C)),
    X ~ Bin(n, q*). The Clopper–Pearson interval at 1 − a misses 0 exactly when one tail
    is below a/2."""
    upper, lower = _binomial_tails(n, support, float(mechanism.q))
    return np.asarray(np.minimum(1.0, 2.0 * np.minimum(upper, lower)), dtype=np.float64)


def interval_zero_p(
    mechanism: Any, n: Any, support: npt.ArrayLike, r: float, method: str
) -> FloatArray:
    """The two-sided p-value of f = 0 that :func:`frequency_intervals` built by ``method``
    inverts: at level 1 − a its interval misses 0 exactly when this is ≤ a (either
    estimand: the sampling term vanishes at f = 0). ``n`` one, or a column as
    :func:`frequency_intervals` takes it."""
    counts = np.asarray(support, dtype=np.float64)
    if method == SCORE:
        f = np.asarray(mechanism.debias(counts, n), dtype=np.float64)
        return score_zero_p(f, variance_coefficients(mechanism, n, r)[2])
    deff = design_effect(mechanism, r)
    return exact_zero_p(mechanism, n / deff, counts / deff)


def zero_test(
    mechanism: Any, n: Any, support: npt.ArrayLike, reports_per_device: float = 1
) -> FloatArray:
    """The exact two-sided p-values of "f(v) = 0": 2·min of the count's two tails under
    f = 0 (:func:`zero_p_values` is the upper one), whatever the interval's regime.

    A flag is never raised on less than this test: an interval shown beside a flag is
    made to reach 0 wherever it cannot reject (:mod:`aggregator.stats.multiplicity`).
    ``n`` one, or a column as :func:`frequency_intervals` takes it while r is 1.
    """
    counts = np.asarray(support, dtype=np.float64)
    r = checked_reports_per_device(reports_per_device)
    survival = _memoized_survival(mechanism, n, r)
    if survival is not None:
        top = len(survival) - 1
        index = np.clip(np.ceil(counts), 0, top).astype(np.int64)
        upper = survival[index]
        below = np.clip(np.floor(counts) + 1, 0, top + 1).astype(np.int64)
        lower = 1.0 - np.where(below <= top, survival[np.minimum(below, top)], 0.0)
        return np.asarray(np.clip(2.0 * np.minimum(upper, lower), 0.0, 1.0), dtype=np.float64)
    upper, lower = _binomial_tails(n, counts, float(mechanism.q))
    return np.asarray(np.minimum(1.0, 2.0 * np.minimum(upper, lower)), dtype=np.float64)


def zero_p_values(
    mechanism: Any, n: int, support: npt.ArrayLike, reports_per_device: float = 1
) -> FloatArray:
    """One-sided p-values of "f(v) = 0" against "f(v) > 0", one per value.

    Under f(v) = 0 every report supports v with probability q*, independently, so the
    p-value is the binomial upper tail P(Bin(n, q*) ≥ C), exact in both regimes. Not the
    normal approximation: where Benjamini–Hochberg decides over many values (α/k and
    below) its tail is several times too light while n·q* is below a few hundred (see the
    module). With r > 1 reports per device (memoized metrics) one device's reports share
    its permanent response, but devices are independent: the p-value is the exact tail of
    the sum of ⌈n/r⌉ device counts (:func:`_device_sum_survival`). A binomial deflated by
    the design effect crossed 10⁻⁴ eight times too often at r = 100.
    """
    counts = np.asarray(support, dtype=np.float64)
    r = checked_reports_per_device(reports_per_device)
    survival = _memoized_survival(mechanism, n, r)
    if survival is not None:
        index = np.clip(np.ceil(counts), 0, len(survival) - 1).astype(np.int64)
        return np.asarray(np.clip(survival[index], 0.0, 1.0), dtype=np.float64)
    betainc = scipy_special().betainc
    rate = float(mechanism.q)  # the support rate of every report when f(v) = 0
    # P(Bin(n, q) ≥ c) = I_q(c, n − c + 1), the regularized incomplete beta function.
    tail = np.where(counts > 0, betainc(np.maximum(counts, 1e-12), n - counts + 1, rate), 1.0)
    return np.asarray(tail, dtype=np.float64)


def _memoized_survival(mechanism: Any, n: int, r: float) -> FloatArray | None:
    """:func:`_device_sum_survival` where each device's ``r`` > 1 reports share a memoized
    permanent response; None where reports are independent."""
    if r > 1 and hasattr(mechanism, "permanent") and hasattr(mechanism, "irr_keep"):
        return _device_sum_survival(mechanism, n, math.ceil(r))
    return None


@lru_cache(maxsize=32)
def _device_sum_survival(mechanism: Any, n: int, r: int) -> FloatArray:
    """P(C ≥ c), c = 0..⌈n/r⌉·r, for C the support count of a value no device holds, when
    each of ⌈n/r⌉ devices sends r reports of one memoized value.

    A device's permanent response supports v with probability q₁ (the base mechanism at
    ε∞); each of its r reports then supports v with probability s₁ = the IRR's keep
    probability if it does, s₀ = (q* − q₁s₁)/(1 − q₁) if not. So one device's count is a
    mixture of Bin(r, s₁) and Bin(r, s₀), and C the convolution of ⌈n/r⌉ of them (one
    FFT). Devices that send fewer reports make the tail lighter, not heavier.
    """
    binom = scipy_stats().binom
    q1, s1, rate = float(mechanism.permanent.q), float(mechanism.irr_keep), float(mechanism.q)
    s0 = (rate - q1 * s1) / (1.0 - q1)
    j = np.arange(r + 1)
    pmf = q1 * binom.pmf(j, r, s1) + (1.0 - q1) * binom.pmf(j, r, s0)
    devices = max(1, math.ceil(n / r))
    size = devices * r + 1
    fft = 1 << (size - 1).bit_length()
    total = np.clip(np.fft.irfft(np.fft.rfft(pmf, fft) ** devices, fft)[:size], 0.0, None)
    return np.asarray(np.cumsum(total[::-1])[::-1] / total.sum(), dtype=np.float64)


def benjamini_hochberg(p_values: npt.ArrayLike, alpha: float) -> np.ndarray:
    """Which hypotheses the Benjamini–Hochberg step-up procedure rejects at FDR ``alpha``:
    those whose BH-adjusted p-value (``scipy.stats.false_discovery_control``) is ≤ α.

    Reject the i smallest p-values, i the largest with p₍ᵢ₎ ≤ i·α/m. A NaN p-value is never
    rejected and counts in m.
    """
    false_discovery_control = scipy_stats().false_discovery_control
    values = np.asarray(p_values, dtype=np.float64)
    if values.size == 0:
        return np.zeros(0, dtype=bool)
    adjusted = false_discovery_control(np.where(np.isnan(values), 1.0, values), method="bh")
    return np.asarray((adjusted <= alpha) & ~np.isnan(values), dtype=bool)


@lru_cache(maxsize=4096)
def t_value(confidence: float, df: int) -> float:
    """Two-sided Student-t quantile: Pr[|T| ≤ t] = ``confidence`` for T with ``df`` df.

    Args:
        confidence: the level, in (0, 1).
        df: degrees of freedom, a positive integer (n − 1 for a mean of n reports).

    Returns:
        The quantile t_{df}(1 − α/2), α = 1 − confidence (``scipy.special.stdtrit``).

    Raises:
        ValueError: a bad confidence or df.
    """
    check_confidence(confidence)
    if not is_count(df):
        raise ValueError(f"degrees of freedom must be a positive int, got {df!r}")
    return float(scipy_special().stdtrit(df, 0.5 + confidence / 2.0))

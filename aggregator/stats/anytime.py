"""Confidence sequences: intervals that stay valid however often the operator looks.

A fixed-n 95 % interval misses the truth 5 % of the time *at one pre-chosen n*. An
operator who watches a dashboard refresh and stops when the interval looks interesting
has looked at hundreds of n, and the chance that some look missed is far larger: over 200
looks from n = 100 to 10⁶ the tests and ``benchmarks/bench_anytime.py`` measure 53–76 %
for GRR, OUE and OLH, 60–66 % for numeric means. A *confidence sequence* (CS) is a
sequence of intervals C_n with

In full: ``docs/statistics/anytime.md``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from aggregator.stats.accounting import checked_reports_per_device
from aggregator.stats.arrays import FloatArray
from client_sdk.mechanisms import (
    DuchiMechanism,
    FrequencyOracle,
    HybridMechanism,
    NumericMechanism,
)

__all__ = [
    "ALPHA_OPT",
    "METHODS",
    "T_OPT",
    "Method",
    "anytime_p_value",
    "cs_bounded_mean",
    "frequency_cs",
    "mean_cs",
    "mean_cs_many",
    "method_for",
]

Method = Literal["bernoulli", "empirical-bernstein", "hoeffding"]
METHODS: tuple[Method, ...] = ("bernoulli", "empirical-bernstein", "hoeffding")

T_OPT = 25_000
"""Reports at which every mixture is tuned to be tightest; fixed in advance, never chosen
from data. It balances the counts a metric's cumulative window usually holds, 10⁴ to 10⁶:
a mixture that knows the variance is then 1.59× as wide as the fixed-n 95 % interval at
n = 10⁴, 1.55× at best (n ≈ T_OPT) and 1.75× at 10⁶ (2.6× at 10³). The minimax choice
over [10⁴, 10⁶], T ≈ 5·10⁴, would gain 2 % at the worst end and cost 31 % at n = 10³."""

ALPHA_OPT = 0.05
"""The level the mixing precision is tuned for (ρ's formula): fixed, so that the same
supermartingale serves every α and the CS and :func:`anytime_p_value` agree."""

_STEPS = 24
"""Root-finding steps per end point (Illinois with a bisection every fourth). In sweeps over
n = 1..10⁷ and every mean they bring the returned end within 10⁻⁸ of the half-width
typically and 2·10⁻⁵ at worst (a few elements near the range's ends). The outer end of the
bracket is returned, so fewer steps could only widen the interval."""

_EB_STEP = 1.25
_EB_GRID: FloatArray = 8.0 / _EB_STEP ** np.arange(61, dtype=np.float64)
"""Tilts of the empirical-Bernstein mixture, in units of the prior's standard deviation
1/√ρ, from 8 (the prior's mass above is below e⁻³²) down by factors of 1.25 to 10⁻⁵ (tilts
that small matter only after ~10¹⁰·T_OPT reports). Near the boundary the integrand is a
bump about 0.3 wide in log λ, wider than the step log 1.25 = 0.22, so the sum is within a
per cent or so of the continuous mixture; validity never depends on the grid."""


def _half_normal_log_weights() -> FloatArray:
    """log w_j: the half-normal density at each tilt of :data:`_EB_GRID` times the width of
    its (geometric) cell, normalised so that the weights sum to exactly 1."""
    cell = _EB_GRID * (math.sqrt(_EB_STEP) - 1 / math.sqrt(_EB_STEP))
    log_w = -0.5 * _EB_GRID**2 + np.log(cell)
    return np.asarray(log_w - np.log(np.sum(np.exp(log_w))))


_EB_LOG_W = _half_normal_log_weights()


def _tuning_length(alpha_opt: float = ALPHA_OPT) -> float:
    """L = 2 log(1/α) + log(1 + 2 log(1/α)): ρ = v_opt / L (``confseq``'s best_rho)."""
    two_log = 2.0 * math.log(1.0 / alpha_opt)
    return two_log + math.log1p(two_log)


def _lgamma(x: FloatArray) -> FloatArray:
    """log Γ(x) for x > 0, vectorized (numpy has no lgamma; scipy is not loaded here).

    Stirling's series with four correction terms after shifting x to ≥ 8 with
    Γ(x) = Γ(x + 8)/(x(x+1)…(x+7)): relative error below 10⁻¹¹ (checked against
    ``math.lgamma`` from 10⁻³⁰⁰ to 10¹²). x = 0 gives +∞.
    """
    x = np.asarray(x, dtype=np.float64)
    small = x < 8.0
    shift = np.zeros_like(x)
    if small.any():
        xs = x[small]
        prod = np.ones_like(xs)
        for i in range(8):
            prod *= xs + i
        shift[small] = np.log(prod)
    y = np.where(small, x + 8.0, x)
    inv = 1.0 / y
    inv2 = inv * inv
    series = inv * (1 / 12 - inv2 * (1 / 360 - inv2 * (1 / 1260 - inv2 / 1680)))
    return np.asarray((y - 0.5) * np.log(y) - y + 0.5 * math.log(2 * math.pi) + series - shift)


def _lbeta(a: FloatArray, b: FloatArray) -> FloatArray:
    return _lgamma(a) + _lgamma(b) - _lgamma(a + b)


def _xlogy(x: FloatArray, y: FloatArray) -> FloatArray:
    """x·log y with 0·log 0 = 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x == 0, 0.0, x * np.log(np.where(x == 0, 1.0, y)))


def _log_m_bernoulli(n: FloatArray, m: FloatArray, mu: FloatArray) -> FloatArray:
    """log M_n(μ) of the beta-binomial mixture, z units (see the module docstring)."""
    conc = max(T_OPT / _tuning_length() - 1.0, 1e-3)  # A: the prior Beta(μA, (1−μ)A)
    s = n * m
    a, b = mu * conc, (1 - mu) * conc
    return np.asarray(
        _lbeta(a + s, b + n - s) - _lbeta(a, b) - _xlogy(s, mu) - _xlogy(n - s, 1 - mu)
    )


def _eb_penalty(lam: FloatArray, c: FloatArray, v: FloatArray) -> FloatArray:
    """ψ_E(cλ)/c² · V with ψ_E(u) = −log(1 − u) − u; +∞ where cλ ≥ 0.999 (the term is left
    out: any weights summing to at most 1 keep M_0 ≤ 1, and these tilts are useless).

    ψ_E(u)/u² is summed as its series 1/2 + u/3 + u²/4 + … below u = 10⁻³ (where the
    direct form cancels), so c → 0 tends to the sub-Gaussian λ²V/2.
    """
    u = c * lam
    direct = (-np.log1p(-np.minimum(u, 0.999)) - u) / np.maximum(u * u, 1e-300)
    series = 0.5 + u * (1 / 3 + u * (1 / 4 + u * (1 / 5 + u * (1 / 6 + u / 7))))
    h = np.where(u < 1e-3, series, direct)
    return np.asarray(np.where(u < 0.999, lam * lam * h * v, np.inf))


def _log_m_eb(
    n: FloatArray, m: FloatArray, var: FloatArray, mu: FloatArray, design_var: FloatArray
) -> FloatArray:
    """log M_n(μ) of the empirical-Bernstein mixture, z units (see the module docstring).

    The prior on λ is half-normal with precision ρ = T_OPT·σ_d²/L (σ_d² the design
    variance in z units), discretised on :data:`_EB_GRID`. The sum over the grid is a
    log-sum-exp taken a block of tilts at a time (about 2¹⁶ numbers per block): a scalar
    costs one pass over the grid, a large array a few arrays' memory.
    """
    sd = np.sqrt(_tuning_length() / (T_OPT * np.asarray(design_var, dtype=np.float64)))
    shape = np.broadcast(n, m, var, mu, sd).shape
    s = np.broadcast_to(n * (m - mu), shape)[None]
    v = np.broadcast_to(n * (var + (m - mu) ** 2), shape)[None]
    up, down = np.broadcast_to(mu, shape)[None], np.broadcast_to(1 - mu, shape)[None]
    sd = np.broadcast_to(sd, shape)[None]
    block = max(1, (1 << 16) // max(1, math.prod(shape)))
    top = np.full(shape, -np.inf)
    total = np.zeros(shape)
    extra = (1,) * len(shape)
    for start in range(0, len(_EB_GRID), block):
        lam: FloatArray = _EB_GRID[start : start + block].reshape((-1, *extra)) * sd
        log_w: FloatArray = _EB_LOG_W[start : start + block].reshape((-1, *extra))
        for terms in (
            log_w + lam * s - _eb_penalty(lam, up, v),
            log_w - lam * s - _eb_penalty(lam, down, v),
        ):
            new_top = np.maximum(top, terms.max(axis=0))
            ref = np.where(np.isfinite(new_top), new_top, 0.0)
            total = total * np.exp(top - ref) + np.exp(terms - ref).sum(axis=0)
            top = new_top
    return np.asarray(np.where(np.isfinite(top), top, 0.0) + np.log(total) - math.log(2.0))


def _hoeffding_rho() -> float:
    """ρ of the normal mixture: tuned at v_opt = T_OPT/4, the range's variance in z units."""
    return T_OPT / 4.0 / _tuning_length()


def _hoeffding_radius(n: FloatArray, alpha: float) -> FloatArray:
    """Half-width, z units, of the two-sided normal mixture with variance process n/4:
    |S_n| < √((V + ρ) log((V + ρ)/(ρα²))), V = n/4, divided by n."""
    v, rho = n / 4.0, _hoeffding_rho()
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(np.sqrt((v + rho) * np.log((v + rho) / (rho * alpha * alpha))) / n)


def _log_m(
    method: Method,
    n: FloatArray,
    m: FloatArray,
    var: FloatArray,
    mu: FloatArray,
    design_var: FloatArray,
) -> FloatArray:
    """log M_n(μ) of a method, z units; NaN where n = 0 (or m is NaN)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if method == "bernoulli":
            return _log_m_bernoulli(n, m, mu)
        if method == "empirical-bernstein":
            return _log_m_eb(n, m, var, mu, design_var)
        v, rho = n / 4.0, _hoeffding_rho()  # the two-sided normal mixture, closed form
        return np.asarray(0.5 * np.log(rho / (v + rho)) + (n * (m - mu)) ** 2 / (2 * (v + rho)))


def _endpoint(
    method: Method,
    n: FloatArray,
    m: FloatArray,
    var: FloatArray,
    design_var: FloatArray,
    threshold: float,
    edge: float,
) -> FloatArray:
    """The end of {μ : log M_n(μ) < threshold} between m (inside) and ``edge`` (0 or 1).

    Solved for the distance d = |μ − m| on a log scale, where log M is smooth and nearly
    linear. A bracket [inside, outside] is kept throughout and its *outside* end
    returned, so an unconverged element can only come out wider, never narrower. The
    outside end starts a few standard errors se out (the innermost of 6, 24 and 96 se
    that is outside, else the edge), the inside end at se/16 (the CS is always wider than
    that), then :data:`_STEPS` Illinois steps (regula falsi halving a stale end's value)
    shrink the bracket, with a plain bisection every fourth step to guarantee progress.
    """
    direction = -1.0 if edge == 0.0 else 1.0
    room = np.abs(edge - m)

    def g(d: FloatArray) -> FloatArray:
        mu = np.clip(m + direction * d, 0.0, 1.0)
        return _log_m(method, n, m, var, mu, design_var) - threshold

    d_out = room.copy()
    if method == "bernoulli":
        # The limit at μ → 0 of M is 0 for Σz < 1, A/(A + n − 1) < 1 for Σz = 1 (the prior
        # Beta(μA, ·) puts mass ~μA near 0: one success cannot refute μ ≈ 0) and ∞ beyond;
        # at μ → 1 the same with n − Σz.
        g_out = np.full_like(m, np.inf)
        edge_inside = n * room <= 1.0
    else:
        g_out = g(room)
        edge_inside = ~(g_out >= 0)  # NaN counts as inside: wider
    se = np.sqrt(np.maximum(m * (1 - m), 1.0 / np.maximum(n, 1.0)) / np.maximum(n, 1.0))
    for k in (96.0, 24.0, 6.0):  # the innermost one outside wins
        trial = np.minimum(k * se, room)
        g_trial = g(trial)
        ok = g_trial >= 0
        d_out, g_out = np.where(ok, trial, d_out), np.where(ok, g_trial, g_out)
    d_in = np.minimum(se / 16, d_out / 2)
    g_in = g(d_in)
    with np.errstate(divide="ignore"):
        u_in, u_out = np.log(d_in), np.log(d_out)
    side = np.zeros(m.shape, dtype=np.int8)  # the end that moved last: −1 inside, +1 out
    for step in range(_STEPS):
        mid = 0.5 * (u_in + u_out)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            secant = u_out - g_out * (u_out - u_in) / (g_out - g_in)
        usable = np.isfinite(g_out) & np.isfinite(g_in) & (step % 4 != 3)
        usable &= (secant - u_in) * (secant - u_out) < 0  # strictly inside the bracket
        u = np.where(usable, secant, mid)
        g_u = g(np.exp(u))
        out = g_u >= 0
        g_out = np.where(~out & (side == -1), g_out * 0.5, g_out)  # Illinois: stale end
        g_in = np.where(out & (side == 1), g_in * 0.5, g_in)
        u_out, g_out = np.where(out, u, u_out), np.where(out, g_u, g_out)
        u_in, g_in = np.where(out, u_in, u), np.where(out, g_in, g_u)
        side = np.where(out, 1, -1).astype(np.int8)
    end = np.clip(m + direction * np.exp(u_out), 0.0, 1.0)
    return np.where(edge_inside, edge, end)


def _check_alpha(alpha: float) -> float:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    return float(alpha)


def _z_stats(
    n: Any, total: Any, total_sq: Any, low: float, high: float, method: str
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(n, m, σ̂²) in z units, n = 0 giving NaN; sums outside [n·low, n·high] refused, and
    a missing total_sq where ``method`` needs it."""
    if method == "empirical-bernstein" and total_sq is None:
        raise ValueError("the empirical-Bernstein boundary needs total_sq")
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ValueError(f"need finite low < high, got [{low!r}, {high!r}]")
    nn = np.asarray(n, dtype=np.float64)
    tot = np.asarray(total, dtype=np.float64)
    if np.any(nn < 0) or not np.all(np.isfinite(nn)):
        raise ValueError("n must be finite and non-negative")
    width = high - low
    with np.errstate(divide="ignore", invalid="ignore"):
        m = (tot / nn - low) / width
        if total_sq is None:
            var = np.zeros_like(m)
        else:
            sq = np.asarray(total_sq, dtype=np.float64)
            var = (sq / nn - (tot / nn) ** 2) / (width * width)
    slack = 1e-9
    if np.any((nn > 0) & ((m < -slack) | (m > 1 + slack))):
        raise ValueError(f"total must lie in [n·low, n·high] = n·[{low!r}, {high!r}]")
    m = np.where(nn > 0, np.clip(m, 0.0, 1.0), np.nan)
    var = np.clip(var, 0.0, m * (1 - m))  # float rounding only: [0, 1] data have σ̂² ≤ m(1−m)
    return np.broadcast_arrays(nn, m, var)  # type: ignore[return-value]


def _cs_z(
    n: FloatArray,
    m: FloatArray,
    var: FloatArray,
    alpha: float,
    method: Method,
    design_var: FloatArray,
) -> tuple[FloatArray, FloatArray]:
    """The CS in z units (NaN where n = 0)."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    alpha = _check_alpha(alpha)
    if method == "hoeffding":
        r = _hoeffding_radius(n, alpha)
        lo, hi = np.maximum(m - r, 0.0), np.minimum(m + r, 1.0)
    else:
        threshold = math.log(1.0 / alpha)
        lo = _endpoint(method, n, m, var, design_var, threshold, 0.0)
        hi = _endpoint(method, n, m, var, design_var, threshold, 1.0)
    empty = ~(n > 0)
    return np.where(empty, np.nan, lo), np.where(empty, np.nan, hi)


def _out(x: FloatArray) -> Any:
    return float(x) if np.ndim(x) == 0 else x


def cs_bounded_mean(
    n: Any,
    total: Any,
    total_sq: Any,
    low: float,
    high: float,
    alpha: float = 0.05,
    *,
    method: Method = "bernoulli",
    design_variance: float | None = None,
) -> tuple[Any, Any]:
    """A confidence sequence for the mean of bounded contributions, from their sums.

    **Guarantee.** If the contributions x_1, x_2, … lie in [low, high] and each has the
    same mean μ given the ones before it (true for i.i.d. draws: devices sampled from one
    population, one contribution per device, arriving in an order that does not depend on
    their values), then with probability at least 1 − α the returned interval contains μ
    at *every* n simultaneously: at every look, however many, and at a look chosen after
    seeing the data. (Not with memoized or repeated reports of one device counted as
    separate contributions: see :func:`frequency_cs`'s ``reports_per_device``.)

    Args:
        n: the number of contributions (scalar or array; arrays broadcast together).
        total: Σx.
        total_sq: Σx² (used by ``"empirical-bernstein"``; may be None for the others).
        low: the smallest possible contribution.
        high: the largest possible contribution.
        alpha: 1 − the level, in (0, 1).
        method: the boundary, ``"bernoulli"`` (beta-binomial mixture: exact for two-valued
            contributions), ``"empirical-bernstein"`` (adapts to the data's variance) or
            ``"hoeffding"`` (normal mixture with the range's variance; a baseline). See the
            module docstring for the measured widths behind each default.
        design_variance: the variance of one contribution ``"empirical-bernstein"`` is
            tuned for (T_OPT of them is where it is tightest). A constant chosen before
            the data, e.g. from the mechanism; default: the range's worst case
            ((high − low)/2)². Validity never depends on it.

    Returns:
        (lo, hi), floats for scalar inputs, arrays otherwise, inside [low, high]; NaN
        where n = 0.

    Raises:
        ValueError: alpha outside (0, 1), an unknown method, low ≥ high, negative n, a
            total outside [n·low, n·high], or ``"empirical-bernstein"`` without total_sq.
    """
    nn, m, var = _z_stats(n, total, total_sq, low, high, method)
    width = high - low
    dv = (width * width / 4.0) if design_variance is None else float(design_variance)
    if not dv > 0:
        raise ValueError(f"design_variance must be positive, got {design_variance!r}")
    lo, hi = _cs_z(nn, m, var, alpha, method, np.asarray(dv / (width * width)))
    return _out(low + lo * width), _out(low + hi * width)


def anytime_p_value(
    n: Any,
    total: Any,
    total_sq: Any,
    low: float,
    high: float,
    mean: Any,
    *,
    method: Method = "bernoulli",
    design_variance: float | None = None,
) -> Any:
    """An anytime-valid p-value for "the mean is ``mean``": min(1, 1/M_n(mean)).

    Under the hypothesis (and the guarantee of :func:`cs_bounded_mean`), the probability
    that it *ever* drops to α or below, at any of any number of looks, is at most α. It
    is the dual of the CS: ``mean`` lies in ``cs_bounded_mean(..., alpha)`` exactly when
    this p-value exceeds alpha (up to the root-finder's last bits). NaN where n = 0.

    Args:
        n: the number of contributions.
        total: Σx.
        total_sq: Σx² (for ``"empirical-bernstein"``).
        low: the smallest possible contribution.
        high: the largest possible contribution.
        mean: the hypothesised mean, in [low, high].
        method: the boundary (as in :func:`cs_bounded_mean`).
        design_variance: the empirical-Bernstein tuning (as in :func:`cs_bounded_mean`).

    Raises:
        ValueError: as :func:`cs_bounded_mean`, or a mean outside [low, high].
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    nn, m, var = _z_stats(n, total, total_sq, low, high, method)
    width = high - low
    mu = (np.asarray(mean, dtype=np.float64) - low) / width
    if np.any((mu < 0) | (mu > 1)):
        raise ValueError(f"mean must lie in [{low!r}, {high!r}]")
    dv = (width * width / 4.0) if design_variance is None else float(design_variance)
    log_m = _log_m(method, nn, m, var, mu, np.asarray(dv / (width * width)))
    with np.errstate(over="ignore"):
        p_values = np.minimum(1.0, np.exp(-log_m))
    return _out(np.where(nn > 0, p_values, np.nan))


def frequency_cs(
    mechanism: FrequencyOracle,
    n: Any,
    support: Any,
    alpha: float = 0.05,
    *,
    reports_per_device: float = 1,
    clip: bool = False,
) -> tuple[Any, Any]:
    """Confidence sequences for frequencies f(v) from the support counts C(v) and n.

    The beta-binomial mixture for the Bernoulli mean μ = q* + f(p* − q*) of "a report
    supports v", mapped to f = (μ − q*)/(p* − q*); exact for the 0/1 support indicator of
    every frequency oracle (with local hashing's q* exact, as the SDK computes it).

    **Guarantee.** With probability ≥ 1 − α, f(v) lies in the interval at every n at once
    (every look, any stopping rule), for each v separately (a Bonferroni α/k gives all k
    at once), provided the reports are independent draws from one population: one report
    per device in the counted window, devices sampled at random, their order independent
    of their values.

    Devices that send several reports (memoized metrics, or one value reported again and
    again) make the counts dependent and void that guarantee (the tests: 10 identical
    reports per device, ever-miss 99 %). Pass ``reports_per_device=r``, an upper bound on
    any device's reports in the window (the budget gives one: reports per period ×
    periods). The same mixture is then taken over n/r "device units" with sum C/r: a
    device with r_i ≤ r reports, T_i of them supporting v, contributes the factor
    (θ/μ)^(T_i/r)·((1−θ)/(1−μ))^((r_i−T_i)/r), whose expectation is at most 1 (convex
    in T_i, so at most the two-point law's; then Jensen for the power r_i/r ≤ 1) when
    devices are i.i.d. and r_i does not depend on the device's value. That proves the
    guarantee at looks where every counted device has all its reports counted; a look
    that splits a device's reports is not covered by the proof (the tests check the
    aligned case). The price is a factor ≈ √r in width.

    Args:
        mechanism: the frequency oracle every report was made with (its ``p``, ``q``).
        n: the number of reports (scalar; or an array broadcasting with ``support``).
        support: C(v), the reports supporting each value (scalar or array).
        alpha: 1 − the level, in (0, 1).
        reports_per_device: r ≥ 1, the most reports one device contributes to the counts.
        clip: intersect with [0, 1], where every frequency lies: a superset of the true
            frequency's CS ∩ [0, 1], so the guarantee is kept, but an interval wholly
            outside [0, 1] (a count far from any share: on the ≤ α event of a miss, or
            with fake reports) becomes its nearer end point, [0, 0] or [1, 1], a
            zero-width interval that reads as certainty. The default (``False``) returns
            the raw CS in [−q*/(p*−q*), (1−q*)/(p*−q*)], never of zero width.

    Returns:
        (lo, hi) like ``support``; NaN where n = 0.

    Raises:
        ValueError: alpha outside (0, 1), counts outside [0, n], or r < 1.
    """
    r = checked_reports_per_device(reports_per_device)
    nn = np.asarray(n, dtype=np.float64)
    counts = np.asarray(support, dtype=np.float64)
    if np.any(counts < 0) or np.any(counts > nn):
        raise ValueError("support counts must lie in [0, n]")
    mu_lo, mu_hi = cs_bounded_mean(nn / r, counts / r, counts / r, 0.0, 1.0, alpha)
    gap = mechanism.p - mechanism.q
    lo = (np.asarray(mu_lo) - mechanism.q) / gap
    hi = (np.asarray(mu_hi) - mechanism.q) / gap
    if clip:
        lo, hi = np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)
    return _out(lo), _out(hi)


def method_for(mechanism: NumericMechanism) -> Method:
    """The boundary :func:`mean_cs` uses for a numeric mechanism (by measured width).

    Duchi's reports are two-valued (±C), so the beta-binomial mixture is exact for them;
    the piecewise and hybrid mechanisms' reports spread inside [−C, C] with a variance
    well below the two-point worst case, which the empirical-Bernstein mixture exploits.
    """
    two_valued = isinstance(mechanism, DuchiMechanism) or (
        isinstance(mechanism, HybridMechanism) and not mechanism.alpha
    )
    return "bernoulli" if two_valued else "empirical-bernstein"


def mean_cs(
    mechanism_or_bounds: NumericMechanism | tuple[float, float],
    n: int,
    total: float,
    total_sq: float,
    alpha: float = 0.05,
    *,
    value_range: tuple[float, float] | None = None,
    method: Method | None = None,
    clip: bool = False,
) -> tuple[float, float]:
    """A confidence sequence for a numeric metric's mean, from n, Σy and Σy².

    With a :class:`~client_sdk.mechanisms.NumericMechanism`, ``total`` and ``total_sq``
    are the exact integer sums ``NumericStats`` keeps (units of 2⁻³⁰ and 2⁻⁶⁰), every
    report lies in [−C, C] and E[y] is the mean of the values scaled to [−1, 1]; the CS
    is returned in the metric's units when ``value_range`` is given, else scaled. With a
    (low, high) pair, ``total`` and ``total_sq`` are plain sums of contributions in
    [low, high].

    **Guarantee.** With probability ≥ 1 − α the mean lies in the interval at every n at
    once (any number of looks, any stopping rule), when the reports are independent draws
    from one population (one report per device, devices sampled at random in an order
    independent of their values); the mean is that population's.

    Args:
        mechanism_or_bounds: the numeric mechanism every report was made with, or the
            (low, high) bounds of the contributions.
        n: the number of reports.
        total: Σy (units with a mechanism).
        total_sq: Σy² (units² with a mechanism).
        alpha: 1 − the level, in (0, 1).
        value_range: the metric's (low, high), to map the scaled CS into its units.
        method: the boundary; default :func:`method_for` the mechanism, or
            ``"empirical-bernstein"`` for bare bounds.
        clip: intersect with [−1, 1] (a mechanism's mean of scaled values lies there, so
            validity is kept, but a CS wholly outside becomes a zero-width end point; the
            default, ``False``, keeps the raw CS, as the fixed-n interval is kept; ignored
            for bare bounds, already clipped to them).

    Returns:
        (lo, hi); NaN, NaN when n = 0.

    Raises:
        ValueError: as :func:`cs_bounded_mean`.
    """
    if isinstance(mechanism_or_bounds, NumericMechanism):
        lo, hi = mean_cs_many(
            mechanism_or_bounds,
            [n],
            [total],
            [total_sq],
            alpha,
            value_range=value_range,
            method=method,
            clip=clip,
        )
        return float(lo[0]), float(hi[0])
    low, high = mechanism_or_bounds
    lo_b, hi_b = cs_bounded_mean(
        n, total, total_sq, low, high, alpha, method=method or "empirical-bernstein"
    )
    return float(lo_b), float(hi_b)


def mean_cs_many(
    mechanism: NumericMechanism,
    n: Sequence[int],
    total: Sequence[float],
    total_sq: Sequence[float],
    alpha: float = 0.05,
    *,
    value_range: tuple[float, float] | None = None,
    method: Method | None = None,
    clip: bool = False,
) -> tuple[FloatArray, FloatArray]:
    """:func:`mean_cs` of many windows at once (a trend's): each window's exact sums
    turned into floats as there, then one root-finding pass over the arrays. Within the
    root finder's tolerance of each window's own call (its sums of mixture terms run
    over an array, in another order: float rounding).

    Raises:
        ValueError: as :func:`mean_cs`.
    """
    k = mechanism.bound_units
    size = len(n)
    m, var = np.full(size, np.nan), np.full(size, np.nan)
    for i, (count, t, sq) in enumerate(zip(n, total, total_sq, strict=True)):
        if count < 0:
            raise ValueError(f"n must be non-negative, got {count}")
        if count and not -count * k <= t <= count * k:
            raise ValueError("total must lie in [−n·C, n·C] (units)")
        if count:
            # exact integers → floats once: the mean and n²σ̂² without cancellation
            m[i] = (int(t) + count * k) / (2 * count * k)
            var[i] = max(count * int(sq) - int(t) ** 2, 0) / (2.0 * count * k) ** 2
    var = np.minimum(var, m * (1 - m))
    chosen = method or method_for(mechanism)
    design = np.asarray(mechanism.worst_case_variance() / (2 * mechanism.bound) ** 2)
    lo_z, hi_z = _cs_z(np.asarray(n, dtype=np.float64), m, var, alpha, chosen, design)
    c = mechanism.bound
    lo, hi = -c + 2 * c * lo_z, -c + 2 * c * hi_z
    if clip:
        lo, hi = np.clip(lo, -1.0, 1.0), np.clip(hi, -1.0, 1.0)
    if value_range is not None:
        a, b = value_range
        half = (b - a) / 2
        lo, hi = a + (lo + 1) * half, a + (hi + 1) * half
    return np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)

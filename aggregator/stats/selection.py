"""Selection-adjusted estimates and intervals of values found *because* they looked large.

**The problem.** Discovery (:mod:`aggregator.stats.discovery`) calls a string value
present when its one-sided test statistic clears the Benjamini–Hochberg cutoff, and then
reports an estimate made from the same reports. Among the values called present, those
near the cutoff were selected because their noise came out positive, so the plain
interval f̂ ± z·σ covers their truth less often than its level says (the winner's curse):
0.80 at ε = 8, n = 10⁵ (docs/benchmarks/quality.md, "String metrics"), where many
values sit near the threshold. A value that is absent but called present (at most the
false discovery rate's share of them) is never covered by a plain interval at all.

**The conditional law.** Let X ~ N(μ, σ²) be the reported estimate and let the value be
selected when X ≥ a, a known truncation point. Given selection, X has the truncated
normal law, whose distribution function

    F_μ(x) = Pr_μ[X ≤ x | X ≥ a] = 1 − Φ̄((x − μ)/σ) / Φ̄((a − μ)/σ)      (x ≥ a)

(Φ̄ the normal upper tail) is, at the observed x, continuous and strictly decreasing in
μ. So F_μ(X) is uniform given selection, and inverting it gives an interval that covers
μ with probability exactly 1 − γ *conditionally on being selected* — hence also over the
selected values: the pivot of Lee, Sun, Sun & Taylor (2016) with one truncation point,
the conditional inference of Zhong & Prentice (2008):

    low:  F_low(x)  = 1 − γ/2        high:  F_high(x) = γ/2        point: F_μ̂(x) = ½

μ̂ is the conditional median-unbiased estimate (Pr[μ̂ ≤ μ | selected] = ½; Zhong &
Prentice maximise the conditional likelihood instead, the median-unbiased one comes from
the same pivot and always lies inside the interval); far above the cutoff (a − x ≪ −σ) F_μ
→ Φ((x − μ)/σ) and all three are the plain ones (up to σ(μ), below). A frequency is ≥ 0,
so the interval and estimate are intersected with [0, ∞): no coverage is lost (the truth
is ≥ 0), and the interval of a value barely over the cutoff, whose pivot alone would reach
far below 0, ends at 0 (conditionally, such a value is about as likely absent as present).
Weinstein, Fithian & Benjamini (2013) construct shorter intervals for the *two-sided*
selection |X| ≥ c; discovery's selection is one-sided.

**At the cutoff.** Equal tails at every μ fail where x sits just above a: for every
μ ≥ 0 the truncated law piles up at a, F_μ(x) ≈ (x − a)·(its density at a) is below γ/2,
every μ ≥ 0 is rejected, and the interval collapses to [0, 0] (seen: a real word of
0.066 % reported as [0, 5·10⁻⁶]). At and below the cutoff the conditional law is close to
an exponential from a, whose lower tail is a sliver next to a that says nothing against
μ. So the acceptance region of each μ is chosen by μ alone, which keeps the conditional
coverage at every μ (the Neyman construction; choosing by x instead is Feldman &
Cousins's "flip-flopping", which loses it): the upper tail alone, {F_μ(X) ≤ 1 − γ/2},
for μ ≤ a, equal tails above. The μ accepted form [μ_{1−γ/2}, max(a, μ_{γ/2})] (μ_t: the
root of F_μ(x) = t): the equal-tailed interval with its upper end raised to the cutoff
if it fell below. It is never empty, always holds the estimate, reads [0, a] for a value
just over the cutoff ("at most about the cutoff", which is what such an observation
says), and covers with probability 1 − γ/2 at μ ≤ a (an absent value included), 1 − γ
above. An interval of no width could only come from a ≤ 0 with x at it; it is reported
as NaN (not shown).

**Which σ.** A GRR cell's variance is linear in its frequency (π = q* + (p* − q*)·F), and
at a few reports per cell it grows several-fold between F = 0 and the F of a value near
the threshold (σ 4× at ε = 7, 30,000 users, 8-byte values); a pivot with σ fixed at the
plug-in σ(x) would be far too wide near μ = 0. So σ(μ)² = V₀ + (V̂ − V₀)·μ/x, linear
between the variance at 0 (V₀: the model's at f = 0, from what the value's own cells hold
besides it, :meth:`~aggregator.stats.strings.SketchEstimator.reduce`; the test, the exact
salt null, has no σ to lend) and the plug-in V̂ at x; F_μ(x) still decreases in μ (both
the standardized distance and the standardized gap x − a shrink as σ grows), so the roots
are unique. Measured on 10 populations per row (docs/benchmarks/quality.md): fixed σ(x)
covered 0.987 at ε = 8, n = 10⁵, the linear σ(μ) 0.961.

**Which truncation point.** With the other values' p-values fixed, Benjamini–Hochberg
calls value i present exactly when p_i ≤ α·R/T, R the number of values called present
and T the number tested (raising p_i to just below that cutoff changes no one else's
verdict). Its p-value is the larger of two: the exact salt null's of the statistic
T_i (:func:`~aggregator.stats.discovery.salt_null`: its cells' residuals weighted by the
inverse of their variance, against the table with the strongly found values taken out,
the same table the reported X reads) and a Poisson tail of its support count S. So
selection is T_i ≥ t_cut, the salt null's (1 − α·R/T) quantile, and S ≥ s_min. T_i grows
by its slope per unit of frequency, so T_i/slope is an estimate of the same frequency
from the same counts with other row weights; it differs from X by D = T_i/slope − X, and
conditioning on D as well (Lee et al.: inference conditional on the part of the
selection statistic that is not the estimate; exact when D is independent of X, close
when the weights are near-equal, as away from heavy cells) selection is X ≥ a with

    a = X − (T_i − t_cut)/slope

i.e. the reported estimate minus the margin by which the test cleared its cutoff
(:meth:`~aggregator.stats.discovery.SaltNull.margin`). X is κ·S plus a constant, so
S ≥ s_min is a bound on X too, and a is the larger of the two
(:func:`aggregator.stats.discovery._truncation`).

**Where it stops.** The law of X given μ is taken as normal. For a value that is absent
this needs the null to be normal in its tail too; where the sketch has few rows and few
reports per cell (ε ≥ 7 with short values) absent values collide with unfound heavy ones
more often than that, Benjamini–Hochberg's share of false discoveries exceeds α (a
quarter of the values found at ε = 7, 30,000 users, 8 bytes) and their adjusted intervals
cover 0 less often than the level says (0.90 overall there).

References:
    J. D. Lee, D. L. Sun, Y. Sun, J. E. Taylor, "Exact post-selection inference, with
    application to the lasso", Annals of Statistics 44(3), 2016.
    H. Zhong, R. L. Prentice, "Bias-reduced estimators and confidence intervals for odds
    ratios in genome-wide association studies", Biostatistics 9(4), 2008.
    A. Weinstein, W. Fithian, Y. Benjamini, "Selection adjusted confidence intervals with
    more power to determine the sign", JASA 108(501), 2013.
    Y. Benjamini, D. Yekutieli, "False discovery rate-adjusted multiple confidence
    intervals for selected parameters", JASA 100(469), 2005.
    G. J. Feldman, R. D. Cousins, "Unified approach to the classical statistical analysis
    of small signals", Physical Review D 57(7), 1998 (acceptance regions chosen per
    parameter value near a physical boundary).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

__all__ = ["Adjusted", "log_normal_sf", "selection_adjusted", "truncated_cdf"]

ASYMPTOTIC_Z = 30.0
"""From here on log Φ̄(z) is the Mills-ratio expansion (erfc underflows near z = 38); its
first omitted term is 105/z⁸ < 2·10⁻¹⁰ of the value."""

PLAIN_BEYOND = 8.0
"""Where the truncation point is this many σ below even the plain interval's low end
((a − x)/σ + z < −8), Φ̄((a − μ)/σ) = 1 to double precision over the whole search range
and the selection changes nothing: the plain f̂ ± z·σ(f̂) is returned (clipped to ≥ 0),
so such a value reads the same whether it was discovered or asked for. (Nearer, the
answer also differs from it by σ(μ) varying along the interval, as a score interval's.)"""

BISECTIONS = 64
"""Halvings of [0, x + z·σ]: 2⁻⁶⁴ of it, below a double's resolution."""

_erfc = np.vectorize(math.erfc, otypes=[float])


def log_normal_sf(z: np.ndarray) -> np.ndarray:
    """log Φ̄(z) = log Pr[Z ≥ z], elementwise, without underflow for large z."""
    z = np.asarray(z, dtype=float)
    out = np.empty(z.shape)
    small = z < ASYMPTOTIC_Z
    with np.errstate(divide="ignore"):
        out[small] = np.log(0.5 * _erfc(z[small] / math.sqrt(2.0)))
    big = z[~small]
    inv = 1.0 / (big * big)
    out[~small] = (
        -0.5 * big * big
        - np.log(big * math.sqrt(2 * math.pi))
        + np.log1p(-inv + 3 * inv**2 - 15 * inv**3)
    )
    return out


def truncated_cdf(x: np.ndarray, mu: np.ndarray, sigma: np.ndarray, a: np.ndarray) -> np.ndarray:
    """F_μ(x) = Pr[X ≤ x | X ≥ a] for X ~ N(μ, σ²), x ≥ a (see the module's docstring)."""
    num = log_normal_sf((x - mu) / sigma)
    den = log_normal_sf((a - mu) / sigma)
    return np.asarray(-np.expm1(np.minimum(num - den, 0.0)))


@dataclass(frozen=True)
class Spread:
    """σ(μ) of N estimates: σ² = V₀ + slope·μ, linear in the frequency like the cells' GRR
    variance (module docstring)."""

    null: np.ndarray
    slope: np.ndarray

    def at(self, mu: np.ndarray) -> np.ndarray:
        """σ at each μ (negative μ read as 0)."""
        return np.sqrt(self.null + self.slope * np.maximum(mu, 0.0))


@dataclass(frozen=True)
class Adjusted:
    """Selection-adjusted point estimates and interval ends of N values."""

    frequency: np.ndarray
    low: np.ndarray
    high: np.ndarray


def _solve(
    x: np.ndarray, spread: Spread, a: np.ndarray, target: float, top: np.ndarray
) -> np.ndarray:
    """The μ in [0, top] with F_μ(x) = target (F decreases in μ); 0 if F_0(x) ≤ target."""
    lo, hi = np.zeros_like(x), top.copy()
    for _ in range(BISECTIONS):
        mid = 0.5 * (lo + hi)
        above = truncated_cdf(x, mid, spread.at(mid), a) > target
        lo = np.where(above, mid, lo)
        hi = np.where(above, hi, mid)
    # The bound μ ≥ 0 binds exactly, not at 2⁻⁶⁴ above it (a truth of 0 is then inside).
    zero = np.zeros_like(x)
    at_zero = truncated_cdf(x, zero, spread.at(zero), a)
    return np.where(at_zero <= target, 0.0, 0.5 * (lo + hi))


def selection_adjusted(
    x: np.ndarray,
    variance: np.ndarray,
    null_variance: np.ndarray,
    a: np.ndarray,
    confidence: float,
) -> Adjusted:
    """The conditional median-unbiased estimate and interval of μ ≥ 0 from X = x ~
    N(μ, σ(μ)²) observed given X ≥ a (module docstring: equal-tailed above a, upper tail
    only at and below it).

    Args:
        x: the reported estimates.
        variance: their variances at μ = x (the plug-in ones the plain interval uses).
        null_variance: their variances at μ = 0; between the two, σ(μ)² is linear in μ.
        a: their truncation points (clipped to ≤ x: a test that cleared its cutoff by a
            negative normal margin was selected on its Poisson tail, see above).
        confidence: 1 − γ.
    """
    x = np.asarray(x, dtype=float)
    var = np.asarray(variance, dtype=float)
    v0 = np.minimum(np.asarray(null_variance, dtype=float), var)
    a = np.minimum(np.asarray(a, dtype=float), x)
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    good = np.isfinite(x) & np.isfinite(var) & (v0 > 0) & np.isfinite(v0) & np.isfinite(a)
    out = {k: np.full(x.shape, np.nan) for k in ("frequency", "low", "high")}
    with np.errstate(invalid="ignore", divide="ignore"):
        sigma = np.sqrt(var)
        plain = good & ((a - x) / sigma + z < -PLAIN_BEYOND)
        slope = np.where(x > 0, (var - v0) / x, 0.0)
    out["frequency"][plain] = np.maximum(x[plain], 0.0)
    out["low"][plain] = np.maximum(x[plain] - z * sigma[plain], 0.0)
    out["high"][plain] = np.maximum(x[plain] + z * sigma[plain], 0.0)
    good &= ~plain
    if good.any():
        xs, aa = x[good], a[good]
        spread = Spread(v0[good], slope[good])
        # F_μ(x) ≤ Φ((x − μ)/σ(μ)), so every root is below the μ with μ − x = z·σ(μ); the
        # fixed-point steps from x reach it from below (σ is concave), and the factor 2
        # leaves room.
        top = np.maximum(xs, 0.0)
        for _ in range(4):
            top = np.maximum(xs + z * spread.at(top), 0.0)
        top = 2 * top
        gamma = 1 - confidence
        roots = {
            key: _solve(xs, spread, aa, target, top)
            for key, target in (("frequency", 0.5), ("low", 1 - gamma / 2), ("high", gamma / 2))
        }
        # Each μ's acceptance region is chosen by μ alone (module docstring, "At the
        # cutoff"): {F_μ(X) ≤ 1 − γ/2} for μ ≤ a, equal tails above. The μ it accepts
        # are [μ_{1−γ/2}, max(a, μ_{γ/2})].
        low = roots["low"]
        high = np.maximum(roots["high"], np.maximum(aa, 0.0))
        # An interval of no width holds no plausible value (a ≤ 0 and x at it): not shown.
        shown = high > low
        out["frequency"][good] = roots["frequency"]
        out["low"][good] = np.where(shown, low, np.nan)
        out["high"][good] = np.where(shown, high, np.nan)
    return Adjusted(out["frequency"], out["low"], out["high"])

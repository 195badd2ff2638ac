"""Selection-adjusted estimates and intervals of values found *because* they looked large.

In full: ``docs/statistics/selection.md``.
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

"""Flags that say what the interval beside them says, in every multiplicity mode.

A value is flagged "distinguishable from zero" exactly when 0 lies outside the interval
shown beside it, and its p-value is that interval's dual: at the level ``level`` each
interval is read at, p ≤ 1 − level ⇔ flagged ⇔ 0 ∉ [low, high]. The mode says which
level that is: ``each`` (every interval and flag at 1 − α, for that value alone),
``simultaneous`` (1 − α/k: all together, Bonferroni) or ``fdr`` (Benjamini–Hochberg
flags R values at false discovery rate α; every interval is read at 1 − R·α/k, the
false-coverage-rate level of Benjamini & Yekutieli, where BH's flags are exactly the
intervals that miss 0). A confidence sequence is read the same way with its own
anytime-valid p-values (``fdr``: e-BH, valid at any look).

In full: ``docs/statistics/intervals.md`` (Flags and intervals).

References:
    Y. Benjamini, D. Yekutieli. "False discovery rate-adjusted multiple confidence
    intervals for selected parameters". JASA 100 (2005), Definition 1 and Theorem 1.
    R. Wang, A. Ramdas. "False discovery rate control with e-values". JRSS-B 84 (2022).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from aggregator.stats.arrays import FloatArray
from aggregator.stats.intervals import benjamini_hochberg, checked_choice

__all__ = [
    "EACH",
    "FDR",
    "MULTIPLICITIES",
    "SIMULTANEOUS",
    "ZeroRead",
    "bisect_dual",
    "check_multiplicity",
    "multiplicity_of",
    "outside_zero",
    "read_at_level",
    "strictest_alpha",
]


EACH = "each"
"""Each interval at 1 − α, each flag the test of that value alone (the default)."""
FDR = "fdr"
"""Flags by Benjamini–Hochberg at false discovery rate α; intervals at 1 − R·α/k."""
SIMULTANEOUS = "simultaneous"
"""All k intervals together at 1 − α (Bonferroni: each at 1 − α/k); flags read them."""
MULTIPLICITIES = (EACH, FDR, SIMULTANEOUS)

IntervalsAt = Callable[[float], tuple[FloatArray, FloatArray]]
"""The intervals of every value at one per-interval α: (low, high)."""

DUAL_STEPS = 64
"""Bisection steps on log α for a dual p-value with no closed form: the bracket starts
at [10⁻³⁰⁰, 1] (690 in log) and ends 690/2⁶⁴ ≈ 4·10⁻¹⁷ wide, below a float's rounding."""


def check_multiplicity(mode: str) -> str:
    """``mode`` if it is one of :data:`MULTIPLICITIES` (else ValueError naming them)."""
    allowed = f"one of {', '.join(MULTIPLICITIES)}"
    return checked_choice("multiplicity", mode, MULTIPLICITIES, allowed)


def multiplicity_of(simultaneous: bool, multiplicity: str | None) -> str:
    """The mode asked for: ``multiplicity``, or :data:`SIMULTANEOUS` for the older
    ``simultaneous=True`` (:data:`EACH` without either).

    Raises:
        ValueError: an unknown mode, or ``simultaneous=True`` with another mode.
    """
    if multiplicity is None:
        return SIMULTANEOUS if simultaneous else EACH
    mode = check_multiplicity(multiplicity)
    if simultaneous and mode != SIMULTANEOUS:
        raise ValueError(f"simultaneous=True contradicts multiplicity={mode!r}")
    return mode


def strictest_alpha(alpha: float, k: int, mode: str) -> float:
    """The smallest per-interval α the mode can read (α, or α/k): the level an answer
    chooses its interval method at, so that every level it reads is built alike."""
    return alpha if check_multiplicity(mode) == EACH else alpha / k


def _shown_alpha(p_values: FloatArray, alpha: float, mode: str) -> float:
    """The per-interval α the mode shows: α, α/k, or max(R, 1)·α/k with R the
    Benjamini–Hochberg rejections at α (R = 0: the Bonferroni level, where every
    p-value above it keeps 0 inside)."""
    k = max(len(p_values), 1)
    if mode == EACH:
        return alpha
    if mode == SIMULTANEOUS:
        return alpha / k
    found = int(benjamini_hochberg(p_values, alpha).sum())
    return max(found, 1) * alpha / k


def bisect_dual(holds_zero: Callable[[FloatArray], np.ndarray], size: int) -> FloatArray:
    """The least α at which each value's interval misses 0 (1 if it never does), for an
    interval family without a closed-form dual, by bisection on log α.

    Args:
        holds_zero: for one α per value, whether each value's interval at 1 − α holds 0
            (it must widen as α falls).
        size: how many values.
    """
    inside = np.full(size, np.log(1e-300))  # log α where the interval holds 0
    outside = np.zeros(size)  # log α where it misses 0 (if it ever does)
    never = np.asarray(holds_zero(np.ones(size)), dtype=bool)
    for _ in range(DUAL_STEPS):
        mid = (inside + outside) / 2
        holds = np.asarray(holds_zero(np.exp(mid)), dtype=bool)
        inside = np.where(holds, mid, inside)
        outside = np.where(holds, outside, mid)
    return np.asarray(np.where(never, 1.0, np.exp(outside)), dtype=np.float64)


def outside_zero(low: npt.ArrayLike, high: npt.ArrayLike) -> np.ndarray:
    """0 ∉ [low, high] (False where an end is NaN: no reports, no flag)."""
    lo, hi = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
    return np.asarray((lo > 0) | (hi < 0), dtype=bool)


@dataclass(frozen=True)
class ZeroRead:
    """Intervals read at one level with the flags and p-values they imply.

    ``flags`` is exactly ``0 ∉ [low, high]``; ``p_values`` ≤ 1 − ``level`` exactly where a
    value is flagged.
    """

    low: FloatArray
    high: FloatArray
    p_values: FloatArray
    flags: np.ndarray
    level: float
    """The confidence of each interval (1 − the per-interval α)."""


def read_at_level(
    p_values: npt.ArrayLike, alpha: float, mode: str, intervals_at: IntervalsAt
) -> ZeroRead:
    """Read intervals at the mode's level, so that they and the flags agree.

    Args:
        p_values: each value's two-sided p-value of f = 0, at least the dual of
            ``intervals_at``'s interval (an exact test of f = 0 may raise it).
        alpha: 1 − the confidence (the FDR in :data:`FDR` mode).
        mode: one of :data:`MULTIPLICITIES`.
        intervals_at: every value's interval at a per-interval α.

    Returns:
        The intervals, each made to reach 0 where its p-value exceeds the level's α (the
        exact test could not reject f = 0 there: the interval only grows), the flags
        0 ∉ interval, and the p-values, each nudged across the level's α in the sliver
        where rounding or a root finder's last bits put it on the other side of its
        interval.
    """
    zero_p = np.asarray(p_values, dtype=np.float64)
    a = _shown_alpha(zero_p, alpha, check_multiplicity(mode))
    low, high = (np.asarray(x, dtype=np.float64).copy() for x in intervals_at(a))
    keep = zero_p > a
    low[keep] = np.minimum(low[keep], 0.0)
    high[keep] = np.maximum(high[keep], 0.0)
    flags = outside_zero(low, high)
    shown = np.where(~flags & (zero_p <= a), np.nextafter(a, 1.0), zero_p)
    shown = np.where(np.isnan(low), np.nan, shown)
    return ZeroRead(low=low, high=high, p_values=shown, flags=flags, level=1.0 - a)

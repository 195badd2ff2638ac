"""``ldp plan --kind distribution``: the users a quantile's interval of a given half-width
needs, or the half-width a number of users buys, for the hierarchical histogram (auto's
tree) or HaarHRR.

Both are read off the very estimator a window uses, fed the counters a uniform
distribution is expected to give at a reference n; the standard error scales as 1/√n.
In full: ``docs/statistics/distributions.md`` ("Planning").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from aggregator.stats.distribution import DistributionEstimate
from aggregator.stats.distribution_haar import HaarEstimate
from client_sdk.mechanisms.distribution import choose_distribution
from client_sdk.mechanisms.haar import HaarHRR

__all__ = ["PLAN_MECHANISMS", "PLAN_REFERENCE", "QuantilePlan", "plan_quantile"]

PLAN_MECHANISMS = ("auto", "hh", "haar")
"""What a plan is for: auto's hierarchical histogram (``hh`` the same), or HaarHRR."""

PLAN_REFERENCE = 1 << 20
"""Reports per level whose expected counters the plan's standard error is computed at (a
power of two: HaarHRR's expected counts by row are then whole); it scales as 1/√n (both
parts of the variance are ∝ 1/n)."""


@dataclass(frozen=True)
class QuantilePlan:
    """What ``ldp plan --kind distribution`` prints: a quantile's half-width as a share of
    the range, and the users it takes, for a uniform distribution (docs, "Planning")."""

    epsilon: float
    bins: int
    mechanism: str
    """``hh`` or ``haar``."""
    branching: int
    """The tree's B (2 for HaarHRR's binary tree)."""
    p: float
    users: int
    half_width: float
    """Of the quantile's interval, as a share of the range (a uniform distribution)."""
    band_critical: float


def _reference(
    epsilon: float, bins: int, mechanism: str, confidence: float
) -> tuple[DistributionEstimate, int, int]:
    """The estimate of a uniform window at the reference n, that n, and the tree's B."""
    h = bins.bit_length() - 1
    if mechanism == "haar":
        haar = HaarHRR(epsilon, bins)
        counters = np.zeros(haar.counters, dtype=np.int64)
        counters[:h] = PLAN_REFERENCE
        for level in range(h):
            size, start = 1 << level, haar.offsets[level]
            counters[start : start + size] = PLAN_REFERENCE // size
            # uniform: every coefficient 0, each bit ±1 alike whatever the row
            counters[start + size : start + 2 * size] = PLAN_REFERENCE // size // 2
        edges = np.linspace(0.0, 1.0, bins + 1)
        return HaarEstimate(haar, edges, counters[:h], counters, confidence), h * PLAN_REFERENCE, 2
    m = choose_distribution(epsilon, bins).mechanism
    h = m.height
    expected = np.zeros(m.counters)
    expected[:h] = PLAN_REFERENCE
    for i, o in enumerate(m.oracles):
        size = m.level_size(i + 1)
        share = 1.0 / size
        start = m.offsets[i]
        expected[start : start + size] = PLAN_REFERENCE * (share * o.p + (1 - share) * o.q)
    tree = DistributionEstimate(
        m, np.linspace(0.0, 1.0, bins + 1), expected[:h].astype(np.int64), expected, confidence
    )
    return tree, h * PLAN_REFERENCE, m.branching


def plan_quantile(
    epsilon: float,
    bins: int,
    *,
    users: int | None = None,
    width: float | None = None,
    p: float = 0.95,
    confidence: float = 0.95,
    mechanism: str = "auto",
) -> QuantilePlan:
    """The half-width of the p-quantile's interval for ``users``, or the users for a
    half-width ``width`` (a share of the range).

    For a uniform distribution the quantile interval's half-width in the range's units is
    the CDF band's c·se at the quantile (the CDF's slope is 1 per range), plus half a bin
    for the band's edges; a density d times the uniform's divides it by d.

    Args:
        mechanism: ``auto``/``hh`` (the tree auto picks) or ``haar`` (HaarHRR).

    Raises:
        ValueError: neither or both of users and width, a width a bin cannot reach, an
            unknown mechanism, ε or bins out of range.
    """
    if (users is None) == (width is None):
        raise ValueError("give exactly one of users and width")
    if mechanism not in PLAN_MECHANISMS:
        raise ValueError(f"mechanism {mechanism!r}: one of {', '.join(PLAN_MECHANISMS)}")
    est, n0, branching = _reference(epsilon, bins, mechanism, confidence)
    name = "haar" if mechanism == "haar" else "hh"
    edge = min(bins - 1, max(1, round(p * bins)))
    se0 = math.sqrt(float(est.interval_variances([0], [edge])[0]))
    c = est.band_critical
    half_bin = 0.5 / bins
    if users is not None:
        half = c * se0 * math.sqrt(n0 / users) + half_bin
        return QuantilePlan(epsilon, bins, name, branching, p, users, half, c)
    assert width is not None
    if width <= half_bin:
        raise ValueError(
            f"±{width:g} of the range is finer than half a bin (1/{2 * bins}): more bins"
        )
    needed = math.ceil(n0 * (c * se0 / (width - half_bin)) ** 2)
    return QuantilePlan(epsilon, bins, name, branching, p, needed, width, c)

"""Sequential alert tests: does an estimate cross a level, or move from its baseline?

Every alert rule is a test an operator may look at after every batch, forever. Each
decision is read off the anytime-valid p-values of :mod:`aggregator.stats.anytime`, so the
chance that a rule *ever* fires while its hypothesis holds is at most α however many
looks are taken; a fixed-n test re-run at every look has no such bound. A change against
a baseline is a union bound over two confidence sequences at α/2 each. Pure functions
over sufficient statistics (scalars or numpy arrays), vectorized for simulation.

In full: ``docs/guides/alerts.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from aggregator.stats.anytime import Method, anytime_p_value, cs_bounded_mean, method_for
from aggregator.stats.arrays import FloatArray
from client_sdk.mechanisms import FrequencyOracle, NumericMechanism

__all__ = [
    "MAX_DELAY_REPORTS",
    "Observable",
    "change_fires",
    "expected_delay",
    "interval",
    "level_fires",
]


MAX_DELAY_REPORTS = 10**12
"""The largest detection delay :func:`expected_delay` reports; beyond it, "never" (the
search doubles n up to here: an effect that needs more reports is not one to alert on)."""


@dataclass(frozen=True)
class Observable:
    """What one report contributes to a test: a bounded number whose mean maps onto the
    estimand by ``estimand = offset + slope · mean`` (slope > 0).

    A frequency f(v) is tested through the 0/1 indicator "the report supports v", whose
    mean is q* + f(p* − q*); a numeric mean through the report y ∈ [−C, C], whose mean is
    the value scaled to [−1, 1].
    """

    low: float
    high: float
    method: Method
    offset: float
    slope: float
    design_variance: float | None = None

    @classmethod
    def of_share(cls, mechanism: FrequencyOracle) -> Observable:
        """The support indicator of a frequency oracle (beta-binomial mixture: exact)."""
        gap = mechanism.p - mechanism.q
        return cls(0.0, 1.0, "bernoulli", -mechanism.q / gap, 1.0 / gap)

    @classmethod
    def of_mean(
        cls, mechanism: NumericMechanism, value_range: tuple[float, float] | None
    ) -> Observable:
        """A numeric mechanism's reports, the estimand in the metric's units (or scaled)."""
        a, b = value_range if value_range is not None else (-1.0, 1.0)
        half = (b - a) / 2
        c = mechanism.bound
        return cls(-c, c, method_for(mechanism), a + half, half, mechanism.worst_case_variance())

    def mean_of(self, estimand: Any) -> Any:
        """The report mean that corresponds to an estimand value."""
        return (np.asarray(estimand, dtype=np.float64) - self.offset) / self.slope

    def estimand_of(self, mean: Any) -> Any:
        """The estimand value of a report mean."""
        return self.offset + self.slope * np.asarray(mean, dtype=np.float64)


def _p(obs: Observable, n: Any, total: Any, total_sq: Any, mean: Any) -> FloatArray:
    """The anytime p-value of "the report mean is ``mean``" (1 where it lies outside the
    reports' range: such a mean is impossible, and the caller's test then cannot fire)."""
    mu = np.asarray(mean, dtype=np.float64)
    inside = (mu > obs.low) & (mu < obs.high)
    safe = np.where(inside, mu, (obs.low + obs.high) / 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        p_values = anytime_p_value(
            n,
            total,
            total_sq,
            obs.low,
            obs.high,
            safe,
            method=obs.method,
            design_variance=obs.design_variance,
        )
    return np.where(inside & (np.asarray(n) > 0), p_values, 1.0)


def level_fires(
    obs: Observable, n: Any, total: Any, total_sq: Any, level: float, above: bool, alpha: float
) -> Any:
    """Whether the estimand is shown to lie above (below) ``level``.

    Fires when the confidence sequence at ``alpha`` lies wholly on that side of the level:
    the anytime p-value of "the estimand is the level" is at most α and the estimate is
    beyond it. **Guarantee**: while the estimand is the level or on the other side, the
    chance of firing at any of any number of looks is at most α (:func:`~aggregator.stats.
    anytime.anytime_p_value`; a mean further from the side only lowers it).

    Args:
        obs: what a report contributes.
        n: reports since the rule was armed (scalar or array).
        total: their sum.
        total_sq: their sum of squares (for the empirical-Bernstein boundary).
        level: the level, in the estimand's units.
        above: test "above" (else "below").
        alpha: the false-alarm probability, in (0, 1).

    Returns:
        A bool (array for array inputs).
    """
    mu = float(obs.mean_of(level))
    nn = np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        m = np.asarray(total, dtype=np.float64) / nn
    beyond = (m > mu) if above else (m < mu)
    fired = beyond & (_p(obs, nn, total, total_sq, mu) <= alpha)
    return bool(fired) if np.ndim(fired) == 0 else fired


def change_fires(
    obs: Observable,
    current: tuple[Any, Any, Any],
    baseline_interval: tuple[float, float],
    min_change: float,
    alpha: float,
) -> Any:
    """Whether the estimand now differs from its baseline by more than ``min_change``.

    ``baseline_interval`` is the baseline's confidence interval at α/2 in *report-mean*
    units (:func:`interval` of the baseline sums at ``alpha / 2``: a confidence sequence
    read once); the current reports' confidence sequence at α/2 must lie wholly above
    hi + δ or below lo − δ (δ = ``min_change`` in report-mean units). **Guarantee**: when
    the two estimands differ by at most ``min_change``, firing at any look needs one of
    the two intervals to miss its estimand, which has probability at most α/2 + α/2 = α
    (a union bound; the samples need not even be independent).

    Args:
        obs: what a report contributes.
        current: (n, Σ, Σ²) of the reports since the rule was armed.
        baseline_interval: the baseline's (lo, hi) report-mean interval at α/2.
        min_change: the smallest change worth an alert, in estimand units (≥ 0).
        alpha: the false-alarm probability, in (0, 1).
    """
    n, total, total_sq = current
    delta = min_change / obs.slope
    up, down = baseline_interval[1] + delta, baseline_interval[0] - delta
    nn = np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        m = np.asarray(total, dtype=np.float64) / nn
    half = alpha / 2
    fired = ((m > up) & (_p(obs, nn, total, total_sq, up) <= half)) | (
        (m < down) & (_p(obs, nn, total, total_sq, down) <= half)
    )
    return bool(fired) if np.ndim(fired) == 0 else fired


def interval(obs: Observable, n: int, total: float, total_sq: float, alpha: float) -> tuple:
    """The confidence sequence of the report mean at ``alpha`` (NaNs without reports)."""
    if n <= 0:
        return math.nan, math.nan
    lo, hi = cs_bounded_mean(
        n,
        total,
        total_sq,
        obs.low,
        obs.high,
        alpha,
        method=obs.method,
        design_variance=obs.design_variance,
    )
    return float(lo), float(hi)


def expected_delay(
    obs: Observable,
    truth: float,
    boundary: float,
    alpha: float,
    variance: float | None = None,
) -> int | None:
    """Reports until a rule fires when its estimand is ``truth`` (the typical delay).

    The least n at which the statistics the truth *expects* (mean exactly at the truth,
    variance ``variance`` or the two-point law's) put ``boundary`` outside the confidence
    sequence at ``alpha``: half of the streams fire near or before it (the estimate is
    beyond its expectation about half the time). Found by doubling n, then bisection.

    Args:
        obs: what a report contributes.
        truth: the estimand's true value.
        boundary: the value the interval must leave behind (a level; for a change, the
            baseline interval's near end ± the minimum change), in estimand units.
        alpha: the level of the test (α for a level rule, α/2 for a change).
        variance: a report's variance, report-mean units; default from the truth as a
            two-valued report in [low, high] would have it (the worst case).

    Returns:
        n, or None when even :data:`MAX_DELAY_REPORTS` would not do.
    """
    mu, edge = float(obs.mean_of(truth)), float(obs.mean_of(boundary))
    if not obs.low < mu < obs.high or mu == edge:
        return None
    var = (obs.high - mu) * (mu - obs.low) if variance is None else variance

    def fires(n: int) -> bool:
        total, total_sq = n * mu, n * (var + mu * mu)
        return bool(level_fires(obs, n, total, total_sq, boundary, mu > edge, alpha))

    lo, hi = 1, 2
    while not fires(hi):
        lo, hi = hi, hi * 2
        if hi > MAX_DELAY_REPORTS:
            return None
    while hi - lo > max(1, lo // 1000):
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fires(mid) else (mid, hi)
    return hi

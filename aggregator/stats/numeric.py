"""Numeric metrics on the server: exact additive sums of the reports, and the mean with a CI.

The sufficient statistics of a set of numeric reports are n, Σy and Σy². Every report is
on the SDK's grid (an integer number of units of 2⁻³⁰, see
``client_sdk.mechanisms.numeric``), so here y is that *integer* and the sums are exact
integers: any order, any batching, any number of workers give the same bits, and the
worker's commit script adds them with ``HINCRBY`` exactly as it adds support counts.

In full: ``docs/statistics/numeric.md``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from operator import countOf, mul
from typing import Any

import numpy as np

from aggregator.stats.anytime import mean_cs
from aggregator.stats.arrays import FloatArray, IntArray
from aggregator.stats.batch import Batch, FastParseCodec, Increments
from aggregator.stats.intervals import check_confidence, json_float, t_value
from client_sdk.mechanisms import (
    DuchiMechanism,
    HybridMechanism,
    NumericMechanism,
    PiecewiseMechanism,
)
from client_sdk.mechanisms.numeric import SCALE
from client_sdk.wire import MetricDefinition
from ldp_store import schema

__all__ = [
    "INTERVAL_METHOD",
    "NumericCodec",
    "NumericEstimate",
    "NumericStats",
    "estimate_mean",
    "mean_interval",
    "min_report_variance",
]


@dataclass(frozen=True)
class NumericStats:
    """Sufficient statistics of numeric reports: n, Σy and Σy², y in integer units.

    Exact and additive: the statistics of two disjoint sets of reports add up.
    """

    n: int
    total: int
    """Σy, in units of 2⁻³⁰."""
    total_sq: int
    """Σy², in units of 2⁻⁶⁰."""

    def __add__(self, other: NumericStats) -> NumericStats:
        return NumericStats(
            self.n + other.n, self.total + other.total, self.total_sq + other.total_sq
        )

    @classmethod
    def zeros(cls) -> NumericStats:
        """No reports yet."""
        return cls(0, 0, 0)

    @classmethod
    def of_units(cls, units: Sequence[int]) -> NumericStats:
        """The statistics of reports given in units (Python ints: exact)."""
        values = [int(u) for u in units]
        return cls(len(values), sum(values), sum(map(mul, values, values)))

    def increments(self) -> Increments:
        """What these statistics add to a window's counts: ``n``, Σy and Σy²."""
        return Increments(self.n, sums=(self.total, self.total_sq))

    @classmethod
    def from_fields(cls, fields: Mapping[bytes, bytes] | Mapping[str, str | int]) -> NumericStats:
        """Rebuild the statistics from a counts hash (``n``, ``s:<i>``, ``s2:<i>``).

        Raises:
            ValueError: a field that a numeric counts hash does not hold (corrupt counts).
        """
        return cls(*schema.numeric_fields(fields))

    @property
    def mean(self) -> float:
        """ȳ in the scaled domain [−1, 1] (NaN without reports)."""
        if not self.n:
            return math.nan
        return float(Fraction(self.total, self.n * SCALE))

    @property
    def sample_variance(self) -> float:
        """s² of the reports in the scaled domain, exact from the integer sums (NaN if n < 2)."""
        n = self.n
        if n < 2:
            return math.nan
        return float(Fraction(n * self.total_sq - self.total**2, n * (n - 1) * SCALE * SCALE))


def _valid_units(m: NumericMechanism, units: IntArray) -> np.ndarray:
    """Which integers (a numpy array) are reports ``m`` can produce: ``m.is_report``, vectorized."""
    if isinstance(m, DuchiMechanism):
        return np.asarray(np.abs(units) == m.bound_units)
    if isinstance(m, PiecewiseMechanism):
        return np.asarray(((units & 1) == 1) & (np.abs(units) < m.cells))
    if isinstance(m, HybridMechanism):
        valid = _valid_units(m.duchi, units)
        return valid | _valid_units(m.pm, units) if m.alpha else valid
    raise TypeError(f"no decoder for {type(m).__name__}")


def _encode(m: NumericMechanism, x: FloatArray, gen: np.random.Generator) -> IntArray:
    """Reports (units) of scaled values ``x``, drawn with numpy (simulation only)."""
    n = len(x)
    if isinstance(m, DuchiMechanism):
        plus = gen.random(n) < m.plus_probability(x)
        return np.where(plus, m.bound_units, -m.bound_units).astype(np.int64)
    if isinstance(m, PiecewiseMechanism):
        start = m.window_start(x)
        first = np.floor(start)
        i = first.astype(np.int64) + (gen.random(n) < start - first)
        low, span = m.window, SCALE + m.window
        inside = gen.random(n) < float(m.keep)
        window = i + gen.integers(0, low, n)
        other = gen.integers(0, span, n)
        other += low * (other >= i)
        return np.asarray(2 * np.where(inside, window, other) + 1 - m.cells, dtype=np.int64)
    if isinstance(m, HybridMechanism):
        duchi = _encode(m.duchi, x, gen)
        if not m.alpha:
            return duchi
        return np.where(gen.random(n) < m.alpha, _encode(m.pm, x, gen), duchi)
    raise TypeError(f"no encoder for {type(m).__name__}")


class NumericCodec(FastParseCodec):
    """The :class:`~aggregator.stats.batch.Codec` of a numeric mechanism: exact sums.

    A parsed :class:`~aggregator.stats.batch.Batch` has one int64 column ``y``: the reports
    in units (|y| < 2⁴⁶, exact).
    """

    def __init__(self, mechanism: NumericMechanism) -> None:
        self.m = mechanism

    def _parse_fast(self, payloads: Sequence[Any]) -> Batch | None:
        if not all(type(p) is dict and len(p) == 1 and "y" in p for p in payloads):
            return None
        ys = [p["y"] for p in payloads]
        if countOf(map(type, ys), float) != len(ys):  # floats only: no int, no bool
            return None
        scaled = np.array(ys, dtype=np.float64) * SCALE  # exact: a power-of-two scaling
        if scaled.size and not (
            np.isfinite(scaled).all()
            and (np.abs(scaled) < 2.0**62).all()
            and (scaled == np.floor(scaled)).all()
        ):
            return None
        units = scaled.astype(np.int64)
        if units.size and not _valid_units(self.m, units).all():
            return None
        return Batch(len(ys), {"y": units})

    def stats(self, batch: Batch) -> NumericStats:
        """n, Σy and Σy² of a parsed batch, exactly (Python ints)."""
        return NumericStats.of_units(batch.columns["y"].tolist())

    def increments(self, batch: Batch) -> Increments:
        """What a parsed batch adds to a window's counts."""
        return self.stats(batch).increments()

    def decode(self, payloads: Sequence[Any]) -> NumericStats:
        """parse + stats."""
        return self.stats(self.parse(payloads))

    def encode(self, x: FloatArray, gen: np.random.Generator) -> Batch:
        """Perturb scaled values in bulk with a numpy generator (simulation only).

        The same discrete law as the SDK's ``perturb``, with the probabilities rounded to
        floats: fine for simulating estimates, never for devices (not a CSPRNG, not exact).
        """
        values = np.asarray(x, dtype=np.float64)
        return Batch(len(values), {"y": _encode(self.m, values, gen)})

    def to_payloads(self, batch: Batch) -> list[dict[str, Any]]:
        """Payload dicts of a batch, as the SDK would have produced them."""
        return [{"y": int(u) / SCALE} for u in batch.columns["y"].tolist()]


INTERVAL_METHOD = (
    "Student t score interval (n − 1 df), the variance floored at the mechanism's least "
    "variance for each hypothesised mean"
)
"""What :func:`estimate_mean`'s interval is, as ``NumericEstimate.interval`` names it."""


def min_report_variance(m: NumericMechanism, mean: float) -> float:
    """The mechanism's least report variance at ``mean``, clipped into [−1, 1] first.

    A hypothesised mean outside the range is judged with the floor at the nearest range
    end (the truth itself is always inside).
    """
    return m.min_variance(min(1.0, max(-1.0, mean)))


def _roots(a: float, b: float, c: float) -> list[float]:
    """Real roots of a·μ² + b·μ + c (numerically stable; a or b may be 0)."""
    if a == 0.0:
        return [] if b == 0.0 else [-c / b]
    disc = b * b - 4.0 * a * c
    if disc < 0.0:
        return []
    half_sum = -0.5 * (b + math.copysign(math.sqrt(disc), b))  # no cancellation
    return [half_sum / a, c / half_sum] if half_sum != 0.0 else [0.0]


def mean_interval(
    m: NumericMechanism, mean: float, variance: float, n: int, confidence: float
) -> tuple[float, float]:
    """The score interval for the mean of the scaled values, from ȳ, s² and n ≥ 2.

    Every μ is kept that a t test with the variance max(s², V(μ)) does not reject, V(μ)
    the least variance a report can have when the inputs' mean is μ
    (:func:`min_report_variance`): |ȳ − μ| ≤ t·√(max(s², V(μ))/n), t the two-sided
    Student quantile with n − 1 degrees of freedom. The kept set is the plug-in interval
    ȳ ± t·s/√n joined with where (ȳ − μ)² ≤ (t²/n)·V(μ), a quadratic inequality on
    [−1, 1] (V(μ) = (A − 1)μ² + B) and a plain one beyond it (V(±1)); returned is the
    smallest interval holding all of it, which always holds ȳ.

    Args:
        m: the mechanism the reports were made with.
        mean: ȳ, the mean of the reports in the scaled domain.
        variance: s², their sample variance (≥ 0).
        n: the number of reports, at least 2.
        confidence: the level, in (0, 1).

    Returns:
        (low, high) in the scaled domain (either may lie beyond [−1, 1]).
    """
    if n < 2:
        raise ValueError(f"an interval needs at least 2 reports, got {n}")
    t = t_value(confidence, n - 1)
    c = t * t / n
    a2, b2 = m.second_moment_coefficients()
    slope = a2 - 1.0  # V(μ) = slope·μ² + b2 on [−1, 1]
    plug_in = math.sqrt(c * max(variance, 0.0))
    ends = [mean - plug_in, mean + plug_in]
    edge = math.sqrt(c * m.min_variance(1.0))  # beyond the range V is V(±1)
    if mean + edge > 1.0:
        ends += [max(1.0, mean - edge), mean + edge]
    if mean - edge < -1.0:
        ends += [mean - edge, min(-1.0, mean + edge)]
    # Inside the range: (1 − c·slope)μ² − 2ȳμ + ȳ² − c·b2 ≤ 0. Its kept set's ends are
    # range ends that pass, or roots inside the range.
    ends += [mu for mu in (-1.0, 1.0) if (mean - mu) ** 2 <= c * m.min_variance(mu)]
    roots = _roots(1.0 - c * slope, -2.0 * mean, mean * mean - c * b2)
    ends += [mu for mu in roots if -1.0 <= mu <= 1.0]
    return min(ends), max(ends)


@dataclass(frozen=True)
class NumericEstimate:
    """The mean of a numeric metric from n reports, in its own units, with its uncertainty.

    ``mean`` is unbiased (it can fall outside the range with few reports);
    ``mean_clipped`` is the separately labelled post-processed value, clipped into the
    range (biased, for display). ``std_error`` is the standard error with the reports'
    variance floored at the least the mechanism allows for the estimated mean,
    √(max(s², V(ȳ))/n); ``std_error_worst_case`` the mechanism's bound for any values in
    the range, √(sup_x E[y² | x] / n). The interval (``interval`` names it) is the score
    interval of :func:`mean_interval`: close to ``mean ± z·std_error`` from a few
    hundred reports on, wider and not always symmetric below.
    """

    mechanism: NumericMechanism
    value_range: tuple[float, float]
    n: int
    mean: float
    std_error: float
    std_error_worst_case: float
    ci_low: float
    ci_high: float
    confidence: float
    interval: str
    """How the interval is made (:data:`INTERVAL_METHOD`)."""
    stats: NumericStats
    """The sufficient statistics it was estimated from (for :meth:`conf_int`)."""

    @property
    def mean_clipped(self) -> float:
        """The mean clipped into the range: post-processed, biased, for display."""
        low, high = self.value_range
        return self.mean if math.isnan(self.mean) else min(high, max(low, self.mean))

    def conf_int(self, alpha: float = 0.05) -> tuple[float, float]:
        """The interval at level 1 − alpha, made as ``ci_low``/``ci_high`` are."""
        if self.interval == ANYTIME_METHOD:
            return self.confidence_sequence(alpha)
        return _interval_in_units(self.mechanism, self.stats, self.value_range, 1.0 - alpha)

    def confidence_sequence(self, alpha: float | None = None) -> tuple[float, float]:
        """The confidence sequence ("valid while you watch") at level 1 − alpha (default:
        the estimate's own confidence), in units: :func:`aggregator.stats.anytime.mean_cs`."""
        a = 1.0 - self.confidence if alpha is None else alpha
        s = self.stats
        return mean_cs(self.mechanism, s.n, s.total, s.total_sq, a, value_range=self.value_range)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (NaN becomes None)."""
        return {
            "kind": "numeric",
            "mechanism": self.mechanism.params(),
            "n": self.n,
            "confidence": self.confidence,
            "range": list(self.value_range),
            "mean": json_float(self.mean),
            "std_error": json_float(self.std_error),
            "std_error_worst_case": json_float(self.std_error_worst_case),
            "ci_low": json_float(self.ci_low),
            "ci_high": json_float(self.ci_high),
            "interval": self.interval,
            "mean_clipped": json_float(self.mean_clipped),
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON."""
        return json.dumps(self.to_dict())

    def summary(self) -> str:
        """One readable line: mean, interval, n."""
        m = self.mechanism
        low, high = self.value_range
        level = f"{self.confidence:.0%}"
        return (
            f"{m.name} ε={m.epsilon:g} range [{low:g}, {high:g}]  n={self.n:,}  "
            f"mean {self.mean:.6g} ({level}: [{self.ci_low:.6g}, {self.ci_high:.6g}]; "
            f"se {self.std_error:.3g}, worst-case se {self.std_error_worst_case:.3g})"
        )


def _interval_in_units(
    m: NumericMechanism, stats: NumericStats, value_range: tuple[float, float], confidence: float
) -> tuple[float, float]:
    """:func:`mean_interval` in the metric's units (NaN with fewer than 2 reports)."""
    check_confidence(confidence)  # for every n
    if stats.n < 2:
        return math.nan, math.nan
    low, high = value_range
    half = (high - low) / 2
    lo, hi = mean_interval(m, stats.mean, stats.sample_variance, stats.n, confidence)
    return low + (lo + 1.0) * half, low + (hi + 1.0) * half


ANYTIME_METHOD = (
    "confidence sequence (valid at every n at once, however often one looks): "
    "see aggregator.stats.anytime"
)


def estimate_mean(
    definition: MetricDefinition,
    stats: NumericStats,
    confidence: float = 0.95,
    *,
    anytime: bool = False,
) -> NumericEstimate:
    """Estimate a numeric metric's mean, in its units, from additive sufficient statistics.

    Args:
        definition: the metric version every report was made with (mechanism and range).
        stats: n, Σy, Σy² as summed over any number of batches.
        confidence: the interval's level, in (0, 1).
        anytime: a confidence sequence instead of the fixed-n interval: valid at every n
            at once, however often one looks (:func:`aggregator.stats.anytime.mean_cs`).

    Returns:
        The unbiased mean with floored and worst-case standard errors and the score
        interval (NaN where undefined: no reports; the standard error and the interval
        need n ≥ 2; the confidence sequence needs n ≥ 1).

    Raises:
        ValueError: a categorical metric, negative n, or a bad confidence.
    """
    m = definition.mechanism
    if definition.value_range is None or not isinstance(m, NumericMechanism):
        raise ValueError(f"metric {definition.name!r} is not numeric")
    if stats.n < 0:
        raise ValueError(f"n must be non-negative, got {stats.n}")
    low, high = definition.value_range
    if anytime:
        check_confidence(confidence)
        ci_low, ci_high = mean_cs(
            m, stats.n, stats.total, stats.total_sq, 1.0 - confidence, value_range=(low, high)
        )
    else:
        ci_low, ci_high = _interval_in_units(m, stats, (low, high), confidence)
    half = (high - low) / 2
    n = stats.n
    mean = low + (stats.mean + 1.0) * half if n else math.nan
    if n >= 2:
        floored = max(stats.sample_variance, min_report_variance(m, stats.mean))
        se = math.sqrt(floored / n) * half
    else:
        se = math.nan
    worst = math.sqrt(m.max_second_moment() / n) * half if n else math.nan
    return NumericEstimate(
        mechanism=m,
        value_range=(low, high),
        n=n,
        mean=mean,
        std_error=se,
        std_error_worst_case=worst,
        ci_low=ci_low,
        ci_high=ci_high,
        confidence=confidence,
        interval=ANYTIME_METHOD if anytime else INTERVAL_METHOD,
        stats=stats,
    )

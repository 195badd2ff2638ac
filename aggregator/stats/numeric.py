"""Numeric metrics on the server: exact additive sums of the reports, and the mean with a CI.

The sufficient statistics of a set of numeric reports are n, Σy and Σy². Every report is
on the SDK's grid (an integer number of units of 2⁻³⁰, see
``client_sdk.mechanisms.numeric``), so here y is that *integer* and the sums are exact
integers: any order, any batching, any number of workers give the same bits, and the
worker's commit script adds them with ``HINCRBY`` exactly as it adds support counts.

**Storage.** A Redis hash field holds a signed 64-bit integer, but Σy² of one batch can
reach 2¹⁰⁷ (|y| < 2⁴⁶ units at the smallest ε). So each sum is split into base-2³²
limbs (:func:`ldp_store.schema.limbs`): field ``s:<i>`` (``s2:<i>``) holds limb i of Σy
(Σy²), weight 2^{32i}, next to ``n`` in the same ``counts:<window>`` hashes the
categorical metrics use. A batch's total
T is cut into non-negative 32-bit low limbs and a signed top limb in [−2³¹, 2³¹); every
commit adds less than 2³² in magnitude to each field, so a field cannot overflow before
2³¹ commits, whatever the reports. Reading sums the limbs back exactly (Python ints).
The commit script is the categorical one, unchanged: the increments are just more
``field, integer`` pairs.

**Estimate.** With x the value scaled to [−1, 1], E[y] = x for every mechanism, so
ȳ = Σy/n is unbiased for the mean of the scaled values, and mapping it back with the
metric's range is unbiased for the mean in the metric's units. Its standard error is the
plug-in one, √(s²/n) with s² the sample variance of the reports (exact from the integer
sums). Intervals are ȳ ± z·se. They are nominal for the mean of the population the
reporting devices are drawn from (s² estimates the noise *and* the spread of the true
values); for the mean of exactly these devices' values they are conservative: s²
overstates the variance of a report by the spread of those values (at most 1 in the
scaled domain), which matters only where the noise is small (large ε).
``std_error_worst_case`` needs no data: with
E[y²] ≤ sup_x E[y² | x], it bounds the standard error for any values in the range.

References:
    Duchi, Jordan, Wainwright. JASA 2018; Wang et al. ICDE 2019, §III (the mechanisms and
    their unbiasedness, E[y | x] = x).
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
import numpy.typing as npt

from aggregator.stats.batch import Batch, raise_first_error
from aggregator.stats.intervals import json_float, z_value
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
    "NumericCodec",
    "NumericEstimate",
    "NumericStats",
    "estimate_mean",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


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

    def increments(self) -> list[str | int]:
        """``HINCRBY`` field/increment pairs: ``n``, then the nonzero limbs of Σy and Σy²."""
        return schema.numeric_increments(self.n, self.total, self.total_sq)

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


class NumericCodec:
    """The :class:`~aggregator.stats.batch.Codec` of a numeric mechanism: exact sums.

    A parsed :class:`~aggregator.stats.batch.Batch` has one int64 column ``y``: the reports
    in units (|y| < 2⁴⁶, exact).
    """

    def __init__(self, mechanism: NumericMechanism) -> None:
        self.m = mechanism

    def parse(self, payloads: Sequence[Any]) -> Batch:
        """Validate and columnize payloads, as strictly as ``m.check_payload``.

        Raises:
            PayloadError: naming the index and the problem of the first bad payload.
        """
        batch = self._parse_fast(payloads)
        if batch is None:
            raise_first_error(self.m, payloads)
        return batch

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

    def increments(self, batch: Batch) -> list[str | int]:
        """The commit script's ``HINCRBY`` pairs of a parsed batch."""
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


@dataclass(frozen=True)
class NumericEstimate:
    """The mean of a numeric metric from n reports, in its own units, with its uncertainty.

    ``mean`` is unbiased (it can fall outside the range with few reports);
    ``mean_clipped`` is the separately labelled post-processed value, clipped into the
    range (biased, for display). ``std_error`` is the plug-in standard error (sample
    variance of the reports), ``std_error_worst_case`` the mechanism's bound for any
    values in the range, √(sup_x E[y² | x] / n); the interval is ``mean ± z·std_error``.
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

    @property
    def mean_clipped(self) -> float:
        """The mean clipped into the range: post-processed, biased, for display."""
        low, high = self.value_range
        return self.mean if math.isnan(self.mean) else min(high, max(low, self.mean))

    def conf_int(self, alpha: float = 0.05) -> tuple[float, float]:
        """The interval at level 1 − alpha (plug-in standard error)."""
        z = z_value(1.0 - alpha)
        return self.mean - z * self.std_error, self.mean + z * self.std_error

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
            "mean_clipped": json_float(self.mean_clipped),
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON."""
        return json.dumps(self.to_dict())

    def summary(self) -> str:
        """One readable line: mean ± half-width, interval, n."""
        m = self.mechanism
        low, high = self.value_range
        level = f"{self.confidence:.0%}"
        return (
            f"{m.name} ε={m.epsilon:g} range [{low:g}, {high:g}]  n={self.n:,}  "
            f"mean {self.mean:.6g} ± {self.ci_high - self.mean:.3g} ({level}: "
            f"[{self.ci_low:.6g}, {self.ci_high:.6g}]; "
            f"worst-case se {self.std_error_worst_case:.3g})"
        )


def estimate_mean(
    definition: MetricDefinition, stats: NumericStats, confidence: float = 0.95
) -> NumericEstimate:
    """Estimate a numeric metric's mean, in its units, from additive sufficient statistics.

    Args:
        definition: the metric version every report was made with (mechanism and range).
        stats: n, Σy, Σy² as summed over any number of batches.
        confidence: the interval's level, in (0, 1).

    Returns:
        The unbiased mean with plug-in and worst-case standard errors and the interval
        (NaN where undefined: no reports; the plug-in error needs n ≥ 2).

    Raises:
        ValueError: a categorical metric, negative n, or a bad confidence.
    """
    m = definition.mechanism
    if definition.value_range is None or not isinstance(m, NumericMechanism):
        raise ValueError(f"metric {definition.name!r} is not numeric")
    if stats.n < 0:
        raise ValueError(f"n must be non-negative, got {stats.n}")
    z = z_value(confidence)
    low, high = definition.value_range
    half = (high - low) / 2
    n = stats.n
    mean = low + (stats.mean + 1.0) * half if n else math.nan
    se = math.sqrt(stats.sample_variance / n) * half if n >= 2 else math.nan
    worst = math.sqrt(m.max_second_moment() / n) * half if n else math.nan
    return NumericEstimate(
        mechanism=m,
        value_range=(low, high),
        n=n,
        mean=mean,
        std_error=se,
        std_error_worst_case=worst,
        ci_low=mean - z * se,
        ci_high=mean + z * se,
        confidence=confidence,
    )

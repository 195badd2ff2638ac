"""Unbiased frequency estimates with standard errors and confidence intervals.

The interval of each value is a score interval with the mechanism's exact variance, or
an exact (Clopper–Pearson) one when counts are small (:mod:`aggregator.stats.intervals`);
a value is flagged "distinguishable from zero" exactly when its interval misses 0, in
each multiplicity mode (:mod:`aggregator.stats.multiplicity`).
A memoized metric's pools hold up to r reports per device: pass ``reports_per_device``.
The intervals are for the share among the devices that reported; ``estimand="population"``
gives them for a larger population the devices are a random sample of.

References:
    Wang, Blocki, Li, Jha. USENIX Security 2017, eq. (2) and Theorem 2 (the estimator
    and its variance); ``client_sdk.mechanisms.base`` holds both formulas.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from aggregator.stats.accounting import checked_reports_per_device
from aggregator.stats.anytime import anytime_p_value, frequency_cs
from aggregator.stats.arrays import FloatArray
from aggregator.stats.codecs import Counts
from aggregator.stats.intervals import (
    POPULATION,
    REPORTERS,
    check_confidence,
    check_estimand,
    frequency_intervals,
    interval_method,
    interval_zero_p,
    json_float,
    z_value,
    zero_test,
)
from aggregator.stats.kinds import count_payloads
from aggregator.stats.multiplicity import (
    EACH,
    SIMULTANEOUS,
    ZeroRead,
    multiplicity_of,
    read_at_level,
    strictest_alpha,
)
from aggregator.stats.postprocess import norm_sub
from aggregator.stats.pram import pram_estimate, pram_intervals, pram_zero_read
from client_sdk.mechanisms import FrequencyOracle, Memoized, PostRandomization

__all__ = ["ANYTIME", "FrequencyEstimate", "estimate", "estimate_from_counts"]

ANYTIME = "anytime"
"""The interval kind of a confidence sequence."""


def _frozen(a: npt.ArrayLike, dtype: Any = np.float64) -> np.ndarray:
    out = np.array(a, dtype=dtype)
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False)
class FrequencyEstimate:
    """The estimate of a frequency vector from n reports, with its uncertainty.

    ``frequencies`` are unbiased (they can be negative and need not sum to 1);
    ``norm_sub`` is the separately labelled post-processed estimate (on the simplex,
    biased). ``std_errors`` are √V(f̂) with the exact variance at the estimate; the
    intervals are ``interval`` ("score" or "exact": :mod:`aggregator.stats.intervals`),
    each read at ``level``, which ``multiplicity`` sets from ``confidence``: each at
    ``confidence`` ("each"), all k together ("simultaneous", Bonferroni), or at the level
    of the Benjamini–Hochberg flags ("fdr"). ``distinguishable`` is exactly "0 lies
    outside the interval" and ``p_values`` are the intervals' duals
    (:mod:`aggregator.stats.multiplicity`). ``estimand`` says whose share the standard
    errors and intervals are for.
    """

    mechanism: FrequencyOracle
    n: int
    support_counts: np.ndarray
    frequencies: FloatArray
    std_errors: FloatArray
    ci_low: FloatArray
    ci_high: FloatArray
    norm_sub: FloatArray
    confidence: float
    simultaneous: bool
    labels: tuple[str, ...]
    interval: str = "score"
    """How the intervals were built: "score" or "exact" (small counts), fixed-n; or
    "anytime", a confidence sequence valid at every n at once (:mod:`.anytime`)."""
    reports_per_device: float = 1
    """The most reports of one device the pool may hold (memoized metrics), as assumed."""
    p_values: FloatArray | None = None
    """Two-sided p-values of f(v) = 0, the intervals' duals: ≤ 1 − ``level`` exactly where
    a value is flagged."""
    distinguishable: np.ndarray | None = None
    """Values whose interval misses 0 (``ci_low > 0``, or ``ci_high < 0``: below zero,
    which no true share is: chance or fake reports)."""
    multiplicity: str = EACH
    """How the flags and intervals account for the k values
    (:data:`~aggregator.stats.multiplicity.MULTIPLICITIES`)."""
    level: float = float("nan")
    """The confidence each interval is read at (``confidence``, 1 − (1 − confidence)/k,
    or 1 − R·(1 − confidence)/k in "fdr" mode); NaN without reports."""
    estimand: str = REPORTERS
    """Whose share ``std_errors`` and the intervals are for: "reporters", the devices that
    reported (only the mechanism's noise is random), or "population", a larger population
    they are a random sample of (the sampling variance f(1 − f)/n added). The confidence
    sequence ("anytime") assumes devices drawn at random and serves both."""

    @property
    def k(self) -> int:
        """Domain size."""
        return self.mechanism.domain_size

    def conf_int(
        self, alpha: float = 0.05, simultaneous: bool = False
    ) -> tuple[FloatArray, FloatArray]:
        """Intervals at level 1 − alpha (optionally simultaneous over the k values), built
        as the estimate's own (:attr:`interval`)."""
        if self.n == 0:
            nan = np.full(self.k, np.nan)
            return nan, nan
        if self.interval == ANYTIME:
            return self.confidence_sequence(alpha, simultaneous)
        if isinstance(self.mechanism, PostRandomization):
            low, high, _ = pram_intervals(
                self.mechanism,
                self.n,
                self.support_counts,
                1.0 - alpha,
                self.k if simultaneous else 1,
                self.estimand,
            )
            return low, high
        low, high, _ = frequency_intervals(
            self.mechanism,
            self.n,
            self.support_counts,
            1.0 - alpha,
            self.k if simultaneous else 1,
            self.reports_per_device,
            self.estimand,
        )
        return low, high

    def confidence_sequence(
        self, alpha: float | None = None, simultaneous: bool | None = None
    ) -> tuple[FloatArray, FloatArray]:
        """The confidence sequence ("valid while you watch") at level 1 − alpha, for all k
        values at once with ``simultaneous`` (defaults: the estimate's own confidence and
        simultaneity), not clipped into [0, 1]; NaN without reports.

        Raises:
            ValueError: pram (no single p*, q*: no sequence).
        """
        if self.n == 0:
            nan = np.full(self.k, np.nan)
            return nan, nan
        a = 1.0 - self.confidence if alpha is None else alpha
        together = self.simultaneous if simultaneous is None else simultaneous
        k = self.k if together else 1
        r = self.reports_per_device
        return _sequence(self.mechanism, self.n, self.support_counts, a / k, r)

    def sequence_read(self) -> ZeroRead:
        """The confidence sequence in this estimate's multiplicity mode, with its flags
        (0 outside the sequence) and anytime-valid p-values (its duals; "fdr": e-BH).

        Raises:
            ValueError: pram (no single p*, q*: no sequence), or no reports.
        """
        if self.n == 0:
            raise ValueError("no reports: no confidence sequence")
        return _sequence_read(
            self.mechanism,
            self.n,
            self.support_counts,
            1.0 - self.confidence,
            self.multiplicity,
            self.reports_per_device,
        )

    def indistinguishable_from_zero(self) -> np.ndarray:
        """Values not flagged :attr:`distinguishable` (the false-discovery-rate test)."""
        if self.distinguishable is None:
            return np.ones(self.k, dtype=bool)
        return ~self.distinguishable

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (NaN, for n = 0, becomes None)."""
        num = json_float
        return {
            "mechanism": self.mechanism.params(),
            "n": self.n,
            "confidence": self.confidence,
            "simultaneous": self.simultaneous,
            "multiplicity": self.multiplicity,
            "level": num(self.level),
            "interval": self.interval,
            "estimand": self.estimand,
            "reports_per_device": self.reports_per_device,
            "estimates": [
                {
                    "value": label,
                    "support_count": int(c),
                    "frequency": num(f),
                    "std_error": num(se),
                    "ci_low": num(lo),
                    "ci_high": num(hi),
                    "norm_sub": num(ns),
                    "p_value": num(pv),
                    "distinguishable_from_zero": None if self.n == 0 else not bool(zero),
                }
                for label, c, f, se, lo, hi, ns, pv, zero in zip(
                    self.labels,
                    self.support_counts,
                    self.frequencies,
                    self.std_errors,
                    self.ci_low,
                    self.ci_high,
                    self.norm_sub,
                    self.p_values if self.p_values is not None else np.full(self.k, np.nan),
                    self.indistinguishable_from_zero(),
                    strict=True,
                )
            ],
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON."""
        return json.dumps(self.to_dict())

    def summary(self, limit: int = 40) -> str:
        """A readable table: value, unbiased estimate ± half-width, interval, Norm-Sub."""
        m = self.mechanism
        level = f"{self.confidence:.0%}" + (
            "" if self.multiplicity == EACH else f" {self.multiplicity}"
        )
        if self.multiplicity != EACH and self.n:
            level += f" (each at {self.level:.4%})"
        level += f" {self.interval}"
        if self.reports_per_device != 1:
            level += f", ≤ {self.reports_per_device:g} reports per device"
        level += " (population share)" if self.estimand == POPULATION else ""
        lines = [
            f"{m.name} ε={m.epsilon:g} k={m.domain_size}  n={self.n:,}  {level} intervals",
            f"{'value':>16} {'estimate':>10} {'± half':>9} {'low':>9} {'high':>9} "
            f"{'norm-sub*':>10}",
        ]
        order = np.argsort(-np.nan_to_num(self.frequencies, nan=-np.inf), kind="stable")
        for i in order[:limit]:
            mark = "" if not self.indistinguishable_from_zero()[i] else "  ~0"
            lines.append(
                f"{self.labels[i][:16]:>16} {self.frequencies[i]:>10.5f} "
                f"{self.ci_high[i] - self.frequencies[i]:>9.5f} {self.ci_low[i]:>9.5f} "
                f"{self.ci_high[i]:>9.5f} {self.norm_sub[i]:>10.5f}{mark}"
            )
        if self.k > limit:
            lines.append(f"{'':>16} … {self.k - limit} more values")
        lines.append(
            "estimate: unbiased; ~0: not distinguishable from zero (its interval holds 0); "
            f"{_FLAG_MEANING[self.multiplicity]}; *norm-sub: projected onto the simplex "
            "(post-processed, biased)"
        )
        return "\n".join(lines)


def estimate_from_counts(
    mechanism: FrequencyOracle,
    counts: Counts,
    confidence: float = 0.95,
    simultaneous: bool = False,
    labels: Sequence[str] | None = None,
    *,
    reports_per_device: float = 1,
    anytime: bool = False,
    estimand: str = REPORTERS,
    multiplicity: str | None = None,
) -> FrequencyEstimate:
    """Estimate frequencies from additive sufficient statistics (n, support counts).

    Args:
        mechanism: the mechanism object every report was made with.
        counts: n and C(v) as summed over any number of batches.
        confidence: the intervals' level, in (0, 1) (in "fdr" mode 1 − the flags' false
            discovery rate).
        simultaneous: Bonferroni-correct the intervals over the k values (the same as
            ``multiplicity="simultaneous"``).
        labels: names of the k values (default "0".."k-1").
        reports_per_device: the most reports one device can have in the pool. Reports of
            a memoized mechanism share the device's permanent response, so r of them vary
            more than r devices' would (``mechanism.variance(..., reports_per_device=r)``);
            a metric's budget bounds r (reports per period × periods in the window).
            Ignored by mechanisms whose reports carry fresh noise only.
        anytime: intervals valid under continuous monitoring (a confidence sequence:
            with probability ≥ confidence the truth lies in the interval at *every* n,
            however often one looks); wider than the fixed-n interval (about 1.6× at
            n = 10⁴, 1.75× at 10⁶). See :mod:`aggregator.stats.anytime`.
        estimand: whose share the standard errors and intervals are for: "reporters"
            (default), the n devices that reported, or "population", a larger population
            they are a random sample of (adds the sampling variance f(1 − f)/n; wider,
            most at high ε and small k). See :mod:`aggregator.stats.intervals`.
        multiplicity: "each" (default), "fdr" or "simultaneous": the level every interval
            is read at, and so what its "distinguishable from zero" flag (0 outside the
            interval) promises (:mod:`aggregator.stats.multiplicity`).

    Raises:
        ValueError: counts of the wrong length, negative, or above n; a bad confidence;
            ``reports_per_device`` < 1; an estimand other than those two; an unknown
            multiplicity, or one that contradicts ``simultaneous``.
    """
    k = mechanism.domain_size
    n, support, names = _checked_counts(k, counts, labels)
    r = _reports_per_device(mechanism, reports_per_device)
    population = check_estimand(estimand) == POPULATION
    mode = multiplicity_of(simultaneous, multiplicity)
    check_confidence(confidence)
    alpha = 1.0 - confidence
    method = "score"
    level = float("nan")
    if n == 0:
        nan = np.full(k, np.nan)
        f = se = lo = hi = ns = pv = nan
        flags = np.zeros(k, dtype=bool)
    elif isinstance(mechanism, PostRandomization):
        if anytime:
            raise ValueError("anytime intervals are not available for pram (no single p*, q*)")
        f = pram_estimate(mechanism, n, support)
        se = np.sqrt(
            np.asarray(mechanism.variance(n, f), dtype=np.float64)
            + (_sampling(f, n, 1.0) if population else 0.0)
        )
        read, method = pram_zero_read(mechanism, n, support, alpha, mode, estimand)
        lo, hi, pv, flags, level = read.low, read.high, read.p_values, read.flags, read.level
        ns = norm_sub(f)
    else:
        f = mechanism.debias(support.astype(np.float64), n)
        plug_in = np.clip(f, 0.0, 1.0)
        se = np.sqrt(
            _variance(mechanism, n, plug_in, r) + (_sampling(f, n, r) if population else 0.0)
        )
        if anytime:
            method = ANYTIME
            read = _sequence_read(mechanism, n, support, alpha, mode, r)
        else:
            strict = strictest_alpha(alpha, k, mode)
            method = interval_method(mechanism, n, r, z_value(1.0 - strict))
            zero_p = np.maximum(
                interval_zero_p(mechanism, n, support, r, method),
                zero_test(mechanism, n, support, r),
            )

            def intervals_at(a: float) -> tuple[FloatArray, FloatArray]:
                low, high, _ = frequency_intervals(
                    mechanism, n, support, 1.0 - a, 1, r, estimand, method=method
                )
                return low, high

            read = read_at_level(zero_p, alpha, mode, intervals_at)
        lo, hi, pv, flags, level = read.low, read.high, read.p_values, read.flags, read.level
        ns = norm_sub(f)
    return FrequencyEstimate(
        mechanism=mechanism,
        n=n,
        support_counts=_frozen(support, np.int64),
        frequencies=_frozen(f),
        std_errors=_frozen(se),
        ci_low=_frozen(lo),
        ci_high=_frozen(hi),
        norm_sub=_frozen(ns),
        confidence=confidence,
        simultaneous=mode == SIMULTANEOUS,
        labels=names,
        interval=method,
        reports_per_device=r,
        p_values=_frozen(pv),
        distinguishable=_frozen(flags, bool),
        multiplicity=mode,
        level=level,
        estimand=estimand,
    )


_FLAG_MEANING = {
    EACH: "each interval and flag is for that value alone",
    SIMULTANEOUS: "all intervals hold together, so do the flags (Bonferroni)",
    "fdr": "flags by Benjamini–Hochberg (false discovery rate), intervals at their level",
}
"""What a flag promises in each mode, for :meth:`FrequencyEstimate.summary`."""


def _sequence(
    mechanism: FrequencyOracle, n: int, support: np.ndarray, alpha: float, r: float
) -> tuple[FloatArray, FloatArray]:
    """The frequencies' confidence sequence, each at level 1 − alpha, unclipped: the one
    place an estimate builds it. A value's bounds depend on its support count alone, so
    they are computed once per distinct count (a few hundred where k is 65,536)."""
    if isinstance(mechanism, PostRandomization):
        raise ValueError("anytime intervals are not available for pram (no single p*, q*)")
    counts = np.asarray(support)
    distinct, at = np.unique(counts, return_inverse=True)
    low, high = frequency_cs(mechanism, n, distinct, alpha, reports_per_device=r, clip=False)
    low = np.asarray(low, dtype=np.float64)[at].reshape(counts.shape)
    high = np.asarray(high, dtype=np.float64)[at].reshape(counts.shape)
    return low, high


def _sequence_read(
    mechanism: FrequencyOracle, n: int, support: np.ndarray, alpha: float, mode: str, r: float
) -> ZeroRead:
    """The sequence read in ``mode``: its p-values of f = 0 are anytime-valid
    (:func:`~aggregator.stats.anytime.anytime_p_value` at μ = q*, the sequence's dual), so
    "fdr" is e-BH, whose false discovery rate holds at any look."""
    if isinstance(mechanism, PostRandomization):
        raise ValueError("anytime intervals are not available for pram (no single p*, q*)")
    counts = np.asarray(support, dtype=np.float64)
    distinct, at = np.unique(counts, return_inverse=True)  # elementwise: once per count
    zero_p = np.asarray(
        anytime_p_value(n / r, distinct / r, distinct / r, 0.0, 1.0, float(mechanism.q)),
        dtype=np.float64,
    )[at].reshape(counts.shape)
    return read_at_level(
        np.atleast_1d(zero_p), alpha, mode, lambda a: _sequence(mechanism, n, support, a, r)
    )


def _sampling(f: FloatArray, n: int, r: float) -> FloatArray:
    """The sampling variance r·f(1 − f)/n of a population share (f clipped into [0, 1])."""
    plug_in = np.clip(f, 0.0, 1.0)
    return np.asarray(r * plug_in * (1.0 - plug_in) / n, dtype=np.float64)


def _reports_per_device(mechanism: FrequencyOracle, r: float) -> float:
    """``r`` checked (:func:`~aggregator.stats.accounting.checked_reports_per_device`); 1
    for mechanisms without memoization, whose reports carry fresh noise."""
    checked = checked_reports_per_device(r)
    return checked if isinstance(mechanism, Memoized) else 1.0


def _checked_counts(
    k: int, counts: Counts, labels: Sequence[str] | None
) -> tuple[int, npt.NDArray[np.int64], tuple[str, ...]]:
    """n, the k support counts (each in [0, n]) and the k labels ("0".."k-1" if none).

    Raises:
        ValueError: saying which does not fit.
    """
    support = np.asarray(counts.support, dtype=np.int64)
    if support.shape != (k,):
        raise ValueError(f"support counts must have length {k}, got shape {support.shape}")
    n = int(counts.n)
    if n < 0 or support.min() < 0 or support.max() > n:
        raise ValueError("support counts must lie in [0, n]")
    if labels is None:
        names = tuple(map(str, range(k)))
    elif isinstance(labels, tuple) and all(type(x) is str for x in labels):
        names = labels  # a definition's domain: already labels (no copy per request)
    else:
        names = tuple(str(x) for x in labels)
    if len(names) != k:
        raise ValueError(f"need {k} labels, got {len(names)}")
    return n, support, names


def _variance(mechanism: FrequencyOracle, n: int, f: Any, r: float) -> Any:
    if r == 1:
        return mechanism.variance(n, f)
    assert isinstance(mechanism, Memoized)
    return mechanism.variance(n, f, reports_per_device=r)


def estimate(
    mechanism: FrequencyOracle,
    payloads: Sequence[Any],
    confidence: float = 0.95,
    simultaneous: bool = False,
    labels: Sequence[str] | None = None,
    *,
    reports_per_device: float = 1,
    anytime: bool = False,
    estimand: str = REPORTERS,
) -> FrequencyEstimate:
    """Validate, decode and estimate a batch of payloads (see :func:`estimate_from_counts`).

    Raises:
        PayloadError: a payload that does not fit the mechanism, by index and problem.
    """
    return estimate_from_counts(
        mechanism,
        count_payloads(mechanism, payloads),
        confidence=confidence,
        simultaneous=simultaneous,
        labels=labels,
        reports_per_device=reports_per_device,
        anytime=anytime,
        estimand=estimand,
    )

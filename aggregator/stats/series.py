"""A frequency oracle's estimates of a few values over many windows, at once.

A trend shows the values a chart draws (a handful) over months of windows. Every
statistic of one value in one window depends on that window's n and C(v) alone once the
level is fixed (α, or α/k simultaneous), so they are computed for the V values asked in
one numpy pass over the (W, V) counts per (r, interval method), with the window's own
formulas and n a column (bit-identical), the confidence sequence for all W·V at once,
Norm-Sub only when asked. The false discovery rate mode ("fdr") reads each window at a
level set by all k p-values, and PRAM debiases through every value: those windows are
estimated in full. See docs/architecture/read-side.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from aggregator.stats.anytime import anytime_p_value, frequency_cs
from aggregator.stats.codecs import Counts
from aggregator.stats.frequency import FrequencyEstimate, estimate_from_counts
from aggregator.stats.intervals import (
    EXACT,
    POPULATION,
    REPORTERS,
    SCORE,
    check_confidence,
    check_estimand,
    frequency_intervals,
    interval_zero_p,
    needs_exact,
    z_value,
    zero_test,
)
from aggregator.stats.multiplicity import (
    EACH,
    FDR,
    SIMULTANEOUS,
    ZeroRead,
    multiplicity_of,
    read_at_level,
    strictest_alpha,
)
from client_sdk.mechanisms import FrequencyOracle, Memoized, PostRandomization

__all__ = ["ERROR_DIGITS", "SERIES_FIELDS", "Series", "estimate_series", "round_to_error"]

SERIES_FIELDS = (
    "frequency",
    "std_error",
    "ci_low",
    "ci_high",
    "norm_sub",
    "cs_low",
    "cs_high",
    "p_value",
    "cs_p_value",
)
"""The (W, V) float arrays of a :class:`Series`, as an estimate's rows name them."""


@dataclass(frozen=True)
class Series:
    """V values' estimates in W windows: each array (W, V), NaN where n is 0.

    ``distinguishable`` and ``cs_distinguishable`` are "0 outside the interval" (the
    sequence), False without reports; ``level``, ``cs_level`` each window's (NaN: none).
    """

    n: np.ndarray
    support: np.ndarray
    frequency: np.ndarray
    std_error: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    norm_sub: np.ndarray
    cs_low: np.ndarray
    cs_high: np.ndarray
    p_value: np.ndarray
    cs_p_value: np.ndarray
    distinguishable: np.ndarray
    cs_distinguishable: np.ndarray
    rest_frequency: np.ndarray
    """(W,): the frequencies of the values not shown, summed (NaN without reports)."""
    rest_norm_sub: np.ndarray
    """(W,): their Norm-Sub shares, summed."""
    interval: tuple[str, ...]
    """Each window's interval method (score or exact; "" without reports)."""


def estimate_series(
    mechanism: FrequencyOracle,
    n: np.ndarray,
    support: np.ndarray,
    shown: np.ndarray,
    confidence: float = 0.95,
    *,
    reports_per_device: np.ndarray | None = None,
    estimand: str = REPORTERS,
    multiplicity: str | None = None,
    sequence: bool = True,
    norm_sub: bool = True,
) -> Series:
    """The values ``shown`` of W windows, as each window's own answer has them.

    Args:
        mechanism: the mechanism every report was made with.
        n: reports per window, shape (W,).
        support: every value's support counts per window, shape (W, k).
        shown: the indices of the V values wanted.
        confidence: the intervals' level.
        reports_per_device: r per window (W,); default 1.
        estimand: reporters or population.
        multiplicity: each (default), simultaneous or fdr.
        sequence: compute the confidence sequence (NaN otherwise).
        norm_sub: compute the Norm-Sub shares, a projection of every value of every
            window (NaN otherwise; a window estimated in full has them anyway).

    Raises:
        ValueError: counts of the wrong shape, a bad level, estimand or mode.
    """
    counts = np.asarray(support, dtype=np.int64)
    reports = np.asarray(n, dtype=np.int64)
    k = mechanism.domain_size
    _check_shapes(reports, counts, k)
    check_confidence(confidence)
    mode = multiplicity_of(False, multiplicity)
    check_estimand(estimand)
    rs = np.ones(counts.shape[0])
    if reports_per_device is not None and isinstance(mechanism, Memoized):
        rs = np.asarray(reports_per_device, float)
    cols = _Columns.empty(counts.shape[0], len(shown))
    hidden = np.ones(k, dtype=bool)
    hidden[shown] = False
    picked = counts[:, shown]
    if mode == FDR or isinstance(mechanism, PostRandomization):
        # the level depends on every value: each window's answer in full
        for w in np.flatnonzero(reports > 0):
            est = estimate_from_counts(
                mechanism,
                Counts(int(reports[w]), counts[w]),
                confidence,
                reports_per_device=float(rs[w]),
                estimand=estimand,
                multiplicity=mode,
            )
            cols.put_window(int(w), est, shown, hidden, sequence)
        return cols.series(reports, picked)
    shares = cols.out["norm_sub"] if norm_sub else None
    _every_value(mechanism, reports, counts, shown, hidden, shares, cols.rest)
    alpha = 1.0 - confidence
    _read_at_once(cols, mechanism, reports, picked, rs, alpha, estimand, mode)
    if sequence:
        a = _value_alpha(alpha, k, mode)
        cols.put_sequences(_sequences(mechanism, reports, picked, rs, a))
    return cols.series(reports, picked)


def _check_shapes(reports: np.ndarray, counts: np.ndarray, k: int) -> None:
    """Raises ValueError unless there are (W,) reports and (W, k) counts."""
    if counts.ndim != 2 or counts.shape[1] != k or reports.shape != (counts.shape[0],):
        raise ValueError(f"need (W,) reports and (W, {k}) counts, got {counts.shape}")


def _value_alpha(alpha: float, k: int, mode: str) -> float:
    """Each value's level: α, or α/k when the k values are read simultaneously."""
    return alpha / k if mode == SIMULTANEOUS else alpha


@dataclass
class _Columns:
    """A :class:`Series`' arrays as they are filled, window by window or all at once."""

    out: dict[str, np.ndarray]
    """The :data:`SERIES_FIELDS`, each (W, V)."""
    flags: np.ndarray
    cs_flags: np.ndarray
    methods: list[str]
    rest: np.ndarray
    """(2, W): the rest's frequencies and Norm-Sub shares, summed."""

    @classmethod
    def empty(cls, windows: int, values: int) -> _Columns:
        """NaN estimates, no flags, no methods: what a window without reports keeps."""
        nan = np.full((windows, values), np.nan)
        return cls(
            out={name: nan.copy() for name in SERIES_FIELDS},
            flags=np.zeros((windows, values), dtype=bool),
            cs_flags=np.zeros((windows, values), dtype=bool),
            methods=[""] * windows,
            rest=np.full((2, windows), np.nan),
        )

    def put_window(
        self, w: int, est: FrequencyEstimate, shown: np.ndarray, hidden: np.ndarray, sequence: bool
    ) -> None:
        """Window ``w``'s values from its answer estimated in full (``est``); its
        confidence sequence too if asked and the mechanism has one."""
        for name, got in (
            ("frequency", est.frequencies),
            ("std_error", est.std_errors),
            ("ci_low", est.ci_low),
            ("ci_high", est.ci_high),
            ("norm_sub", est.norm_sub),
            ("p_value", est.p_values),
        ):
            self.out[name][w] = np.asarray(got, dtype=float)[shown]
        self.rest[:, w] = np.sum(est.frequencies[hidden]), np.sum(est.norm_sub[hidden])
        self.flags[w] = np.asarray(est.distinguishable, dtype=bool)[shown]
        self.methods[w] = est.interval
        if sequence and not isinstance(est.mechanism, PostRandomization):
            cs = est.sequence_read()
            self.out["cs_low"][w], self.out["cs_high"][w] = cs.low[shown], cs.high[shown]
            self.out["cs_p_value"][w], self.cs_flags[w] = cs.p_values[shown], cs.flags[shown]

    def put_sequences(self, seq: ZeroRead) -> None:
        """Every window's confidence sequence, read at once."""
        self.out["cs_low"], self.out["cs_high"] = seq.low, seq.high
        self.out["cs_p_value"], self.cs_flags = seq.p_values, seq.flags

    def series(self, reports: np.ndarray, picked: np.ndarray) -> Series:
        """The filled arrays as a :class:`Series`."""
        return Series(
            n=reports,
            support=picked,
            **self.out,
            distinguishable=self.flags,
            cs_distinguishable=self.cs_flags,
            rest_frequency=self.rest[0],
            rest_norm_sub=self.rest[1],
            interval=tuple(self.methods),
        )


def _read_at_once(
    cols: _Columns,
    mechanism: FrequencyOracle,
    reports: np.ndarray,
    picked: np.ndarray,
    rs: np.ndarray,
    alpha: float,
    estimand: str,
    mode: str,
) -> None:
    """The estimates, intervals, p-values and flags of every window with reports, read a
    group of alike windows (:func:`_alike`) per numpy pass, into ``cols``."""
    k = mechanism.domain_size
    a = _value_alpha(alpha, k, mode)
    z = z_value(1.0 - strictest_alpha(alpha, k, mode))
    for rows, r, exact in _alike(mechanism, reports, rs, z):
        read = _windows_read(mechanism, reports[rows], picked[rows], r, a, estimand, exact)
        cols.flags[rows] = read.pop("flags")
        for name, got in read.items():
            cols.out[name][rows] = got
        for w in rows:
            cols.methods[w] = EXACT if exact else SCORE


def _alike(
    mechanism: FrequencyOracle, reports: np.ndarray, rs: np.ndarray, z: float
) -> Iterator[tuple[np.ndarray, float, bool]]:
    """The windows with reports in the groups read together by :func:`_windows_read`:
    (rows, r, exact), alike in reports per device r and in interval method."""
    live = reports > 0
    for r in np.unique(rs[live]):
        exact = needs_exact(mechanism, reports, float(r), z)
        for method in (False, True):
            rows = np.flatnonzero(live & (rs == r) & (exact == method))
            if len(rows):
                yield rows, float(r), method


def _windows_read(
    mechanism: FrequencyOracle,
    n: np.ndarray,
    picked: np.ndarray,
    r: float,
    a: float,
    estimand: str,
    exact: bool,
) -> dict[str, np.ndarray]:
    """The estimates, standard errors, intervals (read at per-interval level ``a``),
    p-values and flags of W windows alike in r and interval method, in one numpy pass
    over their (W, V) counts: each window's answer's formulas
    (:func:`~aggregator.stats.frequency.estimate_from_counts`) with n a column."""
    method = EXACT if exact else SCORE
    column = n[:, None]
    row = picked.astype(np.float64)
    f = np.asarray(mechanism.debias(row, column), dtype=np.float64)
    plug_in = np.clip(f, 0.0, 1.0)
    variance = _variance(mechanism, column, plug_in, r)
    if check_estimand(estimand) == POPULATION:
        variance = variance + r * plug_in * (1.0 - plug_in) / column
    if r == 1:
        tested = zero_test(mechanism, column, row, r)
    else:  # a memoized pool's exact test convolves per window (n, r)
        tested = np.stack([zero_test(mechanism, int(m), c, r) for m, c in zip(n, row, strict=True)])
    zero_p = np.maximum(interval_zero_p(mechanism, column, row, r, method), tested)

    def intervals_at(level: float) -> tuple[np.ndarray, np.ndarray]:
        low, high, _ = frequency_intervals(
            mechanism, column, row, 1.0 - level, 1, r, estimand, method=method
        )
        return low, high

    read = read_at_level(zero_p, a, EACH, intervals_at)
    return {
        "frequency": f,
        "std_error": np.sqrt(variance),
        "ci_low": read.low,
        "ci_high": read.high,
        "p_value": read.p_values,
        "flags": read.flags,
    }


ERROR_DIGITS = 2
"""Significant digits of a standard error kept by :func:`round_to_error`: the digit of
the second is at most a tenth of the error, so the rounding moves a number by at most a
twentieth of it (docs/architecture/read-side.md)."""


def round_to_error(x: np.ndarray, std_error: np.ndarray) -> np.ndarray:
    """``x`` rounded to the decimal digit of the :data:`ERROR_DIGITS`-th significant
    digit of ``std_error`` (elementwise; a standard error rounds to itself so), as is
    where the error is not a positive finite number or below 10⁻¹⁵.

    With u = 10^(⌊log₁₀ SE⌋ − 1) ≤ SE/10, |round(x) − x| ≤ u/2 ≤ SE/20. The rounded
    value is an integer over a power of ten, both exact in a float: the nearest float to
    that decimal, which JSON prints as its few digits.
    """
    values = np.asarray(x, dtype=np.float64)
    errors = np.broadcast_to(np.asarray(std_error, dtype=np.float64), values.shape)
    ok = np.isfinite(errors) & (errors >= 1e-15) & np.isfinite(values)
    digits = np.zeros(values.shape)
    digits[ok] = np.maximum(ERROR_DIGITS - 1 - np.floor(np.log10(errors[ok])), 0.0)
    scale = 10.0**digits
    return np.where(ok, np.rint(values * scale) / scale + 0.0, values)


ROWS_AT_ONCE = 1 << 21
"""Window × value cells estimated in one numpy call by :func:`_every_value` (16 MB of
float64): months of windows of a large domain go in chunks."""


def _every_value(
    mechanism: FrequencyOracle,
    n: np.ndarray,
    counts: np.ndarray,
    shown: np.ndarray,
    hidden: np.ndarray,
    shares: np.ndarray | None,
    rest: np.ndarray,
) -> None:
    """What needs every value of a window: its Norm-Sub shares (the projection onto the
    simplex, :func:`~aggregator.stats.postprocess.norm_sub` row by row, the same sums in
    the same order) and the rest's sums, for many windows per call; into ``shares``
    (W, V; None: no projection) and ``rest`` (2, W)."""
    live = np.flatnonzero(n > 0)
    k = counts.shape[1]
    step = max(1, ROWS_AT_ONCE // max(1, k))
    ranks = np.arange(1, k + 1)
    for start in range(0, len(live), step):
        rows = live[start : start + step]
        every = np.asarray(
            mechanism.debias(counts[rows].astype(np.float64), n[rows, None]), dtype=np.float64
        )
        rest[0, rows] = every[:, hidden].sum(axis=1)
        if shares is None:
            continue
        if not np.all(np.isfinite(every)):
            raise ValueError("norm_sub needs finite estimates")
        u = -np.sort(-every, axis=1)
        cumulative = np.cumsum(u, axis=1) - 1.0
        above = u - cumulative / ranks > 0
        rho = k - 1 - np.argmax(above[:, ::-1], axis=1)
        theta = cumulative[np.arange(len(rows)), rho] / (rho + 1)
        projected = np.maximum(every - theta[:, None], 0.0)
        shares[rows] = projected[:, shown]
        rest[1, rows] = projected[:, hidden].sum(axis=1)


def _variance(mechanism: FrequencyOracle, n: Any, f: np.ndarray, r: float) -> np.ndarray:
    if r == 1:
        return np.asarray(mechanism.variance(n, f), dtype=np.float64)
    assert isinstance(mechanism, Memoized)
    return np.asarray(mechanism.variance(n, f, reports_per_device=r), dtype=np.float64)


def _sequences(
    mechanism: FrequencyOracle, n: np.ndarray, picked: np.ndarray, rs: np.ndarray, a: float
) -> ZeroRead:
    """The confidence sequence of every (window, value) at per-interval level ``a``, read
    as each window's answer reads it (:func:`aggregator.stats.frequency.sequence_read`):
    computed once per distinct (n, C, r), all windows in one call per r."""
    shape = picked.shape
    low, high, zero_p = (np.full(shape, np.nan) for _ in range(3))
    live = n > 0
    for r in np.unique(rs[live]):
        rows = live & (rs == r)
        nn = np.broadcast_to(n[rows, None], picked[rows].shape).astype(np.float64).ravel()
        cc = picked[rows].astype(np.float64).ravel()
        pairs, at = np.unique(np.stack([nn, cc]), axis=1, return_inverse=True)
        at = at.ravel()
        dual = anytime_p_value(
            pairs[0] / r, pairs[1] / r, pairs[1] / r, 0.0, 1.0, float(mechanism.q)
        )
        lo, hi = frequency_cs(mechanism, pairs[0], pairs[1], a, reports_per_device=float(r))
        sub = picked[rows].shape
        zero_p[rows] = np.asarray(dual, dtype=np.float64)[at].reshape(sub)
        low[rows] = np.asarray(lo, dtype=np.float64)[at].reshape(sub)
        high[rows] = np.asarray(hi, dtype=np.float64)[at].reshape(sub)
    flat = read_at_level(
        np.where(np.isnan(zero_p), 1.0, zero_p).ravel(),
        a,
        EACH,
        lambda _: (low.ravel(), high.ravel()),
    )
    flags = flat.flags.reshape(shape) & live[:, None]
    p_values = np.where(live[:, None], flat.p_values.reshape(shape), math.nan)
    return ZeroRead(flat.low.reshape(shape), flat.high.reshape(shape), p_values, flags, 1.0 - a)

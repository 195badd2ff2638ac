"""Estimates of a joint metric's 1- and 2-way marginals, with intervals and consistency.

A joint metric's counts (:attr:`JointMechanism.counters`) hold each group's report
count n_g, then its support counts over the group's cells. A marginal over attributes
A is read from one group holding A (:meth:`JointMechanism.source`, the lowest variance):
its cells are sums of the group's cells, each an unbiased estimate through the group's
:class:`~client_sdk.mechanisms.joint.SetOracle`, so the intervals, p-values and
confidence sequences of single metrics apply unchanged, for either estimand (the share
among the devices that reported, or in a population they were drawn from at random),
and the flags read them in each multiplicity mode (:mod:`aggregator.stats.multiplicity`).
The consistent estimate (:func:`consistent_tables`) is post-processing, labelled beside
the raw one.

In full: ``docs/statistics/joint.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
import numpy.typing as npt

from aggregator.stats.anytime import anytime_p_value, frequency_cs
from aggregator.stats.arrays import FloatArray, IntArray
from aggregator.stats.intervals import (
    EXACT,
    POPULATION,
    REPORTERS,
    SCORE,
    _exact,
    check_confidence,
    check_estimand,
    exact_zero_p,
    frequency_intervals,
    interval_method,
    json_float,
    score_zero_p,
    variance_coefficients,
    z_value,
    zero_test,
)
from aggregator.stats.lazy import scipy_special
from aggregator.stats.multiplicity import (
    ZeroRead,
    bisect_dual,
    multiplicity_of,
    outside_zero,
    read_at_level,
    strictest_alpha,
)
from aggregator.stats.planning import check_users_or_width, users_and_width
from aggregator.stats.postprocess import norm_sub
from client_sdk.mechanisms.joint import JointMechanism, SetOracle, choose_joint

__all__ = [
    "CONSISTENCY_ROUNDS",
    "JointPlanRow",
    "MarginalEstimate",
    "consistent_marginal",
    "consistent_tables",
    "estimate_marginal",
    "group_counts",
    "marginal_support",
    "plan_joint",
]


CONSISTENCY_ROUNDS = 20
"""Rounds of (make shared margins agree, project each table onto the simplex) before the
final agreement step; measured: the tables stop changing by more than 10⁻⁶ within ~10."""


def group_counts(m: JointMechanism, counts: npt.ArrayLike) -> tuple[IntArray, list[IntArray]]:
    """(n_g of each group, each group's support counts) from a window's counters.

    Raises:
        ValueError: counters of the wrong length, negative, or a support above its n_g.
    """
    flat = np.asarray(counts, dtype=np.int64)
    if flat.shape != (m.counters,):
        raise ValueError(f"a joint window has {m.counters} counters, got shape {flat.shape}")
    sizes = flat[: len(m.groups)]
    supports = [flat[o : o + k] for o, k in zip(m.offsets, m.group_sizes, strict=True)]
    if flat.min(initial=0) < 0 or any(
        s.size and s.max() > n for s, n in zip(supports, sizes, strict=True)
    ):
        raise ValueError("support counts must lie in [0, n_g]")
    return sizes, supports


def _check_attrs(m: JointMechanism, attrs: Sequence[int]) -> tuple[int, ...]:
    out = tuple(int(a) for a in attrs)
    if not 1 <= len(out) <= len(m.sizes) or len(set(out)) != len(out):
        raise ValueError(f"a marginal names 1 to {len(m.sizes)} distinct attributes")
    if not all(0 <= a < len(m.sizes) for a in out):
        raise ValueError(f"attribute indices are in range(0, {len(m.sizes)})")
    return out


def _reduce(m: JointMechanism, g: int, table: npt.ArrayLike, attrs: tuple[int, ...]) -> Any:
    """Group g's flat cell table summed onto ``attrs`` (in that order), flattened."""
    held = m.groups[g]
    shaped = np.asarray(table).reshape(tuple(m.sizes[a] for a in held))
    drop = tuple(i for i, a in enumerate(held) if a not in attrs)
    summed = shaped.sum(axis=drop) if drop else shaped
    kept = [a for a in held if a in attrs]
    return np.transpose(summed, [kept.index(a) for a in attrs]).ravel()


def marginal_support(
    m: JointMechanism, counts: npt.ArrayLike, attrs: Sequence[int]
) -> tuple[int, int, IntArray]:
    """(source group, its n_g, the summed support C_S of each cell of the marginal)."""
    wanted = _check_attrs(m, attrs)
    g = m.source(wanted)
    sizes, supports = group_counts(m, counts)
    return g, int(sizes[g]), np.asarray(_reduce(m, g, supports[g], wanted), dtype=np.int64)


@dataclass(frozen=True)
class MarginalEstimate:
    """One marginal's cells (row-major over ``shape``), raw and consistent.

    ``frequencies`` are unbiased; ``consistent`` is the post-processed estimate (shared
    margins agree across every marginal, cells non-negative), biased, labelled apart.
    ``n`` counts the source group's reports (``total`` all the metric's). Each interval
    is read at ``level``; ``distinguishable`` is exactly 0 ∉ [ci_low, ci_high] and
    ``p_values`` (two-sided, of f = 0) ≤ 1 − ``level`` exactly there.
    """

    attributes: tuple[int, ...]
    shape: tuple[int, ...]
    group: int
    n: int
    total: int
    frequencies: FloatArray
    std_errors: FloatArray
    ci_low: FloatArray
    ci_high: FloatArray
    interval: str
    p_values: FloatArray
    distinguishable: np.ndarray
    consistent: FloatArray
    confidence: float
    level: float = float("nan")
    """The confidence each interval is read at (set by the multiplicity mode)."""
    multiplicity: str = "each"
    estimand: str = REPORTERS
    """Whose share: the devices that reported, or a population they were drawn from."""

    def table(self, which: str = "frequencies") -> FloatArray:
        """A field as an array of ``shape``."""
        return np.asarray(getattr(self, which)).reshape(self.shape)

    def to_dict(self, labels: Sequence[Sequence[str]] | None = None) -> dict[str, Any]:
        """JSON form: one row per cell with its labels (or indices)."""
        cells = np.indices(self.shape).reshape(len(self.shape), -1).T
        rows = []
        for i, cell in enumerate(cells):
            names = [
                labels[j][c] if labels is not None else str(c) for j, c in enumerate(cell.tolist())
            ]
            rows.append(
                {
                    "cell": names,
                    "frequency": json_float(self.frequencies[i]),
                    "std_error": json_float(self.std_errors[i]),
                    "ci_low": json_float(self.ci_low[i]),
                    "ci_high": json_float(self.ci_high[i]),
                    "p_value": json_float(self.p_values[i]),
                    "distinguishable": bool(self.distinguishable[i]),
                    "consistent": json_float(self.consistent[i]),
                }
            )
        return {
            "attributes": list(self.attributes),
            "n": self.n,
            "total": self.total,
            "group": self.group,
            "confidence": self.confidence,
            "level": json_float(self.level),
            "multiplicity": self.multiplicity,
            "estimand": self.estimand,
            "interval": self.interval,
            "cells": rows,
        }


def estimate_marginal(
    m: JointMechanism,
    counts: npt.ArrayLike,
    attrs: Sequence[int],
    confidence: float = 0.95,
    *,
    simultaneous: bool = False,
    anytime: bool = False,
    tables: list[FloatArray] | None = None,
    estimand: str = REPORTERS,
    multiplicity: str | None = None,
) -> MarginalEstimate:
    """The marginal over ``attrs`` with its variance and the single metrics' intervals.

    Args:
        m: the metric's joint mechanism.
        counts: the window's counters (:attr:`JointMechanism.counters` of them).
        attrs: attribute indices, in the order the cells should vary (last fastest).
        confidence: the intervals' level (in "fdr" mode 1 − the flags' false discovery
            rate).
        simultaneous: Bonferroni over the marginal's cells (``multiplicity="simultaneous"``).
        anytime: confidence sequences (valid at every n at once) instead of fixed-n.
        tables: :func:`consistent_tables` of these counts if the caller has them (several
            marginals of one window share them); computed here otherwise.
        estimand: "reporters", the share among the devices that reported (a group of the
            marginals layout is a random part of them: its sampling term is added), or
            "population", the share in a population the devices are a random sample of
            (the group's sampling variance f(1 − f)/n added, as for single metrics).
        multiplicity: "each", "fdr" or "simultaneous" over the marginal's cells
            (:mod:`aggregator.stats.multiplicity`).

    Raises:
        ValueError: bad attributes, counters, confidence, estimand or multiplicity; a
            marginal no group holds.
    """
    wanted = _check_attrs(m, attrs)
    population = check_estimand(estimand) == POPULATION
    mode = multiplicity_of(simultaneous, multiplicity)
    g, n, summed = marginal_support(m, counts, wanted)
    total = int(group_counts(m, counts)[0].sum())
    finite = total if len(m.groups) > 1 and not population else 0
    oracle = m.set_oracle(g, wanted, population=finite)
    shape = tuple(m.sizes[a] for a in wanted)
    cells = int(np.prod(shape))
    check_confidence(confidence)
    support = np.asarray(oracle.scaled_support(summed.astype(np.float64)))
    if n == 0:
        nan = np.full(cells, np.nan)
        f = se = lo = hi = pv = nan
        flags = np.zeros(cells, dtype=bool)
        method, level = "score", float("nan")
    else:
        f = np.asarray(oracle.debias(support, n), dtype=np.float64)
        plug_in = np.clip(f, 0.0, 1.0)
        sampling = plug_in * (1.0 - plug_in) / n if population else 0.0
        se = np.sqrt(np.asarray(oracle.variance(n, plug_in), dtype=np.float64) + sampling)
        read, method = (
            _sequence_read(oracle, n, support, 1.0 - confidence, mode)
            if anytime
            else _fixed_read(oracle, n, support, 1.0 - confidence, mode, estimand)
        )
        lo, hi, pv, flags, level = read.low, read.high, read.p_values, read.flags, read.level
    if not n:
        consistent = np.full(cells, np.nan)
    else:
        tables = consistent_tables(m, counts) if tables is None else tables
        consistent = np.asarray(_reduce(m, g, tables[g], wanted), dtype=np.float64)
    return MarginalEstimate(
        attributes=wanted,
        shape=shape,
        group=g,
        n=n,
        total=total,
        frequencies=f,
        std_errors=se,
        ci_low=lo,
        ci_high=hi,
        interval=method,
        p_values=pv,
        distinguishable=flags,
        consistent=consistent,
        confidence=confidence,
        level=level,
        multiplicity=mode,
        estimand=estimand,
    )


def _fixed_read(
    oracle: SetOracle, n: int, support: FloatArray, alpha: float, mode: str, estimand: str
) -> tuple[ZeroRead, str]:
    """The fixed-n intervals read in ``mode``: built by one method for every level the
    mode may read; the reporters' exact interval of a group that is part of the reports
    widened by its sampling spread (:func:`_widen`)."""
    cells = len(support)
    strict = strictest_alpha(alpha, cells, mode)
    method = interval_method(oracle, n, 1, z_value(1.0 - strict))
    widen = method == EXACT and oracle.population > n

    def intervals_of(counts: FloatArray, a: Any) -> tuple[FloatArray, FloatArray]:
        if widen:  # one α per cell (the dual's bisection) or one for all
            lo, hi = _exact_at(oracle, n, counts, a)
            return _widen(oracle, n, lo, hi, _z_of(a))
        lo, hi, _ = frequency_intervals(
            oracle, n, counts, 1.0 - float(a), 1, estimand=estimand, method=method
        )
        return lo, hi

    def intervals_at(a: Any) -> tuple[FloatArray, FloatArray]:
        if np.ndim(a):
            return intervals_of(support, a)
        # One α for all: a cell's interval depends on its count alone, computed once per
        # distinct count (a few hundred of a 256×256 marginal's 65,536 cells).
        distinct, at = np.unique(np.asarray(support), return_inverse=True)
        lo, hi = intervals_of(distinct, a)
        shape = np.shape(support)
        return np.asarray(lo)[at].reshape(shape), np.asarray(hi)[at].reshape(shape)

    if method == SCORE:
        dual = score_zero_p(oracle.debias(support, n), variance_coefficients(oracle, n)[2])
    elif widen:  # each cell's dual from its count alone: bisected once per distinct count
        distinct, at = np.unique(np.asarray(support), return_inverse=True)
        dual = bisect_dual(lambda a: ~outside_zero(*intervals_of(distinct, a)), len(distinct))[
            at
        ].reshape(np.shape(support))
    else:
        dual = exact_zero_p(oracle, n, support)
    # The exact test of f = 0 where the set's count is a binomial; an OLH set's scaled
    # count varies m times less than one, and its interval's dual is the test.
    zero_p = np.maximum(dual, zero_test(oracle, n, support)) if oracle.exact else dual
    return read_at_level(zero_p, alpha, mode, intervals_at), method


def _exact_at(
    oracle: SetOracle, n: int, support: FloatArray, alpha: Any
) -> tuple[FloatArray, FloatArray]:
    """The exact (Clopper–Pearson) interval at α, one per cell or one for all."""
    lo, hi = _exact(oracle, n, support, np.asarray(alpha, dtype=np.float64))
    return np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)


def _z_of(alpha: Any) -> Any:
    """The two-sided normal quantile of 1 − α, one per cell or one for all."""
    return -scipy_special().ndtri(np.asarray(alpha, dtype=np.float64) / 2.0)


def _sequence_read(
    oracle: SetOracle, n: int, support: FloatArray, alpha: float, mode: str
) -> tuple[ZeroRead, str]:
    """The confidence sequences read in ``mode`` with their anytime-valid p-values
    (the sequences' duals; "fdr": e-BH)."""
    zero_p = np.atleast_1d(
        np.asarray(anytime_p_value(n, support, support, 0.0, 1.0, float(oracle.q)), dtype=float)
    )

    distinct, at = np.unique(np.asarray(support), return_inverse=True)  # once per count
    shape = np.shape(support)

    def intervals_at(a: float) -> tuple[FloatArray, FloatArray]:
        lo, hi = frequency_cs(oracle, n, distinct, a, clip=False)  # type: ignore[arg-type]
        return (
            np.asarray(lo, dtype=np.float64)[at].reshape(shape),
            np.asarray(hi, dtype=np.float64)[at].reshape(shape),
        )

    return read_at_level(zero_p, alpha, mode, intervals_at), "anytime"


def _widen(
    oracle: SetOracle, n: int, lo: FloatArray, hi: FloatArray, z: float
) -> tuple[FloatArray, FloatArray]:
    """An exact (mechanism-only) interval widened by the group's sampling spread, at its
    largest over the interval: z·√(max f(1 − f)·(1/n − 1/population)), f in [lo, hi]."""
    widest = np.clip(0.5, np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0))
    spread = z * np.sqrt(np.asarray(oracle.sampling_variance(n, widest), dtype=np.float64))
    return lo - spread, hi + spread


def raw_tables(m: JointMechanism, counts: npt.ArrayLike) -> list[FloatArray]:
    """Each group's unbiased cell estimates (NaN for a group without reports)."""
    sizes, supports = group_counts(m, counts)
    out = []
    for g, (n, support) in enumerate(zip(sizes, supports, strict=True)):
        oracle = m.oracles[g]
        if n == 0:
            out.append(np.full(m.group_sizes[g], np.nan))
        else:
            out.append(np.asarray(oracle.debias(support.astype(np.float64), int(n))))
    return out


def _agree(
    m: JointMechanism,
    tables: list[FloatArray],
    live: list[int],
    shared: list[int],
    weights: dict[tuple[int, int], float],
) -> None:
    """Make every shared 1-way margin of the live groups' ``tables`` agree (in place), at
    the ``weights``' (inverse variances) mean, each correction spread evenly over the
    cells it sums."""
    for a in shared:
        holders = [g for g in live if a in m.groups[g]]
        margins = {g: _reduce(m, g, tables[g], (a,)) for g in holders}
        w = np.array([weights[(g, a)] for g in holders])
        target = sum(wi * margins[g] for wi, g in zip(w, holders, strict=True)) / w.sum()
        for g in holders:
            held = m.groups[g]
            shaped = tables[g].reshape(tuple(m.sizes[b] for b in held))
            spread = m.group_sizes[g] // m.sizes[a]
            fix = (target - margins[g]) / spread
            axis = held.index(a)
            view = [1] * len(held)
            view[axis] = m.sizes[a]
            tables[g] = (shaped + fix.reshape(view)).ravel()


def consistent_tables(m: JointMechanism, counts: npt.ArrayLike) -> list[FloatArray]:
    """Every group's table after consistency post-processing (CALM's, Zhang et al. §5).

    Alternately (1) make every 1-way margin that several groups share agree, at the
    inverse-variance weighted mean of the groups' margins, spreading each correction
    evenly over the cells it sums, and (2) project each table onto the probability
    simplex (Norm-Sub); :data:`CONSISTENCY_ROUNDS` rounds, then (1) once more so the
    margins agree exactly. Groups without reports are left out. With one group (the
    joint layout) this is Norm-Sub of the joint.
    """
    sizes, _ = group_counts(m, counts)
    tables = raw_tables(m, counts)
    live = [g for g in range(len(m.groups)) if sizes[g] > 0]
    if len(live) <= 1:
        return [norm_sub(t) if g in live else t for g, t in enumerate(tables)]
    shared = [a for a in range(len(m.sizes)) if sum(a in m.groups[g] for g in live) > 1]
    weights = _margin_weights(m, sizes, live, shared)
    for _ in range(CONSISTENCY_ROUNDS):
        _agree(m, tables, live, shared, weights)
        for g in live:
            tables[g] = norm_sub(tables[g])
    _agree(m, tables, live, shared, weights)
    return tables


def _margin_weights(
    m: JointMechanism, sizes: IntArray, live: list[int], shared: list[int]
) -> dict[tuple[int, int], float]:
    """Each live group's weight in the agreed value of each ``shared`` 1-way margin it
    holds, by (group, attribute): the inverse of that margin's variance at the group's
    reports (CALM's inverse-variance weighted mean)."""
    return {
        (g, a): 1.0 / float(m.set_oracle(g, (a,)).variance(int(sizes[g])))
        for g in live
        for a in shared
        if a in m.groups[g]
    }


def consistent_marginal(
    m: JointMechanism, counts: npt.ArrayLike, attrs: Sequence[int]
) -> FloatArray:
    """The consistent estimate of the marginal over ``attrs`` (see :func:`consistent_tables`)."""
    wanted = _check_attrs(m, attrs)
    g = m.source(wanted)
    tables = consistent_tables(m, counts)
    return np.asarray(_reduce(m, g, tables[g], wanted), dtype=np.float64)


@dataclass(frozen=True)
class JointPlanRow:
    """One layout's answer for one marginal: a cell's n·Var at f ≈ 0 and what it buys."""

    layout: str
    attributes: tuple[int, ...]
    variance_star: float
    half_width: float
    users: int
    auto: bool


def plan_joint(
    epsilon: float,
    sizes: Sequence[int],
    users: int | None = None,
    width: float | None = None,
    confidence: float = 0.95,
) -> list[JointPlanRow]:
    """Half-width of a marginal cell for ``users`` users, or users for a half-width.

    One row per layout ``auto`` weighs (:func:`~client_sdk.mechanisms.joint.choose_joint`)
    and per 1- and 2-way marginal; a cell's variance counts that its group gets 1/G of
    the users (w = z·√(Var*/n), n = z²·Var*/w², Var* at f ≈ 0).

    Raises:
        ValueError: not exactly one of ``users`` and ``width``, or either out of range.
    """
    check_users_or_width(users, width)
    z = z_value(confidence)
    choice = choose_joint(epsilon, tuple(sizes))
    d = len(choice.mechanism.sizes)
    marginals = [(a,) for a in range(d)] + list(combinations(range(d), 2))
    rows = []
    for m in choice.candidates:
        for attrs in marginals:
            var = m.cell_variance_star(attrs)
            n, w = users_and_width(var, z, users, width)
            rows.append(JointPlanRow(m.method, attrs, var, w, n, m == choice.mechanism))
    return rows

"""Poisoning tests that need no baseline: what one window's counts alone can contradict.

Pure functions over counts, called by :mod:`aggregator.stats.detect` (which turns them
into alarms). What is testable, and why (derivations: ``docs/statistics/poisoning-alarms.md``):

* **floor** (GRR): an honest report names y with probability π_y = q* + f_y(p* − q*) ≥ q*,
  so honest counts are C = U + E with U ~ Multinomial(n; q*, …, q*, 1 − kq*) and E ≥ 0
  (every honest population, coupled). S = Σ_y min(0, C_y − nq*)/√(nq*(1 − q*)) is
  non-decreasing in every count, so S(C) ≥ S(U) pathwise: the law of S(U), free of f,
  bounds the false-alarm rate for every honest population (tight when all but one value
  are absent). Crafted GRR reports thin every other value by (1 − β), so values with a
  share below β/((1 − β)(e^ε − 1)) fall below q*. Where every value's share is above
  that, the poisoned counts *are* an honest window of another population: nothing can
  tell them apart without a baseline.
* **groups** (string sketch): a device picks its (level, row) group uniformly and
  independently of its value, so the reports per group are Multinomial(n, 1/G) for every
  population. Crafted reports aimed at a few rows of each level stand out as a
  chi-square excess of the group sizes.
* **rows** (string sketch, per discovered value): an honest value's reports pick their
  row uniformly, so at each level its cell counts over the h rows are spread as the
  group sizes are (plus collisions, at rate 1/m per row); Pearson's dispersion over the
  rows, as a z per level, and its median over the levels (robust to the few levels a
  collision inflates). Mass crafted into a few rows of each level is not spread so. A
  crafter who spreads over every row as devices do is exactly an honest value of
  frequency ≈ reports·(1 − q*)/(n(p* − q*)): no test can tell.

OLH has no such test beyond :func:`aggregator.stats.detect.support_test`: a crafted OLH
report with a fresh seed supports the other values at rate 1/g = q*, as an honest one
does, so the only trace is Σ f̂ > 1, which the support total measures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from aggregator.stats.arrays import FloatArray
from aggregator.stats.lazy import chi2_isf, chi2_sf, normal_isf
from client_sdk.mechanisms.strings import StringSketch

if TYPE_CHECKING:  # codecs imports detect: only the annotations need them
    from aggregator.stats.strings import Known, SketchEstimator

__all__ = [
    "FLOOR_DRAWS",
    "MIN_CELL_EXPECTED",
    "FloorResult",
    "RowsResult",
    "floor_test",
    "groups_test",
    "rows_test",
    "sketch_rows_test",
]


MIN_CELL_EXPECTED = 20.0
"""Honest reports per value at f = 0 (n·q*) the floor test needs: its null is drawn as a
Gaussian vector with the multinomial's covariance, right once each count is ≳ 20."""

FLOOR_DRAWS = 1 << 21
"""Standard normals drawn for the floor test's null (k per draw): 32,768 draws at k = 64,
once per (k, q*) and process (0.25 s at load 8: the first read of a GRR metric pays it),
an empirical tail at α = 10⁻³ from 33 exceedances. From k ≈ 100 on there are fewer than
:data:`MIN_EXCEEDANCES` and the normal tail of the draws' mean and spread is used (S is
then a sum of over a hundred weakly dependent terms; at k = 64 the normal 10⁻³ quantile
is 1 % of the spread inside the empirical one, the bound itself about a factor 2 outside
the true rate)."""

MIN_EXCEEDANCES = 20
"""Null draws beyond the threshold for the empirical p-value to be used."""

MIN_GROUP_EXPECTED = 5.0
"""Expected reports per bin of the group-size chi-square (Cochran's rule): groups are
merged into bins of consecutive groups until a bin expects this many."""


def _normal_sf(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2.0))


# -- floor (GRR) -------------------------------------------------------------------------


@lru_cache(maxsize=32)
def _floor_null(k: int, q: float) -> FloatArray:
    """Sorted draws of S(U), U the f-free part of honest GRR counts, in Gaussian form.

    The standardised cells x = (U − nq)/√(nq(1 − q)) have correlation −q/(1 − q)
    (multinomial cells): x = (z − a·Σz)/√(1 − q) with a = (1 − √(1 − kq))/k gives exactly
    that covariance from independent normals z.
    """
    draws = max(1, FLOOR_DRAWS // k)
    gen = np.random.default_rng(20_211_127)  # fixed: the threshold must not move per read
    a = (1.0 - math.sqrt(max(0.0, 1.0 - k * q))) / k
    out = np.empty(draws)
    chunk = max(1, (1 << 20) // k)
    for start in range(0, draws, chunk):
        z = gen.standard_normal((min(chunk, draws - start), k))
        x = (z - a * z.sum(axis=1, keepdims=True)) / math.sqrt(1.0 - q)
        out[start : start + len(z)] = np.minimum(x, 0.0).sum(axis=1)
    return np.sort(out)


@dataclass(frozen=True)
class FloorResult:
    """The floor test of one window."""

    statistic: float
    """S = Σ_y min(0, C_y − nq*)/σ: the counts' shortfall below the honest floor."""
    threshold: float
    """S at the test's level: an alarm when the statistic is at or below it."""
    p_value: float
    below: int
    """Values whose count is below n·q*."""
    deficit: float
    """Σ_y max(0, nq* − C_y)/n in frequency units (÷ (p* − q*)): the estimates' negative mass."""


def floor_test(
    k: int, p: float, q: float, n: int, support: npt.ArrayLike, alpha: float
) -> FloorResult | None:
    """GRR's baseline-free test: are the counts below what every honest population gives?

    Args:
        k: domain size; p, q: GRR's p*, q*.
        n: reports in the window; support: its k counts.
        alpha: this test's false-alarm rate.

    Returns:
        The result, or None when n·q* < :data:`MIN_CELL_EXPECTED`.
    """
    mean = n * q
    if mean < MIN_CELL_EXPECTED:
        return None
    c = np.asarray(support, dtype=np.float64)
    sd = math.sqrt(mean * (1.0 - q))
    x = (c - mean) / sd
    s = float(np.minimum(x, 0.0).sum())
    null = _floor_null(k, q)
    rank = int(np.searchsorted(null, s, side="right"))  # draws ≤ s
    if alpha * len(null) >= MIN_EXCEEDANCES:
        p_value = (1 + rank) / (1 + len(null))
        threshold = float(null[max(0, int(alpha * (len(null) + 1)) - 1)])
    else:
        mu, sigma = float(null.mean()), float(null.std())
        p_value = 1.0 - _normal_sf((s - mu) / sigma)
        threshold = mu - normal_isf(alpha) * sigma
    deficit = float(np.maximum(mean - c, 0.0).sum() / n / (p - q))
    return FloorResult(s, threshold, p_value, int((c < mean).sum()), deficit)


# -- groups (string sketch) --------------------------------------------------------------


def groups_test(
    m: StringSketch, support: npt.ArrayLike, alpha: float
) -> tuple[float, float, float, int, int] | None:
    """Chi-square of the reports per (level, row) group against Multinomial(n, 1/G).

    Returns:
        (chi-square, threshold, p-value, bins, the fullest group's reports), or None
        with fewer than 16 bins of :data:`MIN_GROUP_EXPECTED` reports.
    """
    sizes = np.asarray(support, dtype=np.int64).reshape(m.groups, m.cells).sum(axis=1)
    n = int(sizes.sum())
    width = max(1, math.ceil(MIN_GROUP_EXPECTED * m.groups / max(n, 1)))
    bins = math.ceil(m.groups / width)
    if bins < 16:
        return None
    padded = np.zeros(bins * width, dtype=np.int64)
    padded[: m.groups] = sizes
    folded = padded.reshape(bins, width).sum(axis=1).astype(np.float64)
    share = np.full(bins, float(width))
    share[-1] = m.groups - width * (bins - 1)
    expected = n * share / m.groups
    chi2 = float(((folded - expected) ** 2 / expected).sum())
    df = bins - 1
    return chi2, chi2_isf(alpha, df), chi2_sf(chi2, df), bins, int(sizes.max())


# -- rows (string sketch, discovered values) -----------------------------------------------


@dataclass(frozen=True)
class RowsResult:
    """The rows test of every value asked about."""

    statistic: FloatArray
    """Per value: the median over the levels of z_l, each level's dispersion over the
    rows as a standard normal (see :func:`rows_test`)."""
    levels: int
    threshold: float
    """The statistic's threshold at the level asked for (one value)."""
    p_values: FloatArray
    top_row_share: FloatArray
    """Per value: the share of its reports at a level that its fullest row holds, averaged
    over the levels (1/h when spread evenly, as an honest value's are)."""


def _median_tail(z: float, levels: int) -> float:
    """Pr[the ⌈L/2⌉-th largest of L independent N(0, 1) is ≥ z]: at least that many at or
    above z, a binomial tail."""
    need = (levels + 1) // 2
    tail = _normal_sf(z)
    return float(
        sum(
            math.comb(levels, j) * tail**j * (1 - tail) ** (levels - j)
            for j in range(need, levels + 1)
        )
    )


def _median_threshold(alpha: float, levels: int) -> float:
    low, high = -10.0, 60.0
    for _ in range(80):
        mid = (low + high) / 2
        low, high = (mid, high) if _median_tail(mid, levels) > alpha else (low, mid)
    return high


def rows_test(
    counts: FloatArray,
    known: FloatArray,
    group_sizes: FloatArray,
    scale: float,
    collision: FloatArray,
    alpha: float,
) -> RowsResult:
    """Are each value's reports spread over the rows of every level as an honest value's?

    An honest value's reports pick their row uniformly, so at each level its cell counts
    c_r over the h rows are, given their total T, multinomial with weights ∝ the rows'
    group sizes — up to the collisions: another value lands in x's cell of a row with
    probability 1/m, independently across rows. Per level, Pearson's dispersion
    X²_l = Σ_r (c_r − e_r)²/(e_r + s²·V), e_r = T·n_r/Σn, V the collision variance of a
    cell's frequency and s the counts per unit of it, is about χ²_{h−1}, turned into z_l
    by Wilson–Hilferty. A collision with a heavy value inflates a level or two; the
    statistic is the median of z_l over the L levels, whose tail under independent
    standard normals is a binomial one, so a few such levels do not move it. Mass crafted
    into a few rows of every level (a discovered value needs mass at every level) moves
    all of them. Collisions with the strong values the discovery knows are taken out
    first (their estimated counts in each of x's cells, less the part common to all rows,
    which is x's own when x is itself known).

    Args:
        counts: (N, L, h) the count of each value's cell in each level and row.
        known: (N, L, h) the known values' estimated frequency in those cells.
        group_sizes: (L, h) reports per group.
        scale: counts per unit of cell frequency, n/G·(p* − q*).
        collision: (L,) the collision variance of a cell's frequency at each level.
        alpha: the level of the threshold (per value).
    """
    c = np.asarray(counts, dtype=np.float64)
    k = np.asarray(known, dtype=np.float64)
    c = c - scale * (k - np.median(k, axis=2, keepdims=True))
    c = np.maximum(c, 0.0)
    weights = group_sizes / group_sizes.sum(axis=1, keepdims=True)  # (L, h)
    total = c.sum(axis=2, keepdims=True)
    expected = total * weights[None, :, :]
    var = expected + (scale**2) * np.asarray(collision, dtype=np.float64)[None, :, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(var > 0, (c - expected) ** 2 / var, 0.0)
        share = np.where(total[..., 0] > 0, c.max(axis=2) / total[..., 0], 1.0 / c.shape[2])
    df = c.shape[2] - 1
    h9 = 2.0 / (9.0 * df)
    z = ((terms.sum(axis=2) / df) ** (1.0 / 3.0) - (1.0 - h9)) / math.sqrt(h9)  # (N, L)
    levels = c.shape[1]
    median = -np.sort(-z, axis=1)[:, (levels + 1) // 2 - 1]
    tails = np.array([_median_tail(float(x), levels) for x in median])
    return RowsResult(median, levels, _median_threshold(alpha, levels), tails, share.mean(axis=1))


def sketch_rows_test(
    est: SketchEstimator, values: npt.NDArray[np.uint8], known: list[Known], alpha: float
) -> RowsResult:
    """:func:`rows_test` of padded values ((N, L) uint8) in a window's sketch.

    Args:
        est: the window's estimator.
        values: the values (the discovered ones).
        known: what the discovery knew at each level (:attr:`Discovery.known`).
        alpha: the level of the threshold (per value).
    """
    m, codec = est.m, est.codec
    levels, h = m.levels, m.rows
    count = len(values)
    counts = np.zeros((count, levels, h))
    known_f = np.zeros((count, levels, h))
    collision = np.zeros(levels)
    rows = np.arange(h)[None, :]
    phi = np.zeros((count, h), dtype=np.int64)
    for level in range(levels):
        phi = codec.extend(phi, values[:, level])
        cells = codec.cells(phi, level)
        counts[:, level, :] = est.cell_counts[level][rows, cells]
        at = known[level] if level < len(known) else None
        if at is not None:
            known_f[:, level, :] = (est.cell_freq[level] - at.residual)[rows, cells]
        collision[level] = est.collision_moment(level, at) * (1 / m.cells) * (1 - 1 / m.cells)
    sizes = est.cell_counts.sum(axis=2).astype(np.float64)
    inner = m.inner
    scale = est.n / m.groups * (inner.p - inner.q)
    return rows_test(counts, known_f, sizes, scale, collision, alpha)

"""A distribution metric's quantiles over many windows at once: a trend's months of them.

Each window's histogram is fitted as its own answer fits it (the tree's weighted
constrained inference, or HaarHRR's synthesis), for all windows in one pass over (W, D)
arrays. The CDF's standard error at every band edge is the window's own, computed in
O(h²) per edge: a prefix's level weights take at most 2l + 1 values on contiguous runs of
level-l nodes, so its variance needs only prefix sums of each level's node variances.
The band's critical value is Bonferroni's over the band's edges, z at 1 − α/(2M): valid
whatever the correlation, with no draws (the window's own answer draws 2,000 Gaussian
paths, 0.2 s of CPU at 1,024 bins; its c is a little smaller). In full:
docs/statistics/distributions.md ("Quantiles over time").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from aggregator.stats.codecs import fwht
from aggregator.stats.distribution import (
    BAND_CELLS,
    BAND_POINTS,
    FloatArray,
    Quantile,
    read_quantile,
)
from aggregator.stats.distribution_haar import analyse, synthesise
from aggregator.stats.intervals import z_value
from client_sdk.mechanisms.distribution import DistributionMechanism, HierarchicalHistogram
from client_sdk.mechanisms.haar import HaarHRR

__all__ = ["QuantileSeries", "band_points", "bonferroni_critical", "quantile_series"]

IntArray = npt.NDArray[np.int64]


def band_points(bins: int) -> IntArray:
    """The edge indices j (1..D − 1) of the CDF band, as a window's answer has them."""
    step = max(1, bins // BAND_POINTS)
    return np.arange(step, bins, step)


def bonferroni_critical(points: int, confidence: float) -> float:
    """z at 1 − (1 − confidence)/(2M): a band simultaneous over M edges, any correlation."""
    return z_value(1.0 - (1.0 - confidence) / max(points, 1))


@dataclass(frozen=True)
class QuantileSeries:
    """W windows' quantiles: ``n`` (W,), ``ready`` (W,), ``quantiles[w]`` the window's
    (empty when not ready), and the band's critical value (one for every window)."""

    n: IntArray
    ready: npt.NDArray[np.bool_]
    band_critical: float
    quantiles: list[list[Quantile]]


def quantile_series(
    m: DistributionMechanism,
    edges: npt.ArrayLike,
    counters: npt.ArrayLike,
    quantiles: tuple[float, ...],
    confidence: float = 0.95,
) -> QuantileSeries:
    """The quantiles of W windows from their counters (W, C), each interval read off a
    Bonferroni band over the window's own CDF standard errors.

    Raises:
        ValueError: counters of the wrong shape.
    """
    table = np.asarray(counters, dtype=np.int64)
    if table.ndim != 2 or table.shape[1] != m.counters:
        raise ValueError(f"counters of shape {table.shape}: (windows, {m.counters}) expected")
    h = m.height
    n_levels = table[:, :h]
    ready = np.all(n_levels > 0, axis=1)
    points = band_points(m.bins)
    c = bonferroni_critical(len(points), confidence)
    at = np.asarray(edges, dtype=np.float64)[np.concatenate(([0], points, [m.bins]))]
    found: list[list[Quantile]] = [[] for _ in range(len(table))]
    ready_rows = np.flatnonzero(ready)
    chunk = max(1, BAND_CELLS // m.bins)  # windows at once: (chunk, D) arrays of 4 MiB
    for start in range(0, len(ready_rows), chunk):
        rows = ready_rows[start : start + chunk]
        if isinstance(m, HaarHRR):
            cdf, se = _haar_cdf(m, table[rows], points)
        else:
            cdf, se = _tree_cdf(m, table[rows], points)
        zero, one = np.zeros((len(rows), 1)), np.ones((len(rows), 1))
        full = np.hstack([zero, cdf, one])
        half = c * np.hstack([zero, se, zero])
        log_scale = m.scale == "log"
        for i, w in enumerate(rows):
            found[w] = [read_quantile(p, at, full[i], half[i], log_scale) for p in quantiles]
    return QuantileSeries(n_levels.sum(axis=1), ready, c, found)


def _plugin(histogram: FloatArray) -> FloatArray:
    """Each row clipped to ≥ 0 and renormalised (uniform where nothing is left)."""
    f = np.clip(histogram, 0.0, None)
    total = f.sum(axis=1, keepdims=True)
    uniform = np.full_like(f, 1.0 / f.shape[1])
    return np.where(total > 0, f / np.where(total > 0, total, 1.0), uniform)


def _tree_cdf(
    m: HierarchicalHistogram, table: IntArray, points: IntArray
) -> tuple[FloatArray, FloatArray]:
    """F̂ and its standard error at ``points`` for each row of tree counters (docs §2–3)."""
    h, b, d = m.height, m.branching, m.bins
    sizes = [b ** (h - level) for level in range(h + 1)]
    n_l = table[:, :h].astype(np.float64)
    weights = np.empty_like(n_l)
    raw = []
    for i, o in enumerate(m.oracles):
        p, q, k = o.p, o.q, m.level_size(i + 1)
        weights[:, i] = n_l[:, i] / (q * (1 - q) / (p - q) ** 2 + ((1 - p - q) / (p - q) + 1) / k)
        start = m.offsets[i]
        raw.append((table[:, start : start + k] / n_l[:, i : i + 1] - q) / (p - q))
    lambdas = np.cumsum((weights * np.array(sizes[1:], dtype=np.float64))[:, ::-1], axis=1)[:, ::-1]
    rhs = np.zeros((len(table), d))
    for i, y in enumerate(raw):
        rhs += weights[:, i : i + 1] * np.repeat(y, sizes[i + 1], axis=1)
    histogram = np.full_like(rhs, 1.0 / d)
    previous = np.repeat(rhs.mean(axis=1, keepdims=True), d, axis=1)
    for k in range(1, h + 1):
        shape = (len(rhs), d // sizes[k], sizes[k])
        current = np.repeat(rhs.reshape(shape).mean(axis=2), sizes[k], axis=1)
        histogram += (current - previous) / lambdas[:, k - 1 : k]
        previous = current
    f = _plugin(histogram)
    cdf = np.cumsum(histogram, axis=1)[:, points - 1]
    # a prefix [0, j): its cut block and fraction at every level k = 0..h
    cut = [points // s for s in sizes]
    frac = [(points - u * s) / s for u, s in zip(cut, sizes, strict=True)]
    # the variance's terms are (points, windows): a gather of whole rows is a copy
    inverse = (1.0 / lambdas).T  # λ_k⁻¹ at row k − 1
    total = np.zeros((len(points), len(table)))
    running = np.zeros_like(total)  # S_κ = Σ_{k ≤ κ} λ_k⁻¹(frac_k − frac_{k−1})
    partial = [running.copy()]
    for k in range(1, h + 1):
        running = running + (frac[k] - frac[k - 1])[:, None] * inverse[k - 1][None, :]
        partial.append(running)
    for level in range(1, h + 1):
        o = m.oracles[level - 1]
        p, q = o.p, o.q
        share = f.reshape(len(f), -1, sizes[level]).sum(axis=2).T  # (nodes, windows)
        nl = n_l[:, level - 1]
        v = (share * p * (1 - p) + (1 - share) * q * (1 - q)) / (nl * (p - q) ** 2) + share / nl
        sum_v = np.vstack([np.zeros((1, len(nl))), np.cumsum(v, axis=0)])
        sum_f = np.vstack([np.zeros((1, len(nl))), np.cumsum(share, axis=0)])
        scale = weights[:, level - 1] * sizes[level]
        runs = []  # (weight, first node, end node): the prefix's level weights, by run
        for kappa in range(level):
            below = b ** (level - kappa - 1)  # level-l nodes under a level-(κ+1) node
            first, last = cut[kappa] * b * below, (cut[kappa] + 1) * b * below
            mid = cut[kappa + 1] * below
            base = partial[kappa]
            step = inverse[kappa][None, :]
            runs.append((scale * (base + (1 - frac[kappa])[:, None] * step), first, mid))
            runs.append((scale * (base - frac[kappa][:, None] * step), mid + below, last))
        runs.append((scale * partial[level], cut[level], cut[level] + 1))
        square, linear = np.zeros_like(total), np.zeros_like(total)
        for w, a, z in runs:
            square += w * w * (sum_v[z] - sum_v[a])
            linear += w * (sum_f[z] - sum_f[a])
        total += square - linear**2 / nl
    prefix = np.cumsum(f, axis=1)[:, points - 1]
    n = n_l.sum(axis=1, keepdims=True)
    return cdf, np.sqrt(np.maximum(total.T - (prefix - prefix**2) / n, 0.0))


def _haar_cdf(m: HaarHRR, table: IntArray, points: IntArray) -> tuple[FloatArray, FloatArray]:
    """F̂ and its standard error at ``points`` for each row of HaarHRR counters (docs §5):
    a prefix has one nonzero weight per level, at the node holding its cut."""
    h, d, c = m.height, m.bins, m.scale_factor
    n_l = table[:, :h].astype(np.float64)
    coefficients = []
    for level in range(h):
        size, start = 1 << level, m.offsets[level]
        every, plus = table[:, start : start + size], table[:, start + size : start + 2 * size]
        coefficients.append(c * fwht(2 * plus - every) / n_l[:, level : level + 1])
    histogram = synthesise(np.ones((len(table), 1)), coefficients)
    f = _plugin(histogram)
    theta = [x.reshape(len(f), 1 << level) for level, x in enumerate(_analyse_rows(f, h))]
    total = np.zeros((len(table), len(points)))
    for level in range(h):
        size = d >> level
        node = points // size
        inside = points - node * size
        w = (np.minimum(inside, size // 2) - np.maximum(inside - size // 2, 0)) / size
        total += (c * c * w * w - (w * theta[level][:, node]) ** 2) / n_l[:, level : level + 1]
    cdf = np.cumsum(histogram, axis=1)[:, points - 1]
    return cdf, np.sqrt(np.maximum(total, 0.0))


def _analyse_rows(f: FloatArray, height: int) -> list[FloatArray]:
    """:func:`~aggregator.stats.distribution_haar.analyse` of each row."""
    if len(f) == 1:
        return [x[None, :] for x in analyse(f[0], height)]
    out = []
    for level in range(height):
        halves = f.reshape(len(f), 1 << level, 2, -1).sum(axis=-1)
        out.append(halves[..., 0] - halves[..., 1])
    return out

"""Distributions from hierarchical-histogram counters: a consistent histogram, range
shares, the CDF with a simultaneous band, and quantiles with intervals.

Each level's OUE counts give unbiased node estimates y_l. The histogram x̃ is their
weighted least-squares fit under the tree's constraints (every parent the sum of its
children, the root 1): Hay et al.'s constrained inference with a weight per level. On a
B-ary tree the normal equations are diagonal in the nested block averages P_0 ⊂ … ⊂ P_h,
so x̃ = 1/D + Σ_k λ_k⁻¹(P_k − P_{k−1})b, λ_k = Σ_{l≥k} c_l·s_l, in O(D·h). Any linear
answer aᵀx̃ is then Σ_l w_lᵀ y_l with explicit weights, whose variance is exact: OUE's
node estimates are independent given the level's devices, and the random split of the
devices into levels adds a term computed from the estimated histogram (plug-in).

In full: ``docs/statistics/distributions.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from aggregator.stats.arrays import FloatArray
from aggregator.stats.intervals import z_value
from client_sdk.mechanisms.distribution import HierarchicalHistogram

__all__ = [
    "BAND_DRAWS",
    "DEFAULT_QUANTILES",
    "DistributionEstimate",
    "Quantile",
    "RangeShare",
    "estimate_distribution",
    "read_quantile",
]


DEFAULT_QUANTILES = (0.5, 0.9, 0.95, 0.99)

BAND_DRAWS = 2000
"""Gaussian draws of the CDF's noise that set the band's critical value: the share of
draws beyond it has a Monte Carlo error of √(0.05·0.95/2000) = 0.5 % of coverage. Drawn
with a fixed seed, so an answer is reproducible."""

BAND_CELLS = 1 << 19
"""Leaf values drawn at once per level (4 MiB): every draw at once up to D = 256, 512 of
them at a time at D = 1,024."""

BAND_POINTS = 1024
"""The band is computed at most at this many CDF points (every edge up to 1,024 bins,
every (D/1,024)-th beyond): a D×D covariance is never formed, but draws cost O(D) each."""


def _block_mean(v: FloatArray, size: int) -> FloatArray:
    """Each row of ``v`` (…, D) averaged over blocks of ``size`` and spread back."""
    shape = v.shape
    means = v.reshape(*shape[:-1], shape[-1] // size, size).mean(axis=-1)
    return np.repeat(means, size, axis=-1)


SLICED_SUMS = 16
"""Blocks of at most this many are summed as ``size`` strided slices: numpy reduces a
short innermost axis ~10× slower than it adds whole rows (measured at size 4)."""


def _block_sum(v: FloatArray, size: int) -> FloatArray:
    """Each row of ``v`` (…, D) summed over blocks of ``size`` (…, D/size)."""
    if size <= SLICED_SUMS:
        out = v[..., 0::size].copy()
        for k in range(1, size):
            out += v[..., k::size]
        return out
    shape = v.shape
    return v.reshape(*shape[:-1], shape[-1] // size, size).sum(axis=-1)


@dataclass(frozen=True)
class RangeShare:
    """The share of values in [low, high] (bin-aligned), with its interval."""

    low: float
    high: float
    share: float
    std_error: float
    ci_low: float
    ci_high: float


@dataclass(frozen=True)
class Quantile:
    """The p-quantile: a point estimate and an interval from the simultaneous CDF band."""

    p: float
    value: float
    ci_low: float
    ci_high: float


@dataclass(frozen=True)
class DistributionEstimate:
    """A window's distribution.

    Attributes:
        m: the mechanism.
        edges: the D + 1 bin edges in the metric's units.
        n_levels: reports per level.
        histogram: x̃, each bin's share (consistent; may be slightly negative: raw).
        confidence: of every interval; the CDF band is simultaneous at it.
    """

    m: HierarchicalHistogram
    edges: FloatArray
    n_levels: npt.NDArray[np.int64]
    support: npt.NDArray[Any]
    """The counters (expected ones, floats, when planning)."""
    confidence: float = 0.95

    # -- the fit -----------------------------------------------------------------------
    @property
    def n(self) -> int:
        """Reports in the window."""
        return int(self.n_levels.sum())

    @property
    def ready(self) -> bool:
        """Whether every level has a report (else no estimate)."""
        return bool(np.all(self.n_levels > 0))

    @cached_property
    def _raw(self) -> list[FloatArray]:
        """y_l: each level's unbiased node estimates (of its own devices' shares)."""
        out = []
        for i, o in enumerate(self.m.oracles):
            start, size = self.m.offsets[i], self.m.level_size(i + 1)
            counts = self.support[start : start + size].astype(np.float64)
            out.append((counts / self.n_levels[i] - o.q) / (o.p - o.q))
        return out

    @cached_property
    def _weights(self) -> FloatArray:
        """c_l = 1/σ̄_l²: a level node's mean variance at f = 1/B^l (LDP and sampling)."""
        out = []
        for i, o in enumerate(self.m.oracles):
            p, q, k = o.p, o.q, self.m.level_size(i + 1)
            per = q * (1 - q) / (p - q) ** 2 + ((1 - p - q) / (p - q) + 1) / k
            out.append(self.n_levels[i] / per)
        return np.array(out)

    @property
    def _sizes(self) -> list[int]:
        """s_l = B^{h−l}: leaves under a node of level l (l = 0..h)."""
        b, h = self.m.branching, self.m.height
        return [b ** (h - level) for level in range(h + 1)]

    @cached_property
    def _lambdas(self) -> FloatArray:
        """λ_k = Σ_{l ≥ k} c_l·s_l for k = 1..h (index k − 1)."""
        terms = self._weights * np.array(self._sizes[1:], dtype=np.float64)
        return np.cumsum(terms[::-1])[::-1]

    def _solve(self, a: FloatArray) -> FloatArray:
        """g = Σ_{k≥1} λ_k⁻¹(P_k − P_{k−1})a, row by row (a: (…, D))."""
        sizes = self._sizes
        out = np.zeros_like(a)
        previous = _block_mean(a, sizes[0])
        for k in range(1, self.m.height + 1):
            current = a if sizes[k] == 1 else _block_mean(a, sizes[k])
            out += (current - previous) / self._lambdas[k - 1]
            previous = current
        return out

    @cached_property
    def histogram(self) -> FloatArray:
        """x̃: the consistent (weighted least-squares) share of each bin; sums to 1."""
        d = self.m.bins
        b = np.zeros(d)
        for i, y in enumerate(self._raw):
            b += self._weights[i] * np.repeat(y, self._sizes[i + 1])
        return 1.0 / d + self._solve(b[None, :])[0]

    @cached_property
    def plugin(self) -> FloatArray:
        """The histogram clipped to ≥ 0 and renormalised: the variances' plug-in."""
        f = np.clip(self.histogram, 0.0, None)
        total = f.sum()
        return f / total if total > 0 else np.full(self.m.bins, 1.0 / self.m.bins)

    def _level_weights(self, means: list[FloatArray]) -> list[FloatArray]:
        """w_l = c_l·Σ_{u's leaves}(S·a): the weight of each level-l node estimate in each
        query's answer, from the queries' block means at every level (``means[k]``:
        (Q, B^k), k = 0..h).

        Summed over a level-l node's s_l leaves, (P_k − P_{k−1})a keeps only the terms
        k ≤ l, s_l times the block means: w_l = c_l·s_l·Σ_{k=1}^{l} λ_k⁻¹(m_k − m_{k−1})
        (each m_k spread to level l), accumulated level by level: O(Q·B^l), no D×D step.
        """
        b, sizes, c = self.m.branching, self._sizes, self._weights
        inverse = np.concatenate(([0.0], 1.0 / self._lambdas, [0.0]))
        above = -inverse[1] * means[0]  # Σ_{k<l} (λ_k⁻¹ − λ_{k+1}⁻¹)·m_k − λ_1⁻¹·m_0
        out = []
        for level in range(1, self.m.height + 1):
            above = np.repeat(above, b, axis=1)
            m = means[level]
            out.append((c[level - 1] * sizes[level]) * (above + inverse[level] * m))
            above += (inverse[level] - inverse[level + 1]) * m
        return out

    def _block_means(self, queries: FloatArray) -> list[FloatArray]:
        """Each query row's block means at levels 0..h."""
        rows = len(queries)
        return [
            queries.reshape(rows, -1, size).mean(axis=-1) if size > 1 else queries
            for size in self._sizes
        ]

    def _interval_means(
        self, lows: npt.NDArray[np.int64], highs: npt.NDArray[np.int64]
    ) -> list[FloatArray]:
        """The block means of the queries 1[lows ≤ i < highs] at levels 0..h: each block's
        overlap with [low, high) over its size (never a D-wide query row)."""
        out = []
        for level, size in enumerate(self._sizes):
            starts = np.arange(self.m.branching**level) * size
            top = np.minimum(highs[:, None], starts + size)
            bottom = np.maximum(lows[:, None], starts)
            out.append(np.clip(top - bottom, 0, None) / size)
        return out

    @cached_property
    def _node_variances(self) -> list[tuple[FloatArray, FloatArray]]:
        """Per level: (each node's variance of y_l around its devices' share + share/n_l,
        the plug-in node shares F_l)."""
        out = []
        f = self.plugin
        for i, o in enumerate(self.m.oracles):
            n_l, p, q = self.n_levels[i], o.p, o.q
            share = _block_sum(f, self._sizes[i + 1])
            ldp = (share * p * (1 - p) + (1 - share) * q * (1 - q)) / (n_l * (p - q) ** 2)
            out.append((ldp + share / n_l, share))
        return out

    def _variances(
        self, means: list[FloatArray], linear: FloatArray, square: FloatArray
    ) -> FloatArray:
        """Var of each query's answer from its block means, a·f and (a∘a)·f (docs §3)."""
        total = np.zeros(len(linear))
        for w, (v, share), n_l in zip(
            self._level_weights(means), self._node_variances, self.n_levels, strict=True
        ):
            total += (w * w) @ v - (w @ share) ** 2 / n_l
        spread = square - linear**2
        return np.maximum(total - spread / self.n, 0.0)

    def variances(self, queries: FloatArray) -> FloatArray:
        """Var of each query row's answer aᵀx̃ (docs/statistics/distributions.md, §3)."""
        f = self.plugin
        return self._variances(self._block_means(queries), queries @ f, (queries * queries) @ f)

    def interval_variances(self, lows: npt.ArrayLike, highs: npt.ArrayLike) -> FloatArray:
        """Var of the share of bins [low, high) for each pair, in chunks of
        :data:`BAND_CELLS` node weights (O(D) memory per query, D×D never formed)."""
        lo = np.asarray(lows, dtype=np.int64)
        hi = np.asarray(highs, dtype=np.int64)
        below = np.concatenate(([0.0], np.cumsum(self.plugin)))
        chunk = max(1, BAND_CELLS // self.m.bins)
        out = []
        for start in range(0, len(lo), chunk):
            a, b = lo[start : start + chunk], hi[start : start + chunk]
            share = below[b] - below[a]
            out.append(self._variances(self._interval_means(a, b), share, share))
        return np.concatenate(out) if out else np.zeros(0)

    # -- answers -----------------------------------------------------------------------
    @cached_property
    def bin_std_errors(self) -> FloatArray:
        """Each bin's standard error."""
        at = np.arange(self.m.bins)
        return np.sqrt(self.interval_variances(at, at + 1))

    @cached_property
    def _band_points(self) -> npt.NDArray[np.int64]:
        """Edge indices j (1..D−1) where the CDF and its band are given."""
        d = self.m.bins
        step = max(1, d // BAND_POINTS)
        return np.arange(step, d, step)

    @cached_property
    def cdf(self) -> FloatArray:
        """F̂ at the band points' edges."""
        return np.cumsum(self.histogram)[self._band_points - 1]

    @cached_property
    def cdf_std_errors(self) -> FloatArray:
        """Each band point's standard error."""
        points = self._band_points
        return np.sqrt(self.interval_variances(np.zeros_like(points), points))

    @cached_property
    def band_critical(self) -> float:
        """c with P(max_j |F̂_j − F_j|/se_j ≤ c) = confidence under the Gaussian law of the
        estimate (:data:`BAND_DRAWS` draws; ≥ the pointwise z)."""
        se = self.cdf_std_errors
        gen = np.random.default_rng(20190401)  # fixed: a window's answer is reproducible
        points = self._band_points - 1  # evenly spaced: a strided view, not a gather
        at = slice(int(points[0]), int(points[-1]) + 1, int(points[1] - points[0]))
        inverse = np.where(se > 0, 1.0 / np.where(se > 0, se, 1.0), 0.0)
        maxima = []
        chunk = min(BAND_DRAWS, max(1, BAND_CELLS // self.m.bins))
        for start in range(0, BAND_DRAWS, chunk):
            draws = min(chunk, BAND_DRAWS - start)
            errors = self._noise_draws(gen, draws)
            np.cumsum(errors, axis=1, out=errors)
            prefix = errors[:, at]
            np.abs(prefix, out=prefix)
            prefix *= inverse
            maxima.append(prefix.max(axis=1))
        return max(float(np.quantile(np.concatenate(maxima), self.confidence)), self.z)

    def _noise_draws(self, gen: np.random.Generator, draws: int) -> FloatArray:
        """Draws of x̃'s error: each level's Gaussian LDP noise and its devices' sampling
        (the split of the n devices into levels: d_l = ξ_l/√n_l − Σ_m √n_m ξ_m / n with
        ξ_l ~ N(0, diag f − ffᵀ) independent, whose covariances are the split's).

        ξ_l = √f∘z_l − (z_l·√f) f is only ever needed summed over level l's nodes and,
        pooled, over every level's: the tree's node sums, built bottom-up. x̃'s error
        S·Σ_l c_l·(level-l noise spread to its leaves) is then solved on the tree
        (:meth:`_tree_solve`) without a D×D step: O(D) per draw and level, the leaf-wide
        arrays worked in place.
        """
        f, n, h, b, d = self.plugin, self.n, self.m.height, self.m.branching, self.m.bins
        root = np.sqrt(f)
        counts = [int(x) for x in self.n_levels]
        node_sums: list[FloatArray] = []  # Σ over level l's nodes of √n_l·√f∘z_l
        pooled = np.zeros((draws, d))  # Σ_m √n_m·√f∘z_m (leaves)
        z = np.empty((draws, d))
        for level in range(1, h + 1):
            if level == h:
                z = np.empty((draws, d))  # kept: it becomes the leaves' noise
            gen.standard_normal(out=z)
            z *= root * math.sqrt(counts[level - 1])
            pooled += z
            node_sums.append(_block_sum(z, self._sizes[level]) if level < h else z)
        pooled_sums = [pooled]  # over level h, h − 1, …, 1's nodes
        for _ in range(h - 1):
            pooled_sums.append(_block_sum(pooled_sums[-1], b))
        pooled_sums.reverse()
        pooled_dot = pooled_sums[0].sum(axis=1)
        noises = []
        for i, o in enumerate(self.m.oracles):
            n_l, own = counts[i], node_sums[i]
            share = _block_sum(f, self._sizes[i + 1])
            p, q = o.p, o.q
            sd = np.sqrt((share * p * (1 - p) + (1 - share) * q * (1 - q)) / n_l) / (p - q)
            coef = own.sum(axis=1) / n_l - pooled_dot / n
            if i < h - 1:
                g = gen.standard_normal((draws, len(share)))
                noise = own / n_l - pooled_sums[i] / n - np.outer(coef, share) + sd * g
            else:  # the leaves: in place, in the pooled sum's buffer once it is used
                noise = own
                noise *= 1.0 / n_l
                buffer = pooled_sums[i]
                buffer *= 1.0 / n
                noise -= buffer
                np.multiply(coef[:, None], share[None, :], out=buffer)
                noise -= buffer
                gen.standard_normal(out=buffer)
                buffer *= sd
                noise += buffer
            noises.append(noise)
        return self._tree_solve(noises)

    def _tree_solve(self, noises: list[FloatArray]) -> FloatArray:
        """S·b for b = Σ_l c_l·(noises[l − 1] spread to its leaves), rows of draws (the
        leaves' noise is overwritten).

        S·b = Σ_k λ_k⁻¹(P_k − P_{k−1})b needs b's block means at every level k: the
        coarser levels' noise spread down (i ≤ k) plus the finer ones' summed up (i > k)
        over s_k leaves. The answer is then Σ_k γ_k·(mean_k spread to the leaves), with
        γ_k = λ_k⁻¹ − λ_{k+1}⁻¹ (λ_{h+1}⁻¹ = 0, λ_0⁻¹ = 0), spread down level by level.
        """
        h, b, sizes = self.m.height, self.m.branching, self._sizes
        c = self._weights
        draws = len(noises[0])
        below: list[FloatArray] = [c[h - 1] * _block_sum(noises[h - 1], b)]  # level h − 1
        for k in range(h - 2, -1, -1):  # Σ_{i>k} c_i s_i·noise_i, over level k's nodes
            below.append(_block_sum(below[-1] + (c[k] * sizes[k + 1]) * noises[k], b))
        below.reverse()
        gamma = -np.diff(np.concatenate(([0.0], 1.0 / self._lambdas, [0.0])))  # γ_0..γ_h
        above = np.zeros((draws, 1))  # Σ_{i≤k} c_i·noise_i, spread to level k
        out = gamma[0] * below[0] / sizes[0]
        for k in range(1, h):
            above = np.repeat(above, b, axis=1) + c[k - 1] * noises[k - 1]
            out = np.repeat(out, b, axis=1) + gamma[k] * (above + below[k] / sizes[k])
        # the leaves: mean_h = above_{h−1} spread + c_h·noise_h (nothing below them)
        out += gamma[h] * above
        leaves = noises[h - 1]
        leaves *= gamma[h] * c[h - 1]
        leaves += np.repeat(out, b, axis=1)
        return leaves

    @property
    def z(self) -> float:
        """The pointwise normal quantile."""
        return z_value(self.confidence)

    def bin_index(self, value: float, upper: bool) -> int:
        """The edge index at or outside ``value``: below it (lower end) or above (upper)."""
        edges = self.edges
        if upper:
            at = int(np.searchsorted(edges, value, "left"))
            return min(len(edges) - 1, max(1, at))
        at = int(np.searchsorted(edges, value, "right")) - 1
        return max(0, min(len(edges) - 2, at))

    def range_share(self, low: float, high: float) -> RangeShare:
        """The share of values in [low, high], widened outward to bin edges."""
        i, j = self.bin_index(low, upper=False), self.bin_index(high, upper=True)
        share = float(self.histogram[i:j].sum())
        se = math.sqrt(float(self.interval_variances([i], [j])[0]))
        return RangeShare(
            float(self.edges[i]),
            float(self.edges[j]),
            share,
            se,
            share - self.z * se,
            share + self.z * se,
        )

    def quantile(self, p: float) -> Quantile:
        """The p-quantile, its interval from inverting the simultaneous band
        (:func:`read_quantile`)."""
        edges = self.edges[np.concatenate(([0], self._band_points, [self.m.bins]))]
        cdf = np.concatenate(([0.0], self.cdf, [1.0]))
        half = self.band_critical * np.concatenate(([0.0], self.cdf_std_errors, [0.0]))
        return read_quantile(p, edges, cdf, half, self.m.scale == "log")


def read_quantile(
    p: float, edges: FloatArray, cdf: FloatArray, half: FloatArray, log_scale: bool
) -> Quantile:
    """The p-quantile read off a CDF band: F̂ ± ``half`` at ``edges`` (the range's ends
    included, F̂ 0 and 1 there).

    With the band covering F at every edge, q_p lies above the last edge whose upper band
    is below p and at or below the first edge whose lower band reaches p. The point
    estimate is where the running maximum of F̂ (clipped to [0, 1]) crosses p, linear
    within its bin (geometric on a log scale).
    """
    upper, lower = cdf + half, cdf - half
    above = np.flatnonzero(upper >= p)
    low = float(edges[max(0, above[0] - 1)]) if len(above) else float(edges[-1])
    reached = np.flatnonzero(lower >= p)
    high = float(edges[reached[0]]) if len(reached) else float(edges[-1])
    monotone = np.maximum.accumulate(np.clip(cdf, 0.0, 1.0))
    j = int(np.searchsorted(monotone, p, "left"))
    j = min(max(j, 1), len(edges) - 1)
    f0, f1 = monotone[j - 1], monotone[j]
    t = 0.5 if f1 <= f0 else (p - f0) / (f1 - f0)
    if log_scale:
        value = float(edges[j - 1] * (edges[j] / edges[j - 1]) ** t)
    else:
        value = float(edges[j - 1] + t * (edges[j] - edges[j - 1]))
    return Quantile(p, value, min(low, value), max(high, value))


def estimate_distribution(
    m: HierarchicalHistogram,
    counters: npt.ArrayLike,
    edges: npt.ArrayLike,
    confidence: float = 0.95,
) -> DistributionEstimate:
    """The distribution of a window from its counters (n_l of each level, then supports).

    Args:
        m: the metric's mechanism.
        counters: the window's :attr:`~HierarchicalHistogram.counters` values.
        edges: the D + 1 bin edges in the metric's units.
        confidence: of every interval (the CDF band's simultaneously).
    """
    values = np.asarray(counters, dtype=np.int64)
    if len(values) != m.counters:
        raise ValueError(f"{len(values)} counters for a mechanism of {m.counters}")
    return DistributionEstimate(
        m, np.asarray(edges, dtype=np.float64), values[: m.height], values, confidence
    )


def to_dict(est: DistributionEstimate, ranges: Any = (), quantiles: Any = None) -> dict[str, Any]:
    """Plain numbers for tests and tools (the API has its own models)."""
    qs = DEFAULT_QUANTILES if quantiles is None else quantiles
    return {
        "n": est.n,
        "quantiles": [est.quantile(p).__dict__ for p in qs],
        "ranges": [est.range_share(a, b).__dict__ for a, b in ranges],
    }

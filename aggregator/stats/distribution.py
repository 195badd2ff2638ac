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

from aggregator.stats.intervals import z_value
from client_sdk.mechanisms.distribution import HierarchicalHistogram, choose_distribution

__all__ = [
    "BAND_DRAWS",
    "QuantilePlan",
    "plan_quantile",
    "DEFAULT_QUANTILES",
    "DistributionEstimate",
    "Quantile",
    "RangeShare",
    "estimate_distribution",
]

FloatArray = npt.NDArray[np.float64]

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


def _block_sum(v: FloatArray, size: int) -> FloatArray:
    """Each row of ``v`` (…, D) summed over blocks of ``size`` (…, D/size)."""
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

    def _level_weights(self, queries: FloatArray) -> list[FloatArray]:
        """w_l: the weight of each level-l node estimate in each query's answer."""
        g = self._solve(queries)
        return [self._weights[i] * _block_sum(g, self._sizes[i + 1]) for i in range(self.m.height)]

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

    def variances(self, queries: FloatArray) -> FloatArray:
        """Var of each query row's answer aᵀx̃ (docs/statistics/distributions.md, §3)."""
        total = np.zeros(len(queries))
        for w, (v, share), n_l in zip(
            self._level_weights(queries), self._node_variances(), self.n_levels, strict=True
        ):
            total += (w * w) @ v - (w @ share) ** 2 / n_l
        f = self.plugin
        spread = (queries * queries) @ f - (queries @ f) ** 2
        return np.maximum(total - spread / self.n, 0.0)

    # -- answers -----------------------------------------------------------------------
    @cached_property
    def bin_std_errors(self) -> FloatArray:
        """Each bin's standard error."""
        return np.sqrt(self.variances(np.eye(self.m.bins)))

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
        return np.sqrt(self.variances(self._prefixes()))

    def _prefixes(self) -> FloatArray:
        points = self._band_points
        return (np.arange(self.m.bins)[None, :] < points[:, None]).astype(np.float64)

    @cached_property
    def band_critical(self) -> float:
        """c with P(max_j |F̂_j − F_j|/se_j ≤ c) = confidence under the Gaussian law of the
        estimate (:data:`BAND_DRAWS` draws; ≥ the pointwise z)."""
        se = self.cdf_std_errors
        gen = np.random.default_rng(20190401)  # fixed: a window's answer is reproducible
        points = self._band_points - 1
        maxima = []
        chunk = min(BAND_DRAWS, max(1, BAND_CELLS // self.m.bins))
        for start in range(0, BAND_DRAWS, chunk):
            draws = min(chunk, BAND_DRAWS - start)
            prefix = np.cumsum(self._noise_draws(gen, draws), axis=1)[:, points]
            with np.errstate(divide="ignore", invalid="ignore"):
                t = np.where(se > 0, np.abs(prefix) / se, 0.0)
            maxima.append(t.max(axis=1))
        return max(float(np.quantile(np.concatenate(maxima), self.confidence)), self.z)

    def _noise_draws(self, gen: np.random.Generator, draws: int) -> FloatArray:
        """Draws of x̃'s error: each level's Gaussian LDP noise and its devices' sampling
        (the split of the n devices into levels: d_l = ξ_l/√n_l − Σ_m √n_m ξ_m / n with
        ξ_l ~ N(0, diag f − ffᵀ) independent, whose covariances are the split's)."""
        f, n, h = self.plugin, self.n, self.m.height
        root = np.sqrt(f)
        xis = []
        for _ in range(h):
            z = gen.standard_normal((draws, self.m.bins))
            xis.append(root * z - np.outer(z @ root, f))
        pooled = sum(math.sqrt(int(n_l)) * xi for n_l, xi in zip(self.n_levels, xis, strict=True))
        b = np.zeros((draws, self.m.bins))
        for i, o in enumerate(self.m.oracles):
            n_l, size = int(self.n_levels[i]), self._sizes[i + 1]
            sampling = xis[i] / math.sqrt(n_l) - pooled / n
            share = _block_sum(f, size)
            p, q = o.p, o.q
            sd = np.sqrt((share * p * (1 - p) + (1 - share) * q * (1 - q)) / n_l) / (p - q)
            noise = _block_sum(sampling, size) + sd * gen.standard_normal((draws, len(share)))
            b += self._weights[i] * np.repeat(noise, size, axis=1)
        return self._solve(b)

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
        query = np.zeros((1, self.m.bins))
        query[0, i:j] = 1.0
        share = float(query[0] @ self.histogram)
        se = math.sqrt(float(self.variances(query)[0]))
        return RangeShare(
            float(self.edges[i]),
            float(self.edges[j]),
            share,
            se,
            share - self.z * se,
            share + self.z * se,
        )

    def quantile(self, p: float) -> Quantile:
        """The p-quantile, its interval from inverting the simultaneous band.

        With the band covering F at every band point, q_p lies above the last point whose
        upper band is below p and at or below the first point whose lower band reaches p.
        """
        edges = self.edges[np.concatenate(([0], self._band_points, [self.m.bins]))]
        cdf = np.concatenate(([0.0], self.cdf, [1.0]))
        half = self.band_critical * np.concatenate(([0.0], self.cdf_std_errors, [0.0]))
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
        if self.m.scale == "log":
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


@dataclass(frozen=True)
class QuantilePlan:
    """What ``ldp plan --kind distribution`` prints: a quantile's half-width as a share of
    the range, and the users it takes, for a uniform distribution (docs §7)."""

    epsilon: float
    bins: int
    branching: int
    p: float
    users: int
    half_width: float
    """Of the quantile's interval, as a share of the range (a uniform distribution)."""
    band_critical: float


PLAN_REFERENCE = 1_000_000
"""The n whose expected counters the plan's standard error is computed at; it scales as
1/√n (both parts of the variance are ∝ 1/n)."""


def plan_quantile(
    epsilon: float,
    bins: int,
    *,
    users: int | None = None,
    width: float | None = None,
    p: float = 0.95,
    confidence: float = 0.95,
) -> QuantilePlan:
    """The half-width of the p-quantile's interval for ``users``, or the users for a
    half-width ``width`` (a share of the range), under auto's mechanism.

    For a uniform distribution the quantile interval's half-width in the range's units is
    the CDF band's c·se at the quantile (the CDF's slope is 1 per range), plus half a bin
    for the band's edges; a density d times the uniform's divides it by d.

    Raises:
        ValueError: neither or both of users and width, or a width a bin cannot reach.
    """
    if (users is None) == (width is None):
        raise ValueError("give exactly one of users and width")
    m = choose_distribution(epsilon, bins).mechanism
    n0, h = PLAN_REFERENCE, m.height
    counters = np.zeros(m.counters)
    counters[:h] = n0 // h
    for i, o in enumerate(m.oracles):
        size = m.level_size(i + 1)
        share = 1.0 / size
        start = m.offsets[i]
        counters[start : start + size] = (n0 // h) * (share * o.p + (1 - share) * o.q)
    est = DistributionEstimate(
        m, np.linspace(0.0, 1.0, bins + 1), counters[:h].astype(np.int64), counters, confidence
    )
    edge = min(bins - 1, max(1, round(p * bins)))
    prefix = (np.arange(bins) < edge).astype(np.float64)[None, :]
    se0 = math.sqrt(float(est.variances(prefix)[0]))
    c = est.band_critical
    half_bin = 0.5 / bins
    if users is not None:
        half = c * se0 * math.sqrt(n0 / users) + half_bin
        return QuantilePlan(epsilon, bins, m.branching, p, users, half, c)
    assert width is not None
    if width <= half_bin:
        raise ValueError(
            f"±{width:g} of the range is finer than half a bin (1/{2 * bins}): more bins"
        )
    needed = math.ceil(n0 * (c * se0 / (width - half_bin)) ** 2)
    return QuantilePlan(epsilon, bins, m.branching, p, needed, width, c)


def to_dict(est: DistributionEstimate, ranges: Any = (), quantiles: Any = None) -> dict[str, Any]:
    """Plain numbers for tests and tools (the API has its own models)."""
    qs = DEFAULT_QUANTILES if quantiles is None else quantiles
    return {
        "n": est.n,
        "quantiles": [est.quantile(p).__dict__ for p in qs],
        "ranges": [est.range_share(a, b).__dict__ for a, b in ranges],
    }

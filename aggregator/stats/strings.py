"""String metrics on the server: the sketch's codec and its unbiased frequency estimates.

The device side is :class:`client_sdk.mechanisms.strings.StringSketch`. Its counts vector
(length L·h·m) holds, for each group g = level·h + row, the GRR counts C_g(0..m−1) at
``g·m``: one additive vector, summed by the exactly-once commit script like any frequency
metric's support counts. A report increments one counter.

In full: ``docs/statistics/strings.md``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from aggregator.stats.arrays import IntArray
from aggregator.stats.batch import Batch, SupportCodec, int_columns
from aggregator.stats.codecs import Counts
from client_sdk.mechanisms.strings import HASH_PRIME, StringSketch

__all__ = [
    "Known",
    "LevelEstimate",
    "SketchEstimator",
    "StringCodec",
    "as_padded",
    "combine",
    "padded_array",
    "value_lengths",
]

U8Array = npt.NDArray[np.uint8]


def padded_array(values: Sequence[bytes], length: int) -> U8Array:
    """Padded values (bytes of ``length``) as an (n, length) uint8 matrix."""
    if not values:
        return np.zeros((0, length), dtype=np.uint8)
    return np.frombuffer(b"".join(values), dtype=np.uint8).reshape(len(values), length).copy()


def as_padded(matrix: U8Array) -> list[bytes]:
    """Rows of a uint8 matrix as bytes."""
    return [row.tobytes() for row in np.ascontiguousarray(matrix, dtype=np.uint8)]


def mod_p(x: IntArray) -> IntArray:
    """x mod P for 0 ≤ x < 2⁶², P = 2³¹ − 1, by Mersenne folding (numpy's % is several
    times slower): 2³¹ ≡ 1 (mod P), so x ≡ (x & P) + (x >> 31)."""
    x = (x & HASH_PRIME) + (x >> 31)
    x = (x & HASH_PRIME) + (x >> 31)
    return np.where(x >= HASH_PRIME, x - HASH_PRIME, x)


class StringCodec(SupportCodec):
    """The :class:`~aggregator.stats.batch.Codec` of a string metric: sketch counts."""

    _refused = (KeyError, TypeError, ValueError, OverflowError)

    def __init__(self, mechanism: StringSketch) -> None:
        self.m = mechanism
        self.k = mechanism.counters
        a, cb = mechanism.coefficients
        self._a = np.array(a, dtype=np.int64)
        pairs = np.array(cb, dtype=np.int64).reshape(mechanism.levels, mechanism.rows, 2)
        self._c = pairs[:, :, 0]
        self._b = pairs[:, :, 1]

    # -- parsing ----------------------------------------------------------------------
    def _parse_fast(self, payloads: Sequence[Any]) -> Batch | None:
        m = self.m
        return int_columns(payloads, {"l": (0, m.levels), "r": (0, m.rows), "v": (0, m.cells)})

    # -- decoding ---------------------------------------------------------------------
    def count(self, batch: Batch) -> IntArray:
        """The counts vector: C_g(c) at g·m + c, g = level·h + row."""
        m = self.m
        index = (batch.columns["l"] * m.rows + batch.columns["r"]) * m.cells + batch.columns["v"]
        return np.bincount(index, minlength=self.k).astype(np.int64)

    def decode(self, payloads: Sequence[Any]) -> Counts:
        """parse + count."""
        batch = self.parse(payloads)
        return Counts(batch.n, self.count(batch))

    # -- hashing ----------------------------------------------------------------------
    def extend(self, phi: IntArray, byte: npt.NDArray[Any] | int) -> IntArray:
        """φ_r of prefixes extended by one byte (a column of bytes, or one byte for all)."""
        b = np.asarray(byte, dtype=np.int64)
        if b.ndim == 1:
            b = b[:, None]
        return mod_p(phi * self._a[None, :] + b + 1)

    def extension_cells(
        self, phi: IntArray, parent: IntArray, byte: npt.NDArray[Any], level: int
    ) -> IntArray:
        """:meth:`cells` of prefixes ``parent`` (rows of ``phi``) extended by ``byte``,
        without their φ: c·φ' + b ≡ c·(φ·a mod P) + (c·(byte + 1) + b) (mod P), the first
        term per parent and the second per byte value, so each extension costs one
        addition of two residues instead of two products and two reductions."""
        c, b = self._c[level][None, :], self._b[level][None, :]
        per_parent = mod_p(c * mod_p(phi * self._a[None, :]))
        per_byte = mod_p(c * (np.arange(256, dtype=np.int64)[:, None] + 1) + b)
        h = per_parent[parent] + per_byte[np.asarray(byte, dtype=np.int64)]
        h -= HASH_PRIME * (h >= HASH_PRIME)
        m = self.m.cells
        return h & (m - 1) if m & (m - 1) == 0 else h % m

    def cells(self, phi: IntArray, level: int) -> IntArray:
        """H_{level,r}: the (N, h) cells of fingerprints at a level (0-based)."""
        c, b = self._c[level][None, :], self._b[level][None, :]
        h = mod_p(c * phi + b)
        m = self.m.cells
        return h & (m - 1) if m & (m - 1) == 0 else h % m

    # -- simulation -------------------------------------------------------------------
    def encode(self, values: U8Array, gen: np.random.Generator) -> Batch:
        """Perturb padded values (an (n, L) uint8 matrix) with a numpy generator."""
        m, n = self.m, len(values)
        group = gen.integers(0, m.groups, n)
        level, row = np.divmod(group, m.rows)
        phi = np.zeros(n, dtype=np.int64)
        a = self._a[row]
        for j in range(m.levels):
            step = mod_p(phi * a + values[:, j].astype(np.int64) + 1)
            phi = np.where(j <= level, step, phi)
        cell = mod_p(self._c[level, row] * phi + self._b[level, row]) % m.cells
        keep = gen.random(n) < m.inner.p
        other = gen.integers(0, m.cells - 1, n)
        v = np.where(keep, cell, other + (other >= cell))
        return Batch(n, {"l": level.astype(np.int64), "r": row.astype(np.int64), "v": v})

    def to_payloads(self, batch: Batch) -> list[dict[str, Any]]:
        """Payload dicts of a batch, as the SDK would have produced them."""
        names = list(batch.columns)
        cols = [batch.columns[name].tolist() for name in names]
        return [dict(zip(names, row, strict=True)) for row in zip(*cols, strict=True)]


@dataclass(frozen=True)
class LevelEstimate:
    """Estimates of N prefixes or values: f̂, its variance, the variance at f = 0, and the
    counts behind them (for the small-count test)."""

    frequency: np.ndarray
    variance: np.ndarray
    null_variance: np.ndarray
    support: np.ndarray
    """Σ of the counts of the cells used."""
    null_support: np.ndarray
    """E[support] if the value were absent (its cells holding only the collision mass)."""
    coupling: np.ndarray | None = None
    """Per value, −Cov of two of its rows' estimates (at f̂ and at f = 0): each report
    lands in exactly one group, so counts of different groups are negatively correlated
    (:meth:`SketchEstimator.coupling`); :func:`combine` takes the cross-level part out."""
    null_coupling: np.ndarray | None = None

    def take(self, idx: IntArray) -> LevelEstimate:
        """The estimates of the values ``idx``."""
        return LevelEstimate(
            self.frequency[idx],
            self.variance[idx],
            self.null_variance[idx],
            self.support[idx],
            self.null_support[idx],
            None if self.coupling is None else self.coupling[idx],
            None if self.null_coupling is None else self.null_coupling[idx],
        )

    def p_values(self, scale: np.ndarray | float = 1.0) -> np.ndarray:
        """One-sided p-values of f = 0: the larger of the normal test's (the collision
        noise, which dominates at large n) and a Poisson tail of the counts (right in the
        limit of small counts, and conservative: a Poisson's upper tail is above a binomial
        sum's of the same mean beyond mean + 1; Anderson & Samuels 1967).

        Args:
            scale: the null's measured spread in units of σ₀ (see
                :func:`aggregator.stats.discovery.null_scale`), per value or for all.
        """
        with np.errstate(divide="ignore", invalid="ignore"):
            z = self.frequency / (np.sqrt(self.null_variance) * scale)
        normal = normal_sf(np.nan_to_num(z, nan=-np.inf))
        return np.where(np.isnan(self.frequency), 1.0, np.maximum(normal, self.count_tail()))

    def count_tail(self) -> np.ndarray:
        """Pr[support ≥ observed] if the value were absent, the counts taken as Poisson."""
        return poisson_sf(self.support, np.nan_to_num(self.null_support, nan=0.0))


_erfc = np.vectorize(math.erfc, otypes=[float])

EXACT_POISSON = 400
"""Counts up to which :func:`poisson_sf` sums the probabilities exactly; above, the tail
is the normal one with a continuity correction (the Poisson's mean is then ≥ 300 where
it matters, and its skew under 0.06)."""


def normal_sf(z: np.ndarray) -> np.ndarray:
    """Pr[Z ≥ z] of a standard normal (numpy has no erfc; the web app loads no scipy)."""
    return np.asarray(0.5 * _erfc(np.asarray(z, dtype=float) / math.sqrt(2.0)))


def poisson_sf(count: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """Pr[X ≥ count] for X ~ Poisson(mean), elementwise; 1 where count ≤ 0."""
    count = np.asarray(count, dtype=float)
    mean = np.maximum(np.asarray(mean, dtype=float), 1e-300)
    out = np.ones(np.broadcast(count, mean).shape)
    count, mean = np.broadcast_to(count, out.shape), np.broadcast_to(mean, out.shape)
    small = (count > 0) & (count <= EXACT_POISSON)
    if small.any():
        c, mu = count[small], mean[small]
        k = np.arange(EXACT_POISSON)[None, :]
        log_pmf = (
            k * np.log(mu)[:, None]
            - mu[:, None]
            - np.array([math.lgamma(j + 1) for j in range(EXACT_POISSON)])[None, :]
        )
        below = np.where(k < c[:, None], np.exp(log_pmf), 0.0).sum(axis=1)
        out[small] = np.clip(1.0 - below, 0.0, 1.0)
    large = count > EXACT_POISSON
    if large.any():
        c, mu = count[large], mean[large]
        out[large] = normal_sf((c - 0.5 - mu) / np.sqrt(mu))
    return out


@dataclass(frozen=True)
class Gathered:
    """The (N, h) cells of N prefixes at one level, with their raw estimates and counts."""

    level: int
    cells: IntArray
    f_raw: np.ndarray
    support: np.ndarray

    def take(self, idx: IntArray) -> Gathered:
        """The rows ``idx``."""
        return Gathered(self.level, self.cells[idx], self.f_raw[idx], self.support[idx])


@dataclass
class Known:
    """Values known at one level (accepted by discovery), taken out of others' estimates."""

    residual: np.ndarray
    """(h, m): the cells' estimates minus the known values' estimates in them."""
    mass: float = 0.0
    mass_sq: float = 0.0
    accepted: dict[bytes, float] = field(default_factory=dict)
    """Complete values among them: padded value → its estimate (x's own share is added
    back when x itself is estimated)."""
    moment: float | None = field(default=None, repr=False, compare=False)
    """:meth:`SketchEstimator.collision_moment` of this residual once computed (a pass
    over the level's whole table, asked for by every estimate at the level);
    :meth:`take_out` forgets it."""

    def take_out(self, cells: IntArray, f: np.ndarray) -> None:
        """Take N values of estimates ``f`` out of their (N, h) ``cells``, in order."""
        rows = np.broadcast_to(np.arange(self.residual.shape[0])[None, :], cells.shape)
        np.subtract.at(self.residual, (rows, cells), f[:, None])
        self.mass += float(f.sum())
        self.mass_sq += float((f * f).sum())
        self.moment = None


class SketchEstimator:
    """Unbiased frequency estimates of any prefix or string from a string metric's counts.

    Args:
        codec: the metric's codec (its hash functions).
        counts: the window's n and counts vector.
    """

    def __init__(self, codec: StringCodec, counts: Counts) -> None:
        m = codec.m
        self.codec, self.m = codec, m
        if len(counts.support) != m.counters:
            raise ValueError(f"counts of length {len(counts.support)}, expected {m.counters}")
        self.n = counts.n
        self.cell_counts = counts.support.reshape(m.levels, m.rows, m.cells)
        inner, G = m.inner, m.groups
        n = max(self.n, 1)
        self.cell_freq = (G * self.cell_counts / n - inner.q) / (inner.p - inner.q)
        self.row_reports = self.n / G
        """E[reports per group]: the groups are drawn uniformly."""

    def known(self, level: int) -> Known:
        """Nothing known yet at a level."""
        return Known(self.cell_freq[level].copy())

    @cached_property
    def cell_noise(self) -> np.ndarray:
        """Each cell's Var[F̂] read at its own F̂, unclipped: the variance is linear in F
        (π = q* + (p* − q*)·F = G·C/n ≥ 0), so this plug-in is unbiased to O(π/G), and
        E[F̂² − it] = F². Clipped at F̂ ≥ 0 it rose wherever a cell holds less than its
        noise, and S₂ came out low: at ε = 4, n = 10⁶ on English words (m = 128, a cell's
        σ 0.014 against an average content of 0.008) 0.0089 for a true 0.0111, which left
        nearly no collision noise once the heavy words were taken out (95 % intervals of
        the top 50 covered 0.93)."""
        return np.asarray(self.m.cell_variance(max(self.n, 1), self.cell_freq))

    @cached_property
    def second_moment(self) -> np.ndarray:
        """S₂ = Σ_y f(y)² of each level's prefixes, from the sketch (clipped to [0, 1])."""
        m = self.m.cells
        f = self.cell_freq
        var = self.cell_noise
        squares = (f * f - var).sum(axis=2)  # unbiased for Σ_c F_r(c)², per level and row
        return np.clip(((m * squares - 1) / (m - 1)).mean(axis=1), 0.0, 1.0)

    def collision_moment(self, level: int, known: Known | None) -> float:
        """Σ e_y² of what is left in a level's cells once the known values are taken out,
        e_y = f(y) minus y's subtracted estimate: the collision noise of the residual, read
        off the residual table as :attr:`second_moment` reads the raw one (E[Σ_c R(c)²] =
        Σ e² + ((Σ e)² − Σ e²)/m, Σ e = 1 − M). S₂ − Σ_known f̂² would leave out the error
        of every subtracted estimate, and a value accepted by chance (f = 0, f̂ > 0) adds f̂²
        where that formula takes it away: measured, that made σ₀ too narrow by about √2
        at ε = 8, n = 10⁷ where the walk accepts > 10³ such values at the last level."""
        if known is None:
            return float(self.second_moment[level])
        if known.moment is None:
            m = self.m.cells
            var = self.cell_noise[level]
            squares = (known.residual * known.residual - var).sum(axis=1)
            rest = 1.0 - min(max(known.mass, 0.0), 1.0)
            known.moment = float(np.clip(((m * squares - rest**2) / (m - 1)).mean(), 0.0, 1.0))
        return known.moment

    def gather(self, level: int, cells: IntArray) -> Gathered:
        """The (N, h) raw cell estimates and counts of prefixes at a level."""
        rows = np.arange(self.m.rows)[None, :]
        return Gathered(
            level, cells, self.cell_freq[level][rows, cells], self.cell_counts[level][rows, cells]
        )

    def level(
        self, level: int, cells: IntArray, known: Known | None = None, own: np.ndarray | None = None
    ) -> LevelEstimate:
        """Estimates at a level (0-based) of the prefixes whose cells are ``cells`` (N, h).

        Args:
            level: the level.
            cells: each prefix's cell in each row (:meth:`StringCodec.cells`).
            known: the values known at this level (default: none).
            own: per prefix, its own estimate if it is itself known, else NaN.
        """
        return self.reduce(self.gather(level, cells), known, own)

    def scores(
        self,
        level: int,
        resid_sum: np.ndarray,
        known: Known | None,
        collisions: bool = True,
        raw_sum: np.ndarray | None = None,
    ) -> np.ndarray:
        """z-scores (f̂/σ₀) of prefixes not themselves known, from Σ_r R(c_r): the fast path
        of :meth:`reduce` for ranking (σ₀ is the same for all of them). Without
        ``collisions``, σ₀ is the LDP noise's alone: the spread left once the heavy
        values are known, which is what a first, loose cut needs."""
        m, h = self.m.cells, self.m.rows
        mass = 0.0 if known is None else known.mass
        rest = 1.0 - min(max(mass, 0.0), 1.0)
        f_hat = (resid_sum / h - rest / m) / (1 - 1 / m)
        s2 = self.collision_moment(level, known) if collisions else 0.0
        content: float | np.ndarray = rest / m
        if raw_sum is not None:
            content = np.clip(raw_sum / h - np.clip(f_hat, 0.0, 1.0), 0.0, 1.0)
        null = (m / (m - 1)) ** 2 * (
            self.m.cell_variance(max(self.n, 1), content) / h + s2 * (1 / m) * (1 - 1 / m) / h
        ) - (1 - 1 / h) * self.coupling(np.zeros(1), np.asarray(content))
        return np.asarray(f_hat / np.sqrt(null)) if self.n else np.full(len(resid_sum), -np.inf)

    def typical_null_variance(self, level: int, known: Known | None = None) -> float:
        """σ₀² of an absent value at a level whose cells hold the average content 1/m
        (every row's cells share the level's whole mass): the spread the detection
        threshold quotes, where :meth:`reduce` tests each value at its own cells'."""
        m, h = self.m.cells, self.m.rows
        s2 = self.collision_moment(level, known)
        ldp0 = self.m.cell_variance(max(self.n, 1), 1.0 / m) / h
        if self.n == 0:
            return math.nan
        coupled = (1 - 1 / h) * float(self.coupling(np.zeros(1), np.full(1, 1.0 / m))[0])
        return float((m / (m - 1)) ** 2 * (ldp0 + s2 * (1 / m) * (1 - 1 / m) / h) - coupled)

    def reduce(
        self, g: Gathered, known: Known | None = None, own: np.ndarray | None = None
    ) -> LevelEstimate:
        """:meth:`level` from gathered cells (discovery gathers once per level)."""
        m, h = self.m.cells, self.m.rows
        rows = np.arange(h)[None, :]
        n = max(self.n, 1)
        if known is None:
            resid, mass = g.f_raw, 0.0
        else:
            resid, mass = known.residual[rows, g.cells], known.mass
        own_f = np.zeros(len(g.cells)) if own is None else np.nan_to_num(own, nan=0.0)
        resid_mean = resid.mean(axis=1) + own_f  # x's own subtraction, undone
        rest = 1.0 - np.clip(mass - own_f, 0.0, 1.0)
        f_hat = (resid_mean - rest / m) / (1 - 1 / m)
        # The collision noise: Σ e_y² of what the residual holds besides x (the unknown
        # values and the known ones' estimation errors), read off the residual table
        # (:meth:`collision_moment`), less x's own share. S₂ − Σ_known f̂² instead took
        # each known value's error out instead of in (E[f̂²] = f² + Var) and was too small
        # where heavy words are known (real text: its heads hold most of S₂).
        own_left = np.clip(f_hat, 0.0, 1.0) - np.clip(own_f, 0.0, 1.0)
        s2 = np.maximum(self.collision_moment(g.level, known) - np.maximum(own_left, 0.0) ** 2, 0.0)
        scale = (m / (m - 1)) ** 2
        coll = (1 / m) * (1 - 1 / m) / h
        f_clip = np.clip(f_hat, 0.0, 1.0)
        # The GRR term at the rows' mean content, clipped once: Var_r is linear in F up to
        # π²/G (< p*/G of it), and clipping each cell's F̂ at 0 first raised it wherever
        # cells hold little (measured at ε = 4, n = 10⁶: the term at the cells' true
        # contents was 0.93–0.96 of the per-cell-clipped one for the top 10–50).
        mean_cell = np.clip(g.f_raw.mean(axis=1), 0.0, 1.0)
        ldp = self.m.cell_variance(n, mean_cell) / h
        # What x's cells hold besides x, under f(x) = 0: Σ_r (F̂_r − f̂), the known values'
        # and the unknown rest's mass in them, summed over the rows *before* anything is
        # clipped. Clipping each cell's deviation at 0 counted noise as content: with few
        # reports a cell's F̂ is mostly noise, so x's own reports raised its null (measured:
        # at ε = 8, ~750 reports a level, a value of 2 % held 13 reports against a null of
        # 6.4 where the cells' true background was 0.4, and was never found). The
        # arrivals at x's cells are at least the GRR noise's, h·q*.
        inner = self.m.inner
        arrivals = inner.q * h + (inner.p - inner.q) * (g.f_raw.sum(axis=1) - h * f_clip)
        arrivals = np.maximum(arrivals, inner.q * h)
        content = (arrivals / h - inner.q) / (inner.p - inner.q)  # the mean cell's
        ldp0 = self.m.cell_variance(n, content) / h
        # The rows' cells are not independent counts: a report lands in one group only
        # (:meth:`coupling`), so the sum of h rows' variances overstates the mean's by
        # h(h−1) covariances of −c each.
        coupling = self.coupling(f_clip, mean_cell)
        null_coupling = self.coupling(np.zeros_like(f_clip), np.clip(content, 0.0, 1.0))
        within = 1 - 1 / h
        var = scale * (ldp + s2 * coll) - within * coupling
        null = scale * (ldp0 + self.collision_moment(g.level, known) * coll)
        null = null - within * null_coupling
        null_support = self.row_reports * arrivals
        support = g.support.sum(axis=1).astype(float)
        if self.n == 0:
            nan = np.full(len(g.cells), np.nan)
            return LevelEstimate(nan, nan, nan, support, null_support + nan, nan, nan)
        return LevelEstimate(
            f_hat,
            var,
            null + 0 * f_hat,
            support,
            null_support + 0 * f_hat,
            coupling,
            null_coupling + 0 * f_hat,
        )

    def coupling(self, f: np.ndarray, content: np.ndarray) -> np.ndarray:
        """−Cov of two row estimates F̂ of a value of frequency f whose cells hold
        ``content`` on average (f included), rows of the same level or of two levels.

        Given the population (the estimand is its realised share), user i's report
        lands in group g's cell c_g with probability π_ig/G (π_ig = p* if i's prefix
        hashes to c_g, else q*), once in all: the counts are multinomial, not
        independent, Cov[C_g(c_g), C_g'(c_g')] = −Σ_i π_ig·π_ig'/G² for g ≠ g'. The
        value's own users have π = p* in every one of its groups, the others q* (or p*
        where they collide, share content − f), so per pair of groups, to first order
        in the collisions, Σ_i π_ig·π_ig' = n·(f·p*² + (1 − f)·q*² + 2q*(p* − q*)·(content
        − f)), and in the estimate's units (F̂ = (G·C/n − q*)/(p* − q*), the (m/(m−1))²
        of the debiasing)

            c = (m/(m−1))² · (f·p*² + (1 − f)·q*² + 2q*(p* − q*)·(content − f)) / (n(p* − q*)²).

        It matters where p*·f or q* is not small against the per-cell noise G·π/G: at
        ε = 8 (q* = 2·10⁻⁴, p* = 0.59, G = 128) a 4-byte word of 0.2 % is read in 12 of
        the 16 levels, and the independent-cells sum overstated its variance by a third
        (measured on the top 50 at n = 10⁵: squared errors 0.82 of it); at ε = 1
        (q* = 0.10) an absent short value's by about 9 %.
        """
        inner, m = self.m.inner, self.m.cells
        p, q = inner.p, inner.q
        f = np.clip(f, 0.0, 1.0)
        mass = f * p * p + (1 - f) * q * q + 2 * q * (p - q) * np.maximum(content - f, 0.0)
        return np.asarray((m / (m - 1)) ** 2 * mass / (max(self.n, 1) * (p - q) ** 2))


def combine(parts: list[tuple[np.ndarray, LevelEstimate]], size: int) -> LevelEstimate:
    """The mean of each value's level estimates (independent levels: variances add / count²).

    Args:
        parts: (indices of the values, their estimates at one level) per level.
        size: number of values.
    """
    total, total_var, total_null, used, support, null_support = (np.zeros(size) for _ in range(6))
    coupling, null_coupling = np.zeros(size), np.zeros(size)
    for idx, est in parts:
        good = ~np.isnan(est.frequency)
        at = idx[good]
        total[at] += est.frequency[good]
        total_var[at] += est.variance[good]
        total_null[at] += est.null_variance[good]
        used[at] += 1
        support[at] += est.support[good]
        null_support[at] += est.null_support[good]
        if est.coupling is not None and est.null_coupling is not None:
            coupling[at] += est.coupling[good]
            null_coupling[at] += est.null_coupling[good]
    # Levels are coupled like rows (a report lands in one group): each ordered pair of
    # levels l ≠ l' adds h² row pairs of covariance −(c_l + c_l')/2 to the levels' sum,
    # i.e. −(used − 1)·Σ_l c_l in the row-mean units of the level estimates.
    with np.errstate(divide="ignore", invalid="ignore"):
        return LevelEstimate(
            total / used,
            (total_var - (used - 1) * coupling) / used**2,
            (total_null - (used - 1) * null_coupling) / used**2,
            support,
            null_support,
            coupling / used,
            null_coupling / used,
        )


def value_lengths(padded: U8Array) -> IntArray:
    """Byte length of each padded value (its last non-NUL byte's position + 1)."""
    L = padded.shape[1]
    nonzero = padded != 0
    return np.asarray(np.where(nonzero.any(axis=1), L - np.argmax(nonzero[:, ::-1], axis=1), 0))

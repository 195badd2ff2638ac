"""String metrics on the server: the sketch's codec and its unbiased frequency estimates.

The device side is :class:`client_sdk.mechanisms.strings.StringSketch`. Its support vector
(length L·h·(m+1)) holds, for each group g = level·h + row, the inner oracle's support
counts C_g(0..m−1) at ``g·m``, then the group sizes n_g at ``L·h·m + g``: one additive
vector, summed by the exactly-once commit script like any frequency metric's counts.

Estimating a prefix x of length l (level l−1) from the counts:

    F̂_g(c)  = (C_g(c)/n_g − q*)/(p* − q*)            the inner oracle's unbiased estimate
    F̄(x)    = (1/h) Σ_r F̂_{l,r}(H_{l,r}(x))           mean over the level's rows
    f̂(x)    = (m·F̄(x) − 1)/(m − 1)                    Count Mean Sketch debiasing

E[F_{l,r}(H(x))] = f(x) + (1 − f(x))/m over the salt (collision probability 1/m), so
E[f̂(x)] = f(x): unbiased over the salt and the noise. Its variance has two parts,

    Var[f̂] = (m/(m−1))² · [ Σ_r Var_r / h²  +  (S₂ − f²)·(1/m)(1 − 1/m) / h ]

where Var_r = q*(1−q*)/(n_g(p*−q*)²) + F(1−p*−q*)/(n_g(p*−q*)) is the oracle's variance
(FORMULAS.md) at the cell's frequency F, and the second term is the collision noise:
another prefix y lands in x's cell with probability 1/m, independently across rows, so it
adds f(y)·Bernoulli(1/m). S₂ = Σ_y f(y)² of the level, estimated from the sketch itself:
E[Σ_c F_r(c)²] = S₂ + (1 − S₂)/m, and E[F̂²] = F² + Var.

A string s shorter than L bytes has the same frequency as each of its padded prefixes
s‖0…0 at levels |s|+1..L (no other value starts with s‖0), so its estimate averages those
levels' independent estimates: short strings get more reports than long ones.

References:
    Apple Differential Privacy Team, "Learning with Privacy at Scale", 2017 (CMS).
    G. Cormode, S. Muthukrishnan, "An improved data stream summary: the count-min sketch
    and its applications", J. Algorithms 2005.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import special

from aggregator.stats.batch import Batch, raise_first_error
from aggregator.stats.codecs import Counts, FrequencyCodec, _inverses, codec_for
from client_sdk.mechanisms import GeneralizedRR, LocalHashing
from client_sdk.mechanisms.strings import HASH_PRIME, StringSketch
from ldp_store import schema

__all__ = ["SketchEstimator", "StringCodec", "as_padded", "padded_array"]

IntArray = npt.NDArray[np.int64]
U8Array = npt.NDArray[np.uint8]


def padded_array(values: Sequence[bytes], length: int) -> U8Array:
    """Padded values (bytes of ``length``) as an (n, length) uint8 matrix."""
    if not values:
        return np.zeros((0, length), dtype=np.uint8)
    return np.frombuffer(b"".join(values), dtype=np.uint8).reshape(len(values), length).copy()


def as_padded(matrix: U8Array) -> list[bytes]:
    """Rows of a uint8 matrix as bytes."""
    return [row.tobytes() for row in np.ascontiguousarray(matrix, dtype=np.uint8)]


class StringCodec:
    """The :class:`~aggregator.stats.batch.Codec` of a string metric: sketch support counts."""

    def __init__(self, mechanism: StringSketch) -> None:
        self.m = mechanism
        self.k = mechanism.counters
        self.inner: FrequencyCodec = codec_for(mechanism.inner)
        a, cb = mechanism.coefficients
        self._a = np.array(a, dtype=np.int64)
        pairs = np.array(cb, dtype=np.int64).reshape(mechanism.levels, mechanism.rows, 2)
        self._c = pairs[:, :, 0]
        self._b = pairs[:, :, 1]

    # -- parsing ----------------------------------------------------------------------
    @property
    def _bounds(self) -> dict[str, tuple[int, int]]:
        """[low, high) of every payload field, in the payload's order."""
        m, inner = self.m, self.m.inner
        bounds = {"l": (0, m.levels), "r": (0, m.rows)}
        if isinstance(inner, LocalHashing):
            return {**bounds, "a": (1, inner.prime), "b": (0, inner.prime), "y": (0, inner.g)}
        return {**bounds, "v": (0, m.cells)}

    def parse(self, payloads: Sequence[Any]) -> Batch:
        """Validate and columnize payloads.

        Raises:
            PayloadError: naming the index and the problem of the first bad payload.
        """
        batch: Batch | None = None
        try:
            batch = self.inner._int_columns(payloads, self._bounds)
        except (KeyError, TypeError, ValueError, OverflowError):
            batch = None
        if batch is None:
            raise_first_error(self.m, payloads)
        assert batch is not None
        return batch

    # -- decoding ---------------------------------------------------------------------
    def count(self, batch: Batch) -> IntArray:
        """The support vector: per-group cell counts, then the group sizes.

        GRR and OLH (the inner oracles a sketch uses) are counted for every group at once:
        a report of group g supports cells u (grr: u = v; olh: u = a⁻¹(z − b) mod P for
        z ≡ y mod g', as the olh codec's grid enumerates them), counted at g·m + u.
        """
        m = self.m
        groups = batch.columns["l"] * m.rows + batch.columns["r"]
        sizes = np.bincount(groups, minlength=m.groups)
        inner = m.inner
        if isinstance(inner, GeneralizedRR):
            cells = np.bincount(groups * m.cells + batch.columns["v"], minlength=m.groups * m.cells)
            return np.concatenate([cells, sizes]).astype(np.int64)
        if isinstance(inner, LocalHashing):
            return np.concatenate([self._count_olh(batch, groups), sizes]).astype(np.int64)
        support = np.zeros(self.k, dtype=np.int64)
        support[m.groups * m.cells :] = sizes
        inner_names = [name for name in batch.columns if name not in ("l", "r")]
        order = np.argsort(groups, kind="stable")
        starts = np.concatenate(([0], np.cumsum(sizes)))
        for g in np.flatnonzero(sizes):
            rows = order[starts[g] : starts[g + 1]]
            sub = Batch(len(rows), {name: batch.columns[name][rows] for name in inner_names})
            support[g * m.cells : (g + 1) * m.cells] += self.inner.count(sub)
        return support

    def _count_olh(self, batch: Batch, groups: IntArray) -> IntArray:
        """Cell counts of OLH reports of every group (see :meth:`count`)."""
        m = self.m
        inner = m.inner
        assert isinstance(inner, LocalHashing)
        P, g = inner.prime, inner.g
        inv = _inverses(P)
        width = -(-P // g)
        total = m.groups * m.cells
        out = np.zeros(total + 1, dtype=np.int64)
        step = max(1, (1 << 22) // width)
        cols = batch.columns
        for start in range(0, batch.n, step):
            a = cols["a"][start : start + step]
            b = cols["b"][start : start + step]
            y = cols["y"][start : start + step]
            base = groups[start : start + step] * m.cells
            ainv = inv[a]
            u = (ainv * ((y - b) % P)) % P
            stride = (ainv * g) % P
            grid = np.empty((width, len(a)), dtype=np.int64)
            for j in range(width):
                grid[j] = np.where(u < m.cells, base + u, total)
                u = u + stride
                u = np.where(u >= P, u - P, u)
            grid[width - 1][y + (width - 1) * g >= P] = total  # z beyond P: no candidate
            out += np.bincount(grid.ravel(), minlength=total + 1)
        return out[:total]

    def decode(self, payloads: Sequence[Any]) -> Counts:
        """parse + count."""
        batch = self.parse(payloads)
        return Counts(batch.n, self.count(batch))

    def increments(self, batch: Batch) -> list[str | int]:
        """``HINCRBY`` pairs of a parsed batch: ``n``, then ``c:<i>`` for nonzero counters.

        The same pairs as :func:`ldp_store.schema.frequency_increments`, built from a
        table of field names: a batch of 10⁴ reports touches about 2·10⁵ counters.
        """
        support = self.count(batch)
        nonzero = np.flatnonzero(support)
        pairs: list[str | int] = [None] * (2 * len(nonzero))  # type: ignore[list-item]
        names = self._field_names
        pairs[0::2] = [names[i] for i in nonzero.tolist()]
        pairs[1::2] = support[nonzero].tolist()
        return [schema.N, batch.n, *pairs]

    @cached_property
    def _field_names(self) -> list[str]:
        """``c:<i>`` of every counter (:func:`ldp_store.schema.count_field`)."""
        return [schema.count_field(i) for i in range(self.k)]

    def seed_increments(self, batch: Batch) -> list[int]:
        """None: the poisoning test's seed histograms are local hashing's."""
        return []

    # -- hashing ----------------------------------------------------------------------
    def fingerprints(self, prefixes: U8Array) -> IntArray:
        """φ_r of each prefix (rows of a uint8 matrix) for every row r: an (N, h) matrix."""
        phi = np.zeros((len(prefixes), self.m.rows), dtype=np.int64)
        for j in range(prefixes.shape[1]):
            phi = (phi * self._a[None, :] + prefixes[:, j, None].astype(np.int64) + 1) % HASH_PRIME
        return phi

    def extend(self, phi: IntArray, byte: IntArray | int) -> IntArray:
        """φ_r of each prefix extended by one byte (a column or one value)."""
        b = np.asarray(byte, dtype=np.int64)
        if b.ndim == 1:
            b = b[:, None]
        return (phi * self._a[None, :] + b + 1) % HASH_PRIME

    def cells(self, phi: IntArray, level: int) -> IntArray:
        """H_{level,r}: the (N, h) cells of fingerprints at a level (0-based)."""
        c, b = self._c[level][None, :], self._b[level][None, :]
        return ((c * phi + b) % HASH_PRIME) % self.m.cells

    # -- simulation -------------------------------------------------------------------
    def encode(self, values: U8Array, gen: np.random.Generator) -> Batch:
        """Perturb padded values (an (n, L) uint8 matrix) with a numpy generator."""
        m, n = self.m, len(values)
        group = gen.integers(0, m.groups, n)
        level, row = np.divmod(group, m.rows)
        phi = np.zeros(n, dtype=np.int64)
        a = self._a[row]
        for j in range(m.levels):
            step = (phi * a + values[:, j].astype(np.int64) + 1) % HASH_PRIME
            phi = np.where(j <= level, step, phi)
        cell = ((self._c[level, row] * phi + self._b[level, row]) % HASH_PRIME) % m.cells
        inner = self.inner.encode(cell, gen)
        return Batch(n, {"l": level.astype(np.int64), "r": row.astype(np.int64), **inner.columns})

    def to_payloads(self, batch: Batch) -> list[dict[str, Any]]:
        """Payload dicts of a batch, as the SDK would have produced them."""
        names = list(batch.columns)
        cols = [batch.columns[name].tolist() for name in names]
        return [dict(zip(names, row, strict=True)) for row in zip(*cols, strict=True)]


@dataclass(frozen=True)
class LevelEstimate:
    """Estimates of prefixes at one level: f̂, its variance, and the variance at f = 0."""

    frequency: np.ndarray
    variance: np.ndarray
    null_variance: np.ndarray
    support: np.ndarray | None = None
    """Σ of the support counts of the cells used (for the exact small-count test)."""
    null_support: np.ndarray | None = None
    """E[support] if the value were absent (its cells holding only the collision mass)."""

    def p_values(self) -> np.ndarray:
        """One-sided p-values of f = 0: the larger of the normal test's (the collision
        noise, which dominates at large n) and a Poisson tail of the support counts (exact
        in the limit of small counts, and conservative: a Poisson's upper tail is above a
        binomial sum's of the same mean beyond mean + 1; Anderson & Samuels 1967)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            z = self.frequency / np.sqrt(self.null_variance)
        p = special.ndtr(-np.nan_to_num(z, nan=-np.inf))
        if self.support is not None and self.null_support is not None:
            mu = np.nan_to_num(self.null_support, nan=0.0)
            tail = np.where(
                mu > 0, special.pdtrc(np.maximum(self.support - 1, -1), np.maximum(mu, 1e-300)), 1.0
            )
            tail = np.where(self.support <= 0, 1.0, tail)
            p = np.maximum(p, tail)
        return np.where(np.isnan(self.frequency), 1.0, p)


class SketchEstimator:
    """Unbiased frequency estimates of any prefix or string from a string metric's counts.

    Args:
        codec: the metric's codec (its hash functions).
        counts: the window's n and support vector.
    """

    def __init__(self, codec: StringCodec, counts: Counts) -> None:
        m = codec.m
        self.codec, self.m = codec, m
        if len(counts.support) != m.counters:
            raise ValueError(f"counts of length {len(counts.support)}, expected {m.counters}")
        self.n = counts.n
        cell_counts = counts.support[: m.groups * m.cells].reshape(m.levels, m.rows, m.cells)
        sizes = counts.support[m.groups * m.cells :].reshape(m.levels, m.rows).astype(float)
        self.sizes = sizes
        inner = m.inner
        with np.errstate(divide="ignore", invalid="ignore"):
            freq = inner.debias(cell_counts.astype(float), sizes[:, :, None])
        self.present = sizes > 0
        self.cell_counts = cell_counts
        self.cell_freq = np.where(self.present[:, :, None], freq, 0.0)
        self.safe_sizes = np.maximum(sizes, 1.0)[:, :, None]

    def cell_variance(self, level: int, cells: IntArray, freq: np.ndarray) -> np.ndarray:
        """The inner oracle's variance of each (N, h) cell estimate at its plug-in F."""
        n = self.safe_sizes[level, :, 0][None, :]
        return np.asarray(self.m.inner.variance(n, np.clip(freq, 0.0, 1.0)))

    @cached_property
    def second_moment(self) -> np.ndarray:
        """S₂ = Σ_y f(y)² of each level's prefixes, estimated from the sketch (clipped to [0, 1])."""
        m = self.m.cells
        out = np.zeros(self.m.levels)
        for level in range(self.m.levels):
            rows = np.flatnonzero(self.present[level])
            if not len(rows):
                continue
            f = self.cell_freq[level, rows]
            n = self.safe_sizes[level, rows]
            var = self.m.inner.variance(n, np.clip(f, 0.0, 1.0))
            squares = (f * f - var).sum(axis=1)  # unbiased for Σ_c F_r(c)²
            out[level] = float(np.mean((m * squares - 1) / (m - 1)))
        return np.clip(out, 0.0, 1.0)

    def gather(self, level: int, cells: IntArray) -> Gathered:
        """The (N, h) cell estimates of prefixes at a level and their variances."""
        rows = np.arange(self.m.rows)[None, :]
        f_cells = self.cell_freq[level][rows, cells]
        sizes = self.safe_sizes[level, :, 0][None, :]
        var = np.asarray(self.m.inner.variance(sizes, np.clip(f_cells, 0.0, 1.0)))
        var0 = np.broadcast_to(np.asarray(self.m.inner.variance(sizes, 0.0)), cells.shape)
        support = self.cell_counts[level][rows, cells]
        return Gathered(level, cells, f_cells, var, var0, support)

    def level(
        self,
        level: int,
        cells: IntArray,
        occupied: IntArray | None = None,
        own: np.ndarray | None = None,
        mass: float | np.ndarray = 0.0,
        mass_sq: float | np.ndarray = 0.0,
    ) -> LevelEstimate:
        """Estimates at a level (0-based) of the prefixes whose cells are ``cells`` (N, h).

        Args:
            level: the level.
            cells: each prefix's cell in each row (:meth:`StringCodec.cells`).
            occupied: (h, m) counts of *known* values' cells: a row where another known
                value shares the prefix's cell is left out of its mean, and the known
                values' mass is taken out of the collision correction.
            own: per prefix, whether it is itself among the known values (its own cells
                then do not count as occupied, nor its estimate in ``mass``).
            mass: Σ f̂ of the known values other than the prefix (scalar or per prefix).
            mass_sq: Σ f̂² of the same values (taken out of S₂).
        """
        return self.reduce(self.gather(level, cells), occupied, own, mass, mass_sq)

    def reduce(
        self,
        g: Gathered,
        occupied: IntArray | None = None,
        own: np.ndarray | None = None,
        mass: float | np.ndarray = 0.0,
        mass_sq: float | np.ndarray = 0.0,
    ) -> LevelEstimate:
        """:meth:`level` from gathered cells (rounds of discovery gather once)."""
        m, h_all = self.m.cells, self.m.rows
        keep = np.broadcast_to(self.present[g.level][None, :], g.cells.shape)
        if occupied is not None:
            taken = occupied[np.arange(h_all)[None, :], g.cells]
            if own is not None:
                taken = taken - own[:, None].astype(taken.dtype)
            keep = keep & (taken <= 0)
        h = keep.sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = np.where(keep, g.f_cells, 0.0).sum(axis=1) / h
            rest = 1.0 - np.clip(mass, 0.0, 1.0)
            f_hat = (mean - rest / m) / (1 - 1 / m)
            s2 = np.maximum(self.second_moment[g.level] - mass_sq, 0.0)
            coll = (1 / m) * (1 - 1 / m) / h
            scale = (m / (m - 1)) ** 2
            f_clip = np.clip(f_hat, 0.0, 1.0)
            ldp = np.where(keep, g.var, 0.0).sum(axis=1) / h**2
            ldp0 = np.where(keep, g.var0, 0.0).sum(axis=1) / h**2
            var = scale * (ldp + np.maximum(s2 - f_clip**2, 0.0) * coll)
            null = scale * (ldp0 + s2 * coll)
            inner = self.m.inner
            n_rows = self.sizes[g.level][None, :]
            q0 = inner.q + (inner.p - inner.q) * np.asarray(rest).reshape(-1, 1) / m
            null_support = np.where(keep, n_rows * q0, 0.0).sum(axis=1)
            support = np.where(keep, g.support, 0).sum(axis=1)
        bad = h == 0
        f_hat, var, null = (np.where(bad, np.nan, x) for x in (f_hat, var, null))
        return LevelEstimate(f_hat, var, null, support, null_support)


@dataclass(frozen=True)
class Gathered:
    """Cell estimates of N prefixes at one level, (N, h) each."""

    level: int
    cells: IntArray
    f_cells: np.ndarray
    var: np.ndarray
    var0: np.ndarray
    support: np.ndarray

    def take(self, idx: IntArray) -> Gathered:
        """The rows ``idx``."""
        return Gathered(
            self.level,
            self.cells[idx],
            self.f_cells[idx],
            self.var[idx],
            self.var0[idx],
            self.support[idx],
        )


def combine(parts: list[tuple[np.ndarray, LevelEstimate]], size: int) -> LevelEstimate:
    """The mean of each value's level estimates (independent levels: variances add / count²).

    Args:
        parts: (indices of the values, their estimates at one level) per level.
        size: number of values.
    """
    total, total_var, total_null, used, support, null_support = (
        np.zeros(size) for _ in range(6)
    )
    for idx, est in parts:
        good = ~np.isnan(est.frequency)
        at = idx[good]
        total[at] += est.frequency[good]
        total_var[at] += est.variance[good]
        total_null[at] += est.null_variance[good]
        used[at] += 1
        if est.support is not None and est.null_support is not None:
            support[at] += est.support[good]
            null_support[at] += est.null_support[good]
    with np.errstate(divide="ignore", invalid="ignore"):
        return LevelEstimate(
            total / used, total_var / used**2, total_null / used**2, support, null_support
        )


def value_lengths(padded: U8Array) -> IntArray:
    """Byte length of each padded value (its last non-NUL byte's position + 1)."""
    L = padded.shape[1]
    nonzero = padded != 0
    return np.where(nonzero.any(axis=1), L - np.argmax(nonzero[:, ::-1], axis=1), 0)

"""The frequency oracles' codecs: a batch of payloads becomes (support counts, n).

Each frequency oracle of ``client_sdk.mechanisms`` has a codec here, an implementation of
the :class:`~aggregator.stats.batch.Codec` protocol that works on whole batches with
numpy; :func:`frequency_codec` picks it (and :func:`aggregator.stats.kinds.codec_for`
any kind's). Beyond the protocol, a frequency codec

* ``count``s the support vector C(v) of a parsed batch. Counts of batches add up, so a
  stream is decoded batch by batch in O(k + batch) memory;
* ``sample_support_counts`` draws the support vector of a whole population from its
  true-value counts without materialising reports: exactly for rr, grr, sue, oue and
  hr; per value (the marginals exactly, not their joint law) for olh and ss.

The math (p*, q*, hash family, code sets) comes from the mechanism objects themselves.
"""

from __future__ import annotations

import binascii
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from operator import countOf
from typing import Any

import numpy as np
import numpy.typing as npt

from aggregator.stats.arrays import IntArray
from aggregator.stats.batch import (
    SEED_BINS,
    Batch,
    SupportCodec,
    int_columns,
    seed_bins,
)
from client_sdk.errors import PayloadError
from client_sdk.mechanisms import (
    FrequencyOracle,
    GeneralizedRR,
    HadamardResponse,
    LocalHashing,
    PostRandomization,
    SubsetSelection,
)
from client_sdk.mechanisms.unary import UnaryEncoding

__all__ = [
    "Counts",
    "FrequencyCodec",
    "PayloadError",
    "frequency_codec",
    "fwht",
]


CHUNK_CELLS = 1 << 22
"""Work arrays are cut to about 4 M cells (32 MiB of int64) so decoding stays in
O(k + batch) memory however many reports a batch holds."""

UNPACK_CELLS = 1 << 20
"""Unpacked unary bits per chunk: 1 MiB of uint8, small enough to stay in a core's L2 cache
while it is summed."""


@dataclass(frozen=True)
class Counts:
    """Sufficient statistics of a set of reports: n and the support count of each value."""

    n: int
    support: IntArray

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.n + other.n, self.support + other.support)

    @classmethod
    def zeros(cls, k: int) -> Counts:
        """No reports yet."""
        return cls(0, np.zeros(k, dtype=np.int64))


class FrequencyCodec(SupportCodec):
    """The :class:`~aggregator.stats.batch.Codec` of a frequency oracle: support counts."""

    _refused = (KeyError, TypeError, ValueError, OverflowError, AttributeError, binascii.Error)

    def __init__(self, mechanism: FrequencyOracle) -> None:
        self.m = mechanism
        self.k = mechanism.domain_size

    # -- parsing ----------------------------------------------------------------------
    # -- decoding ---------------------------------------------------------------------
    def count(self, batch: Batch) -> IntArray:
        """Support counts C(v), v in 0..k-1, of a parsed batch."""
        raise NotImplementedError

    def decode(self, payloads: Sequence[Any]) -> Counts:
        """parse + count."""
        batch = self.parse(payloads)
        return Counts(batch.n, self.count(batch))

    # -- simulation -------------------------------------------------------------------
    def encode(self, values: IntArray, gen: np.random.Generator) -> Batch:
        """Perturb true values in bulk with a numpy generator (simulation only)."""
        raise NotImplementedError

    def to_payloads(self, batch: Batch) -> list[dict[str, Any]]:
        """Payload dicts of a batch, as the SDK would have produced them."""
        names = list(batch.columns)
        cols = [batch.columns[name].tolist() for name in names]
        return [dict(zip(names, row, strict=True)) for row in zip(*cols, strict=True)]

    exact_joint = True
    """Whether :meth:`sample_support_counts` samples the joint law of all k counts."""

    def sample_support_counts(self, true_counts: IntArray, gen: np.random.Generator) -> IntArray:
        """Support counts of a population with these true-value counts, without reports.

        The default samples each C(v) ~ Bin(n_v, p*) + Bin(n − n_v, q*): exact for each
        value's marginal law (so for each estimate's error and interval), not for the
        dependence between values.
        """
        n = int(true_counts.sum())
        inside = gen.binomial(true_counts, self.m.p)
        outside = gen.binomial(n - true_counts, self.m.q)
        return np.asarray(inside + outside, dtype=np.int64)


class RRCodec(FrequencyCodec):
    """rr and grr: payload ``{"v": value}``."""

    m: GeneralizedRR

    def int_bounds(self) -> dict[str, tuple[int, int]]:
        """Each payload field's [low, high) (the joint codec checks group payloads so)."""
        return {"v": (0, self.k)}

    def _parse_fast(self, payloads: Sequence[Any]) -> Batch | None:
        return int_columns(payloads, self.int_bounds())

    def count(self, batch: Batch) -> IntArray:  # noqa: D102
        return np.bincount(batch.columns["v"], minlength=self.k).astype(np.int64)

    def encode(self, values: IntArray, gen: np.random.Generator) -> Batch:  # noqa: D102
        n = len(values)
        keep = gen.random(n) < self.m.p
        other = gen.integers(0, self.k - 1, n)
        other += other >= values
        return Batch(n, {"v": np.where(keep, values, other).astype(np.int64)})

    def sample_support_counts(self, true_counts: IntArray, gen: np.random.Generator) -> IntArray:
        """Exact: a report is its true value with probability p* − q* = 1 − k·q*, else
        uniform over all k values (the same law: p* at the true value, q* elsewhere), so
        the support is Bin(n_v, p* − q*) per value plus one multinomial of the rest."""
        k = self.k
        kept = gen.binomial(true_counts, float(self.m.p) - float(self.m.q))
        spread = gen.multinomial(int(true_counts.sum() - kept.sum()), np.full(k, 1.0 / k))
        return np.asarray(kept + spread, dtype=np.int64)


class PramCodec(FrequencyCodec):
    """pram: payload ``{"v": reported value}``, counted as GRR's (one bincount)."""

    m: PostRandomization

    def _parse_fast(self, payloads: Sequence[Any]) -> Batch | None:
        return int_columns(payloads, {"v": (0, self.k)})

    def count(self, batch: Batch) -> IntArray:  # noqa: D102
        return np.bincount(batch.columns["v"], minlength=self.k).astype(np.int64)

    def _matrix(self) -> npt.NDArray[np.float64]:
        return np.array([[float(e) for e in row] for row in self.m.rows])

    def encode(self, values: IntArray, gen: np.random.Generator) -> Batch:  # noqa: D102
        cumulative = np.cumsum(self._matrix(), axis=1)[np.asarray(values)]
        u = gen.random(len(values))[:, None]
        reported = np.minimum((u >= cumulative).sum(axis=1), self.k - 1)
        return Batch(len(values), {"v": reported.astype(np.int64)})

    def sample_support_counts(self, true_counts: IntArray, gen: np.random.Generator) -> IntArray:
        """Exact: the reports of each true value are multinomial on its row."""
        rows = self._matrix()
        support = np.zeros(self.k, dtype=np.int64)
        for x in np.flatnonzero(true_counts):
            support += gen.multinomial(int(true_counts[x]), rows[x] / rows[x].sum())
        return support


_BIT_TABLE = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(np.int64)
"""Row b: the 8 bits of byte b, most significant first (the SDK's bit order)."""


class UnaryCodec(FrequencyCodec):
    """sue and oue: payload ``{"b": base64 of k packed bits}``; columns: one uint8 row each."""

    m: UnaryEncoding

    def _parse_fast(self, payloads: Sequence[Any]) -> Batch | None:
        nbytes, width = self.m.nbytes, 4 * ((self.m.nbytes + 2) // 3)
        strings = [p["b"] if type(p) is dict and len(p) == 1 else None for p in payloads]
        if not all(type(s) is str and len(s) == width for s in strings):
            return None
        a2b = binascii.a2b_base64
        raw = b"".join([a2b(s, strict_mode=True) for s in strings])  # type: ignore[arg-type]
        if len(raw) != nbytes * len(strings):
            return None
        rows = np.frombuffer(raw, dtype=np.uint8).reshape(len(strings), nbytes)
        pad = 8 * nbytes - self.k
        if pad and rows.size and np.any(rows[:, -1] & ((1 << pad) - 1)):
            return None
        return Batch(len(strings), {"bits": rows})

    def count(self, batch: Batch) -> IntArray:
        """Support counts: sum unpacked bits from 8 bytes (k ≥ 57) up, else byte histograms.

        Measured at n = 10⁶: the byte histogram costs ~5 ns per byte, unpacking and
        summing bits ~1.5 ns per byte; the histogram's fixed cost wins below 8 bytes.
        """
        rows: np.ndarray = batch.columns["bits"]
        nbytes = self.m.nbytes
        if nbytes >= 8:
            return self._count_by_bits(rows)
        total = np.zeros((nbytes, 256), dtype=np.int64)
        offsets = (np.arange(nbytes, dtype=np.int64) * 256)[None, :]
        step = max(1, CHUNK_CELLS // max(1, nbytes))
        for start in range(0, batch.n, step):
            chunk = rows[start : start + step].astype(np.int64) + offsets
            total += np.bincount(chunk.ravel(), minlength=256 * nbytes).reshape(nbytes, 256)
        bits = total @ _BIT_TABLE  # (nbytes, 8): count of 1s at each bit position
        return np.asarray(bits.ravel()[: self.k], dtype=np.int64)

    def _count_by_bits(self, rows: np.ndarray) -> IntArray:
        """Unpack chunks of rows into bits and add them up column by column.

        A chunk has at most 65 535 rows, so its column sums fit the uint16 accumulator
        (half the memory traffic of wider ones), and about :data:`UNPACK_CELLS` bits.
        """
        nbytes = self.m.nbytes
        total = np.zeros(8 * nbytes, dtype=np.int64)
        step = max(1, min(UNPACK_CELLS // (8 * nbytes), np.iinfo(np.uint16).max))
        for start in range(0, len(rows), step):
            bits = np.unpackbits(rows[start : start + step], axis=1)
            total += np.add.reduce(bits, axis=0, dtype=np.uint16)
        return total[: self.k]

    def encode(self, values: IntArray, gen: np.random.Generator) -> Batch:  # noqa: D102
        n, k = len(values), self.k
        out = np.empty((n, self.m.nbytes), dtype=np.uint8)
        step = max(1, CHUNK_CELLS // k)
        for start in range(0, n, step):
            v = values[start : start + step]
            bits = gen.random((len(v), k)) < self.m.q
            bits[np.arange(len(v)), v] = gen.random(len(v)) < self.m.p
            out[start : start + step] = np.packbits(bits, axis=1)
        return Batch(n, {"bits": out})

    def to_payloads(self, batch: Batch) -> list[dict[str, Any]]:  # noqa: D102
        b2a = binascii.b2a_base64
        return [
            {"b": b2a(row.tobytes(), newline=False).decode("ascii")}
            for row in batch.columns["bits"]
        ]

    def sample_support_counts(self, true_counts: IntArray, gen: np.random.Generator) -> IntArray:
        """Exact: bits are independent given the true value."""
        return super().sample_support_counts(true_counts, gen)


@lru_cache(maxsize=32)
def _inverses(prime: int) -> IntArray:
    """inv[a] = a⁻¹ mod prime for a in 1..prime-1 (inv[0] = 0)."""
    inv = np.zeros(prime, dtype=np.int64)
    inv[1:] = [pow(a, -1, prime) for a in range(1, prime)]
    return inv


class LocalHashCodec(FrequencyCodec):
    """olh and blh: payload ``{"a", "b", "y"}``."""

    m: LocalHashing
    exact_joint = False

    def int_bounds(self) -> dict[str, tuple[int, int]]:
        """Each payload field's [low, high) (the joint codec checks group payloads so)."""
        P = self.m.prime
        return {"a": (1, P), "b": (0, P), "y": (0, self.m.g)}

    def _parse_fast(self, payloads: Sequence[Any]) -> Batch | None:
        return int_columns(payloads, self.int_bounds())

    def count(self, batch: Batch) -> IntArray:
        """Support counts, by whichever of two exact methods does less work for this batch.

        :meth:`_count_by_multiplier` costs O(n + P·(2P + k)) and wins on large batches
        (0.1 µs per report at k = 1024, n = 10⁶); :meth:`_count_by_grid` costs O(n·P/g)
        and wins on small ones (a few thousand reports at k = 1024). Both equal the sum
        of ``m.support(payload)`` over the reports.
        """
        P, g, n = self.m.prime, self.m.g, batch.n
        table = (P - 1) * (self._row_width() + self.k)
        passes = -(-table // CHUNK_CELLS)  # one pass over the reports per block of rows
        if table + 8 * n * passes < n * -(-P // g):
            return self._count_by_multiplier(batch)
        return self._count_by_grid(batch)

    def _row_width(self) -> int:
        """Cells per multiplier row: the unwrapped w < 2P + g − 1, rounded up to a multiple of g."""
        g = self.m.g
        return g * -(-(2 * self.m.prime + g - 1) // g)

    def _count_by_multiplier(self, batch: Batch) -> IntArray:
        """Histogram the supported w = a·u mod P per multiplier a, then read C(u) off it.

        A report (a, b, y) supports u iff w = a·u mod P lies in {(y − b + g·j) mod P :
        0 ≤ j < L_y}, L_y = ⌈(P − y)/g⌉: an arithmetic progression of step g starting at
        s = (y − b) mod P, which unwrapped stays below 2P. For each a, a difference array
        gets +1 at s and −1 at s + g·L_y; a cumulative sum along each residue class mod g
        turns it into the count of reports whose progression contains each unwrapped w,
        and folding [P, 2P) onto [0, P) gives H_a[w]. Then C(u) = Σ_a H_a[a·u mod P].
        Exact integer arithmetic throughout; rows of a are done in blocks of at most
        :data:`CHUNK_CELLS` cells.
        """
        P, g, k = self.m.prime, self.m.g, self.k
        width = self._row_width()
        rows_per_block = max(1, CHUNK_CELLS // max(width, k))
        a, b, y = (batch.columns[name] for name in ("a", "b", "y"))
        first = (y - b) % P
        stop = first + g * ((P - y + g - 1) // g)  # one step past the last supported w
        values = np.arange(k, dtype=np.int64)
        support = np.zeros(k, dtype=np.int64)
        for r0 in range(1, P, rows_per_block):
            r1 = min(P, r0 + rows_per_block)
            rows, cells = r1 - r0, (r1 - r0) * width
            if rows == P - 1:
                aa, s, e = a, first, stop
            else:
                pick = (a >= r0) & (a < r1)
                aa, s, e = a[pick], first[pick], stop[pick]
            base = (aa - r0) * width
            diff = np.bincount(base + s, minlength=cells)
            diff -= np.bincount(base + e, minlength=cells)
            runs = diff.reshape(rows, width // g, g).cumsum(axis=1).reshape(rows, width)
            hist = runs[:, :P] + runs[:, P : 2 * P]
            where = (np.arange(r0, r1, dtype=np.int64)[:, None] * values) % P
            support += np.take_along_axis(hist, where, axis=1).sum(axis=0)
        return support

    def _count_by_grid(self, batch: Batch) -> IntArray:
        """For each report enumerate u = a⁻¹(z − b) mod P over z ≡ y (mod g), z < P."""
        P, g, k = self.m.prime, self.m.g, self.k
        inv = _inverses(P)
        width = -(-P // g)  # ceil(P / g) candidates z per report
        support = np.zeros(P + 1, dtype=np.int64)
        step = max(1, CHUNK_CELLS // width)
        cols = batch.columns
        for start in range(0, batch.n, step):
            a = cols["a"][start : start + step]
            b = cols["b"][start : start + step]
            y = cols["y"][start : start + step]
            ainv = inv[a]
            u = (ainv * ((y - b) % P)) % P  # candidate z = y
            stride = (ainv * g) % P  # z += g moves u by a⁻¹·g
            grid = np.empty((width, len(a)), dtype=np.int64)
            for j in range(width):
                grid[j] = u
                u = u + stride
                u = np.where(u >= P, u - P, u)
            grid[width - 1][y + (width - 1) * g >= P] = P  # z beyond P: no candidate
            support += np.bincount(grid.ravel(), minlength=P + 1)
        return support[:k]

    def seed_increments(self, batch: Batch) -> list[int]:
        """(bin, count) pairs of the batch's seeds (:func:`aggregator.stats.batch.seed_bins`)."""
        histogram = np.bincount(
            seed_bins(self.m, batch.columns["a"], batch.columns["b"]), minlength=SEED_BINS
        )
        nonzero = np.flatnonzero(histogram)
        return np.column_stack((nonzero, histogram[nonzero])).ravel().tolist()

    def encode(self, values: IntArray, gen: np.random.Generator) -> Batch:  # noqa: D102
        n, P, g = len(values), self.m.prime, self.m.g
        a = gen.integers(1, P, n)
        b = gen.integers(0, P, n)
        x = ((a * values + b) % P) % g
        keep = gen.random(n) < self.m.p
        other = gen.integers(0, g - 1, n)
        other += other >= x
        return Batch(n, {"a": a, "b": b, "y": np.where(keep, x, other).astype(np.int64)})


def fwht(a: IntArray) -> IntArray:
    """Fast Walsh–Hadamard transform: H·a with H[r, j] = (−1)^popcount(r & j), exact in int64
    (of each row, for a 2-D ``a``)."""
    size = np.shape(a)[-1]
    out = np.array(a, dtype=np.int64)
    h = 1
    while h < size:
        blocks = out.reshape(-1, 2, h)
        top, bottom = blocks[:, 0, :].copy(), blocks[:, 1, :]
        blocks[:, 0, :] += bottom
        blocks[:, 1, :] = top - bottom
        h *= 2
    return out


class HadamardCodec(FrequencyCodec):
    """hr: payload ``{"j": index}``; one bincount, then one transform per batch."""

    m: HadamardResponse

    def _parse_fast(self, payloads: Sequence[Any]) -> Batch | None:
        return int_columns(payloads, {"j": (0, self.m.order)})

    def count(self, batch: Batch) -> IntArray:  # noqa: D102
        return self.count_from_histogram(np.bincount(batch.columns["j"], minlength=self.m.order))

    def count_from_histogram(self, histogram: IntArray) -> IntArray:
        """C(v) = #{reports with j in C_v} = (n + (H·hist)[v+1]) / 2."""
        transformed = fwht(histogram)
        n = int(histogram.sum())
        return np.asarray((n + transformed[1 : self.k + 1]) // 2, dtype=np.int64)

    def _in_code(self, values: IntArray, index: IntArray) -> np.ndarray:
        return np.asarray(np.bitwise_count((values + 1) & index) % 2 == 0)

    def encode(self, values: IntArray, gen: np.random.Generator) -> Batch:  # noqa: D102
        n = len(values)
        j = gen.integers(0, self.m.order, n)
        want = gen.random(n) < self.m.p
        row = values + 1
        j = np.where(self._in_code(values, j) != want, j ^ (row & -row), j)
        return Batch(n, {"j": j.astype(np.int64)})

    def sample_support_counts(self, true_counts: IntArray, gen: np.random.Generator) -> IntArray:
        """Exact: the histogram of j is a sum of multinomials over each C_v and its complement."""
        K = self.m.order
        index = np.arange(K)
        histogram = np.zeros(K, dtype=np.int64)
        inside = gen.binomial(true_counts, self.m.p)
        for v in np.flatnonzero(true_counts):
            code = self._in_code(np.full(K, v), index)
            half = np.full(K // 2, 2.0 / K)
            histogram[code] += gen.multinomial(int(inside[v]), half)
            histogram[~code] += gen.multinomial(int(true_counts[v] - inside[v]), half)
        return self.count_from_histogram(histogram)


class SubsetCodec(FrequencyCodec):
    """ss: payload ``{"v": [s increasing values]}``; columns: an (n, s) matrix."""

    m: SubsetSelection
    exact_joint = False

    def _parse_fast(self, payloads: Sequence[Any]) -> Batch | None:
        s = self.m.s
        lists = [p["v"] if type(p) is dict and len(p) == 1 else None for p in payloads]
        if not all(type(x) is list and len(x) == s for x in lists):
            return None
        values = chain.from_iterable(lists)  # type: ignore[arg-type]
        if countOf(map(type, values), int) != len(lists) * s:  # ints, not bools: at C speed
            return None
        matrix = np.array(lists, dtype=np.int64).reshape(len(lists), s)
        if matrix.size and (matrix.min() < 0 or matrix.max() >= self.k):
            return None
        if s > 1 and np.any(np.diff(matrix, axis=1) <= 0):
            return None
        return Batch(len(lists), {"v": matrix})

    def count(self, batch: Batch) -> IntArray:  # noqa: D102
        return np.bincount(batch.columns["v"].ravel(), minlength=self.k).astype(np.int64)

    def encode(self, values: IntArray, gen: np.random.Generator) -> Batch:  # noqa: D102
        n, k, s = len(values), self.k, self.m.s
        out = np.empty((n, s), dtype=np.int64)
        step = max(1, CHUNK_CELLS // k)
        for start in range(0, n, step):
            v = values[start : start + step]
            rows = len(v)
            include = gen.random(rows) < self.m.p
            # s smallest of k−1 uniform keys = a uniform s-subset of the other values
            picks = np.argpartition(gen.random((rows, k - 1)), s - 1, axis=1)[:, :s]
            picks += picks >= v[:, None]
            picks[include, s - 1] = v[include]  # s−1 others plus the true value
            out[start : start + step] = np.sort(picks, axis=1)
        return Batch(n, {"v": out})

    def to_payloads(self, batch: Batch) -> list[dict[str, Any]]:  # noqa: D102
        return [{"v": row} for row in batch.columns["v"].tolist()]


def frequency_codec(mechanism: FrequencyOracle) -> FrequencyCodec:
    """The batch codec of a frequency oracle (a metric kind's table is
    :func:`aggregator.stats.kinds.codec_for`).

    Raises:
        TypeError: a frequency oracle without a codec.
    """
    for kind, codec in (
        (GeneralizedRR, RRCodec),
        (UnaryEncoding, UnaryCodec),
        (LocalHashing, LocalHashCodec),
        (HadamardResponse, HadamardCodec),
        (SubsetSelection, SubsetCodec),
        (PostRandomization, PramCodec),
    ):
        if isinstance(mechanism, kind):
            return codec(mechanism)
    raise TypeError(f"no decoder for {type(mechanism).__name__}")

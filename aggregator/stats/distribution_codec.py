"""The distribution metrics' codecs: a batch of hierarchical-histogram ``{"l", "b"}``
payloads becomes a window's counters (n_l of each level, then each level's OUE support
counts); a batch of HaarHRR ``{"l", "r", "y"}`` payloads, n_l and each level's counts by
row and by (row, y = 1).

An implementation of :class:`~aggregator.stats.batch.Codec`, like the joint metrics' (a
report's level plays the joint group's part): each level's part is parsed and counted by
OUE's own codec (:mod:`aggregator.stats.codecs`). Counters add up batch by batch.

In full: ``docs/statistics/distributions.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from aggregator.stats.arrays import IntArray
from aggregator.stats.batch import Batch, PartsCodec, SupportCodec, int_columns
from aggregator.stats.codecs import UnaryCodec
from client_sdk.mechanisms.distribution import HierarchicalHistogram
from client_sdk.mechanisms.haar import HaarHRR

__all__ = ["HaarCodec", "HistogramCodec"]


class HistogramCodec(PartsCodec):
    """The :class:`~aggregator.stats.batch.Codec` of a hierarchical histogram: parts by
    level ``l`` (1..h), each level's ``{"b"}`` bit rows counted by OUE's codec."""

    key, first = "l", 1

    def __init__(self, mechanism: HierarchicalHistogram) -> None:
        self.m = mechanism
        self.inner = [UnaryCodec(o) for o in mechanism.oracles]
        self.sizes = [mechanism.level_size(i + 1) for i in range(mechanism.height)]

    def _parse_part(self, i: int, part: list[Any]) -> Batch | None:
        if not part:
            return Batch(0, {"bits": np.zeros((0, 1))})
        if not all(len(p) == 2 for p in part):
            return None
        return self.inner[i]._parse_fast([{"b": p.get("b")} for p in part])

    def levels(self, n: int, gen: np.random.Generator) -> IntArray:
        """Each of n devices' level, uniform over 1..h (simulation only)."""
        h = self.m.height
        return gen.integers(1, h + 1, n) if h > 1 else np.ones(n, dtype=np.int64)

    def encode(self, values: npt.ArrayLike, gen: np.random.Generator) -> Batch:
        """Perturb an array of bins in bulk (simulation only: numpy's generator)."""
        bins = np.asarray(values, dtype=np.int64)
        level = self.levels(len(bins), gen)
        columns: dict[str, np.ndarray] = {"l": level}
        b, h = self.m.branching, self.m.height
        for i, codec in enumerate(self.inner):
            rows = np.flatnonzero(level == i + 1)
            nodes = bins[rows] // b ** (h - i - 1)
            columns[f"rows{i}"] = rows
            columns[f"{i}.bits"] = codec.encode(nodes, gen).columns["bits"]
        return Batch(len(bins), columns)

    def sample_counters(self, bins: npt.ArrayLike, gen: np.random.Generator) -> IntArray:
        """A window's counters for devices holding ``bins``, without building reports.

        Exact: each device's level is uniform; OUE flips every bit independently given
        the node, so a node's support is Bin(N_i, p*) + Bin(n_l − N_i, q*) with N_i the
        level's devices in it (simulation only).
        """
        values = np.asarray(bins, dtype=np.int64)
        level = self.levels(len(values), gen)
        out = np.zeros(self.m.counters, dtype=np.int64)
        b, h = self.m.branching, self.m.height
        for i, oracle in enumerate(self.m.oracles):
            mine = values[level == i + 1]
            size = self.m.level_size(i + 1)
            nodes = np.bincount(mine // b ** (h - i - 1), minlength=size)
            out[i] = len(mine)
            start = self.m.offsets[i]
            inside = gen.binomial(nodes, oracle.p)
            outside = gen.binomial(len(mine) - nodes, oracle.q)
            out[start : start + size] = inside + outside
        return out


class HaarCodec(SupportCodec):
    """The :class:`~aggregator.stats.batch.Codec` of HaarHRR: a batch of ``{"l", "r", "y"}``
    payloads (columns ``l``, ``r`` and ``y``) becomes n_l of each level, then per level the
    counts by row r and by (r, y = 1) (:attr:`~client_sdk.mechanisms.haar.HaarHRR.offsets`)."""

    _refused = (KeyError, OverflowError)

    def __init__(self, mechanism: HaarHRR) -> None:
        self.m = mechanism

    def _parse_fast(self, payloads: Sequence[Any]) -> Batch | None:
        h = self.m.height
        batch = int_columns(payloads, {"l": (0, h), "r": (0, 1 << (h - 1)), "y": (0, 2)})
        if batch is None or np.any(batch.columns["r"] >> batch.columns["l"]):
            return None  # row r of level l is below 2^l
        return batch

    def count(self, batch: Batch) -> IntArray:
        """The batch's counters: n_l, then per level the counts by r and by (r, y = 1)."""
        out = np.zeros(self.m.counters, dtype=np.int64)
        level, r, y = batch.columns["l"], batch.columns["r"], batch.columns["y"]
        for lv in range(self.m.height):
            mine = level == lv
            size, start = 1 << lv, self.m.offsets[lv]
            out[lv] = int(mine.sum())
            out[start : start + size] = np.bincount(r[mine], minlength=size)
            out[start + size : start + 2 * size] = np.bincount(r[mine & (y == 1)], minlength=size)
        return out

    def decode(self, payloads: Sequence[Any]) -> IntArray:
        """parse + count."""
        return self.count(self.parse(payloads))

    def encode(self, values: npt.ArrayLike, gen: np.random.Generator) -> Batch:
        """Perturb an array of bins in bulk, with the reports' exact law (simulation only:
        numpy's generator)."""
        bins = np.asarray(values, dtype=np.int64)
        h = self.m.height
        level = gen.integers(0, h, len(bins)) if h > 1 else np.zeros(len(bins), np.int64)
        r = (gen.random(len(bins)) * (1 << level)).astype(np.int64)
        shift = h - level
        node = bins >> shift
        sign = np.where((bins >> (shift - 1)) & 1, -1, 1)
        bit = sign * np.where(np.bitwise_count(r & node) % 2 == 1, -1, 1)
        kept = gen.random(len(bins)) < self.m.p
        y = (np.where(kept, bit, -bit) > 0).astype(np.int64)
        return Batch(len(bins), {"l": level.astype(np.int64), "r": r, "y": y})

    def to_payloads(self, batch: Batch) -> list[dict[str, Any]]:
        """Payload dicts of a batch, as the SDK would have produced them."""
        cols = (batch.columns["l"].tolist(), batch.columns["r"].tolist(), batch.columns["y"])
        return [
            {"l": lv, "r": r, "y": y}
            for lv, r, y in zip(cols[0], cols[1], cols[2].tolist(), strict=True)
        ]

    def sample_counters(self, bins: npt.ArrayLike, gen: np.random.Generator) -> IntArray:
        """A window's counters for devices holding ``bins`` (simulation only)."""
        return self.count(self.encode(bins, gen))

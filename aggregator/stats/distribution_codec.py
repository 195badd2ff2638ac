"""The distribution metrics' codec: a batch of ``{"l", "b"}`` payloads becomes a window's
counters (n_l of each level, then each level's OUE support counts).

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

from aggregator.stats.batch import Batch, Increments, raise_first_error, support_increments
from aggregator.stats.codecs import UnaryCodec
from client_sdk.mechanisms.distribution import HierarchicalHistogram

__all__ = ["HistogramCodec"]

IntArray = npt.NDArray[np.int64]


class HistogramCodec:
    """The :class:`~aggregator.stats.batch.Codec` of a hierarchical histogram."""

    def __init__(self, mechanism: HierarchicalHistogram) -> None:
        self.m = mechanism
        self.inner = [UnaryCodec(o) for o in mechanism.oracles]

    def parse(self, payloads: Sequence[Any]) -> Batch:
        """Validate and columnize payloads: column ``l`` plus each level's bit rows.

        Raises:
            PayloadError: naming the index and the problem of the first bad payload.
        """
        batch = self._parse_fast(payloads)
        if batch is None:
            raise_first_error(self.m, payloads)
        assert batch is not None
        return batch

    def _parse_fast(self, payloads: Sequence[Any]) -> Batch | None:
        h = self.m.height
        levels = [p.get("l") if type(p) is dict and len(p) == 2 else None for p in payloads]
        if not all(type(x) is int and 1 <= x <= h for x in levels):
            return None
        column = np.array(levels, dtype=np.int64)
        columns: dict[str, np.ndarray] = {"l": column}
        for i, codec in enumerate(self.inner):
            rows = np.flatnonzero(column == i + 1)
            part = [{"b": payloads[r].get("b")} for r in rows.tolist()]
            parsed = codec._parse_fast(part) if part else Batch(0, {"bits": np.zeros((0, 1))})
            if parsed is None:
                return None
            columns[f"rows{i}"] = rows
            columns[f"{i}.bits"] = parsed.columns["bits"]
        return Batch(len(payloads), columns)

    def _part(self, batch: Batch, i: int) -> Batch:
        return Batch(len(batch.columns[f"rows{i}"]), {"bits": batch.columns[f"{i}.bits"]})

    def count(self, batch: Batch) -> IntArray:
        """The batch's counters: n_l, then each level's support counts."""
        out = np.zeros(self.m.counters, dtype=np.int64)
        for i, codec in enumerate(self.inner):
            part = self._part(batch, i)
            out[i] = part.n
            if part.n:
                start = self.m.offsets[i]
                out[start : start + self.m.level_size(i + 1)] = codec.count(part)
        return out

    def decode(self, payloads: Sequence[Any]) -> IntArray:
        """parse + count."""
        return self.count(self.parse(payloads))

    def increments(self, batch: Batch) -> Increments:
        """``n``, then the nonzero counters (:func:`support_increments`)."""
        return support_increments(batch.n, self.count(batch))

    def seed_increments(self, batch: Batch) -> list[int]:
        """None: the seed test is for local hashing."""
        return []

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

    def to_payloads(self, batch: Batch) -> list[dict[str, Any]]:
        """Payload dicts of a batch, as the SDK would have produced them."""
        out: list[dict[str, Any]] = [{} for _ in range(batch.n)]
        for i, codec in enumerate(self.inner):
            rows = batch.columns[f"rows{i}"].tolist()
            for r, inner in zip(rows, codec.to_payloads(self._part(batch, i)), strict=True):
                out[r] = {"l": i + 1, **inner}
        return out

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

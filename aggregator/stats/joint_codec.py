"""The joint metrics' codec: a batch of ``{"g", ...}`` payloads becomes a window's counters.

An implementation of :class:`~aggregator.stats.batch.Codec`: the reports are split by
group and each part is counted by its group oracle's own codec
(:mod:`aggregator.stats.codecs`); the counters are n_g of each group, then each group's
support counts (:attr:`~client_sdk.mechanisms.joint.JointMechanism.counters`). They add
up batch by batch, so the worker commits them exactly once like any frequency counts.

In full: ``docs/statistics/joint.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from aggregator.stats.batch import Batch, Increments, raise_first_error, support_increments
from aggregator.stats.codecs import FrequencyCodec, frequency_codec
from client_sdk.mechanisms.joint import JointMechanism

__all__ = ["JointCodec"]

IntArray = npt.NDArray[np.int64]


class JointCodec:
    """The :class:`~aggregator.stats.batch.Codec` of a joint mechanism: its counters."""

    def __init__(self, mechanism: JointMechanism) -> None:
        self.m = mechanism
        self.inner: list[FrequencyCodec] = [frequency_codec(o) for o in mechanism.oracles]

    def parse(self, payloads: Sequence[Any]) -> Batch:
        """Validate and columnize payloads: column ``g`` plus each group's own columns.

        Raises:
            PayloadError: naming the index and the problem of the first bad payload.
        """
        batch = self._parse_fast(payloads)
        if batch is None:
            raise_first_error(self.m, payloads)
        assert batch is not None
        return batch

    def _parse_fast(self, payloads: Sequence[Any]) -> Batch | None:
        """Each group's payloads checked whole by its codec's int columns, ``g`` among
        them (pinned to the group); None if anything is off."""
        groups = len(self.m.groups)
        g = [p.get("g") if type(p) is dict else None for p in payloads]
        if not all(type(x) is int and 0 <= x < groups for x in g):
            return None
        column = np.array(g, dtype=np.int64)
        columns: dict[str, np.ndarray] = {"g": column}
        for i, codec in enumerate(self.inner):
            rows = np.flatnonzero(column == i)
            part = [payloads[r] for r in rows.tolist()]
            bounds = {"g": (i, i + 1), **codec.int_bounds()}  # type: ignore[attr-defined]
            parsed = codec._int_columns(part, bounds)
            if parsed is None:
                return None
            columns[f"rows{i}"] = rows
            for name, col in parsed.columns.items():
                if name != "g":
                    columns[f"{i}.{name}"] = col
        return Batch(len(payloads), columns)

    def _part(self, batch: Batch, i: int) -> Batch:
        prefix = f"{i}."
        cols = {k[len(prefix) :]: v for k, v in batch.columns.items() if k.startswith(prefix)}
        return Batch(len(batch.columns[f"rows{i}"]), cols)

    def count(self, batch: Batch) -> IntArray:
        """The batch's counters: n_g, then each group's support counts."""
        out = np.zeros(self.m.counters, dtype=np.int64)
        for i, codec in enumerate(self.inner):
            part = self._part(batch, i)
            out[i] = part.n
            if part.n:
                start = self.m.offsets[i]
                out[start : start + self.m.group_sizes[i]] = codec.count(part)
        return out

    def decode(self, payloads: Sequence[Any]) -> IntArray:
        """parse + count."""
        return self.count(self.parse(payloads))

    def increments(self, batch: Batch) -> Increments:
        """``n``, then the nonzero counters (:func:`support_increments`)."""
        return support_increments(batch.n, self.count(batch))

    def seed_increments(self, batch: Batch) -> list[int]:
        """None: the seed test is for single local-hashing metrics."""
        return []

    def encode(self, values: npt.ArrayLike, gen: np.random.Generator) -> Batch:
        """Perturb an (n, d) array of true tuples in bulk (simulation only: numpy's generator)."""
        tuples = np.asarray(values, dtype=np.int64)
        n = len(tuples)
        g = gen.integers(0, len(self.m.groups), n)
        columns: dict[str, np.ndarray] = {"g": g}
        for i, (attrs, codec) in enumerate(zip(self.m.groups, self.inner, strict=True)):
            rows = np.flatnonzero(g == i)
            cell = np.zeros(len(rows), dtype=np.int64)
            for a in attrs:
                cell = cell * self.m.sizes[a] + tuples[rows, a]
            columns[f"rows{i}"] = rows
            for name, col in codec.encode(cell, gen).columns.items():
                columns[f"{i}.{name}"] = col
        return Batch(n, columns)

    def to_payloads(self, batch: Batch) -> list[dict[str, Any]]:
        """Payload dicts of a batch, as the SDK would have produced them."""
        out: list[dict[str, Any]] = [{} for _ in range(batch.n)]
        for i, codec in enumerate(self.inner):
            rows = batch.columns[f"rows{i}"].tolist()
            for r, inner in zip(rows, codec.to_payloads(self._part(batch, i)), strict=True):
                out[r] = {"g": i, **inner}
        return out

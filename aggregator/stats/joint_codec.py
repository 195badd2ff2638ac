"""The joint metrics' codec: a batch of ``{"g", ...}`` payloads becomes a window's counters.

An implementation of :class:`~aggregator.stats.batch.Codec`: the reports are split by
group and each part is counted by its group oracle's own codec
(:mod:`aggregator.stats.codecs`); the counters are n_g of each group, then each group's
support counts (:attr:`~client_sdk.mechanisms.joint.JointMechanism.counters`). They add
up batch by batch, so the worker commits them exactly once like any frequency counts.

In full: ``docs/statistics/joint.md``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from aggregator.stats.batch import Batch, PartsCodec, int_columns
from aggregator.stats.codecs import FrequencyCodec, frequency_codec
from client_sdk.mechanisms.joint import JointMechanism

__all__ = ["JointCodec"]


class JointCodec(PartsCodec):
    """The :class:`~aggregator.stats.batch.Codec` of a joint mechanism: its counters, by
    group ``g`` (0..G−1), each group's part counted by its oracle's own codec."""

    key, first = "g", 0

    def __init__(self, mechanism: JointMechanism) -> None:
        self.m = mechanism
        self.inner: list[FrequencyCodec] = [frequency_codec(o) for o in mechanism.oracles]
        self.sizes = mechanism.group_sizes

    def _parse_part(self, i: int, part: list[Any]) -> Batch | None:
        codec = self.inner[i]
        bounds = {"g": (i, i + 1), **codec.int_bounds()}  # type: ignore[attr-defined]
        return int_columns(part, bounds)

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

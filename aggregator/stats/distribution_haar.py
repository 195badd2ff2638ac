"""HaarHRR's distribution estimates: Haar coefficients from Hadamard randomized response,
the histogram they synthesise, and the same answers as the hierarchical histogram's
(ranges, the CDF with its simultaneous band, quantiles read off it).

A level's coefficient estimates are θ̂_l = c/n_l·H·z_l, z_l[r] the signed count of its
reports with row r (one fast Walsh–Hadamard transform); each report adds c·y·H[r, ·], so
a linear answer Σ_l w_l·θ̂_l has the exact variance Σ_l (c²‖w_l‖² − (w_l·θ_l)²)/n_l (with
‖H·w‖² = 2^l‖w‖²), θ plugged in from the histogram. No consistency step: any
coefficients give shares summing to 1.

In full: ``docs/statistics/distributions.md`` ("HaarHRR").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from aggregator.stats.codecs import fwht
from aggregator.stats.distribution import BAND_CELLS, DistributionEstimate, FloatArray
from client_sdk.mechanisms.haar import HaarHRR

__all__ = ["HaarEstimate", "estimate_haar", "haar_counters", "sample_haar_counters"]


def synthesise(base: FloatArray, coefficients: list[FloatArray]) -> FloatArray:
    """Leaf shares (rows, D) from the root's total ``base`` (rows, 1) and each level's
    coefficients (rows, 2^l): a node's halves get T/2 ± θ/2."""
    total = base
    for theta in coefficients:
        rows = len(total)
        total = np.stack([(total + theta) / 2, (total - theta) / 2], axis=-1).reshape(rows, -1)
    return total


def analyse(f: FloatArray, height: int) -> list[FloatArray]:
    """Each level's Haar coefficients (left half's share − right half's) of shares f."""
    out = []
    for level in range(height):
        halves = f.reshape(1 << level, 2, -1).sum(axis=-1)
        out.append(halves[:, 0] - halves[:, 1])
    return out


@dataclass(frozen=True)
class HaarEstimate(DistributionEstimate):
    """A window's distribution from HaarHRR counters (the hierarchical histogram's
    answers: :class:`~aggregator.stats.distribution.DistributionEstimate`)."""

    m: HaarHRR  # type: ignore[assignment]

    @cached_property
    def coefficients(self) -> list[FloatArray]:
        """θ̂_l: each level's unbiased coefficient estimates."""
        out = []
        c = self.m.scale_factor
        for level in range(self.m.height):
            size, start = 1 << level, self.m.offsets[level]
            every = self.support[start : start + size].astype(np.int64)
            plus = self.support[start + size : start + 2 * size].astype(np.int64)
            z = fwht(2 * plus - every).astype(np.float64)
            out.append(c * z / max(int(self.n_levels[level]), 1))
        return out

    @cached_property
    def histogram(self) -> FloatArray:
        """x̂: each bin's share, unbiased (sums to 1; may be slightly negative)."""
        d = self.m.bins
        rows = [theta[None, :] for theta in self.coefficients]
        return synthesise(np.ones((1, 1)), rows)[0] if d else np.zeros(0)

    @cached_property
    def _plugin_coefficients(self) -> list[FloatArray]:
        return analyse(self.plugin, self.m.height)

    def _range_weights(
        self, lows: npt.NDArray[np.int64], highs: npt.NDArray[np.int64], level: int
    ) -> FloatArray:
        """w_l of the ranges [low, high): (overlap with left half − with right)/2^{h−l}."""
        size = self.m.bins >> level
        starts = np.arange(1 << level) * size
        half = size // 2

        def overlap(a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]) -> FloatArray:
            top = np.minimum(highs[:, None], b)
            bottom = np.maximum(lows[:, None], a)
            return np.clip(top - bottom, 0, None).astype(np.float64)

        left = overlap(starts, starts + half)
        right = overlap(starts + half, starts + size)
        return (left - right) / size

    def interval_variances(self, lows: npt.ArrayLike, highs: npt.ArrayLike) -> FloatArray:
        """Var of the share of bins [low, high) for each pair (exact; θ plugged in)."""
        lo = np.asarray(lows, dtype=np.int64)
        hi = np.asarray(highs, dtype=np.int64)
        c2 = self.m.scale_factor**2
        chunk = max(1, BAND_CELLS // self.m.bins)
        out = []
        for start in range(0, len(lo), chunk):
            a, b = lo[start : start + chunk], hi[start : start + chunk]
            total = np.zeros(len(a))
            for level, theta in enumerate(self._plugin_coefficients):
                w = self._range_weights(a, b, level)
                total += (c2 * (w * w).sum(axis=1) - (w @ theta) ** 2) / self.n_levels[level]
            out.append(np.maximum(total, 0.0))
        return np.concatenate(out) if out else np.zeros(0)

    def variances(self, queries: FloatArray) -> FloatArray:
        """Var of each query row's answer aᵀx̂ (any weights over the bins)."""
        c2 = self.m.scale_factor**2
        total = np.zeros(len(queries))
        for level, theta in enumerate(self._plugin_coefficients):
            # a leaf's share moves by sign/2^{h−l} per unit of its node's θ
            size = self.m.bins >> level
            blocks = queries.reshape(len(queries), 1 << level, 2, size // 2).sum(axis=-1)
            w = (blocks[..., 0] - blocks[..., 1]) / size
            total += (c2 * (w * w).sum(axis=1) - (w @ theta) ** 2) / self.n_levels[level]
        return np.maximum(total, 0.0)

    def _noise_draws(self, gen: np.random.Generator, draws: int) -> FloatArray:
        """Draws of x̂'s error: per level N(0, (c²I − θθᵀ)/n_l), as (cI − kθθᵀ)g/√n_l with
        k = (c − √(c² − ‖θ‖²))/‖θ‖² (‖θ‖ ≤ 1 < c), synthesised to the leaves."""
        c = self.m.scale_factor
        errors = []
        for level, theta in enumerate(self._plugin_coefficients):
            g = gen.standard_normal((draws, 1 << level))
            norm2 = float(theta @ theta)
            k = (c - math.sqrt(c * c - norm2)) / norm2 if norm2 > 0 else 0.0
            e = c * g - k * np.outer(g @ theta, theta)
            errors.append(e / math.sqrt(int(self.n_levels[level])))
        return synthesise(np.zeros((draws, 1)), errors)


def estimate_haar(
    m: HaarHRR, counters: npt.ArrayLike, edges: npt.ArrayLike, confidence: float = 0.95
) -> HaarEstimate:
    """The distribution of a window from HaarHRR counters.

    Raises:
        ValueError: the counters are not the mechanism's.
    """
    values = np.asarray(counters, dtype=np.int64)
    if len(values) != m.counters:
        raise ValueError(f"{len(values)} counters for a mechanism of {m.counters}")
    return HaarEstimate(
        m,
        np.asarray(edges, dtype=np.float64),
        values[: m.height],
        values,
        confidence,
    )


def haar_counters(m: HaarHRR, payloads: list[dict[str, Any]]) -> npt.NDArray[np.int64]:
    """A window's counters from checked payloads."""
    out = np.zeros(m.counters, dtype=np.int64)
    for payload in payloads:
        checked = m.check_payload(payload)
        level, r = checked["l"], checked["r"]
        start = m.offsets[level]
        out[level] += 1
        out[start + r] += 1
        out[start + (1 << level) + r] += checked["y"]
    return out


def sample_haar_counters(
    m: HaarHRR, bins: npt.ArrayLike, gen: np.random.Generator
) -> npt.NDArray[np.int64]:
    """A window's counters for devices holding ``bins``, drawn from the counters' exact
    law without a draw per report (simulation only: numpy's generator): each bin's
    devices split into levels (multinomial), each node's left and right halves' devices
    into rows (multinomial), and the reports kept at each row binomially — the same law
    as one uniform level, row and kept-bit per device, in O(D²) whatever n."""
    values = np.asarray(bins, dtype=np.int64)
    h, d = m.height, m.bins
    held = np.bincount(values, minlength=d)
    split = gen.multinomial(held, np.full(h, 1.0 / h))  # (D, h): each bin's devices per level
    out = np.zeros(m.counters, dtype=np.int64)
    for lv in range(h):
        size = 1 << lv
        halves = split[:, lv].reshape(size, 2, -1).sum(axis=-1)  # (node, left/right)
        rows = np.full(size, 1.0 / size)
        left = gen.multinomial(halves[:, 0], rows)  # (node, row)
        right = gen.multinomial(halves[:, 1], rows)
        nodes = np.arange(size)
        positive = np.bitwise_count(nodes[:, None] & nodes[None, :]) % 2 == 0  # H[j, r] = +1
        plus = (left * positive + right * ~positive).sum(axis=0)  # true bit +1, by row
        every = (left + right).sum(axis=0)
        kept = gen.binomial(plus, m.p) + gen.binomial(every - plus, 1.0 - m.p)
        start = m.offsets[lv]
        out[lv] = every.sum()
        out[start : start + size] = every
        out[start + size : start + 2 * size] = kept
    return out

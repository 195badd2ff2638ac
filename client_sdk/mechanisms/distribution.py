"""Distributions of a numeric metric (kind ``distribution``): the hierarchical histogram.

The metric's range [lo, hi] is cut into D = B^h bins (linear, or geometric on a log
scale) that are the leaves of a B-ary tree of depth h. A device finds its value's bin,
picks one level l ∈ 1..h uniformly (independently of its value; no draw when h = 1) and
reports its value's node at that level, an index in range(B^l), through OUE at the full ε.
The level carries no information, so one report is ε-LDP. OUE flips every bit
independently, so the estimates of a level's nodes are independent given the values:
what makes the server's intervals exact (docs/statistics/distributions.md).

Payload: ``{"l": level, "b": base64 of B^l bits}`` (the level's OUE payload).

References:
    G. Cormode, T. Kulkarni, D. Srivastava. "Answering Range Queries Under Local
    Differential Privacy". VLDB 2019, §4 (hierarchical histograms, B ≈ 4 to 8).
    M. Hay, V. Rastogi, G. Miklau, D. Suciu. "Boosting the Accuracy of Differentially
    Private Histograms Through Consistency". VLDB 2010 (constrained inference).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from client_sdk.errors import PayloadError
from client_sdk.mechanisms.base import WireSized, check_epsilon, fields_of, sequential_bounds
from client_sdk.mechanisms.bins import (
    MAX_BINS,
    MIN_BINS,
    SCALES,
    bin_of,
    check_bin,
    check_layout,
    is_power_of_two,
)
from client_sdk.mechanisms.haar import HaarHRR
from client_sdk.mechanisms.randomness import RandomSource, default_rng
from client_sdk.mechanisms.unary import OptimizedUnaryEncoding

__all__ = [
    "DISTRIBUTION_NAMES",
    "MAX_BINS",
    "MIN_BINS",
    "SCALES",
    "DistributionChoice",
    "DistributionMechanism",
    "HaarHRR",
    "HierarchicalHistogram",
    "bin_of",
    "check_bin",
    "check_layout",
    "choose_distribution",
    "distribution_from_params",
]

DISTRIBUTION_NAMES = ("hh", "haar", "auto")
"""The distribution kind's mechanisms: ``hh`` (:class:`HierarchicalHistogram`), ``haar``
(:class:`~client_sdk.mechanisms.haar.HaarHRR`), or ``auto`` (:func:`choose_distribution`)."""


@dataclass(frozen=True)
class HierarchicalHistogram(WireSized):
    """A B-ary tree over D = B^h bins; one level's node per report, through OUE at ε.

    Args:
        epsilon: ε of one report.
        bins: D, a power of two in [MIN_BINS, MAX_BINS].
        branching: B, a power of two with D = B^h for an integer h ≥ 1 (B = D: a flat
            histogram, one level).
        scale: ``linear`` or ``log`` (:data:`SCALES`).

    Raises:
        ValueError: a parameter outside its range (the message says which).
    """

    epsilon: float
    bins: int
    branching: int
    scale: str = "linear"

    name = "hh"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        check_layout(self.bins, self.scale)
        b, d = self.branching, self.bins
        if not is_power_of_two(b) or b < 2 or (d.bit_length() - 1) % (b.bit_length() - 1):
            raise ValueError(f"branching must be a power of two B ≥ 2 with B^h = {d}, got {b!r}")

    # -- layout ------------------------------------------------------------------------
    @property
    def height(self) -> int:
        """h: the levels reported (level 0, the root, is known: every share sums to 1)."""
        return (self.bins.bit_length() - 1) // (self.branching.bit_length() - 1)

    @cached_property
    def oracles(self) -> tuple[OptimizedUnaryEncoding, ...]:
        """OUE over the B^l nodes of level l, for l = 1..h (index l − 1)."""
        return tuple(
            OptimizedUnaryEncoding(epsilon=self.epsilon, domain_size=self.branching**level)
            for level in range(1, self.height + 1)
        )

    def level_size(self, level: int) -> int:
        """B^l: nodes of level l (1..h)."""
        return self.branching**level

    @cached_property
    def offsets(self) -> tuple[int, ...]:
        """Where each level's support counts start in the counters (after h level sizes)."""
        out, at = [], self.height
        for level in range(1, self.height + 1):
            out.append(at)
            at += self.level_size(level)
        return tuple(out)

    @property
    def counters(self) -> int:
        """Counters of a window: n_l of each level, then each level's B^l support counts."""
        return self.height + sum(self.level_size(lv) for lv in range(1, self.height + 1))

    # -- device ------------------------------------------------------------------------
    def check_value(self, value: object) -> int:
        """``value`` as a bin index in range(bins), or ``ValueError``."""
        return check_bin(value, self.bins)

    def perturb(self, value: object, rng: RandomSource | None = None) -> dict[str, Any]:
        """Report one bin: a uniform level (a draw only when h > 1), then the bin's node at
        that level through the level's OUE.

        Args:
            value: the bin (:func:`bin_of` of the value; ``build_report`` finds it).
            rng: a ``random.Random``-like source; default: the process CSPRNG.

        Raises:
            ValueError: ``value`` is not a bin.
        """
        leaf = self.check_value(value)
        rng = rng or default_rng()
        level = 1 + rng.randrange(self.height) if self.height > 1 else 1
        node = leaf // self.branching ** (self.height - level)
        return {"l": level, **self.oracles[level - 1].perturb(node, rng)}

    # -- collector / server ------------------------------------------------------------
    def check_payload(self, payload: object) -> dict[str, Any]:
        """Validate one payload strictly and return it in canonical form.

        Raises:
            PayloadError: no level, an unknown level, or a bad OUE payload for it.
        """
        if not isinstance(payload, dict) or "l" not in payload:
            raise PayloadError(f"hh payload {str(payload)[:80]}: must be an object with 'l'")
        level = payload["l"]
        if type(level) is not int or not 1 <= level <= self.height:
            raise PayloadError(f"hh payload: 'l' must be an int in [1, {self.height}]")
        inner = {key: x for key, x in payload.items() if key != "l"}
        return {"l": level, **self.oracles[level - 1].check_payload(inner)}

    def implausible(self, payload: dict[str, Any]) -> Any:
        """The level's OUE verdict (too few or too many ones for an honest report)."""
        inner = {key: x for key, x in payload.items() if key != "l"}
        return self.oracles[payload["l"] - 1].implausible(inner)

    def max_payload(self) -> dict[str, Any]:
        """A largest payload (a leaf-level report)."""
        return {"l": self.height, **self.oracles[-1].max_payload()}

    def params(self) -> dict[str, Any]:
        """Everything :func:`distribution_from_params` needs."""
        return {"mechanism": self.name, **fields_of(self, "epsilon", "bins", "branching", "scale")}

    @property
    def realized_epsilon(self) -> float:
        """The ε every level's OUE realises (the level choice is free)."""
        return max(o.realized_epsilon for o in self.oracles)

    def privacy_bounds(self) -> dict[str, Any]:  # noqa: D102
        return sequential_bounds(self.epsilon)

    def range_variance_star(self) -> float:
        """A planning figure: n·Var of a range query holding a third of the values, without
        consistency (which lowers it): the range splits into about h·(B − 1) nodes, each
        level seen by n/h of the devices, each node's estimate OUE's variance at f ≈ 0;
        plus the sampling of devices into levels, f(1 − f)·(h − 1) at f = 1/3 (a level's
        n/h devices stand for all n). A flat histogram (h = 1) sums D/3 leaves."""
        v = self.oracles[0].variance_star()
        if self.height == 1:
            return v * self.bins / 3
        h = self.height
        return h * v * h * (self.branching - 1) + (2 / 9) * (h - 1)

    def __repr__(self) -> str:
        return (
            f"HierarchicalHistogram(ε={self.epsilon:g}, bins={self.bins}, "
            f"B={self.branching}, h={self.height}, {self.scale})"
        )


@dataclass(frozen=True)
class DistributionChoice:
    """What ``auto`` picked for a distribution metric, and why."""

    mechanism: HierarchicalHistogram
    reason: str
    candidates: tuple[HierarchicalHistogram, ...]


def choose_distribution(epsilon: float, bins: int, scale: str = "linear") -> DistributionChoice:
    """The hierarchical histogram whose branching factor gives range queries the lowest
    variance (:meth:`HierarchicalHistogram.range_variance_star`), the smaller B on ties.

    Raises:
        ValueError: ε, bins or scale out of range.
    """
    HierarchicalHistogram(epsilon, bins, bins, scale)  # validates ε, bins, scale
    log_d = bins.bit_length() - 1
    built = [
        HierarchicalHistogram(epsilon, bins, 1 << b, scale)
        for b in range(1, log_d + 1)
        if log_d % b == 0
    ]
    ranked = tuple(sorted(built, key=lambda m: (m.range_variance_star(), m.branching)))
    chosen = ranked[0]
    others = ", ".join(f"B={m.branching} {m.range_variance_star():.4g}" for m in ranked[1:])
    haar = HaarHRR(epsilon, bins, scale)
    reason = (
        f"ε = {epsilon:g}, {bins} {scale} bins: hierarchical histogram with B = "
        f"{chosen.branching} (h = {chosen.height} levels, OUE per level) has the lowest "
        f"n·Var of a range query ({chosen.range_variance_star():.4g}; {others or 'no other'}); "
        + _haar_note(epsilon, chosen, haar)
    )
    return DistributionChoice(chosen, reason, ranked)


HAAR_LEVEL_EPSILON = 0.5
"""The ε at or below which HaarHRR's range-query MSE is level with the consistent tree's
(0.98–1.05× at D = 256, N = 2^20: docs/benchmarks/distributions.md, "HaarHRR against the
hierarchical histogram"); above it the tree wins (1.35× at ε = 1.1, 53× at ε = 8)."""


def _haar_note(epsilon: float, tree: HierarchicalHistogram, haar: HaarHRR) -> str:
    """What ``auto``'s reason says of HaarHRR (``"mechanism": "haar"``), which it never
    picks: level with the tree at small ε, never better on range queries."""
    size = f"a {haar.wire_bytes}-byte payload against the tree's {tree.wire_bytes}"
    if epsilon <= HAAR_LEVEL_EPSILON:
        return (
            f"at ε ≤ {HAAR_LEVEL_EPSILON:g} HaarHRR is level with it on range queries "
            f"(0.98–1.05× the MSE in the benchmark) with {size}: declare "
            '"mechanism": "haar" where reports must be tiny'
        )
    return (
        f'HaarHRR ("haar", {size}) is kept out: above ε = {HAAR_LEVEL_EPSILON:g} its '
        "one-bit reports give range queries 1.35× (ε = 1.1) to 53× (ε = 8) the tree's MSE"
    )


DistributionMechanism = HierarchicalHistogram | HaarHRR
"""A distribution metric's mechanism object."""


def distribution_from_params(params: dict[str, Any]) -> DistributionMechanism:
    """Rebuild a distribution mechanism from its ``params()`` (hh or haar).

    Raises:
        ValueError: missing, extra or invalid parameters.
    """
    haar_keys = {"mechanism", "epsilon", "bins", "scale"}
    if isinstance(params, dict) and params.get("mechanism") == HaarHRR.name:
        if set(params) != haar_keys:
            raise ValueError(f"haar mechanism parameters are {sorted(haar_keys)}")
        return HaarHRR(params["epsilon"], params["bins"], params["scale"])
    keys = {"mechanism", "epsilon", "bins", "branching", "scale"}
    if not isinstance(params, dict) or set(params) != keys or params["mechanism"] != "hh":
        raise ValueError(
            f"distribution mechanism parameters are {sorted(keys)} (mechanism hh), "
            f"or {sorted(haar_keys)} (mechanism haar)"
        )
    return HierarchicalHistogram(
        params["epsilon"], params["bins"], params["branching"], params["scale"]
    )

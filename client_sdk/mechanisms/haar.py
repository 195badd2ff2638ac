"""HaarHRR: a number's distribution through its Haar coefficients, one per report.

The D = 2^h bins (as :func:`~client_sdk.mechanisms.distribution.bin_of` finds them) are
the leaves of a binary tree. A node j of level l (l = 0..h − 1, 2^l nodes, s = 2^{h−l}
leaves) has the Haar coefficient θ_{l,j} = (share of values in its left half) − (share
in its right half). A device picks a level l uniformly, then an index r uniformly in
range(2^l), and reports one bit: its own coefficient's sign (±1 at its node, 0
elsewhere) seen through the Hadamard row r, H[r, j] = (−1)^popcount(r & j), kept with
probability p = e^ε/(e^ε + 1) and flipped otherwise (randomized response). Level and r
carry no information, so one report is ε-LDP. The server's estimate of a level's
coefficients is one fast Walsh–Hadamard transform of the signed counts by r; each
report's contribution is independent, so a range's variance is exact
(docs/statistics/distributions.md, "HaarHRR").

Payload: ``{"l": level, "r": index, "y": 0 or 1}`` (y = 1: the bit reported is +1).

References:
    G. Cormode, T. Kulkarni, D. Srivastava. "Answering Range Queries Under Local
    Differential Privacy". VLDB 2019, §5 (HaarHRR).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any

from client_sdk.errors import PayloadError
from client_sdk.mechanisms.base import (
    WireSized,
    check_epsilon,
    exp_epsilon,
    fields_of,
    sequential_bounds,
    shade_down,
)
from client_sdk.mechanisms.bins import check_bin, check_layout
from client_sdk.mechanisms.randomness import RandomSource, bernoulli, default_rng

__all__ = ["HaarHRR", "hadamard_sign"]


def hadamard_sign(r: int, j: int) -> int:
    """H[r, j] = (−1)^popcount(r & j) of the Sylvester–Hadamard matrix."""
    return -1 if (r & j).bit_count() % 2 else 1


@dataclass(frozen=True)
class HaarHRR(WireSized):
    """Haar coefficients through Hadamard randomized response, one level per report.

    Args:
        epsilon: ε of one report.
        bins: D, a power of two in [MIN_BINS, MAX_BINS].
        scale: ``linear`` or ``log``.

    Raises:
        ValueError: a parameter outside its range (the message says which).
    """

    epsilon: float
    bins: int
    scale: str = "linear"

    name = "haar"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        check_layout(self.bins, self.scale)

    @property
    def height(self) -> int:
        """h = log₂ D: the coefficient levels 0..h − 1."""
        return self.bins.bit_length() - 1

    @cached_property
    def p(self) -> float:
        """The probability a report keeps its bit: e^ε/(e^ε + 1), shaded down so that
        p/(1 − p) ≤ e^ε exactly."""
        e = exp_epsilon(self.epsilon)
        return shade_down(e / (e + 1), lambda f: f / (1 - f), self.epsilon)

    def privacy_ratio(self) -> Fraction:
        """The worst likelihood ratio of a report between two values: p/(1 − p)."""
        p = Fraction(self.p)
        return p / (1 - p)

    @property
    def scale_factor(self) -> float:
        """c = 1/(2p − 1): E[c·y | bit] = bit, the debiasing of one report."""
        return 1.0 / (2.0 * self.p - 1.0)

    @cached_property
    def offsets(self) -> tuple[int, ...]:
        """Where each level's counters start: after the h level sizes, per level 2^l
        counts of reports by r, then 2^l counts of those with y = 1."""
        out, at = [], self.height
        for level in range(self.height):
            out.append(at)
            at += 2 * (1 << level)
        return tuple(out)

    @property
    def counters(self) -> int:
        """Counters of a window: n_l per level, then per level the counts by r and by
        (r, y = 1): h + 2(D − 1)."""
        return self.height + 2 * (self.bins - 1)

    # -- device ------------------------------------------------------------------------
    def check_value(self, value: object) -> int:
        """``value`` as a bin index in range(bins), or ``ValueError``."""
        return check_bin(value, self.bins)

    def coefficient(self, leaf: int, level: int) -> tuple[int, int]:
        """The node of ``leaf`` at ``level`` and its coefficient's sign there (+1 in the
        left half)."""
        shift = self.height - level
        return leaf >> shift, -1 if (leaf >> (shift - 1)) & 1 else 1

    def perturb(self, value: object, rng: RandomSource | None = None) -> dict[str, Any]:
        """Report one bin: a uniform level and Hadamard row, then one randomized bit.

        Args:
            value: the bin (:func:`~client_sdk.mechanisms.distribution.bin_of`).
            rng: a ``random.Random``-like source; default: the process CSPRNG.

        Raises:
            ValueError: ``value`` is not a bin.
        """
        leaf = self.check_value(value)
        rng = rng or default_rng()
        level = rng.randrange(self.height) if self.height > 1 else 0
        r = rng.randrange(1 << level) if level else 0
        node, sign = self.coefficient(leaf, level)
        bit = sign * hadamard_sign(r, node)
        if not bernoulli(rng, self.p):
            bit = -bit
        return {"l": level, "r": r, "y": 1 if bit > 0 else 0}

    # -- collector / server ------------------------------------------------------------
    def check_payload(self, payload: object) -> dict[str, Any]:
        """Validate one payload strictly and return it in canonical form.

        Raises:
            PayloadError: not ``{"l", "r", "y"}`` with each in its range.
        """
        if not isinstance(payload, dict) or set(payload) != {"l", "r", "y"}:
            raise PayloadError(f"haar payload {str(payload)[:80]}: must be {{'l', 'r', 'y'}}")
        level, r, y = payload["l"], payload["r"], payload["y"]
        if type(level) is not int or not 0 <= level < self.height:
            raise PayloadError(f"haar payload: 'l' must be an int in [0, {self.height - 1}]")
        if type(r) is not int or not 0 <= r < 1 << level:
            raise PayloadError(f"haar payload: 'r' must be an int in [0, 2^l) = [0, {1 << level})")
        if type(y) is not int or y not in (0, 1):
            raise PayloadError("haar payload: 'y' must be 0 or 1")
        return {"l": level, "r": r, "y": y}

    def implausible(self, payload: dict[str, Any]) -> None:
        """None: every valid one-bit report is one an honest device makes."""
        return None

    def max_payload(self) -> dict[str, Any]:
        """A largest payload (the deepest level's last row)."""
        level = self.height - 1
        return {"l": level, "r": (1 << level) - 1, "y": 1}

    @property
    def realized_epsilon(self) -> float:
        """ln p/(1 − p): the ε a report realises (≤ ``epsilon``)."""
        return math.log(self.privacy_ratio())

    def privacy_bounds(self) -> dict[str, Any]:
        """One report is ε-LDP; reports compose sequentially (no memoization)."""
        return sequential_bounds(self.epsilon)

    def params(self) -> dict[str, Any]:
        """The parameters that rebuild the mechanism."""
        return {"mechanism": self.name, **fields_of(self, "epsilon", "bins", "scale")}

    def range_variance_star(self) -> float:
        """A planning figure: n·Var of a range query, at most two coefficients per level
        with weight ≤ 1/2 each, each level seen by n/h devices: ≤ h·Σ_l c²·2·(1/2)² =
        h²c²/2 (the paper's O(h²c²) bound; its (w·θ)² term only lowers it)."""
        c = self.scale_factor
        return self.height**2 * c * c / 2

    def __repr__(self) -> str:
        return f"HaarHRR(ε={self.epsilon:g}, bins={self.bins}, h={self.height}, {self.scale})"

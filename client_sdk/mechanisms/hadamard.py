"""Hadamard response: one index of a Hadamard code, O(1) server work per report.

Let K = 2^⌈log₂(k+1)⌉ and H the K×K Sylvester–Hadamard matrix, H[r, j] =
(−1)^popcount(r & j). Value v owns row r = v + 1 (row 0, all ones, is skipped) and the
set C_v = {j : H[r, j] = +1} of K/2 indices. The device reports an index j uniform on
C_v with probability p = e^ε/(e^ε+1), otherwise uniform on its complement. Payload:
``{"j": int}``. A report supports v iff j ∈ C_v; any two distinct C_u, C_v share K/4
indices, so q* = 1/2 exactly. The server turns the histogram of j into all k support
counts with one fast Walsh–Hadamard transform, O(K log K).

References:
    J. Acharya, Z. Sun, H. Zhang. "Hadamard Response: Estimating Distributions Privately,
    Efficiently, and with Little Communication". AISTATS 2019.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any

from client_sdk.mechanisms.base import FrequencyOracle, exp_epsilon, shade_down
from client_sdk.mechanisms.randomness import RandomSource, bernoulli

__all__ = ["HadamardResponse"]


@dataclass(frozen=True)
class HadamardResponse(FrequencyOracle):
    """Hadamard response (HR)."""

    name = "hr"
    server_cost = "O(1) per report + one O(K log K) transform per batch"
    server_cost_rank = 1

    @property
    def order(self) -> int:
        """K, the size of the Hadamard code (a power of two > k)."""
        return 1 << self.domain_size.bit_length()

    @cached_property
    def p(self) -> float:  # noqa: D102
        e = exp_epsilon(self.epsilon)
        return shade_down(e / (e + 1), lambda f: f / (1 - f), self.epsilon)

    @property
    def q(self) -> float:  # noqa: D102
        return 0.5

    def privacy_ratio(self) -> Fraction:  # noqa: D102
        # Every index has probability (2/K)·p on one side and (2/K)·(1−p) on the other.
        p = Fraction(self.p)
        return p / (1 - p)

    @staticmethod
    def in_code(value: int, index: int) -> bool:
        """True when ``index`` is in C_value, i.e. H[value + 1, index] = +1."""
        return ((value + 1) & index).bit_count() % 2 == 0

    def _perturb(self, value: int, rng: RandomSource) -> dict[str, Any]:
        row = value + 1
        j = rng.randrange(self.order)
        if self.in_code(value, j) != bernoulli(rng, self.p):
            j ^= row & -row  # flipping one bit of j that row has flips the sign
        return {"j": j}

    def check_payload(self, payload: object) -> dict[str, Any]:  # noqa: D102
        fields = self._fields(payload, ("j",))
        return {"j": self._int_field(fields, "j", self.order)}

    def support(self, payload: dict[str, Any]) -> list[int]:  # noqa: D102
        j = payload["j"]
        return [v for v in range(self.domain_size) if self.in_code(v, j)]

    def supports(self, payload: dict[str, Any], value: int) -> bool:  # noqa: D102
        return self.in_code(value, payload["j"])

    def max_payload(self) -> dict[str, Any]:  # noqa: D102
        return {"j": self.order - 1}

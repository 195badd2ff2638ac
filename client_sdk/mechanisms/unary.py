"""Unary encodings: symmetric (SUE, basic one-time RAPPOR) and optimized (OUE).

The true value is one-hot encoded in k bits; bit v is reported as 1 with probability
p, every other bit with probability q. Payload: ``{"b": base64(bits)}``, the k bits
packed big-endian (value v is bit 7 − v mod 8 of byte v // 8), padding bits zero.

References:
    Ú. Erlingsson, V. Pihur, A. Korolova. "RAPPOR". CCS 2014 (SUE = one-time RAPPOR).
    Wang et al., USENIX Security 2017, §4.3 (OUE: p = 1/2, q = 1/(e^ε+1)).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any

from client_sdk.mechanisms.base import FrequencyOracle, exp_epsilon, shade_down
from client_sdk.mechanisms.plausibility import NEGLIGIBLE, Implausible, ones_range
from client_sdk.mechanisms.randomness import RandomSource, bernoulli, bernoulli_lanes

__all__ = ["OptimizedUnaryEncoding", "SymmetricUnaryEncoding", "UnaryEncoding"]


@dataclass(frozen=True)
class UnaryEncoding(FrequencyOracle):
    """Shared encoding, sampling and decoding of the unary mechanisms."""

    server_cost = "O(k/8) per report (column sums of the packed bits)"
    server_cost_rank = 3

    @cached_property
    def nbytes(self) -> int:
        """Bytes of the packed bit vector."""
        return (self.domain_size + 7) // 8

    @cached_property
    def _pad(self) -> int:
        return 8 * self.nbytes - self.domain_size

    def privacy_ratio(self) -> Fraction:  # noqa: D102
        p, q = Fraction(self.p), Fraction(self.q)
        # Moving the true value from v to v' changes bits v and v' only.
        return (p * (1 - q)) / (q * (1 - p))

    def _perturb(self, value: int, rng: RandomSource) -> dict[str, Any]:
        k = self.domain_size
        bits = bernoulli_lanes(rng, self.q, k) << self._pad
        position = 1 << (8 * self.nbytes - 1 - value)
        if bernoulli(rng, self.p):
            bits |= position
        else:
            bits &= ~position
        return {"b": base64.b64encode(bits.to_bytes(self.nbytes, "big")).decode("ascii")}

    def decode_bits(self, payload: dict[str, Any]) -> bytes:
        """The packed bit vector of a valid payload."""
        return binascii.a2b_base64(payload["b"])  # what b64decode calls, without its checks

    def check_payload(self, payload: object) -> dict[str, Any]:  # noqa: D102
        fields = self._fields(payload, ("b",))
        b = fields["b"]
        if not isinstance(b, str):
            raise self._reject(payload, f"'b' must be a base64 string, got {type(b).__name__}")
        expected = 4 * ((self.nbytes + 2) // 3)
        if len(b) != expected:
            raise self._reject(
                payload,
                f"'b' must be {expected} base64 characters ({self.domain_size} bits), got {len(b)}",
            )
        try:
            raw = binascii.a2b_base64(b.encode("ascii"), strict_mode=True)
        except (binascii.Error, UnicodeEncodeError) as exc:
            raise self._reject(payload, f"'b' is not valid base64 ({exc})") from None
        if len(raw) != self.nbytes:
            raise self._reject(payload, f"'b' decodes to {len(raw)} bytes, not {self.nbytes}")
        if self._pad and raw[-1] & ((1 << self._pad) - 1):
            raise self._reject(payload, f"bits beyond the {self.domain_size} values must be 0")
        return {"b": b}

    def support(self, payload: dict[str, Any]) -> list[int]:  # noqa: D102
        bits = int.from_bytes(self.decode_bits(payload), "big")
        top = 8 * self.nbytes - 1
        return [v for v in range(self.domain_size) if bits >> (top - v) & 1]

    def supports(self, payload: dict[str, Any], value: int) -> bool:  # noqa: D102
        return bool(self.decode_bits(payload)[value // 8] >> (7 - value % 8) & 1)

    def max_payload(self) -> dict[str, Any]:  # noqa: D102
        return {"b": "A" * (4 * ((self.nbytes + 2) // 3))}

    def plausible_ones(self) -> tuple[int, int]:
        """(lo, hi): the counts of ones of all but a NEGLIGIBLE share of honest reports."""
        return self._plausible_ones

    @cached_property
    def _plausible_ones(self) -> tuple[int, int]:
        # once per mechanism: the collector asks for every report it checks
        return ones_range(self.domain_size, self.p, self.q)

    def implausible(self, payload: dict[str, Any]) -> Implausible | None:
        """A report with fewer than lo or more than hi ones (:meth:`plausible_ones`)."""
        k = self.domain_size
        lo, hi = self.plausible_ones()
        if lo == 0 and hi == k:
            return None
        ones = int.from_bytes(self.decode_bits(payload), "big").bit_count()
        if lo <= ones <= hi:
            return None
        reason = "too_few_ones" if ones < lo else "too_many_ones"
        return self._implausible(
            payload,
            reason,
            f"{ones} of {k} bits are set; an honest report at epsilon {self.epsilon:g} sets "
            f"{lo} to {hi} (any other count has probability below {NEGLIGIBLE:g})",
        )


@dataclass(frozen=True)
class SymmetricUnaryEncoding(UnaryEncoding):
    """SUE (basic one-time RAPPOR): p = e^{ε/2}/(e^{ε/2}+1), q = 1 − p."""

    name = "sue"

    @cached_property
    def q(self) -> float:  # noqa: D102
        return 1 / (exp_epsilon(self.epsilon / 2) + 1)

    @cached_property
    def p(self) -> float:  # noqa: D102
        e, q = exp_epsilon(self.epsilon / 2), Fraction(self.q)
        return shade_down(e / (e + 1), lambda f: f * (1 - q) / (q * (1 - f)), self.epsilon)


@dataclass(frozen=True)
class OptimizedUnaryEncoding(UnaryEncoding):
    """OUE: p = 1/2, q = 1/(e^ε+1); the lowest variance of the unary encodings."""

    name = "oue"

    @property
    def p(self) -> float:  # noqa: D102
        return 0.5

    @cached_property
    def q(self) -> float:  # noqa: D102
        # (1 − q)/q is decreasing in q: shading q *up* lowers the ratio.
        q = 1 / (exp_epsilon(self.epsilon) + 1)
        return 1 - shade_down(1 - q, lambda f: f / (1 - f), self.epsilon)

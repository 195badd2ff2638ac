"""Local hashing (OLH, BLH): hash the value into g buckets, then randomize the bucket.

Each report draws a fresh hash h(x) = ((a·x + b) mod P) mod g from a universal family
(P the smallest prime ≥ max(k, g), a ∈ [1, P), b ∈ [0, P)), and reports (a, b, y) where
y = h(v) with probability p' = e^ε/(e^ε+g−1), otherwise one of the other g−1 buckets
uniformly. Payload: ``{"a": int, "b": int, "y": int}``.

The report supports every u with h(u) = y. Because x ↦ (a·x + b) mod P is a bijection
of Z_P, the supported u can be enumerated as a⁻¹(z − b) mod P for z ≡ y (mod g): the
server does O(P/g) work per report, not O(k) hash evaluations.

For u ≠ v the pair ((a·u+b) mod P, (a·v+b) mod P) is uniform over distinct pairs of
Z_P, so the collision probability c = Pr[h(u) = h(v)] is the same for every pair and is
computed exactly; then q* = p'·c + (1−p')(1−c)/(g−1), which is 1/g up to O(g/P).

References:
    Wang et al., USENIX Security 2017, §4.4 (OLH: g = e^ε + 1; BLH: g = 2).
    J. L. Carter, M. N. Wegman. "Universal classes of hash functions". JCSS 18, 1979.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any

from client_sdk.mechanisms.base import FrequencyOracle, exp_epsilon, shade_down
from client_sdk.mechanisms.randomness import RandomSource, bernoulli

__all__ = ["BinaryLocalHashing", "LocalHashing", "smallest_prime_at_least"]

MAX_BUCKETS = 1 << 20
"""g beyond this gains nothing (OLH's optimum is e^ε + 1 ≤ 4.9·10⁸ only at ε = 20, where
GRR is better anyway) and would make the exact collision sum slow."""


def _is_prime(n: int) -> bool:
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    f = 3
    while f * f <= n:
        if n % f == 0:
            return False
        f += 2
    return True


def smallest_prime_at_least(n: int) -> int:
    """The smallest prime ≥ n (trial division; n is at most a few million here)."""
    while not _is_prime(n):
        n += 1
    return n


@dataclass(frozen=True)
class LocalHashing(FrequencyOracle):
    """Optimized local hashing (OLH); ``g`` defaults to round(e^ε) + 1."""

    g: int = 0
    """Number of hash buckets; 0 means OLH's choice round(e^ε) + 1."""

    name = "olh"
    server_cost = "O(k/g) per report (enumerate the supported values)"
    server_cost_rank = 2

    def _validate(self) -> None:
        g = self.g
        if isinstance(g, bool) or not isinstance(g, int):
            raise ValueError(f"g must be an integer, got {g!r}")
        if g == 0:
            g = round(exp_epsilon(self.epsilon)) + 1
            object.__setattr__(self, "g", min(g, MAX_BUCKETS))
        elif not 2 <= g <= MAX_BUCKETS:
            raise ValueError(f"g must be in [2, {MAX_BUCKETS}], got {g}")

    @cached_property
    def prime(self) -> int:
        """P, the modulus of the hash family."""
        return smallest_prime_at_least(max(self.domain_size, self.g))

    @cached_property
    def keep(self) -> float:
        """p' = Pr[y = h(v)] = p*."""
        e, g = exp_epsilon(self.epsilon), self.g
        return shade_down(e / (e + g - 1), lambda f: f * (g - 1) / (1 - f), self.epsilon)

    @cached_property
    def collision(self) -> Fraction:
        """c = Pr[h(u) = h(v)] for u ≠ v, exactly, over the random (a, b)."""
        P, g = self.prime, self.g
        m, t = divmod(P, g)
        same_bucket_pairs = t * (m + 1) * m + (g - t) * m * (m - 1)
        return Fraction(same_bucket_pairs, P * (P - 1))

    @property
    def p(self) -> float:  # noqa: D102
        return self.keep

    @cached_property
    def q(self) -> float:  # noqa: D102
        keep, c = Fraction(self.keep), self.collision
        return float(keep * c + (1 - keep) * (1 - c) / (self.g - 1))

    def privacy_ratio(self) -> Fraction:  # noqa: D102
        keep = Fraction(self.keep)
        return keep * (self.g - 1) / (1 - keep)

    def options(self) -> dict[str, Any]:  # noqa: D102
        return {"g": self.g}

    def hash(self, a: int, b: int, value: int) -> int:
        """h_{a,b}(value) = ((a·value + b) mod P) mod g."""
        return ((a * value + b) % self.prime) % self.g

    def _perturb(self, value: int, rng: RandomSource) -> dict[str, Any]:
        a = 1 + rng.randrange(self.prime - 1)
        b = rng.randrange(self.prime)
        x = self.hash(a, b, value)
        if bernoulli(rng, self.keep):
            y = x
        else:
            y = rng.randrange(self.g - 1)
            y += y >= x
        return {"a": a, "b": b, "y": y}

    def check_payload(self, payload: object) -> dict[str, Any]:  # noqa: D102
        fields = self._fields(payload, ("a", "b", "y"))
        a = self._int_field(fields, "a", self.prime)
        if a == 0:
            raise self._reject(payload, f"'a' must be in range(1, {self.prime})")
        b = self._int_field(fields, "b", self.prime)
        y = self._int_field(fields, "y", self.g)
        return {"a": a, "b": b, "y": y}

    def support(self, payload: dict[str, Any]) -> list[int]:  # noqa: D102
        a, b, y = payload["a"], payload["b"], payload["y"]
        return [u for u in range(self.domain_size) if self.hash(a, b, u) == y]

    def supports(self, payload: dict[str, Any], value: int) -> bool:  # noqa: D102
        return self.hash(payload["a"], payload["b"], value) == payload["y"]

    def max_payload(self) -> dict[str, Any]:  # noqa: D102
        return {"a": self.prime - 1, "b": self.prime - 1, "y": self.g - 1}


@dataclass(frozen=True)
class BinaryLocalHashing(LocalHashing):
    """BLH: local hashing into g = 2 buckets."""

    g: int = 2
    name = "blh"

    def _validate(self) -> None:
        if self.g != 2:
            raise ValueError(f"blh hashes into 2 buckets: g must be 2, got {self.g}")

    def options(self) -> dict[str, Any]:  # noqa: D102
        return {}

"""Subset selection: report a random s-subset that contains the true value more often.

With probability p = s·e^ε/(s·e^ε + k − s) the subset is the true value plus s−1 other
values chosen uniformly; otherwise s values chosen uniformly among the other k−1.
Payload: ``{"v": [s distinct ints, increasing]}``.

Sampling is exact, in O(s) Python steps at most: one exact Bernoulli(p) decides whether
the true value is in; the uniform subset of the others comes, for a sparse subset
(s < k/10), from exactly uniform integer draws with rejection of repeats and of the true
value, then a sort; for a dense one, from independent marks, one random byte per value
compared at C speed, fixed up to the exact size by about √s uniformly chosen flips
(:func:`~client_sdk.mechanisms.randomness.subset_marks`), then the marked positions in
order, also at C speed.

References:
    M. Ye, A. Barg. "Optimal Schemes for Discrete Distribution Estimation under Locally
    Differential Privacy". IEEE Trans. Inf. Theory 64(8), 2018.
    S. Wang et al. "Mutual Information Optimally Local Private Discrete Distribution
    Estimation". arXiv:1607.08025, 2016 (s = k/(e^ε + 1)).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any

from client_sdk.mechanisms.base import FrequencyOracle, exp_epsilon, shade_down
from client_sdk.mechanisms.randomness import (
    RandomSource,
    bernoulli,
    marked,
    subset_marks,
    uniform_indices,
)
from client_sdk.mechanisms.rounding import exp

__all__ = ["SubsetSelection"]

DENSE_FRACTION = 0.1
"""From this s/k on, the subset is sampled as marks over the whole domain (O(k) at C
speed, ~25 ns a value); below it, by rejection of repeats (O(s) in Python, ~250 ns a
value). The crossover measured with the CSPRNG lies between 0.1 and 0.15 at k = 256 to
16,384; at k = 64 both cost about the same (~7 µs) up to s/k ≈ 0.25."""


@dataclass(frozen=True)
class SubsetSelection(FrequencyOracle):
    """Subset selection (SS); ``s`` defaults to max(1, round(k/(e^ε+1)))."""

    s: int = 0
    """Subset size; 0 means the default max(1, round(k/(e^ε + 1)))."""

    name = "ss"
    server_cost = "O(s) per report (bincount of the listed values)"
    server_cost_rank = 2

    def _validate(self) -> None:
        s, k = self.s, self.domain_size
        if isinstance(s, bool) or not isinstance(s, int):
            raise ValueError(f"s must be an integer, got {s!r}")
        if s == 0:
            object.__setattr__(self, "s", max(1, round(k / (exp(self.epsilon) + 1))))
        elif not 1 <= s <= k - 1:
            raise ValueError(f"s must be in [1, {k - 1}] for domain_size {k}, got {s}")

    @cached_property
    def keep(self) -> float:
        """Probability that the subset contains the true value (= p*)."""
        k, s = self.domain_size, self.s
        se = s * exp_epsilon(self.epsilon)
        return shade_down(
            se / (se + k - s), lambda f: f / (1 - f) * Fraction(k - s, s), self.epsilon
        )

    @property
    def p(self) -> float:  # noqa: D102
        return self.keep

    @cached_property
    def q(self) -> float:  # noqa: D102
        keep, k, s = Fraction(self.keep), self.domain_size, self.s
        return float((keep * (s - 1) + (1 - keep) * s) / (k - 1))

    def privacy_ratio(self) -> Fraction:  # noqa: D102
        # Pr[S | v] = keep / C(k−1, s−1) if v ∈ S, else (1 − keep) / C(k−1, s).
        keep, k, s = Fraction(self.keep), self.domain_size, self.s
        return keep / (1 - keep) * Fraction(k - s, s)

    def options(self) -> dict[str, Any]:  # noqa: D102
        return {"s": self.s}

    @cached_property
    def dense(self) -> bool:
        """Whether ``perturb`` samples by marks (s/k ≥ :data:`DENSE_FRACTION`)."""
        return self.s >= DENSE_FRACTION * self.domain_size

    def _perturb(self, value: int, rng: RandomSource) -> dict[str, Any]:
        include = bernoulli(rng, self.keep)
        others = self.s - 1 if include else self.s  # how many of the other k − 1 values
        if self.dense:
            # A uniform subset of the k − 1 other values, as marks; the true value's own
            # mark goes in at its place, and the marked positions are the sorted subset.
            marks = subset_marks(rng, self.domain_size - 1, others)
            marks.insert(value, include)
            return {"v": marked(marks)}
        # The first ``others`` distinct values other than ``value`` of an i.i.d. uniform
        # sequence: a uniform subset of the others (each new one uniform on the rest).
        picked = {value}
        if others:
            # Expected draws: others·(1 + others/k) at most, and s/k < DENSE_FRACTION.
            for u in uniform_indices(rng, self.domain_size, others + others // 8):
                picked.add(u)
                if len(picked) > others:
                    break
        if not include:
            picked.discard(value)
        return {"v": sorted(picked)}

    def check_payload(self, payload: object) -> dict[str, Any]:  # noqa: D102
        fields = self._fields(payload, ("v",))
        v = fields["v"]
        if not isinstance(v, list):
            raise self._reject(payload, f"'v' must be a list of {self.s} integers")
        if len(v) != self.s:
            raise self._reject(payload, f"'v' must list exactly {self.s} values, got {len(v)}")
        previous = -1
        for x in v:
            if type(x) is not int:
                raise self._reject(payload, f"'v' must hold integers, got {type(x).__name__}")
            if not 0 <= x < self.domain_size:
                raise self._reject(payload, f"'v' holds {x}, outside range(0, {self.domain_size})")
            if x <= previous:
                raise self._reject(payload, "'v' must be strictly increasing (distinct, sorted)")
            previous = x
        return {"v": list(v)}

    def support(self, payload: dict[str, Any]) -> list[int]:  # noqa: D102
        return list(payload["v"])

    def max_payload(self) -> dict[str, Any]:  # noqa: D102
        return {"v": list(range(self.domain_size - self.s, self.domain_size))}

"""Randomized response: Warner's binary RR and generalized (k-ary) RR.

References:
    S. L. Warner. "Randomized Response: A Survey Technique for Eliminating Evasive
    Answer Bias". JASA 60(309), 1965.
    P. Kairouz, K. Bonawitz, D. Ramage. "Discrete Distribution Estimation under Local
    Privacy". ICML 2016 (k-RR). Wang et al., USENIX Security 2017, §4.1 (direct encoding).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any

from client_sdk.mechanisms.base import (
    MAX_EPSILON,
    MIN_EPSILON,
    OneValueReport,
    epsilon_for_ratio,
    exp_epsilon,
    shade_down,
)
from client_sdk.mechanisms.randomness import RandomSource, bernoulli

__all__ = ["BinaryRR", "GeneralizedRR"]


@dataclass(frozen=True)
class GeneralizedRR(OneValueReport):
    """k-ary randomized response (GRR, k-RR, direct encoding).

    Report the true value with probability p = e^ε/(e^ε+k−1), otherwise one of the other
    k−1 values uniformly. Payload: ``{"v": int}``.
    """

    name = "grr"
    server_cost = "O(1) per report (one bincount)"
    server_cost_rank = 0

    @cached_property
    def keep(self) -> float:
        """Probability of reporting the true value (= p*)."""
        e, k = exp_epsilon(self.epsilon), self.domain_size
        return shade_down(e / (e + k - 1), lambda f: f * (k - 1) / (1 - f), self.epsilon)

    @property
    def p(self) -> float:  # noqa: D102
        return self.keep

    @cached_property
    def q(self) -> float:  # noqa: D102
        return float((1 - Fraction(self.keep)) / (self.domain_size - 1))

    def privacy_ratio(self) -> Fraction:  # noqa: D102
        keep = Fraction(self.keep)
        return keep * (self.domain_size - 1) / (1 - keep)

    def _perturb(self, value: int, rng: RandomSource) -> dict[str, Any]:
        if bernoulli(rng, self.keep):
            return {"v": value}
        other = rng.randrange(self.domain_size - 1)
        return {"v": other + (other >= value)}


@dataclass(frozen=True)
class BinaryRR(GeneralizedRR):
    """Warner's randomized response on one yes/no question (k = 2; 1 = "yes").

    Built from ε (keep probability e^ε/(e^ε+1)), or in the seeds' own forms:
    :meth:`from_flip_probability`, :meth:`from_truth_bias`, :meth:`coin_flip`; then
    ``keep_probability`` is used exactly and ε is the matching ln(keep/(1−keep)).
    """

    domain_size: int = 2
    keep_probability: float | None = None

    name = "rr"

    def _validate(self) -> None:
        if self.domain_size != 2:
            raise ValueError(f"rr is binary: domain_size must be 2, got {self.domain_size}")
        kp = self.keep_probability
        if kp is not None and not (isinstance(kp, float) and 0.5 < kp < 1.0):
            raise ValueError(f"keep_probability must be a float in (0.5, 1), got {kp!r}")

    @cached_property
    def keep(self) -> float:  # noqa: D102
        if self.keep_probability is not None:
            return self.keep_probability
        return super().keep

    @property
    def flip_probability(self) -> float:
        """Probability that the answer is flipped (the seeds' p)."""
        return float(1 - Fraction(self.keep))

    def options(self) -> dict[str, Any]:  # noqa: D102
        return {} if self.keep_probability is None else {"keep_probability": self.keep_probability}

    @classmethod
    def from_keep_probability(cls, keep: float) -> BinaryRR:
        """Keep the true answer with probability ``keep`` in (0.5, 1); ε = ln(keep/(1−keep))."""
        keep = float(keep)
        if not 0.5 < keep < 1.0:
            raise ValueError(f"keep probability must be in (0.5, 1), got {keep!r}")
        fk = Fraction(keep)
        eps = epsilon_for_ratio(fk / (1 - fk))
        if not MIN_EPSILON <= eps <= MAX_EPSILON:
            raise ValueError(
                f"keep probability {keep!r} gives ε = {eps:.6g}, outside "
                f"[{MIN_EPSILON}, {MAX_EPSILON}]"
            )
        return cls(epsilon=eps, domain_size=2, keep_probability=keep)

    @classmethod
    def from_flip_probability(cls, p: float) -> BinaryRR:
        """Flip the answer with probability ``p`` in (0, 0.5): ε = ln((1−p)/p)."""
        p = float(p)
        if not 0.0 < p < 0.5:
            raise ValueError(f"flip probability must be in (0, 0.5), got {p!r}")
        return cls.from_keep_probability(float(1 - Fraction(p)))

    @classmethod
    def from_truth_bias(cls, bias: float) -> BinaryRR:
        """Keep with probability (1+bias)/2, bias in (0, 1): ε = ln((1+bias)/(1−bias)).

        The "truth bias" is not the DP ε; this returns the ε it amounts to.
        """
        bias = float(bias)
        if not 0.0 < bias < 1.0:
            raise ValueError(f"truth bias must be in (0, 1), got {bias!r}")
        return cls.from_keep_probability(float((1 + Fraction(bias)) / 2))

    @classmethod
    def coin_flip(cls) -> BinaryRR:
        """ "Flip a coin; tails: answer truthfully; heads: flip again for yes/no".

        Keeps the truth with probability 3/4, so ε = ln 3.
        """
        return cls.from_keep_probability(0.75)

    def seeds_estimator(self, yes: Any, n: Any) -> Any:
        """The seeds' estimator T = (#Yes − N·p)/(N(1−2p)), p the flip probability.

        Identical to ``debias(yes, n)`` for value 1; kept in its textbook form.
        """
        p = self.flip_probability
        return (yes - n * p) / (n * (1 - 2 * p))

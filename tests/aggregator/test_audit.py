"""The ε audit passes every shipped mechanism and catches broken ones."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import pytest

from aggregator.analysis.audit import audit, clopper_pearson
from client_sdk.mechanisms import OptimizedUnaryEncoding, create
from client_sdk.mechanisms.randomness import bernoulli, bernoulli_lanes


@pytest.mark.parametrize("name", ["rr", "grr", "sue", "oue", "olh", "blh", "hr", "ss"])
def test_audit_passes_every_mechanism_and_is_close_to_tight(name: str) -> None:
    m = create(name, epsilon=1.0, domain_size=2 if name == "rr" else 8)
    result = audit(m, trials=40_000, confidence=0.99, rng=random.Random(len(name)))
    assert result.passed
    assert result.epsilon_lower_bound <= 1.0
    # The chosen event has likelihood ratio e^ε: the bound lands near ε.
    assert result.epsilon_lower_bound > 0.75


@dataclass(frozen=True)
class LeakyUnary(OptimizedUnaryEncoding):
    """A broken OUE: when the true bit's coin fails it keeps the true bit anyway."""

    name = "leaky-oue"

    def _perturb(self, value: int, rng: Any) -> dict[str, Any]:
        import base64

        bits = bernoulli_lanes(rng, self.q, self.domain_size) << self._pad
        bernoulli(rng, self.p)  # the coin is flipped … and ignored
        bits |= 1 << (8 * self.nbytes - 1 - value)
        return {"b": base64.b64encode(bits.to_bytes(self.nbytes, "big")).decode()}


def test_audit_fails_a_broken_unary_encoding() -> None:
    m = LeakyUnary(epsilon=1.0, domain_size=8)
    result = audit(m, trials=20_000, rng=random.Random(1))
    assert not result.passed
    assert result.epsilon_lower_bound > 3.0


def test_audit_fails_a_declared_epsilon_below_the_real_one() -> None:
    m = create("grr", epsilon=2.0, domain_size=4)
    result = audit(m, trials=40_000, declared_epsilon=1.5, rng=random.Random(2))
    assert not result.passed and result.epsilon_lower_bound > 1.5


def test_clopper_pearson_known_values() -> None:
    lo, hi = clopper_pearson(0, 10, 0.05)
    assert lo == 0.0 and hi == pytest.approx(0.30849710781876, rel=1e-9)
    lo, hi = clopper_pearson(5, 10, 0.05)
    assert lo == pytest.approx(0.18708602844739, rel=1e-9)
    assert hi == pytest.approx(0.81291397155261, rel=1e-9)


def test_audit_argument_errors() -> None:
    m = create("grr", epsilon=1.0, domain_size=4)
    with pytest.raises(ValueError, match="differ"):
        audit(m, inputs=(1, 1))
    with pytest.raises(ValueError, match="at least 100"):
        audit(m, trials=10)
    with pytest.raises(ValueError, match="outside"):
        audit(m, inputs=(0, 9))

"""The ε audit passes every shipped mechanism (frequency and numeric) and catches broken ones."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

import pytest

from aggregator.analysis.audit import audit, clopper_pearson
from client_sdk.mechanisms import (
    DuchiMechanism,
    OptimizedUnaryEncoding,
    PiecewiseMechanism,
    create,
    create_numeric,
)
from client_sdk.mechanisms.numeric import SCALE
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


# -- numeric mechanisms: inputs at the range ends, intervals of the output ------------------


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0])
@pytest.mark.parametrize("name", ["duchi", "pm", "hybrid"])
def test_audit_passes_every_numeric_mechanism_and_is_close_to_tight(
    name: str, epsilon: float
) -> None:
    m = create_numeric(name, epsilon)
    result = audit(m, trials=40_000, confidence=0.99, rng=random.Random(len(name)))
    assert result.passed and result.bound == "report"
    assert sorted(result.inputs) == [-1.0, 1.0]
    assert result.event.startswith("y in [")
    # At x = ±1 an interval of the output has likelihood ratio e^ε: the bound lands near ε.
    assert 0.8 * epsilon < result.epsilon_lower_bound <= epsilon


@dataclass(frozen=True)
class SteepDuchi(DuchiMechanism):
    """Broken Duchi: Pr[+C | x] computed with C' = 2C/3, so it leans too hard on x.

    Its reports are still ±C (valid payloads); the ratio is (C'+1)/(C'−1), not e^ε.
    """

    def _plus(self, x: float) -> tuple[int, int]:
        a, b = x.as_integer_ratio()
        k = 2 * self.bound_units // 3
        return k * b + a * SCALE, 2 * k * b


@dataclass(frozen=True)
class StickyPM(PiecewiseMechanism):
    """Broken PM: the report stays in the window around the truth w.p. 0.9, not (C+1)/2C."""

    def perturb_units(self, x: float, rng: Any) -> int:
        i, rem, den = self._start(x)
        if rem and rng.randrange(den) < rem:
            i += 1
        n, low = self.cells, self.window
        if rng.random() < 0.9:
            j = i + rng.randrange(low)
        else:
            j = rng.randrange(SCALE + low)
            j += low if j >= i else 0
        return 2 * j + 1 - n


@pytest.mark.parametrize(
    ("broken", "real_epsilon"),
    [
        (SteepDuchi(1.0), math.log((2 * 2.1640 / 3 + 1) / (2 * 2.1640 / 3 - 1))),  # 1.79
        (StickyPM(1.0), math.log(9 * (1 + 1 / 1.5415))),  # 2.69: window L = 1.54·M cells
    ],
)
def test_audit_fails_a_broken_numeric_mechanism(broken: Any, real_epsilon: float) -> None:
    result = audit(broken, trials=20_000, rng=random.Random(1))
    assert not result.passed
    assert 1.3 < result.epsilon_lower_bound <= real_epsilon + 0.01


def test_numeric_audit_argument_errors() -> None:
    m = create_numeric("pm", 1.0)
    with pytest.raises(ValueError, match="only the report bound"):
        audit(m, bound="permanent")
    with pytest.raises(ValueError, match="outside"):
        audit(m, inputs=(-1.0, 2.0))
    with pytest.raises(ValueError, match="bound must be one of"):
        audit(create("grr", epsilon=1.0, domain_size=4), bound="forever")
    with pytest.raises(ValueError, match="not memoized"):
        audit(create("grr", epsilon=1.0, domain_size=4), bound="permanent")

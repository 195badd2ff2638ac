"""The ε audit on memoized mechanisms: one report is ε₁, the permanent response ε∞.

``audit`` runs ``m.perturb(value, rng)``, which for a memoized mechanism is one report
of a fresh device (a new secret per call): exactly the single-report ε₁ to check. With
``bound="permanent"`` it runs ``m.permanent_response`` with a fresh secret per trial:
the ε∞ that any number of reports of one unchanged value cost.
"""

from __future__ import annotations

import base64
import random
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import pytest

from aggregator.analysis.audit import audit
from client_sdk.mechanisms import (
    FrequencyOracle,
    GeneralizedRR,
    MemoizedGRR,
    MemoizedOUE,
    create,
)
from client_sdk.mechanisms.randomness import RandomSource


@pytest.mark.parametrize("name", ["memo-grr", "memo-sue", "memo-oue"])
def test_audit_passes_memoized_mechanisms_and_is_close_to_tight(name: str) -> None:
    m = create(name, epsilon=1.0, domain_size=8, permanent_epsilon=4.0)
    result = audit(m, trials=40_000, confidence=0.99, rng=random.Random(len(name)))
    assert result.passed and result.declared_epsilon == 1.0
    assert 0.75 < result.epsilon_lower_bound <= 1.0
    assert result.mechanism["permanent_epsilon"] == 4.0


@dataclass(frozen=True)
class SkippedIrrGRR(MemoizedGRR):
    """Broken: reports the permanent response itself (the IRR is skipped)."""

    name = "broken-memo-grr"

    def _instantaneous(self, prr: dict[str, Any], rng: RandomSource) -> dict[str, Any]:
        return prr


@dataclass(frozen=True)
class SkippedIrrOUE(MemoizedOUE):
    """Broken: the IRR's flips are drawn … and not applied."""

    name = "broken-memo-oue"

    def _instantaneous(self, prr: dict[str, Any], rng: RandomSource) -> dict[str, Any]:
        super()._instantaneous(prr, rng)
        return prr


@pytest.mark.parametrize("cls", [SkippedIrrGRR, SkippedIrrOUE])
def test_audit_fails_a_memoization_without_instantaneous_response(cls: type) -> None:
    """Without the IRR a report is the PRR, which is ε∞ = 4, not the declared ε₁ = 1."""
    m = cls(epsilon=1.0, domain_size=8, permanent_epsilon=4.0)
    result = audit(m, trials=20_000, rng=random.Random(1))
    assert not result.passed
    assert result.epsilon_lower_bound > 2.5


# -- ε∞: the permanent response alone, a fresh device secret per trial ------------------------


@pytest.mark.parametrize("name", ["memo-grr", "memo-sue", "memo-oue"])
def test_the_permanent_response_audit_passes_and_is_close_to_tight(name: str) -> None:
    """Against ε∞ = 4: what any number of reports of one unchanged value reveal."""
    m = create(name, epsilon=1.0, domain_size=8, permanent_epsilon=4.0)
    result = audit(m, trials=40_000, rng=random.Random(len(name)), bound="permanent")
    assert result.passed and result.bound == "permanent"
    assert result.declared_epsilon == 4.0
    assert 3.4 < result.epsilon_lower_bound <= 4.0
    assert result.event.startswith("permanent response supports")


@dataclass(frozen=True)
class HotPermanentGRR(MemoizedGRR):
    """Broken: the permanent response is drawn at ε∞ + 2 (the IRR still brings one report to
    ε₁, so only the permanent audit can see it)."""

    name = "broken-prr-grr"

    @cached_property
    def permanent(self) -> FrequencyOracle:
        return GeneralizedRR(epsilon=self.permanent_epsilon + 2.0, domain_size=self.domain_size)


@dataclass(frozen=True)
class RawPermanentOUE(MemoizedOUE):
    """Broken: the "permanent response" is the true value's one-hot vector, unperturbed."""

    name = "broken-prr-oue"

    def permanent_response(
        self, value: int, secret: bytes, metric: str = "", version: int = 0
    ) -> dict[str, Any]:
        bits = 1 << (8 * self.nbytes - 1 - self.check_value(value))
        return {"b": base64.b64encode(bits.to_bytes(self.nbytes, "big")).decode("ascii")}


def test_the_permanent_audit_catches_a_permanent_response_above_its_epsilon() -> None:
    m = HotPermanentGRR(epsilon=1.0, domain_size=8, permanent_epsilon=4.0)
    one_report = audit(m, trials=20_000, rng=random.Random(3))
    assert one_report.passed  # one report is still ε₁: the per-report audit cannot see it
    result = audit(m, trials=20_000, rng=random.Random(3), bound="permanent")
    assert not result.passed
    assert 4.5 < result.epsilon_lower_bound <= 6.0


def test_the_permanent_audit_catches_an_unperturbed_permanent_response() -> None:
    m = RawPermanentOUE(epsilon=1.0, domain_size=8, permanent_epsilon=4.0)
    result = audit(m, trials=2_000, rng=random.Random(4), bound="permanent")
    assert not result.passed and result.epsilon_lower_bound > 5.0


def test_the_permanent_audit_draws_a_fresh_secret_per_trial() -> None:
    """With one fixed secret every PRR of a value would be the same: the audit would see
    a deterministic map (ε_lb far above ε∞). A fresh secret per trial gives the PRR's law."""
    m = create("memo-grr", epsilon=1.0, domain_size=4, permanent_epsilon=2.0)
    result = audit(m, trials=4_000, rng=random.Random(5), bound="permanent")
    assert result.passed and 0 < result.hits[1] < result.hits[0] < result.trials

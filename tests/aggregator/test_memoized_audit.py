"""The ε audit on memoized mechanisms: one report is ε₁; a broken memoization is caught.

``audit`` runs ``m.perturb(value, rng)``, which for a memoized mechanism is one report
of a fresh device (a new secret per call): exactly the single-report ε₁ to check.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import pytest

from aggregator.analysis.audit import audit
from client_sdk.mechanisms import MemoizedGRR, MemoizedOUE, create
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

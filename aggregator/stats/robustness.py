"""How far fake clients can move an estimate, in theory: Cao, Jia & Gong's maximal gain.

The expected gain of the maximal gain attack (their equation 1), its spread over runs
(equation 2), and the one-number robustness of a mechanism the planner and the explorer
show. The simulation that checks these against the real decoders is
:mod:`aggregator.analysis.poisoning`; the whole account: ``docs/security/poisoning.md``.

References:
    X. Cao, J. Jia, N. Z. Gong. "Data Poisoning Attacks to Local Differential Privacy
    Protocols". USENIX Security 2021 (equations 1 and 2).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from client_sdk.mechanisms import FrequencyOracle, PostRandomization

__all__ = ["DEFAULT_FAKE_FRACTION", "expected_gain", "fake_count", "gain_std", "max_gain"]

DEFAULT_FAKE_FRACTION = 0.01
"""β when nobody says: 1 % of the reports fake, the share Cao et al.'s examples start from
and a handful of scripted devices in a deployment of a few hundred."""


def fake_count(users: int, beta: float) -> int:
    """m = round(β·n/(1 − β)): the fakes that make a fraction β of all n + m reports."""
    if not 0.0 < beta < 1.0:
        raise ValueError(f"the fake fraction must be in (0, 1), got {beta!r}")
    return max(1, round(beta * users / (1.0 - beta)))


def expected_gain(
    mechanism: FrequencyOracle, support: Any, beta: float, frequency: Any = 0.0
) -> Any:
    """Equation (1): β(s_t − q*)/(p* − q*) − β·f_t, on floats or arrays."""
    m = mechanism
    return beta * (np.asarray(support) - m.q) / (m.p - m.q) - beta * np.asarray(frequency)


def gain_std(
    mechanism: FrequencyOracle, support: Any, users: int, fakes: int, true_counts: Any
) -> Any:
    """Equation (2): the standard deviation of one run's gain, given the genuine counts."""
    m, n = mechanism, users
    total, beta = n + fakes, fakes / (n + fakes)
    s, nt = np.asarray(support, dtype=np.float64), np.asarray(true_counts, dtype=np.float64)
    genuine = nt * m.p * (1 - m.p) + (n - nt) * m.q * (1 - m.q)
    var = (fakes * s * (1 - s) / total**2 + beta**2 * genuine / n**2) / (m.p - m.q) ** 2
    return np.sqrt(var)


def max_gain(mechanism: FrequencyOracle, beta: float) -> float:
    """The MGA gain of a single target of frequency ≈ 0: β(1 − q*)/(p* − q*).

    One target makes s_t = 1 for every mechanism, so this is the robustness of a
    mechanism at (ε, k) in one number: how far a fraction β of fakes can push one value.
    """
    if isinstance(mechanism, PostRandomization):
        # f̂ = P⁻ᵀλ̂: fakes all reporting the y with the largest P⁻¹[y, t] move t most.
        return beta * max(max(row) for row in mechanism.inverse)
    return float(expected_gain(mechanism, 1.0, beta))

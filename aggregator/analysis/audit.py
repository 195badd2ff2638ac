"""Empirical ε audit: run the real ``perturb`` code and lower-bound the ε it realises.

For neighbouring inputs x and x' and any output event S, ε-LDP requires
Pr[M(x) ∈ S] ≤ e^ε · Pr[M(x') ∈ S]. The audit perturbs x and x' many times with the
SDK's own code, classes each output by whether it supports x and whether it supports
x' (four classes: for every shipped mechanism the class "supports x, not x'" is an
event of likelihood ratio exactly e^ε), picks the most distinguishing union of classes
on one half of the trials, and on the other half turns the counts into Clopper–Pearson
bounds: ε_lb = ln(TPR_lower / FPR_upper). With probability ≥ the confidence, ε_lb is
below the realised ε; ε_lb above the declared ε proves the mechanism broken.

References:
    Z. Ding, Y. Wang, G. Wang, D. Zhang, D. Kifer. "Detecting Violations of
    Differential Privacy". CCS 2018.
    M. Jagielski, J. Ullman, A. Oprea. "Auditing Differentially Private Machine
    Learning: How Private is Private SGD?". NeurIPS 2020 (Clopper–Pearson bounds).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import beta

from client_sdk.mechanisms import FrequencyOracle
from client_sdk.mechanisms.randomness import RandomSource

__all__ = ["AuditResult", "audit", "clopper_pearson"]

CLASSES = ("supports x only", "supports both", "supports neither", "supports x' only")
"""Output classes by (supports x, supports x')."""


def clopper_pearson(successes: int, trials: int, alpha: float) -> tuple[float, float]:
    """Exact two-sided binomial interval at level 1 − alpha."""
    lo = 0.0 if successes == 0 else float(beta.ppf(alpha / 2, successes, trials - successes + 1))
    hi = (
        1.0
        if successes == trials
        else float(beta.ppf(1 - alpha / 2, successes + 1, trials - successes))
    )
    return lo, hi


@dataclass(frozen=True)
class AuditResult:
    """What an audit found."""

    mechanism: dict[str, Any]
    declared_epsilon: float
    epsilon_lower_bound: float
    passed: bool
    event: str
    """The output event used: a union of :data:`CLASSES`, under input x vs x'."""
    inputs: tuple[int, int]
    hits: tuple[int, int]
    """Event counts under x and x' on the evaluation half."""
    trials: int
    """Evaluation trials per input."""
    confidence: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "mechanism": self.mechanism,
            "declared_epsilon": self.declared_epsilon,
            "epsilon_lower_bound": self.epsilon_lower_bound,
            "passed": self.passed,
            "event": self.event,
            "inputs": list(self.inputs),
            "hits": list(self.hits),
            "trials_per_input": self.trials,
            "confidence": self.confidence,
        }


def _classify(
    m: FrequencyOracle,
    value: int,
    x: int,
    xp: int,
    trials: int,
    rng: RandomSource | None,
    progress: Callable[[int], None] | None,
) -> np.ndarray:
    classes = np.zeros(trials, dtype=np.int8)
    for i in range(trials):
        payload = m.perturb(value, rng)
        sx, sxp = m.supports(payload, x), m.supports(payload, xp)
        classes[i] = 0 if sx and not sxp else 1 if sx else 3 if sxp else 2
        if progress and i % 1000 == 999:
            progress(1000)
    return classes


def _bound(hits_x: int, hits_xp: int, n: int, alpha: float) -> float:
    tpr_lo = clopper_pearson(hits_x, n, alpha)[0]
    fpr_hi = clopper_pearson(hits_xp, n, alpha)[1]
    return -math.inf if tpr_lo <= 0.0 else math.log(tpr_lo / fpr_hi)


def audit(
    mechanism: FrequencyOracle,
    trials: int = 200_000,
    confidence: float = 0.99,
    inputs: tuple[int, int] = (0, 1),
    declared_epsilon: float | None = None,
    rng: RandomSource | None = None,
    progress: Callable[[int], None] | None = None,
) -> AuditResult:
    """Lower-bound the ε that ``mechanism.perturb`` realises.

    Args:
        mechanism: the SDK mechanism object; its real ``perturb`` is run.
        trials: perturbations per input (half select the event, half measure it).
        confidence: the bound holds with at least this probability.
        inputs: the neighbouring values x, x'.
        declared_epsilon: the ε to check against (default: the mechanism's).
        rng: randomness for ``perturb`` (default: its CSPRNG).
        progress: called with the number of perturbations done, now and then.
    """
    if trials < 100:
        raise ValueError("an audit needs at least 100 trials per input")
    x, xp = (mechanism.check_value(v) for v in inputs)
    if x == xp:
        raise ValueError("the two inputs must differ")
    declared = mechanism.epsilon if declared_epsilon is None else declared_epsilon
    alpha = 1.0 - confidence
    under_x = _classify(mechanism, x, x, xp, trials, rng, progress)
    under_xp = _classify(mechanism, xp, x, xp, trials, rng, progress)
    half = trials // 2
    sel_x, sel_xp = (
        np.bincount(under_x[:half], minlength=4),
        np.bincount(under_xp[:half], minlength=4),
    )
    ev_x, ev_xp = (
        np.bincount(under_x[half:], minlength=4),
        np.bincount(under_xp[half:], minlength=4),
    )
    n_eval = trials - half
    best: tuple[float, tuple[int, ...], bool] = (-math.inf, (0,), False)
    for size in range(1, 4):
        for event in itertools.combinations(range(4), size):
            idx = list(event)
            for swapped in (False, True):
                a, b = (sel_xp, sel_x) if swapped else (sel_x, sel_xp)
                score = _bound(int(a[idx].sum()), int(b[idx].sum()), half, alpha)
                if score > best[0]:
                    best = (score, event, swapped)
    _, event, swapped = best
    idx = list(event)
    a, b = (ev_xp, ev_x) if swapped else (ev_x, ev_xp)
    hits = (int(a[idx].sum()), int(b[idx].sum()))
    lower = max(0.0, _bound(hits[0], hits[1], n_eval, alpha))
    names = " or ".join(CLASSES[i] for i in event)
    first, second = ("x'", "x") if swapped else ("x", "x'")
    return AuditResult(
        mechanism=mechanism.params(),
        declared_epsilon=declared,
        epsilon_lower_bound=lower,
        passed=lower <= declared,
        event=f"output {names}: under {first} vs under {second}",
        inputs=(xp, x) if swapped else (x, xp),
        hits=hits,
        trials=n_eval,
        confidence=confidence,
    )

"""Empirical ε audit: run the real ``perturb`` code and lower-bound the ε it realises.

For neighbouring inputs x and x' and any output event S, ε-LDP requires
Pr[M(x) ∈ S] ≤ e^ε · Pr[M(x') ∈ S]. The audit perturbs x and x' many times with the
SDK's own code, sorts each output into a class, picks the most distinguishing union of
classes on one half of the trials, and on the other half turns the counts into
Clopper–Pearson bounds: ε_lb = ln(TPR_lower / FPR_upper). With probability ≥ the
confidence, ε_lb is below the realised ε; ε_lb above the declared ε proves the mechanism
broken. What is audited:

In full: ``docs/statistics/audit.md``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from aggregator.stats.lazy import scipy_stats
from client_sdk.mechanisms import FrequencyOracle, Memoized, NumericMechanism
from client_sdk.mechanisms.base import fields_of
from client_sdk.mechanisms.memoized import SECRET_BYTES
from client_sdk.mechanisms.numeric import SCALE
from client_sdk.mechanisms.randomness import RandomSource, default_rng

__all__ = ["BOUNDS", "NUMERIC_BINS", "AuditResult", "audit", "clopper_pearson"]

CLASSES = ("supports x only", "supports both", "supports neither", "supports x' only")
"""Output classes of a frequency oracle by (supports x, supports x')."""

BOUNDS = ("report", "permanent")
"""What an audit checks: one report (ε), or a memoized mechanism's permanent response (ε∞)."""

NUMERIC_BINS = 40
"""Equal parts of a numeric report's range [−C, C] (plus edges at ±1). Fine enough that
PM's window [1, C] is whole bins whatever C is; coarse enough that each bin of the
window still holds ≥ 2 % of the trials, so the selection half ranks bins reliably."""

ENUMERATE_UNIONS = 4
"""Up to this many classes every union is a candidate event (14 at most); above (the
bins of a numeric output), the intervals of bins and the likelihood-ratio level sets
are."""


def clopper_pearson(successes: int, trials: int, alpha: float) -> tuple[float, float]:
    """Exact two-sided binomial interval at level 1 − alpha."""
    lo = (
        0.0
        if successes == 0
        else float(scipy_stats().beta.ppf(alpha / 2, successes, trials - successes + 1))
    )
    hi = (
        1.0
        if successes == trials
        else float(scipy_stats().beta.ppf(1 - alpha / 2, successes + 1, trials - successes))
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
    """The output event used, under input x vs x'."""
    inputs: tuple[float, float]
    hits: tuple[int, int]
    """Event counts under x and x' on the evaluation half."""
    trials: int
    """Evaluation trials per input."""
    confidence: float
    bound: str = "report"
    """What was audited (:data:`BOUNDS`): one report, or the permanent response (ε∞)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        names = ("mechanism", "bound", "declared_epsilon", "epsilon_lower_bound", "passed", "event")
        return {
            **fields_of(self, *names),
            "inputs": list(self.inputs),
            "hits": list(self.hits),
            "trials_per_input": self.trials,
            "confidence": self.confidence,
        }


# -- classifying outputs ----------------------------------------------------------------------


def _frequency_sampler(
    m: FrequencyOracle, bound: str, rng: RandomSource | None
) -> Callable[[int], dict[str, Any]]:
    """One trial's payload for a value: a report, or the permanent response of a new device."""
    if bound == "report":
        return lambda value: m.perturb(value, rng)
    if not isinstance(m, Memoized):
        raise ValueError(f"{m.name} is not memoized: it has no permanent response")
    source = rng or default_rng()

    def permanent(value: int) -> dict[str, Any]:
        secret = source.getrandbits(8 * SECRET_BYTES).to_bytes(SECRET_BYTES, "big")
        return m.permanent_response(value, secret)

    return permanent


def _frequency_classes(
    m: FrequencyOracle, sample: Callable[[int], dict[str, Any]], x: int, xp: int
) -> Callable[[int], int]:
    """A trial under ``value``: its class in :data:`CLASSES`."""

    def one(value: int) -> int:
        payload = sample(value)
        sx, sxp = m.supports(payload, x), m.supports(payload, xp)
        return 0 if sx and not sxp else 1 if sx else 3 if sxp else 2

    return one


def numeric_edges(m: NumericMechanism) -> np.ndarray:
    """Bin edges in units: :data:`NUMERIC_BINS` equal parts of [−C, C], and ±1."""
    top = m.bound_units
    even = np.linspace(-top, top + 1, NUMERIC_BINS + 1).round().astype(np.int64)
    return np.unique(np.concatenate([even, [-SCALE, SCALE]]))


def _numeric_classes(
    m: NumericMechanism, rng: RandomSource | None, edges: np.ndarray
) -> Callable[[float], int]:
    def one(value: float) -> int:
        units = m.units(m.perturb(value, rng))
        return int(np.searchsorted(edges, units, side="right")) - 1

    return one


def _run(
    one: Callable[[Any], int],
    value: Any,
    trials: int,
    progress: Callable[[int], None] | None,
) -> np.ndarray:
    classes = np.zeros(trials, dtype=np.int32)
    for i in range(trials):
        classes[i] = one(value)
        if progress and i % 1000 == 999:
            progress(1000)
    return classes


# -- choosing the event and bounding ε ----------------------------------------------------------


def _bound(hits_x: int, hits_xp: int, n: int, alpha: float) -> float:
    tpr_lo = clopper_pearson(hits_x, n, alpha)[0]
    fpr_hi = clopper_pearson(hits_xp, n, alpha)[1]
    return -math.inf if tpr_lo <= 0.0 else math.log(tpr_lo / fpr_hi)


def _candidates(a: np.ndarray, b: np.ndarray) -> Iterator[list[int]]:
    """Unions of classes to try for "more likely under a than under b"."""
    k = len(a)
    if k <= ENUMERATE_UNIONS:
        for size in range(1, k):
            for event in itertools.combinations(range(k), size):
                yield list(event)
        return
    for first in range(k):  # intervals of the output
        for stop in range(first + 1, k + 1):
            if (first, stop) != (0, k):
                yield list(range(first, stop))


def _describe_bins(event: list[int], edges: np.ndarray) -> str:
    """Bins as merged intervals of y, in the scaled domain."""
    runs: list[list[int]] = []
    for i in event:
        if runs and runs[-1][1] == i:
            runs[-1][1] = i + 1
        else:
            runs.append([i, i + 1])
    parts = [f"[{edges[lo] / SCALE:.4g}, {edges[hi] / SCALE:.4g})" for lo, hi in runs]
    return "y in " + " ∪ ".join(parts)


# -- the audit --------------------------------------------------------------------------------


def audit(
    mechanism: FrequencyOracle | NumericMechanism,
    trials: int = 200_000,
    confidence: float = 0.99,
    inputs: tuple[float, float] | None = None,
    declared_epsilon: float | None = None,
    rng: RandomSource | None = None,
    progress: Callable[[int], None] | None = None,
    bound: str = "report",
) -> AuditResult:
    """Lower-bound the ε that ``mechanism``'s real perturbation code realises.

    Args:
        mechanism: the SDK mechanism object (a frequency oracle or a numeric mechanism);
            its real ``perturb`` (or ``permanent_response``) is run.
        trials: perturbations per input (half select the event, half measure it).
        confidence: the bound holds with at least this probability.
        inputs: the neighbouring values x, x' (default: 0 and 1; numeric: −1 and 1).
        declared_epsilon: the ε to check against (default: the mechanism's ε, or its ε∞
            for ``bound="permanent"``).
        rng: randomness for ``perturb`` and the device secrets (default: the CSPRNG).
        progress: called with the number of perturbations done, now and then.
        bound: ``"report"`` (one report) or ``"permanent"`` (a memoized mechanism's
            permanent response: the ε∞ of unlimited reports of one value).

    Raises:
        ValueError: too few trials, equal inputs, an input outside the domain, an unknown
            bound, or ``"permanent"`` for a mechanism that is not memoized.
    """
    if trials < 100:
        raise ValueError("an audit needs at least 100 trials per input")
    if bound not in BOUNDS:
        raise ValueError(f"bound must be one of {', '.join(BOUNDS)}, got {bound!r}")
    x, xp, one, declared, edges = _classifier(mechanism, inputs, rng, bound)
    if x == xp:
        raise ValueError("the two inputs must differ")
    declared = declared if declared_epsilon is None else declared_epsilon
    alpha = 1.0 - confidence
    under_x = _run(one, x, trials, progress)
    under_xp = _run(one, xp, trials, progress)
    k = len(CLASSES) if edges is None else len(edges) - 1
    half = trials // 2
    sel_x, sel_xp = (np.bincount(c[:half], minlength=k) for c in (under_x, under_xp))
    ev_x, ev_xp = (np.bincount(c[half:], minlength=k) for c in (under_x, under_xp))
    n_eval = trials - half
    event, swapped = _best_event(sel_x, sel_xp, half, alpha)
    (a, first), (b, second) = (ev_x, "x"), (ev_xp, "x'")
    inputs = (x, xp)
    if swapped:  # the event is likelier under x' than under x
        (a, first), (b, second) = (b, second), (a, first)
        inputs = (xp, x)
    hits = (int(a[event].sum()), int(b[event].sum()))
    lower = max(0.0, _bound(hits[0], hits[1], n_eval, alpha))
    return AuditResult(
        mechanism=mechanism.params(),
        declared_epsilon=declared,
        epsilon_lower_bound=lower,
        passed=lower <= declared,
        event=f"{_event_name(event, edges, bound)}: under {first} vs under {second}",
        inputs=inputs,
        hits=hits,
        trials=n_eval,
        confidence=confidence,
        bound=bound,
    )


def _event_name(event: list[int], edges: Any, bound: str) -> str:
    """The event's classes (a frequency oracle's) or bins (a numeric mechanism's) in words."""
    if edges is not None:
        return _describe_bins(event, edges)
    what = "permanent response" if bound == "permanent" else "output"
    return f"{what} " + " or ".join(CLASSES[i] for i in event)


def _classifier(
    mechanism: FrequencyOracle | NumericMechanism,
    inputs: tuple[float, float] | None,
    rng: RandomSource | None,
    bound: str,
) -> tuple[Any, Any, Callable[[Any], int], float, Any]:
    """The two inputs, a function perturbing one and naming its output's class, the
    declared ε, and the numeric output bins (None: a frequency oracle's classes).

    Raises:
        ValueError: an input outside the domain, or ``"permanent"`` for a numeric
            mechanism.
    """
    if isinstance(mechanism, NumericMechanism):
        if bound != "report":
            raise ValueError(f"{mechanism.name} is not memoized: it has only the report bound")
        x, xp = (mechanism.check_value(v) for v in (inputs or (-1.0, 1.0)))
        edges = numeric_edges(mechanism)
        return x, xp, _numeric_classes(mechanism, rng, edges), mechanism.epsilon, edges
    x, xp = (mechanism.check_value(v) for v in (inputs or (0, 1)))
    sample = _frequency_sampler(mechanism, bound, rng)
    one = _frequency_classes(mechanism, sample, int(x), int(xp))
    declared = mechanism.epsilon
    if bound == "permanent" and isinstance(mechanism, Memoized):
        declared = mechanism.permanent_epsilon
    return x, xp, one, declared, None


def _best_event(sel_x: Any, sel_xp: Any, half: int, alpha: float) -> tuple[list[int], bool]:
    """The event (classes) and direction (swapped: under x' vs under x) with the largest
    bound on the selection half of the trials."""
    best: tuple[float, list[int], bool] = (-math.inf, [0], False)
    for swapped in (False, True):
        a, b = (sel_xp, sel_x) if swapped else (sel_x, sel_xp)
        for event in _candidates(a, b):
            score = _bound(int(a[event].sum()), int(b[event].sum()), half, alpha)
            if score > best[0]:
                best = (score, event, swapped)
    return best[1], best[2]

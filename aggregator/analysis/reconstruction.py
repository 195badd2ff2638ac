"""The reconstruction attack (Dinur & Nissim 2003): exact aggregates leak the data.

A database holds n secret bits x ∈ {0,1}ⁿ. An analyst asks m random subset-sum queries
("how many of the people in S have the bit?"), each S containing every person with
probability ½, and receives answers a = Qx + e. The attacker solves the linear program

In full: ``docs/statistics/reconstruction.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import csr_matrix, hstack, identity, vstack

from client_sdk.mechanisms import BinaryRR

__all__ = [
    "KINDS",
    "ReconstructionPoint",
    "ReconstructionResult",
    "answers",
    "default_bounds",
    "ldp_bound",
    "reconstruct",
    "run_reconstruction",
]

KINDS = ("exact", "bounded", "laplace", "ldp")
"""How the answers are protected: none, noise |e| ≤ E, Lap(1/ε) per answer, ε-LDP bits."""

QUERIES_PER_BIT = 4
"""m = 4n queries by default: Dinur–Nissim ask for n·log²n, but L1 decoding of random
subset sums already recovers almost every bit from a few n when the noise is o(√n)."""

LAPLACE_EPSILONS: tuple[float, ...] = (0.1, 0.5, 1.0, 2.0)
"""ε per answer of the central Laplace runs: from strict to lax (each composes to m·ε)."""

LDP_EPSILONS: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0)
"""ε per report of the local DP runs (LDP bound 0.62, 0.73, 0.88, 0.98)."""


def ldp_bound(epsilon: float) -> float:
    """e^ε/(e^ε + 1): the chance the best guess of one bit from its ε-RR report is right."""
    return float(BinaryRR(epsilon=epsilon).keep)


def default_bounds(n: int) -> list[int]:
    """E = 1, 2, 4, … up to 16√n: from far below the theorem's √n to far above it."""
    top = 16 * math.sqrt(n)
    return [2**k for k in range(0, 64) if 2**k <= top]


def answers(
    kind: str, secret: np.ndarray, queries: np.ndarray, level: float, rng: np.random.Generator
) -> tuple[np.ndarray, float]:
    """The m answers to the subset-sum ``queries`` under one protection.

    Args:
        kind: one of :data:`KINDS`.
        secret: the n bits.
        queries: the m × n 0/1 matrix Q.
        level: E for ``bounded``, ε for ``laplace`` and ``ldp``; ignored for ``exact``.
        rng: the simulation's generator.

    Returns:
        (answers, noise standard deviation per answer: the sweep's x axis).
    """
    true = queries @ secret
    m = len(true)
    if kind == "exact":
        return true.astype(np.float64), 0.0
    if kind == "bounded":
        bound = int(level)
        noise = rng.integers(-bound, bound + 1, size=m)
        return true + noise, math.sqrt(((2 * bound + 1) ** 2 - 1) / 12.0)
    if kind == "laplace":
        return true + rng.laplace(0.0, 1.0 / level, size=m), math.sqrt(2.0) / level
    if kind == "ldp":
        rr = BinaryRR(epsilon=level)
        kept = rng.random(len(secret)) < rr.keep
        reports = np.where(kept, secret, 1 - secret)
        sizes = queries.sum(axis=1)
        debiased = (queries @ reports - sizes * rr.q) / (rr.p - rr.q)
        per_bit = rr.p * (1.0 - rr.p) / (rr.p - rr.q) ** 2
        return debiased, math.sqrt(per_bit * len(secret) / 2.0)
    raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")


def reconstruct(queries: np.ndarray, given: np.ndarray) -> np.ndarray:
    """The attacker's guess: L1 decoding by linear programming, rounded at ½.

    Variables (x̂, t), minimise Σt subject to −t ≤ Qx̂ − a ≤ t, 0 ≤ x̂ ≤ 1, t ≥ 0 (HiGHS).
    """
    m, n = queries.shape
    sparse = csr_matrix(queries.astype(np.float64))
    eye = identity(m, format="csr")
    constraints = vstack([hstack([sparse, -eye]), hstack([-sparse, -eye])], format="csr")
    bounds_rhs = np.concatenate([given, -given])
    cost = np.concatenate([np.zeros(n), np.ones(m)])
    limits = [(0.0, 1.0)] * n + [(0.0, None)] * m
    solved = linprog(cost, A_ub=constraints, b_ub=bounds_rhs, bounds=limits, method="highs")
    if solved.x is None:  # HiGHS solves every such program; a failure is a bug to see
        raise RuntimeError(f"the linear program failed: {solved.message}")
    return (solved.x[:n] >= 0.5).astype(np.int64)


@dataclass(frozen=True)
class ReconstructionPoint:
    """One protection's result over the trials."""

    kind: str
    level: float
    """E (bounded), ε (laplace, ldp) or 0 (exact)."""
    noise_std: float
    """Standard deviation of one answer's noise."""
    recovered: float
    """Mean fraction of the n bits the attack got right."""
    recovered_se: float
    """Its standard error over the trials (0 for one trial)."""
    bound: float | None
    """For ldp: e^ε/(e^ε + 1), what each report reveals; None otherwise."""


@dataclass(frozen=True)
class ReconstructionResult:
    """The whole sweep."""

    users: int
    queries: int
    trials: int
    seed: int | None
    points: list[ReconstructionPoint] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {**asdict(self), "sqrt_n": math.sqrt(self.users)}


def _settings(
    n: int, bounds: Sequence[int], laplace: Sequence[float], ldp: Sequence[float]
) -> list[tuple[str, float]]:
    return (
        [("exact", 0.0)]
        + [("bounded", float(e)) for e in bounds]
        + [("laplace", float(e)) for e in laplace]
        + [("ldp", float(e)) for e in ldp]
    )


def run_reconstruction(
    users: int = 100,
    queries: int | None = None,
    trials: int = 3,
    seed: int | None = None,
    bounds: Sequence[int] | None = None,
    laplace: Sequence[float] = LAPLACE_EPSILONS,
    ldp: Sequence[float] = LDP_EPSILONS,
    progress: Callable[[int], None] | None = None,
) -> ReconstructionResult:
    """Run the attack against every protection, ``trials`` fresh databases each.

    Args:
        users: n, the secret bits.
        queries: m, default :data:`QUERIES_PER_BIT` · n.
        trials: databases (and query sets) per protection.
        seed: the simulation's seed.
        bounds: the E of the bounded-noise runs (default :func:`default_bounds`).
        laplace: ε per answer of the central Laplace runs.
        ldp: ε per report of the local DP runs.
        progress: called with 1 after each linear program.

    Returns:
        One point per protection.
    """
    if users < 2 or trials < 1:
        raise ValueError(f"need at least 2 users and 1 trial, got {users} and {trials}")
    m = QUERIES_PER_BIT * users if queries is None else queries
    if m < 1:
        raise ValueError(f"need at least one query, got {m}")
    rng = np.random.default_rng(seed)
    chosen = default_bounds(users) if bounds is None else bounds
    points = [
        _attacked(rng, kind, level, users, m, trials, progress)
        for kind, level in _settings(users, chosen, laplace, ldp)
    ]
    return ReconstructionResult(users, m, trials, seed, points)


def _attacked(
    rng: np.random.Generator,
    kind: str,
    level: float,
    users: int,
    m: int,
    trials: int,
    progress: Callable[[int], None] | None,
) -> ReconstructionPoint:
    """One protection's point: ``trials`` fresh databases of ``users`` bits, each
    attacked with ``m`` random subset-sum queries answered under (``kind``, ``level``)."""
    hits = []
    std = 0.0
    for _ in range(trials):
        secret = rng.integers(0, 2, size=users)
        matrix = rng.integers(0, 2, size=(m, users))
        given, std = answers(kind, secret, matrix, level, rng)
        hits.append(float(np.mean(reconstruct(matrix, given) == secret)))
        if progress is not None:
            progress(1)
    se = float(np.std(hits, ddof=1) / math.sqrt(trials)) if trials > 1 else 0.0
    bound = ldp_bound(level) if kind == "ldp" else None
    return ReconstructionPoint(kind, level, std, float(np.mean(hits)), se, bound)


def total_runs(
    users: int,
    trials: int,
    bounds: Sequence[int] | None = None,
    laplace: Sequence[float] = LAPLACE_EPSILONS,
    ldp: Sequence[float] = LDP_EPSILONS,
) -> int:
    """How many linear programs :func:`run_reconstruction` solves (for a progress bar)."""
    chosen = default_bounds(users) if bounds is None else bounds
    return trials * len(_settings(users, chosen, laplace, ldp))

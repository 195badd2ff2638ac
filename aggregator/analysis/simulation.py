"""Population simulations: how close do the estimates come, and do the intervals cover?

SIMULATION ONLY: randomness here is numpy's PCG64 generator, fast and seedable, not a
CSPRNG. Devices perturb with ``client_sdk`` and its CSPRNG.

Two ways to simulate a population of N users:

* ``method="counts"`` (default) samples the support counts from the true-value counts
  directly (``FrequencyCodec.sample_support_counts``): exactly for rr, grr, sue, oue and hr; for
  olh and ss each value's count has exactly its true law but the dependence between
  values is not reproduced (it matters only to Norm-Sub, whose figure is then omitted).
  O(k) to O(k²) work whatever N is.
* ``method="reports"`` perturbs every user's value with the vectorized encoder and
  decodes the reports with the real batch decoder, in chunks: O(N·k) work.

Each run reports the MSE of the unbiased estimates against the *exact* expected MSE
(docs/concepts/formulas.md's variance with both terms, at the population's true frequencies), and
how many of the k intervals covered the truth.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from aggregator.stats.codecs import Counts
from aggregator.stats.detect import SEED_BINS
from aggregator.stats.frequency import estimate_from_counts
from aggregator.stats.kinds import codec_for
from client_sdk.mechanisms import FrequencyOracle, LocalHashing
from client_sdk.mechanisms.base import fields_of

__all__ = [
    "DISTRIBUTIONS",
    "RunResult",
    "SimulationResult",
    "distribution",
    "seed_histogram",
    "simulate",
    "simulate_counts",
    "simulate_reports",
]

DISTRIBUTIONS = ("zipf", "uniform", "geometric", "two-point", "point")

REPORT_CHUNK = 1 << 18
"""Users perturbed and decoded per step in ``method="reports"``."""


def distribution(name: str, k: int, zipf_s: float = 1.1) -> npt.NDArray[np.float64]:
    """True-value probabilities over 0..k-1.

    zipf: ∝ 1/(v+1)^s; uniform; geometric: ∝ 0.9^v (most mass on a few values);
    two-point: half on value 0, half on value 1; point: everyone has value 0.
    """
    v = np.arange(k, dtype=np.float64)
    weights = {
        "zipf": 1.0 / (v + 1.0) ** zipf_s,
        "uniform": np.ones(k),
        "geometric": 0.9**v,
        "two-point": (v < 2).astype(np.float64),
        "point": (v < 1).astype(np.float64),
    }
    w = weights.get(name)
    if w is None:
        raise ValueError(f"unknown distribution {name!r}; choose one of {', '.join(DISTRIBUTIONS)}")
    return np.asarray(w / w.sum(), dtype=np.float64)


@dataclass(frozen=True)
class RunResult:
    """One simulated population."""

    run: int
    users: int
    mse: float
    """Mean over the k values of (f̂ − f)²."""
    expected_mse: float
    """Mean over the k values of the exact variance at the true frequencies."""
    mse_ratio: float
    covered: int
    """How many of the k intervals contained the true frequency."""
    intervals: int
    norm_sub_mse: float | None
    """MSE of the Norm-Sub estimate (None when the joint law was not simulated)."""


@dataclass(frozen=True)
class SimulationResult:
    """All runs, and what they add up to."""

    mechanism: dict[str, Any]
    users: int
    distribution: str
    method: str
    exact_joint: bool
    confidence: float
    seed: int | None
    runs: list[RunResult] = field(default_factory=list)

    @property
    def mse_ratio(self) -> float:
        """Σ MSE / Σ expected MSE over all runs."""
        return sum(r.mse for r in self.runs) / sum(r.expected_mse for r in self.runs)

    @property
    def coverage(self) -> float:
        """Fraction of all intervals that covered the truth."""
        return sum(r.covered for r in self.runs) / sum(r.intervals for r in self.runs)

    @property
    def intervals(self) -> int:
        """Number of intervals over all runs."""
        return sum(r.intervals for r in self.runs)

    def norm_sub_gain(self) -> float | None:
        """Raw MSE / Norm-Sub MSE (> 1: post-processing helped), when simulated."""
        if any(r.norm_sub_mse is None for r in self.runs):
            return None
        return sum(r.mse for r in self.runs) / sum(r.norm_sub_mse or 0.0 for r in self.runs)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary and runs."""
        return {
            **fields_of(self, "mechanism", "users", "distribution", "method"),
            "randomness": "simulation: numpy PCG64 (not a CSPRNG)",
            **fields_of(
                self, "exact_joint", "confidence", "seed", "mse_ratio", "coverage", "intervals"
            ),
            "norm_sub_gain": self.norm_sub_gain(),
            "runs": [asdict(r) for r in self.runs],
        }


def simulate_counts(
    mechanism: FrequencyOracle,
    true_counts: npt.NDArray[np.int64],
    gen: np.random.Generator,
    method: str = "counts",
) -> Counts:
    """Support counts of one population given its true-value counts."""
    codec = codec_for(mechanism)
    n = int(true_counts.sum())
    if method == "counts":
        return Counts(n, codec.sample_support_counts(true_counts, gen))
    if method != "reports":
        raise ValueError(f"method must be 'counts' or 'reports', got {method!r}")
    return simulate_reports(mechanism, true_counts, gen)[0]


def simulate_reports(
    mechanism: FrequencyOracle, true_counts: npt.NDArray[np.int64], gen: np.random.Generator
) -> tuple[Counts, npt.NDArray[np.int64] | None]:
    """Every user's report perturbed and decoded: the support counts, and the seed histogram.

    The histogram is what the worker keeps of a local-hashing window's seeds (the
    codec's ``seed_increments``, :func:`aggregator.stats.detect.seed_bins`), None for
    mechanisms whose reports carry no seed. ``simulate_counts(method="reports")`` is its
    first half, drawing the same numbers.
    """
    codec = codec_for(mechanism)
    n = int(true_counts.sum())
    values = np.repeat(np.arange(mechanism.domain_size), true_counts)
    gen.shuffle(values)
    total = Counts.zeros(mechanism.domain_size)
    seeds = np.zeros(SEED_BINS, dtype=np.int64) if isinstance(mechanism, LocalHashing) else None
    for start in range(0, n, REPORT_CHUNK):
        chunk = values[start : start + REPORT_CHUNK]
        batch = codec.encode(chunk, gen)
        total = total + Counts(len(chunk), codec.count(batch))
        if seeds is not None:
            seeds += seed_histogram(codec.seed_increments(batch))
    return total, seeds


def seed_histogram(increments: list[int]) -> npt.NDArray[np.int64]:
    """A codec's flat (bin, count) seed increments as a histogram of :data:`SEED_BINS` bins."""
    pairs = np.asarray(increments, dtype=np.int64).reshape(-1, 2)
    histogram = np.zeros(SEED_BINS, dtype=np.int64)
    np.add.at(histogram, pairs[:, 0], pairs[:, 1])
    return histogram


def simulate(
    mechanism: FrequencyOracle,
    users: int,
    reps: int = 1,
    dist: str = "zipf",
    seed: int | None = None,
    confidence: float = 0.95,
    method: str = "counts",
    progress: Callable[[int], None] | None = None,
) -> SimulationResult:
    """Simulate ``reps`` populations of ``users`` users drawn from ``dist``.

    Args:
        mechanism: what every simulated device uses.
        users: N per population (≥ 1).
        reps: number of independent populations.
        dist: a name from :data:`DISTRIBUTIONS`.
        seed: numpy seed (None: fresh entropy).
        confidence: level of the per-value intervals.
        method: "counts" (sufficient statistics) or "reports" (every report).
        progress: called with 1 after each run.
    """
    if min(users, reps) < 1:
        raise ValueError("users and reps must be at least 1")
    gen = np.random.default_rng(seed)
    probs = distribution(dist, mechanism.domain_size)
    codec = codec_for(mechanism)
    exact_joint = method == "reports" or codec.exact_joint
    result = SimulationResult(
        mechanism=mechanism.params(),
        users=users,
        distribution=dist,
        method=method,
        exact_joint=exact_joint,
        confidence=confidence,
        seed=seed,
    )
    for run in range(reps):
        true_counts = gen.multinomial(users, probs).astype(np.int64)
        truth = true_counts / users
        counts = simulate_counts(mechanism, true_counts, gen, method)
        est = estimate_from_counts(mechanism, counts, confidence=confidence)
        mse = float(np.mean((est.frequencies - truth) ** 2))
        expected = float(np.mean(mechanism.variance(users, truth)))
        covered = int(np.sum((est.ci_low <= truth) & (truth <= est.ci_high)))
        ns = float(np.mean((est.norm_sub - truth) ** 2)) if exact_joint else None
        result.runs.append(
            RunResult(run, users, mse, expected, mse / expected, covered, len(truth), ns)
        )
        if progress:
            progress(1)
    return result

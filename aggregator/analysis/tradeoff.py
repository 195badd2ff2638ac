"""Privacy–utility–N: how the error of one frequency moves with ε, N and the mechanism.

The sweep crosses ε × N × mechanism and, for every point, puts two figures side by side:

* **theory**: the expected root-mean-square error over the k values,
  √(mean_v Var[f̂(v)]), with the *exact* variance of each value at the population's true
  frequency (``mechanism.variance(n, f)``: both terms of docs/concepts/formulas.md's formula);
* **simulation**: the RMSE of the unbiased estimates over ``reps`` simulated populations
  (``aggregator.analysis.simulation.simulate`` with ``method="counts"``). SIMULATION ONLY: numpy's
  PCG64 generator with a fixed seed per point, not a CSPRNG.

Every row also carries the trusted-curator reference, central Laplace's √2/(nε), and the
mechanism's robustness: how far fake clients sending 1 % of the reports move one value
(:func:`aggregator.stats.robustness.max_gain`), the fourth axis beside ε, N and error. The
mechanism math (p*, q*, e^ε) is the SDK's alone; nothing here re-derives it.

Outputs of :func:`aggregator.analysis.plots.run_tradeoff`: ``tradeoff.csv`` and five
150 dpi PNG plots, drawn by :mod:`aggregator.analysis.plots` (the one module that imports
matplotlib).

References:
    docs/concepts/formulas.md, "Mechanisms", "Sample size" and "Central DP for comparison";
    T. Wang, J. Blocki, N. Li, S. Jha. "Locally Differentially Private Protocols for
    Frequency Estimation". USENIX Security 2017, Theorem 2 (the exact variance).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from aggregator.analysis.simulation import distribution, simulate
from aggregator.stats.planning import central_laplace_std, plan
from aggregator.stats.robustness import DEFAULT_FAKE_FRACTION, max_gain
from client_sdk import mechanisms
from client_sdk.mechanisms import BinaryRR, FrequencyOracle

__all__ = [
    "EPSILONS",
    "MECHANISMS",
    "USERS",
    "TradeoffPoint",
    "sweep",
    "CSV_UNITS",
    "csv_header",
    "total_points",
    "total_steps",
    "write_csv",
]

EPSILONS: tuple[float, ...] = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 6.0, 8.0)
"""ε per report: from "strong" (0.1) to the values shipped in practice (4–8)."""

USERS: tuple[int, ...] = (10**3, 10**4, 10**5, 10**6, 10**7)
"""Population sizes, one per decade: a survey to a large deployment."""

MECHANISMS: tuple[str, ...] = ("grr", "sue", "oue", "olh", "hr", "ss")
"""The k-ary frequency oracles swept at the chosen domain size."""

SHUFFLED_EPSILONS: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0, 8.0)
"""ε₀ per report of the amplification-by-shuffling plot (ε_c against N)."""

BINARY = "rr"
"""Warner's binary randomized response, swept at k = 2 for the seeds' comparison."""

COIN_FLIP = "coin_flip"
"""``form`` of the rows for the seeds' design (``BinaryRR.coin_flip()``: ε = ln 3)."""

SLIDE_USERS = 10**5
"""N of the error-vs-ε plot (the nearest swept N when it is not swept)."""

SLIDE_EPSILON = 1.0
"""ε of the error-vs-N plot (the nearest swept ε when it is not swept)."""

TARGET_HALF_WIDTH = 0.01
TARGET_CONFIDENCE = 0.95
"""The users-needed map asks for ±1 percentage point at 95 %: a typical dashboard need."""

BINARY_REPS_FACTOR = 10
"""Binary RR runs this many times ``reps`` populations per point: its two estimates are
f̂ and 1 − f̂, one independent error per population against about k for the k-ary
mechanisms, so its simulated RMSE would scatter √k times more (±1/√(2·reps) relative).
k = 2 makes a population cheap; 10× keeps the whole sweep within seconds."""

SIMULATION = "numpy PCG64, method=counts (not a CSPRNG)"


@dataclass(frozen=True)
class TradeoffPoint:
    """One mechanism at one (ε, N): theory, simulation and the central reference.

    Errors are absolute, in frequency units (0.01 = one percentage point); the CSV
    writes them in percentage points (:data:`CSV_UNITS`).
    """

    mechanism: str
    form: str
    """``epsilon`` (built from ε) or ``coin_flip`` (the seeds' keep-3/4 design)."""
    domain_size: int
    epsilon: float
    users: int
    distribution: str
    theory_variance: float
    """mean over the k values of ``mechanism.variance(users, f(v))``."""
    theory_se: float
    """√theory_variance: the expected RMSE of the unbiased estimates."""
    theory_se_at_zero: float
    """√``mechanism.variance(users)``: the usual f ≈ 0 figure (the formulas' Var*/n)."""
    simulated_rmse: float
    """√(mean over runs of the MSE over the k values)."""
    simulated_mse_ratio: float
    """Σ simulated MSE / Σ exact expected MSE (≈ 1 when the decoder is right)."""
    simulated_reps: int
    simulated_seed: int
    simulation: str
    central_laplace_se: float
    auto: bool
    """Whether ``auto`` picks this mechanism for (ε, k)."""
    wire_bytes: int
    poisoning_gain: float
    """Robustness: the maximal gain attack's shift of one value's estimate when
    :data:`~aggregator.stats.robustness.DEFAULT_FAKE_FRACTION` of the reports are fake."""
    params: str
    """JSON of ``mechanism.params()``: ``mechanisms.from_params`` rebuilds it."""


def total_points(epsilons: Sequence[float] = EPSILONS, users: Sequence[int] = USERS) -> int:
    """Number of sweep points (rows of the CSV) for these grids: the progress total.

    Every k-ary mechanism and binary RR at every (ε, N), plus the seeds' coin-flip design
    at every N.
    """
    return (len(MECHANISMS) + 1) * len(epsilons) * len(users) + len(users)


def total_steps(epsilons: Sequence[float] = EPSILONS, users: Sequence[int] = USERS) -> int:
    """What :func:`aggregator.analysis.plots.run_tradeoff`'s progress adds up to: every
    sweep point, then every file written, the shuffled-ε plot counting one step per line
    (its bound is computed per ε₀ and n, and takes about as long as the sweep: without its
    steps a bar would sit full for half the run)."""
    return total_points(epsilons, users) + 6 + len(SHUFFLED_EPSILONS)


def _point_seed(seed: int, index: int) -> int:
    """An independent numpy seed for sweep point ``index`` (SeedSequence mixing)."""
    return int(np.random.SeedSequence([seed, index]).generate_state(1, np.uint64)[0])


def _grid(
    domain_size: int, epsilons: Sequence[float], users: Sequence[int]
) -> list[tuple[FrequencyOracle, str, int]]:
    """(mechanism, form, N) of every sweep point, in CSV order."""
    grid: list[tuple[FrequencyOracle, str, int]] = []
    for name in MECHANISMS:
        for eps in epsilons:
            m = mechanisms.create(name, epsilon=eps, domain_size=domain_size)
            grid.extend((m, "epsilon", n) for n in users)
    for eps in epsilons:
        rr = mechanisms.create(BINARY, epsilon=eps)
        grid.extend((rr, "epsilon", n) for n in users)
    coin = BinaryRR.coin_flip()
    grid.extend((coin, COIN_FLIP, n) for n in users)
    return grid


def theory_variance(mechanism: FrequencyOracle, users: int, dist: str = "zipf") -> float:
    """Mean over the k values of the exact variance at the population's true frequencies."""
    probs = distribution(dist, mechanism.domain_size)
    return float(np.mean(mechanism.variance(users, probs)))


def sweep(
    domain_size: int = 64,
    reps: int = 20,
    seed: int = 2017,
    *,
    epsilons: Sequence[float] = EPSILONS,
    users: Sequence[int] = USERS,
    dist: str = "zipf",
    progress: Callable[[int], None] | None = None,
) -> list[TradeoffPoint]:
    """Theory and simulation at every point of ε × N × mechanism (no I/O).

    Args:
        domain_size: k of the k-ary mechanisms (binary RR always has k = 2).
        reps: simulated populations per point (≥ 1; binary RR: ``BINARY_REPS_FACTOR`` times).
        seed: master seed; point i simulates with a seed mixed from (seed, i).
        epsilons: ε grid.
        users: N grid.
        dist: population distribution, a name from ``aggregator.analysis.simulation.DISTRIBUTIONS``.
        progress: called with the number of points just finished (1, after each point).

    Returns:
        One :class:`TradeoffPoint` per point, :func:`total_points` of them.

    Raises:
        ValueError: an ε, k, N or ``reps`` out of range, or an unknown distribution.
    """
    if reps < 1:
        raise ValueError(f"reps must be at least 1, got {reps}")
    chosen = {eps: mechanisms.choose(eps, domain_size).mechanism for eps in epsilons}
    points: list[TradeoffPoint] = []
    for index, (m, form, n) in enumerate(_grid(domain_size, epsilons, users)):
        point_seed = _point_seed(seed, index)
        runs = reps * BINARY_REPS_FACTOR if m.name == BINARY else reps
        sim = simulate(m, n, runs, dist, seed=point_seed, method="counts")
        var = theory_variance(m, n, dist)
        points.append(
            TradeoffPoint(
                mechanism=m.name,
                form=form,
                domain_size=m.domain_size,
                epsilon=m.epsilon,
                users=n,
                distribution=dist,
                theory_variance=var,
                theory_se=math.sqrt(var),
                theory_se_at_zero=math.sqrt(float(m.variance(n))),
                simulated_rmse=math.sqrt(sum(r.mse for r in sim.runs) / runs),
                simulated_mse_ratio=sim.mse_ratio,
                simulated_reps=runs,
                simulated_seed=point_seed,
                simulation=SIMULATION,
                central_laplace_se=central_laplace_std(n, m.epsilon),
                auto=m.domain_size == domain_size and chosen.get(m.epsilon) == m,
                wire_bytes=m.wire_bytes,
                poisoning_gain=max_gain(m, DEFAULT_FAKE_FRACTION),
                params=json.dumps(m.params(), sort_keys=True),
            )
        )
        if progress:
            progress(1)
    return points


PP = 100.0
"""Percentage points per frequency unit: errors of a share are reported in points, as
the plots and ``ldp plan`` show them (0.01 of the population = 1 point)."""

CSV_UNITS: dict[str, tuple[str, float]] = {
    "theory_variance": ("theory_variance_pp2", PP * PP),
    "theory_se": ("theory_se_pp", PP),
    "theory_se_at_zero": ("theory_se_at_zero_pp", PP),
    "simulated_rmse": ("simulated_rmse_pp", PP),
    "central_laplace_se": ("central_laplace_se_pp", PP),
    "poisoning_gain": ("poisoning_gain_pp", PP),
}
"""The CSV's columns with a unit: the header names it (``_pp``: percentage points,
``_pp2``: their square) and the value is scaled to it. The other columns are counts,
ε, bytes (``wire_bytes``) or ratios (``simulated_mse_ratio``) and keep their field name."""


def csv_header() -> list[str]:
    """The CSV's column names, in :class:`TradeoffPoint` order, units in the names."""
    return [CSV_UNITS.get(f.name, (f.name, 1.0))[0] for f in fields(TradeoffPoint)]


def write_csv(points: Sequence[TradeoffPoint], path: Path) -> Path:
    """Write one row per point, columns in :class:`TradeoffPoint` order; errors in
    percentage points (:data:`CSV_UNITS`), as in the plots."""
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(csv_header())
        for p in points:
            row = asdict(p)
            writer.writerow(
                [
                    row[f.name] * CSV_UNITS[f.name][1] if f.name in CSV_UNITS else row[f.name]
                    for f in fields(TradeoffPoint)
                ]
            )
    return path


def users_needed_grid(
    epsilons: Sequence[float], domains: Sequence[int]
) -> tuple[Any, list[list[str]]]:
    """N for a ±1 pp 95 % half-width with ``auto``'s mechanism, over (k, ε); and its names.

    From :func:`aggregator.stats.planning.plan` (variance at f ≈ 0).
    """
    needed = np.zeros((len(domains), len(epsilons)))
    names: list[list[str]] = []
    for i, k in enumerate(domains):
        names.append([])
        for j, eps in enumerate(epsilons):
            rows = plan(eps, k, width=TARGET_HALF_WIDTH, confidence=TARGET_CONFIDENCE)
            (auto,) = [r for r in rows if r.auto]
            needed[i, j] = auto.users
            names[i].append(auto.name)
    return needed, names

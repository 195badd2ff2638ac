"""Planning a string metric: which frequencies N users can find, and the N a frequency needs.

A value is found when every prefix of it survives the discovery's walk and the value
clears the final test. The planner models the worst case, a value of full length whose
prefixes no other value shares (shorter values average more levels; shared prefixes are
heavier), from n reports.

In full: ``docs/statistics/strings.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from aggregator.stats.discovery import DEFAULT_BEAM, KEEP_Z
from aggregator.stats.strings import EXACT_POISSON
from client_sdk.mechanisms.strings import StringSketch

__all__ = [
    "DEFAULT_TESTED",
    "TRADEOFF_EPSILONS",
    "Detectability",
    "collision_floor",
    "detectable_curve",
    "detectable_frequency",
    "found_probability",
    "null_std",
    "string_plan",
    "tradeoff",
    "users_to_find",
]

DEFAULT_TESTED = 255 * DEFAULT_BEAM
"""Values a discovery tests, for planning: every extension of the beam's prefixes at the
last level, which is what the walk tests once its beam fills — and it fills with the
prefixes noise lifts over the cut even where few values are real (measured 66,100–66,300
at ε = 8, 6 bytes, 4,544 reports). With 10⁴ the planner promised a value of 2 % at
2,272 reports, found there in 3 of 24 populations (0.125; the model now says 0.25 there
and 0.80 at twice that, measured 0.875: ``bench_strings.py --section planning``)."""


@dataclass(frozen=True)
class Detectability:
    """The answer: the frequency found at n, or the n a frequency needs (None: none does)."""

    epsilon: float
    max_length: int
    users: int | None
    frequency: float
    power: float
    floor: float
    """The frequency below which no n finds a value (the collision floor)."""

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON-ready values (the API's StringPlan, ``--json``)."""
        return dict(self.__dict__)


def _terms(sketch: StringSketch, concentration: float) -> tuple[float, float]:
    m, h = sketch.cells, sketch.rows
    scale = (m / (m - 1)) ** 2
    a = scale * float(sketch.cell_variance(1.0, 1.0 / m)) / h
    b = scale * concentration * (1 / m) * (1 - 1 / m) / h
    return a, b


def null_std(sketch: StringSketch, users: float, concentration: float = 0.0) -> float:
    """σ₀(n): the standard deviation of a full-length absent value's estimate from ``users``
    reports, the LDP term √(A/n) and the collision term √B of the module's formula (the
    quantity every answer here scales; tests check it against simulated sketches)."""
    a, b = _terms(sketch, concentration)
    return math.sqrt(a / users + b)


def _poisson_tail(mean: float, count: int) -> float:
    """Pr[Poisson(mean) ≥ count], summed in logs (the mean may be large)."""
    if count <= 0:
        return 1.0
    below = sum(math.exp(j * math.log(mean) - mean - math.lgamma(j + 1)) for j in range(count))
    return max(0.0, 1.0 - below)


def _arrivals(sketch: StringSketch, users: float, frequency: float) -> tuple[float, float]:
    """(λ₀, λ₁): the reports expected in a value's cells at one level, absent and at
    ``frequency`` (see the module's docstring)."""
    inner, m, share = sketch.inner, sketch.cells, users / sketch.levels
    lam0 = share * (inner.q + (inner.p - inner.q) / m)
    lam1 = share * (inner.q + (inner.p - inner.q) * (frequency + (1 - frequency) / m))
    return lam0, lam1


def _count_power(sketch: StringSketch, users: float, frequency: float, level: float) -> float:
    """Pr[X ≥ c]: the chance that a value's cells hold enough reports for the exact
    small-count test at ``level`` (see the module's docstring); 1 where that test cannot
    bind (the null's mean above the counts the discovery tests exactly)."""
    lam0, lam1 = _arrivals(sketch, users, frequency)
    if lam0 > EXACT_POISSON:
        return 1.0
    # the least c with Pr[Poisson(λ₀) ≥ c] ≤ level: walk the upper tail down from c = 0
    c, tail, pmf = 0, 1.0, math.exp(-lam0)
    while tail > level and c <= EXACT_POISSON + 1:
        tail -= pmf
        c += 1
        pmf *= lam0 / c
    return _poisson_tail(lam1, c)


def _walk_count_power(sketch: StringSketch, users: float, frequency: float) -> float:
    """Pr[X ≥ λ₀ + KEEP_Z·√λ₀]: the chance that a prefix's cells hold enough reports for
    its z-score to clear the walk's cut, counted as Poisson arrivals (with a few reports a
    level the normal z is far from its law); 1 where the counts are large."""
    lam0, lam1 = _arrivals(sketch, users, frequency)
    if lam0 > EXACT_POISSON:
        return 1.0
    return _poisson_tail(lam1, math.ceil(lam0 + KEEP_Z * math.sqrt(lam0)))


def found_probability(
    sketch: StringSketch,
    users: float,
    frequency: float,
    concentration: float = 0.0,
    alpha: float = 0.05,
    tested: int = DEFAULT_TESTED,
) -> float:
    """The chance that discovery finds a full-length value of ``frequency`` among
    ``users`` reports: the walk keeps each of its prefixes, and both final tests pass (the
    module's docstring)."""
    nd = NormalDist()
    x = frequency / null_std(sketch, users, concentration)
    level = alpha / max(tested, 1)
    walk = min(nd.cdf(x - KEEP_Z), _walk_count_power(sketch, users, frequency)) ** (
        sketch.levels - 1
    )
    normal = nd.cdf(x - nd.inv_cdf(1 - level))
    return walk * min(normal, _count_power(sketch, users, frequency, level))


def _bisect(increasing: Callable[[float], float], target: float, low: float, high: float) -> float:
    """The x in [low, high] where an increasing function reaches ``target`` (to 1e-9 of
    the interval's log width: both ends are positive)."""
    for _ in range(100):
        mid = math.sqrt(low * high)
        if increasing(mid) >= target:
            high = mid
        else:
            low = mid
        if high / low < 1 + 1e-9:
            break
    return high


def detectable_frequency(
    sketch: StringSketch,
    users: int,
    concentration: float = 0.0,
    alpha: float = 0.05,
    tested: int = DEFAULT_TESTED,
    power: float = 0.5,
) -> Detectability:
    """The frequency found with probability ``power`` from ``users`` reports.

    Args:
        sketch: the metric's mechanism.
        users: n.
        concentration: S₂ = Σf² of the values (0: collisions ignored; Zipf 1.1 over 10⁵
            words: 0.027; 1.5: 0.16).
        alpha: the discovery's false discovery rate.
        tested: values tested.
        power: probability of finding a value at the answer's frequency.
    """
    (frequency,) = detectable_curve(sketch, [users], concentration, alpha, tested, power)
    floor = collision_floor(sketch, concentration, alpha, tested, power)
    return Detectability(sketch.epsilon, sketch.max_length, users, frequency, power, floor)


MAX_PLANNED_USERS = 1e13
"""The most users the planner considers (a thousand times the world's population): a
frequency no n up to this finds is reported as needing none (``users`` None)."""


def users_to_find(
    sketch: StringSketch,
    frequency: float,
    concentration: float = 0.0,
    alpha: float = 0.05,
    tested: int = DEFAULT_TESTED,
    power: float = 0.5,
) -> Detectability:
    """The users needed to find values of ``frequency`` with probability ``power``.

    Raises:
        ValueError: ``frequency`` not in (0, 1).
    """
    if not 0.0 < frequency < 1.0:
        raise ValueError(f"frequency must be in (0, 1), got {frequency}")
    floor = collision_floor(sketch, concentration, alpha, tested, power)

    def found(n: float) -> float:
        return found_probability(sketch, n, frequency, concentration, alpha, tested)

    users = None
    if frequency > floor and found(MAX_PLANNED_USERS) >= power:
        users = math.ceil(_bisect(found, power, 1.0, MAX_PLANNED_USERS))
    return Detectability(sketch.epsilon, sketch.max_length, users, frequency, power, floor)


TRADEOFF_EPSILONS = (1.0, 2.0, 4.0, 6.0, 8.0)
"""The ε a planning table compares (with the one asked for): 1 finds only values of a few
per cent at 10⁶ users, 8 the top hundred of a Zipf 1.1 vocabulary (docs/concepts/strings.md)."""


def string_plan(
    epsilon: float,
    max_length: int,
    users: int | None = None,
    frequency: float | None = None,
    concentration: float = 0.0,
    power: float = 0.5,
) -> Detectability:
    """One planning question, as the CLI and ``GET /v1/plan/strings`` ask it: give exactly
    one of ``users`` (the frequency they find) and ``frequency`` (the users it needs).

    Raises:
        ValueError: both or neither asked, or ε, ``max_length`` or ``frequency`` refused
            (the sketch's own message).
    """
    if (users is None) == (frequency is None):
        raise ValueError("give exactly one of users and frequency")
    sketch = StringSketch(epsilon=epsilon, max_length=max_length)
    if users is not None:
        return detectable_frequency(sketch, users, concentration, power=power)
    assert frequency is not None
    return users_to_find(sketch, frequency, concentration, power=power)


def tradeoff(
    epsilon: float,
    max_length: int,
    users: int | None = None,
    frequency: float | None = None,
    concentration: float = 0.0,
    power: float = 0.5,
    epsilons: Iterable[float] = TRADEOFF_EPSILONS,
) -> list[Detectability]:
    """:func:`string_plan` at ``epsilon`` and at each of ``epsilons``, ascending ε: the
    table that shows what privacy costs in users (or in the rarest value found).

    Raises:
        ValueError: as :func:`string_plan`, for ``epsilon``.
    """
    asked = string_plan(epsilon, max_length, users, frequency, concentration, power)
    others = sorted(set(epsilons) - {asked.epsilon})
    rows = [asked] + [
        string_plan(e, max_length, users, frequency, concentration, power) for e in others
    ]
    return sorted(rows, key=lambda r: r.epsilon)


def detectable_curve(
    sketch: StringSketch,
    users: Iterable[float],
    concentration: float = 0.0,
    alpha: float = 0.05,
    tested: int = DEFAULT_TESTED,
    power: float = 0.5,
) -> list[float]:
    """:func:`detectable_frequency` at each n of ``users`` (floats), for the explorer's
    curve: the frequency found with probability ``power`` (1.0 where not even a value
    every user holds is found, at very small n)."""
    out = []
    for n in users:

        def found(f: float, n: float = n) -> float:
            return found_probability(sketch, n, f, concentration, alpha, tested)

        out.append(_bisect(found, power, 1e-12, 1.0) if found(1.0) >= power else 1.0)
    return out


def collision_floor(
    sketch: StringSketch,
    concentration: float = 0.0,
    alpha: float = 0.05,
    tested: int = DEFAULT_TESTED,
    power: float = 0.5,
) -> float:
    """The frequency no number of users gets below: the limit of :func:`detectable_curve`
    as n grows, x*·√B with x* where the walk and the normal test find a value with
    probability ``power`` (0 when ``concentration`` is 0)."""
    _, b = _terms(sketch, concentration)
    if b == 0:
        return 0.0
    nd = NormalDist()
    z = nd.inv_cdf(1 - alpha / max(tested, 1))

    def found(x: float) -> float:
        return nd.cdf(x - KEEP_Z) ** (sketch.levels - 1) * nd.cdf(x - z)

    return _bisect(found, power, 1e-6, 100.0) * math.sqrt(b)

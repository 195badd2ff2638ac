"""Planning a string metric: which frequencies N users can find, and the N a frequency needs.

A value is found when its estimate clears the discovery's test. Its standard deviation
at f ≈ 0 from n reports (a value of full length, the worst case: shorter values average
more levels) is σ₀(n) with

    σ₀² = (m/(m−1))² · [ V(n)/h + S₂·(1/m)(1 − 1/m)/h ],   V(n) = G·q*(1 − q*/G)/(n(p* − q*)²)

(:mod:`aggregator.stats.strings`): the LDP term falls as 1/n, the collision term does not:
it is a floor set by the sketch's cells per level and the population's concentration
S₂ = Σf². A value of frequency f is found with probability about ``power`` when
f ≥ (z_{1−α/T} + z_power)·σ₀(n), T the values tested (Bonferroni: a little stricter than
the discovery's Benjamini–Hochberg), so

    n = Z²·A / (f² − Z²·B),   Z = z_{1−α/T} + z_power, A = n × the LDP term, B = the collision term

and no n suffices when f² ≤ Z²·B: more cells per level, not more users, are
then what the metric needs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from client_sdk.mechanisms.strings import StringSketch

__all__ = [
    "DEFAULT_TESTED",
    "TRADEOFF_EPSILONS",
    "Detectability",
    "collision_floor",
    "detectable_curve",
    "detectable_frequency",
    "null_std",
    "string_plan",
    "tradeoff",
    "users_to_find",
]

DEFAULT_TESTED = 10_000
"""Values a discovery tests, for planning: measured 900–70,000 on Zipf populations of 10⁵
words (more when more prefixes pass the walk); the threshold moves by 0.6 σ between
10³ and 10⁵."""


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


def _z(alpha: float, tested: int, power: float) -> float:
    nd = NormalDist()
    return nd.inv_cdf(1 - alpha / max(tested, 1)) + nd.inv_cdf(power)


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
    a, b = _terms(sketch, concentration)
    z = _z(alpha, tested, power)
    room = frequency**2 - z * z * b
    users = math.ceil(z * z * a / room) if room > 0 else None
    floor = collision_floor(sketch, concentration, alpha, tested, power)
    return Detectability(sketch.epsilon, sketch.max_length, users, frequency, power, floor)


TRADEOFF_EPSILONS = (1.0, 2.0, 4.0, 6.0, 8.0)
"""The ε a planning table compares (with the one asked for): 1 finds only values of a few
per cent at 10⁶ users, 8 the top hundred of a Zipf 1.1 vocabulary (README)."""


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
    """:func:`detectable_frequency` at each n of ``users`` (floats: the formula is smooth
    in n), for the explorer's curve."""
    z = _z(alpha, tested, power)
    return [z * null_std(sketch, n, concentration) for n in users]


def collision_floor(
    sketch: StringSketch,
    concentration: float = 0.0,
    alpha: float = 0.05,
    tested: int = DEFAULT_TESTED,
    power: float = 0.5,
) -> float:
    """The frequency no number of users gets below: Z·√B, the limit of
    :func:`detectable_curve` as n grows (0 when ``concentration`` is 0)."""
    _, b = _terms(sketch, concentration)
    return _z(alpha, tested, power) * math.sqrt(b)

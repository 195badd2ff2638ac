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
from dataclasses import dataclass
from statistics import NormalDist

from client_sdk.mechanisms.strings import StringSketch

__all__ = ["DEFAULT_TESTED", "Detectability", "detectable_frequency", "users_to_find"]

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


def _terms(sketch: StringSketch, concentration: float) -> tuple[float, float]:
    m, h = sketch.cells, sketch.rows
    scale = (m / (m - 1)) ** 2
    a = scale * float(sketch.cell_variance(1.0, 1.0 / m)) / h
    b = scale * concentration * (1 / m) * (1 - 1 / m) / h
    return a, b


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
    a, b = _terms(sketch, concentration)
    z = _z(alpha, tested, power)
    return Detectability(
        sketch.epsilon,
        sketch.max_length,
        users,
        z * math.sqrt(a / users + b),
        power,
        z * math.sqrt(b),
    )


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
    return Detectability(
        sketch.epsilon, sketch.max_length, users, frequency, power, z * math.sqrt(b)
    )

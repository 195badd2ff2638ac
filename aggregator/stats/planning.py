"""Sample-size planning: what N users buy, and what a target width costs.

Half-width of a level-c interval on one frequency near 0 from n reports:
w = z·√(Var*/n), so n = z²·Var*/w². The trusted-curator reference is the central
Laplace mechanism on counts, Lap(1/ε) per count: the frequency's standard deviation is
√2/(nε), so w = z·√2/(nε) and n = z·√2/(wε).

Each row also carries the mechanism's robustness, the fourth axis beside ε, N and
accuracy: how far a fraction β of fake reports crafted by the maximal gain attack moves
one value's estimate (:func:`aggregator.stats.robustness.max_gain`, β(1 − q*)/(p* − q*));
for central Laplace a fake is one more raw value, worth β.

References:
    docs/concepts/formulas.md, "Sample size" and "Central DP for comparison"; C. Dwork, F. McSherry,
    K. Nissim, A. Smith. "Calibrating Noise to Sensitivity". TCC 2006.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from aggregator.stats.intervals import z_value
from aggregator.stats.robustness import DEFAULT_FAKE_FRACTION, max_gain
from client_sdk import mechanisms
from client_sdk.mechanisms import FrequencyOracle

__all__ = [
    "CENTRAL",
    "HalfWidthCurve",
    "PlanRow",
    "central_laplace_std",
    "half_width_curves",
    "plan",
]

PLANNED = ("grr", "sue", "oue", "olh", "hr", "ss")

CENTRAL = "central laplace"
"""The trusted-curator reference's name in a plan and a curve."""


def central_laplace_std(n: float, epsilon: float) -> float:
    """Standard deviation of a frequency from a Lap(1/ε)-noised count over n users."""
    return math.sqrt(2.0) / (n * epsilon)


@dataclass(frozen=True)
class PlanRow:
    """One mechanism's (or central Laplace's) answer."""

    name: str
    variance_star: float | None
    wire_bytes: int | None
    half_width: float
    users: int
    auto: bool = False
    max_gain: float = 0.0
    """The estimate's shift from a fraction β of fakes promoting this one value."""


def check_users_or_width(users: int | None, width: float | None) -> None:
    """A plan asks for exactly one of ``users`` (at least 1) and ``width`` (in (0, 1)).

    Raises:
        ValueError: saying which.
    """
    if (users is None) == (width is None):
        raise ValueError("give exactly one of users and width")
    if users is not None and users < 1:
        raise ValueError(f"users must be at least 1, got {users}")
    if width is not None and not 0.0 < width < 1.0:
        raise ValueError(f"width must be in (0, 1), got {width}")


def users_and_width(
    var: float, z: float, users: int | None, width: float | None
) -> tuple[int, float]:
    """Users and half-width of an estimate of variance ``var``/n (Var*), given one of them:
    w = z·√(Var*/n), or n = ⌈z²·Var*/w²⌉."""
    if users is not None:
        return users, z * math.sqrt(var / users)
    assert width is not None
    return math.ceil(z * z * var / width**2), width


def plan(
    epsilon: float,
    domain_size: int,
    users: int | None = None,
    width: float | None = None,
    confidence: float = 0.95,
    fake_fraction: float = DEFAULT_FAKE_FRACTION,
    given: FrequencyOracle | None = None,
) -> list[PlanRow]:
    """Half-width for ``users`` users, or users for a half-width ``width``, per mechanism.

    Exactly one of ``users`` and ``width`` is given. Rows: every frequency oracle for
    (ε, k), best first, ``auto``'s choice marked, then central Laplace; each with the
    maximal gain attack's shift of one value when ``fake_fraction`` of the reports are fake.
    ``given``: a mechanism built elsewhere (pram from its matrix, at its own ε, which
    ``auto`` never picks) planned beside them.
    """
    if not 0.0 < fake_fraction < 1.0:
        raise ValueError(f"fake_fraction must be in (0, 1), got {fake_fraction}")
    check_users_or_width(users, width)
    z = z_value(confidence)
    chosen = mechanisms.choose(epsilon, domain_size).mechanism
    rows: list[PlanRow] = []
    built = [mechanisms.create(name, epsilon=epsilon, domain_size=domain_size) for name in PLANNED]
    for m in [*built, *([given] if given is not None else [])]:
        name = m.name
        var = m.variance_star()
        n, w = users_and_width(var, z, users, width)
        gain = max_gain(m, fake_fraction)
        rows.append(PlanRow(name, var, m.wire_bytes, w, n, auto=m == chosen, max_gain=gain))
    rows.sort(key=lambda r: r.users if width is not None else r.half_width)
    if users is not None:
        rows.append(
            PlanRow(
                CENTRAL,
                None,
                None,
                z * central_laplace_std(users, epsilon),
                users,
                max_gain=fake_fraction,
            )
        )
    else:
        assert width is not None
        n_central = math.ceil(z * math.sqrt(2.0) / (width * epsilon))
        rows.append(PlanRow(CENTRAL, None, None, width, n_central, max_gain=fake_fraction))
    return rows


@dataclass(frozen=True)
class HalfWidthCurve:
    """One mechanism's (or central Laplace's) half-width over a grid of N."""

    mechanism: str
    half_width: list[float]
    auto: bool = False
    current: bool = False
    central: bool = False


def half_width_curves(
    epsilon: float,
    k: int,
    n: np.ndarray,
    confidence: float = 0.95,
    current: str | None = None,
    given: FrequencyOracle | None = None,
) -> list[HalfWidthCurve]:
    """Half-width z·√Var(n) over the grid ``n`` for every planned mechanism, then central.

    Args:
        epsilon: ε per report.
        k: domain size.
        n: report counts (floats are fine: the formulas are smooth in n).
        confidence: the interval's level.
        current: a mechanism name to mark (a metric's own); added if not planned.
        given: a mechanism built elsewhere (pram from its matrix), drawn after the planned.

    Returns:
        One curve per mechanism, then central Laplace.

    Raises:
        ValueError: ε, k or ``current`` rejected by the mechanisms.
    """
    z = z_value(confidence)
    chosen = mechanisms.choose(epsilon, k).mechanism
    names = list(PLANNED)
    if current is not None and current not in names and current != "pram":
        names.append(current)
    built = [mechanisms.create(name, epsilon=epsilon, domain_size=k) for name in names]
    if given is not None:
        built.append(given)
    elif current == "pram":
        raise ValueError("mechanism=pram needs its matrix (&matrix=[[…], …])")
    curves = [
        HalfWidthCurve(
            mechanism=m.name,
            half_width=[float(x) for x in z * np.sqrt(m.variance(n))],
            auto=m == chosen,
            current=m.name == current,
        )
        for m in built
    ]
    central = [z * central_laplace_std(float(x), epsilon) for x in n]
    return [*curves, HalfWidthCurve(CENTRAL, central, central=True)]

"""e^x and e^x − 1 correctly rounded: the floats every sampling probability is built on.

The protocol pins them to the double nearest the exact real value (ties to even), so that
an SDK in any language samples with the very floats the reference does, whatever its libm
(docs/protocol.md §3). Stdlib only: ``decimal`` at rising precision (Ziv's strategy).
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_EVEN, Context, Decimal
from fractions import Fraction
from functools import lru_cache

__all__ = ["exp", "expm1"]

_FIRST_DIGITS = 40
"""Decimal digits of the first try (≈ 133 bits): more than the hardest known binary64 case
of exp needs (Lefèvre and Muller), so the loop below almost never runs twice."""

_MAX_ARGUMENT = 709.0
"""e^709.78 overflows a double; the mechanisms need |x| ≤ 20."""


def _rounded(x: float, minus_one: bool) -> float:
    """The double nearest e^x (− 1 if ``minus_one``), ties to even.

    ``decimal``'s exp is correctly rounded to the context's digits for the exact operand
    (a float converts to a Decimal exactly), so e^x lies within one unit in the last digit
    of ``y``; when both ends of that interval round to the same double, every point inside
    does (rounding is monotone), e^x included. e^x is transcendental for rational x ≠ 0,
    so it is never a midpoint between two doubles and the interval, shrinking as the digits
    rise, ends up on one side of every midpoint: the loop ends.
    """
    if not math.isfinite(x) or abs(x) > _MAX_ARGUMENT:
        raise ValueError(f"x must be finite and in [-{_MAX_ARGUMENT}, {_MAX_ARGUMENT}], got {x!r}")
    if x == 0.0:
        return x if minus_one else 1.0
    digits = _FIRST_DIGITS
    while True:
        y = Context(prec=digits, rounding=ROUND_HALF_EVEN).exp(Decimal(x))
        unit = Fraction(10) ** (y.adjusted() - digits + 1)
        centre = Fraction(y) - 1 if minus_one else Fraction(y)
        low, high = float(centre - unit), float(centre + unit)  # each correctly rounded
        if low == high:
            return low
        digits *= 2


@lru_cache(maxsize=1024)
def exp(x: float) -> float:
    """e^x rounded to the nearest double (ties to even), |x| ≤ 709.

    Raises:
        ValueError: x is not finite or e^x would overflow.
    """
    return _rounded(float(x), minus_one=False)


@lru_cache(maxsize=1024)
def expm1(x: float) -> float:
    """e^x − 1 rounded to the nearest double (ties to even), |x| ≤ 709.

    Raises:
        ValueError: x is not finite or e^x would overflow.
    """
    return _rounded(float(x), minus_one=True)

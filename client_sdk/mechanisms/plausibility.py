"""Reports a mechanism produces only with negligible probability, which the collector refuses.

A perturbed report is random, but not arbitrary. A unary report (SUE, OUE and their
memoized forms) sets bit v with probability p* and every other bit with probability q*,
independently: its number of ones is ``B + Y`` with ``B ~ Bernoulli(p*)`` and
``Y ~ Binomial(k − 1, q*)``, whatever the true value. An honest device therefore sets
between ``lo`` and ``hi`` bits, except with probability at most :data:`NEGLIGIBLE`;
:func:`ones_range` computes that range from the exact binomial law, once per (k, p*, q*).
All-zero and all-one vectors are the extreme counts: refused where the mechanism makes
them negligible (OUE at ε = 1: all-one from k = 17, all-zero from k = 68; at k = 8
neither, and nothing is refused).

In full: ``docs/security/limits.md``.
"""

from __future__ import annotations

import decimal
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache

__all__ = ["NEGLIGIBLE", "Implausible", "ones_range"]

NEGLIGIBLE = 1e-9
"""The probability, per honest report, of being refused as implausible (both tails
together, at most): one false refusal in a billion reports, where a deployment of a
million devices reporting daily sends a billion reports in three years."""

_PRECISION = 40
"""Significant digits of the tail sums. Each term of the binomial law follows from the
previous one by one multiplication and one division, so after k ≤ 65 536 steps the
relative error is below 10⁻³⁴: the range is that of the exact law unless a tail equals
NEGLIGIBLE/2 to 30 digits, and :data:`_HALF` is shaded down by 10⁻³⁰ to stay on the
accepting side even then."""

_HALF = Decimal(NEGLIGIBLE) / 2 * (1 - Decimal("1e-30"))
"""The mass each tail may hold (at most NEGLIGIBLE/2, a little less for rounding)."""

_CONTEXT = decimal.Context(
    prec=_PRECISION, Emin=decimal.MIN_EMIN, Emax=decimal.MAX_EMAX, traps=[decimal.Overflow]
)
"""A context whose exponent range holds q*^(k−1) for every q* and k the mechanisms allow
(2·10⁻⁹ to the 65 535th is about 10⁻⁵⁷⁰⁰⁰⁰)."""

MEMO_SIZE = 512
"""Distinct (k, p*, q*) triples :func:`ones_range` remembers: one per unary metric
version in use, far more than a deployment defines; each costs a few bytes."""


@dataclass(frozen=True)
class Implausible:
    """Why a report is refused as implausible under its declared mechanism.

    Attributes:
        reason: a short category for the collector's counter (``too_few_ones``,
            ``too_many_ones``).
        detail: what was found and what an honest report does, for people.
    """

    reason: str
    detail: str


@lru_cache(maxsize=MEMO_SIZE)
def ones_range(k: int, p: float, q: float) -> tuple[int, int]:
    """The counts of ones an honest unary report has, except with probability ≤ NEGLIGIBLE.

    The law of the count is X = B + Y, B ~ Bernoulli(p), Y ~ Binomial(k − 1, q) (bits
    independent; which bit is B does not matter). ``lo`` is the largest count with
    Pr[X < lo] ≤ NEGLIGIBLE/2, ``hi`` the smallest with Pr[X > hi] ≤ NEGLIGIBLE/2, each
    summed exactly from its end of the support (p and q are the floats the mechanism
    samples with, converted without rounding). Memoized: the collector asks per report.

    Args:
        k: the number of bits, ≥ 2.
        p: the probability that the true value's bit is set, in (0, 1).
        q: the probability that any other bit is set, in (0, 1).

    Returns:
        (lo, hi): a report with fewer than ``lo`` or more than ``hi`` ones is implausible.

    Raises:
        ValueError: k < 2, or p or q outside (0, 1).
    """
    if k < 2 or not (0 < p < 1 and 0 < q < 1):
        raise ValueError(f"need k >= 2 and p, q in (0, 1), got k={k}, p={p!r}, q={q!r}")
    with decimal.localcontext(_CONTEXT):
        lo = _cutoff(k, Decimal(p), Decimal(q))
        # The upper tail of X is the lower tail of k − X = (1 − B) + (k − 1 − Y).
        hi = k - _cutoff(k, 1 - Decimal(p), 1 - Decimal(q))
    return lo, hi


def _cutoff(k: int, p: Decimal, q: Decimal) -> int:
    """The largest c with Pr[B + Y < c] ≤ _HALF, B ~ Bern(p), Y ~ Bin(k − 1, q)."""
    n = k - 1
    ratio = q / (1 - q)
    y_prev = Decimal(0)  # Pr[Y = j − 1]
    y = (1 - q) ** n  # Pr[Y = 0]
    total = Decimal(0)  # Pr[X < j]
    for j in range(k + 1):
        mass = (1 - p) * y + p * y_prev  # Pr[X = j]
        if total + mass > _HALF:
            return j
        total += mass
        y_prev = y
        y = y * (n - j) / (j + 1) * ratio if j < n else Decimal(0)
    return k + 1  # pragma: no cover - the masses add up to 1 > _HALF

"""PRAM, the post-randomization method: any k×k transition matrix P.

A device with true value x reports y with probability P[x, y] (rows: true value, columns:
reported value). The server sees the reported values' distribution λ = Pᵀf and inverts
it: f̂ = P⁻ᵀ λ̂. Generalized randomized response is the special case P = pI + q(J − I);
an ordinal metric can instead make a value's neighbours likelier than far-off values, so
that a mistaken report costs less (docs/concepts/mechanisms.md: age bands).

ε is read off the matrix: e^ε = max over columns y of max_{x,x'} P[x, y]/P[x', y],
computed exactly in rational arithmetic. Entries are JSON numbers or strings: a number is
taken as the decimal it is written as (``0.7`` is 7/10, not the binary double nearest to
it), a string as a decimal or a fraction (``"1/3"``). Each row must sum to 1 within
:data:`ROW_SUM_TOLERANCE` and is then divided by its exact sum, so the matrix the device
samples from is exactly stochastic and the ε shown is the ε it realises.

References:
    J. M. Gouweleeuw, P. Kooiman, L. C. R. J. Willenborg, P.-P. de Wolf.
    "Post Randomisation for Statistical Disclosure Control: Theory and Implementation".
    Journal of Official Statistics 14(4), 1998.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property, lru_cache
from itertools import accumulate
from typing import Any

from client_sdk.mechanisms.base import (
    MAX_EPSILON,
    MIN_EPSILON,
    OneValueReport,
    epsilon_for_ratio,
)
from client_sdk.mechanisms.randomness import RandomSource

__all__ = [
    "MAX_PRAM_SIZE",
    "ROW_SUM_TOLERANCE",
    "PostRandomization",
    "epsilon_of",
    "freeze",
    "read_frozen",
    "read_matrix",
]

MAX_PRAM_SIZE = 64
"""Largest k of a PRAM matrix. The spec carries all k² entries (4,096 here, about 100 KB
of JSON, within the collector's body limit) and every process that loads the definition
checks it exactly in rational arithmetic, O(k³) in pure Python; PRAM is meant for ordinal
metrics of a few to a few dozen bands. A larger domain belongs to grr/oue/olh."""

ROW_SUM_TOLERANCE = Fraction(1, 10**9)
"""How far a row's sum may be from 1 (absolute): room for entries written to 9+ digits
(e^ε/(e^ε + k − 1) as a float). Rows are then divided by their exact sums."""

Matrix = tuple[tuple[Fraction, ...], ...]


def _entry(x: object, where: str) -> Fraction:
    if isinstance(x, bool) or not isinstance(x, int | float | str):
        raise ValueError(f"{where} must be a number or a string like '0.7' or '1/3', got {x!r}")
    try:
        value = Fraction(repr(x) if isinstance(x, float) else x)
    except (ValueError, ZeroDivisionError, OverflowError):
        raise ValueError(f"{where} = {x!r} is not a finite number") from None
    if not 0 <= value <= 1:
        raise ValueError(f"{where} = {x!r} is not a probability in [0, 1]")
    return value


def read_matrix(matrix: object) -> Matrix:
    """The exact row-stochastic matrix of a spec's ``options.matrix``.

    Raises:
        ValueError: not a square list of lists of probabilities, k outside
            [2, MAX_PRAM_SIZE], a row not summing to 1 (within the tolerance).
    """
    if not isinstance(matrix, list | tuple) or not all(isinstance(r, list | tuple) for r in matrix):
        raise ValueError("pram's matrix must be a list of k rows, each a list of k probabilities")
    k = len(matrix)
    if not 2 <= k <= MAX_PRAM_SIZE:
        raise ValueError(f"pram's matrix must be k×k with k in [2, {MAX_PRAM_SIZE}], got {k} rows")
    rows: list[tuple[Fraction, ...]] = []
    for x, row in enumerate(matrix):
        if len(row) != k:
            raise ValueError(
                f"pram's matrix is not square: row {x} has {len(row)} entries, not {k}"
            )
        entries = [_entry(v, f"matrix[{x}][{y}]") for y, v in enumerate(row)]
        total = sum(entries, Fraction(0))
        if abs(total - 1) > ROW_SUM_TOLERANCE:
            raise ValueError(
                f"pram's matrix is not stochastic: row {x} sums to {float(total)!r}, not 1 "
                f"(within {float(ROW_SUM_TOLERANCE):g})"
            )
        rows.append(tuple(e / total for e in entries))
    return tuple(rows)


@lru_cache(maxsize=64)
def read_frozen(matrix: tuple[tuple[Any, ...], ...]) -> Matrix:
    """:func:`read_matrix` of a hashable matrix, remembered: ``create`` checks a matrix
    and the mechanism it builds reads the same one (an exact parse of k² entries)."""
    return read_matrix(matrix)


def freeze(matrix: object) -> tuple[tuple[Any, ...], ...]:
    """A spec's matrix as a tuple of tuples (what the mechanism keeps and hashes).

    Raises:
        ValueError: not a list of lists.
    """
    if not isinstance(matrix, list | tuple) or not all(isinstance(r, list | tuple) for r in matrix):
        raise ValueError("pram's matrix must be a list of k rows, each a list of k probabilities")
    return tuple(tuple(row) for row in matrix)


def privacy_ratio_of(rows: Matrix) -> Fraction | None:
    """max_y max_{x,x'} P[x,y]/P[x',y], exactly; None when infinite (a column with a zero
    below a positive entry: that report rules a true value out)."""
    worst = Fraction(1)
    for y in range(len(rows)):
        column = [row[y] for row in rows]
        high, low = max(column), min(column)
        if high == 0:
            continue
        if low == 0:
            return None
        worst = max(worst, high / low)
    return worst


_PRIME = (1 << 61) - 1


def _residues(rows: Matrix, prime: int) -> list[list[int]] | None:
    """The matrix's entries as residues mod a prime, None when a denominator vanishes
    mod it."""
    if any(e.denominator % prime == 0 for row in rows for e in row):
        return None
    return [[e.numerator * pow(e.denominator, -1, prime) % prime for e in row] for row in rows]


def _rank_mod(rows: Matrix, prime: int) -> int | None:
    """The rank of the matrix mod a prime, None when a denominator vanishes mod it."""
    a = _residues(rows, prime)
    if a is None:
        return None
    k = len(rows)
    rank = 0
    for col in range(k):
        pivot = next((r for r in range(rank, k) if a[r][col]), None)
        if pivot is None:
            continue
        a[rank], a[pivot] = a[pivot], a[rank]
        inv = pow(a[rank][col], -1, prime)
        for r in range(rank + 1, k):
            if a[r][col]:
                factor = a[r][col] * inv % prime
                a[r] = [(x - factor * y) % prime for x, y in zip(a[r], a[rank], strict=True)]
        rank += 1
    return rank


def _singular(rows: Matrix) -> bool:
    """Whether det P = 0, exactly: full rank mod a prime proves it invertible; otherwise
    (almost always a truly singular P) Gaussian elimination over the rationals decides."""
    if _rank_mod(rows, _PRIME) == len(rows):
        return False
    a = [list(r) for r in rows]
    k = len(a)
    for col in range(k):
        pivot = next((r for r in range(col, k) if a[r][col] != 0), None)
        if pivot is None:
            return True
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(col + 1, k):
            if a[r][col] != 0:
                factor = a[r][col] / a[col][col]
                a[r] = [x - factor * y for x, y in zip(a[r], a[col], strict=True)]
    return False


def _float_inverse(rows: Matrix) -> list[list[float]]:
    """P⁻¹ in floats (Gauss–Jordan with partial pivoting; P is known to be invertible)."""
    k = len(rows)
    a = [[float(e) for e in row] + [float(i == j) for j in range(k)] for i, row in enumerate(rows)]
    for col in range(k):
        pivot = max(range(col, k), key=lambda r: abs(a[r][col]))
        a[col], a[pivot] = a[pivot], a[col]
        lead = a[col][col]
        a[col] = [x / lead for x in a[col]]
        for r in range(k):
            if r != col and a[r][col] != 0.0:
                factor = a[r][col]
                a[r] = [x - factor * y for x, y in zip(a[r], a[col], strict=True)]
    return [row[k:] for row in a]


def epsilon_of(rows: Matrix) -> float:
    """The smallest float ε with e^ε provably ≥ the matrix's privacy ratio.

    Raises:
        ValueError: singular, infinite ε (a zero entry), or ε outside
            [MIN_EPSILON, MAX_EPSILON].
    """
    if _singular(rows):
        raise ValueError(
            "pram's matrix is singular: the reported distribution cannot be inverted to "
            "the true one (two true values are reported alike)"
        )
    ratio = privacy_ratio_of(rows)
    if ratio is None:
        raise ValueError(
            "pram's matrix gives ε = ∞: a column has a zero entry where another row's is "
            "positive, so that report rules a true value out"
        )
    eps = epsilon_for_ratio(ratio)
    if not MIN_EPSILON <= eps <= MAX_EPSILON:
        raise ValueError(
            f"pram's matrix gives ε = {eps:.6g}, outside [{MIN_EPSILON}, {MAX_EPSILON}]"
        )
    return eps


@dataclass(frozen=True)
class PostRandomization(OneValueReport):
    """PRAM with transition matrix ``matrix`` (rows: true value; columns: reported value).

    Build it with :func:`client_sdk.mechanisms.create` (``"pram"``, option ``matrix``):
    ε is then read off the matrix. Payload: ``{"v": int}``, the reported value, as GRR's.
    Not a pure frequency oracle (no single p*, q*): :meth:`debias` and :meth:`variance`
    use the whole matrix.
    """

    matrix: tuple[tuple[Any, ...], ...] = ()
    """The entries as given in the spec (numbers or strings), kept to rebuild it."""

    name = "pram"
    server_cost = "O(1) per report (one bincount) + a k×k product per estimate"
    server_cost_rank = 0

    def _validate(self) -> None:
        if len(self.matrix) != self.domain_size:
            raise ValueError(
                f"pram's matrix has {len(self.matrix)} rows for domain_size {self.domain_size}"
            )

    @cached_property
    def rows(self) -> Matrix:
        """The exact stochastic matrix the device samples from."""
        return read_frozen(self.matrix)

    def privacy_ratio(self) -> Fraction:  # noqa: D102
        ratio = privacy_ratio_of(self.rows)
        if ratio is None:  # pragma: no cover - create() refuses such matrices
            raise ValueError("pram's matrix gives ε = ∞")
        return ratio

    def reason(self, declared: float | None = None) -> str:
        """Why this mechanism has its ε, for a definition's ``mechanism_reason``: nothing
        was chosen by ``auto``, so say what the operator's matrix realises, and how.

        Args:
            declared: the ``epsilon`` the spec gave as a ceiling, if any.
        """
        k, ratio = self.domain_size, self.privacy_ratio()
        shown = f"{ratio}" if ratio.denominator == 1 else f"{ratio} ≈ {float(ratio):.6g}"
        ceiling = "" if declared is None else f", within the declared ε = {declared:g}"
        return (
            f"pram: the given {k}×{k} transition matrix realises ε = {self.epsilon:.6g}{ceiling} "
            f"(e^ε = {shown}, the largest ratio P[x, y]/P[x′, y] of two entries of one "
            "column: how much one reported value can favour one true value over another)"
        )

    @cached_property
    def _thresholds(self) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """Per row: a common denominator D and the cumulative integer weights (sum D)."""
        out = []
        for row in self.rows:
            d = math.lcm(*(e.denominator for e in row))
            out.append((d, tuple(accumulate(e.numerator * (d // e.denominator) for e in row))))
        return tuple(out)

    def _perturb(self, value: int, rng: RandomSource) -> dict[str, Any]:
        d, cumulative = self._thresholds[value]
        return {"v": bisect_right(cumulative, rng.randrange(d))}  # exact: Pr = P[x, y]

    def options(self) -> dict[str, Any]:  # noqa: D102
        return {"matrix": [list(r) for r in self.matrix]}

    @property
    def p(self) -> float:
        """Not defined: PRAM is no pure frequency oracle."""
        raise TypeError("pram has no single p*: use its matrix (debias, variance)")

    @property
    def q(self) -> float:
        """Not defined: PRAM is no pure frequency oracle."""
        raise TypeError("pram has no single q*: use its matrix (debias, variance)")

    @cached_property
    def inverse(self) -> list[list[float]]:
        """P⁻¹ in floats: f̂_v = Σ_y P⁻¹[y][v]·λ̂_y."""
        return _float_inverse(self.rows)

    @cached_property
    def variance_terms(self) -> list[list[float]]:
        """a[v][x] = n·Var[f̂_v] contributed per unit of true frequency at x:
        Σ_y P⁻¹[y][v]²·P[x][y] − δ(x, v) (one report from x is multinomial on row P[x])."""
        k, w = self.domain_size, self.inverse
        prob = [[float(e) for e in row] for row in self.rows]
        return [
            [sum(w[y][v] ** 2 * prob[x][y] for y in range(k)) - float(x == v) for x in range(k)]
            for v in range(k)
        ]

    def debias(self, support_count: Any, n: Any) -> Any:
        """f̂ = P⁻ᵀ·(C/n): all k values at once (a sequence of k counts; a list)."""
        k, w = self.domain_size, self.inverse
        rates = [float(c) / float(n) for c in support_count]
        if len(rates) != k:
            raise ValueError(f"pram debiases all {k} support counts at once, got {len(rates)}")
        return [sum(w[y][v] * rates[y] for y in range(k)) for v in range(k)]

    def variance_lines(self, frequency: Any) -> list[tuple[float, float]]:
        """Per value v, (a[v][v], s_v): n·Var[f̂_v] = f·a[v][v] + (1 − f)·s_v, linear in v's
        own frequency f, with s_v the other values' terms averaged with the weights of
        ``frequency`` (k plug-in estimates, clipped to [0, 1]; evenly when all are 0)."""
        k, a = self.domain_size, self.variance_terms
        g = [min(max(float(x), 0.0), 1.0) for x in frequency]
        total = sum(g)
        lines = []
        for v in range(k):
            rest = total - g[v]
            if rest > 0:
                spread = sum(a[v][x] * g[x] for x in range(k) if x != v) / rest
            else:
                spread = (sum(a[v]) - a[v][v]) / (k - 1)
            lines.append((a[v][v], spread))
        return lines

    def variance(self, n: Any, frequency: Any = 0.0) -> Any:
        """Variance of f̂_v from ``n`` reports (a fixed population, as for every mechanism).

        n·Var[f̂_v] = Σ_x f_x·a[v][x] (:attr:`variance_terms`). Given the k frequencies
        (the plug-in estimate), value v takes f_v clipped to [0, 1] and the rest of the
        population 1 − f_v spread over the other values like their clipped estimates
        (:meth:`variance_lines`): a list of k variances. Given one number f, every value
        at frequency f with the rest spread evenly, the worst over v (for planning;
        ``variance(n)`` is the usual f ≈ 0 figure). For GRR's matrix both equal GRR's.
        """
        k = self.domain_size
        if isinstance(frequency, int | float):
            f = min(max(float(frequency), 0.0), 1.0)
            lines = self.variance_lines([0.0] * k)
            return max(f * own + (1 - f) * rest for own, rest in lines) / n
        g = [min(max(float(x), 0.0), 1.0) for x in frequency]
        return [
            (g[v] * own + (1 - g[v]) * rest) / n
            for v, (own, rest) in enumerate(self.variance_lines(g))
        ]

    def variance_star(self) -> float:  # noqa: D102
        return float(self.variance(1))

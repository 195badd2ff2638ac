"""What an attacker can solve for from served figures: every figure is a sum of unknown
counts (≥ 0), so the values a hidden figure can take form an interval, found by linear
programming (its least and greatest value over all counts agreeing with every figure)."""

from __future__ import annotations

from collections.abc import Hashable, Iterable

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import csr_array


class Unknowns:
    """Unknown non-negative counts, the figures known about them, and what they leave
    open."""

    def __init__(self) -> None:
        self.index: dict[Hashable, int] = {}
        self.equal: list[tuple[list[tuple[int, float]], float]] = []
        self.below: list[list[tuple[int, float]]] = []

    def of(self, name: Hashable) -> int:
        """The column of an unknown (created on first use)."""
        return self.index.setdefault(name, len(self.index))

    def known(self, names: Iterable[Hashable], value: float) -> None:
        """A served figure: the sum of ``names`` is ``value``."""
        self.equal.append(([(self.of(n), 1.0) for n in names], float(value)))

    def relation(self, plus: Iterable[Hashable], minus: Iterable[Hashable]) -> None:
        """Known to hold for every dataset: Σ plus = Σ minus."""
        terms = [(self.of(n), 1.0) for n in plus] + [(self.of(n), -1.0) for n in minus]
        self.equal.append((terms, 0.0))

    def at_most(self, small: Hashable, large: Hashable) -> None:
        """Known to hold for every dataset: small ≤ large."""
        self.below.append([(self.of(small), 1.0), (self.of(large), -1.0)])

    def span(self, names: Iterable[Hashable]) -> tuple[float, float]:
        """The least and greatest value of the sum of ``names`` over every dataset of
        non-negative counts agreeing with everything known."""
        size = len(self.index)
        a_eq, b_eq = _matrix([terms for terms, _ in self.equal], size), [v for _, v in self.equal]
        a_ub = _matrix(self.below, size) if self.below else None
        b_ub = np.zeros(len(self.below)) if self.below else None
        c = np.zeros(size)
        for name in names:
            c[self.index[name]] += 1
        ends = []
        for sign in (1, -1):
            found = linprog(sign * c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq, bounds=(0, None))
            assert found.status == 0, found.message  # the true counts always agree
            ends.append(sign * found.fun)
        return ends[0], ends[1]


def _matrix(rows: list[list[tuple[int, float]]], size: int) -> csr_array:
    data = [v for row in rows for _, v in row]
    cols = [c for row in rows for c, _ in row]
    ptr = np.cumsum([0] + [len(row) for row in rows])
    return csr_array((data, cols, ptr), shape=(len(rows), size))

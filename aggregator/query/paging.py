"""Which rows of a table an answer shows: the top values, the values asked for, a page, or
all of them; the rest summarised in one row.

An estimate of k values costs about 16 µs and 300 bytes of JSON per row it shows, and a
chart shows a few dozen: a web answer shows every row while it holds at most
:data:`ANSWER_ROWS` in all (small answers as they always were), else the top values of
each part (an estimate, a marginal, a group) within that budget, with the rest summed
(:class:`~aggregator.query.answers.Rest`). The estimators compute every value's
statistics (numpy, cheap) and build rows only for those shown. ``ldp export`` and
``ldp estimates`` ask for every row. In full: docs/architecture/read-side.md.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from pydantic import BaseModel, TypeAdapter

from aggregator.query.answers import Rest
from aggregator.safe_text import comma_list
from aggregator.stats.intervals import json_float

__all__ = [
    "ALL",
    "ANSWER_ROWS",
    "MAX_ROWS",
    "PAGE",
    "TOP",
    "VALUES",
    "Rows",
    "columns_of",
    "rest_of",
    "rows_of",
]

M = TypeVar("M", bound=BaseModel)

ANSWER_ROWS = 256
"""Rows a web answer shows by default, in all: every row of an answer that small (a
domain of 256 values, a 16×16 marginal, 64 groups of 4 values), else the top
⌊256 / parts⌋ of each part. 256 rows are ~77 kB of JSON, ~5 ms to build."""

MAX_ROWS = 65_536
"""Most rows ``?top=`` or ``?limit=`` asks for: a domain's largest size
(:data:`client_sdk.mechanisms.MAX_DOMAIN_SIZE`)."""

ALL, TOP, VALUES, PAGE = "all", "top", "values", "page"
"""How the rows shown were chosen: every row (in the table's order), the largest
estimates (largest first), the values asked for (in the order asked), a page of the
table's order."""


@dataclass(frozen=True)
class Rows:
    """Rows asked for; nothing asked: the default of a web answer (:data:`ANSWER_ROWS`).

    Args:
        top: the ``top`` largest estimates of each part.
        values: these labels (of a categorical metric), in this order.
        every: every row.
        offset: with ``limit``: a page of the table's order, from row ``offset``.
        limit: the rows of a page.
        columns: one array per field instead of one object per row.
    """

    top: int | None = None
    values: tuple[str, ...] | None = None
    every: bool = False
    offset: int = 0
    limit: int | None = None
    columns: bool = False

    @classmethod
    def parse(cls, args: Mapping[str, str]) -> Rows:
        """The rows a query asks for: ``top``, ``values`` (``all`` or comma-separated
        labels), ``offset``/``limit``, ``format=columns`` (one of the first three).

        Raises:
            ValueError: a bad number, or more than one way of choosing rows.
        """
        top = _count(args, "top", 1)
        limit = _count(args, "limit", 1)
        offset = _count(args, "offset", 0)
        raw = args.get("values")
        values = None
        every = raw == ALL
        if raw is not None and not every:
            values = comma_list(raw)
            if not values:
                raise ValueError("values must be all or comma-separated values of the metric")
        if offset is not None and limit is None:
            limit = ANSWER_ROWS
        asked = [n for n, x in (("top", top), ("values", raw), ("limit", limit)) if x is not None]
        if len(asked) > 1:
            raise ValueError(f"ask for one of top, values and offset/limit, not {asked}")
        return cls(
            top=top,
            values=values,
            every=every,
            offset=offset or 0,
            limit=limit,
            columns=args.get("format") == "columns",
        )

    def resolve(self, total: int, parts: int = 1) -> Rows:
        """The rows to show when the answer holds ``total`` rows in ``parts`` parts: the
        default made explicit (every row, or the top of each part), anything asked as is."""
        if self.every or self.how != ALL:  # asked for
            return self
        if total <= ANSWER_ROWS:
            return Rows(every=True, columns=self.columns)
        return Rows(top=max(1, ANSWER_ROWS // max(1, parts)), columns=self.columns)

    @property
    def how(self) -> str:
        """:data:`ALL`, :data:`TOP`, :data:`VALUES` or :data:`PAGE`."""
        if self.top:
            return TOP
        if self.values is not None:
            return VALUES
        if self.limit is not None:
            return PAGE
        return ALL

    def pick(self, frequencies: np.ndarray, labels: Sequence[str]) -> np.ndarray:
        """Indices of the rows shown, in the order shown.

        Raises:
            ValueError: ``values`` names a label not in ``labels``.
        """
        k = len(frequencies)
        if self.top:
            ranked = np.where(np.isfinite(frequencies), frequencies, -np.inf)
            order = np.argsort(-ranked, kind="stable")  # ties: in the table's order
            return order[: self.top]
        if self.values is not None:
            where = {label: i for i, label in enumerate(labels)}
            unknown = [v for v in self.values if v not in where]
            if unknown:
                shown = ", ".join(repr(v[:40]) for v in unknown[:5])
                raise ValueError(f"not values of this metric: {shown}")
            return np.array([where[v] for v in self.values], dtype=np.int64)
        if self.limit is not None:
            return np.arange(min(self.offset, k), min(self.offset + self.limit, k))
        return np.arange(k)


def _count(args: Mapping[str, str], name: str, least: int) -> int | None:
    raw = args.get(name)
    if raw is None:
        return None
    if not (raw.isascii() and raw.isdigit()) or not least <= int(raw) <= MAX_ROWS:
        raise ValueError(f"{name} must be an integer in [{least}, {MAX_ROWS}], got {raw[:40]!r}")
    return int(raw)


def rest_of(
    shown: np.ndarray, frequencies: np.ndarray, norm_sub: np.ndarray | None = None
) -> Rest | None:
    """The rows not ``shown``, summed; None when every row is shown."""
    hidden = np.ones(len(frequencies), dtype=bool)
    hidden[shown] = False
    count = int(hidden.sum())
    if not count:
        return None
    return Rest(
        values=count,
        frequency=json_float(float(np.sum(frequencies[hidden]))),
        norm_sub=None if norm_sub is None else json_float(float(np.sum(norm_sub[hidden]))),
    )


def columns_of(fields: Mapping[str, Any], shown: np.ndarray) -> dict[str, list[Any]]:
    """Each field's values at the rows ``shown``, as JSON has them (NaN as None, numpy
    scalars as Python's); a field that is None is None in every row."""
    out: dict[str, list[Any]] = {}
    for name, values in fields.items():
        if values is None:
            out[name] = [None] * len(shown)
            continue
        picked = np.asarray(values)[shown].tolist()
        if picked and isinstance(picked[0], float):
            picked = [None if x != x else x for x in picked]  # NaN is not equal to itself
        out[name] = picked
    return out


def rows_of(columns: Mapping[str, list[Any]], model: type[M]) -> list[M]:
    """One ``model`` per row of ``columns``, validated in one call."""
    names = list(columns)
    rows = [dict(zip(names, row, strict=True)) for row in zip(*columns.values(), strict=True)]
    return _adapter(model).validate_python(rows)


@functools.cache
def _adapter(model: type[M]) -> TypeAdapter[list[M]]:
    return TypeAdapter(list[model])  # type: ignore[valid-type]

"""A categorical metric's trend: the values a chart shows, over every window kept.

The windows' counts are read in a few round trips (:func:`read_counts_many`), the values
shown picked from the estimate pooled over the windows, and each window's statistics
computed for those values only (:func:`aggregator.stats.series.estimate_series`). In
full: docs/architecture/read-side.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aggregator.query.answers import (
    TREND_FIELDS,
    TREND_VALUES,
    EstimateRow,
    Rest,
    TrendColumns,
    TrendCompact,
    TrendPoint,
)
from aggregator.query.estimators.base import Ask, Reader, per_device_now
from aggregator.query.paging import ALL, Rows, columns_of, rows_of
from aggregator.query.window import read_counts_many
from aggregator.stats.accounting import reports_per_device
from aggregator.stats.intervals import json_float
from aggregator.stats.series import Series, estimate_series, round_to_error
from client_sdk.mechanisms import PostRandomization
from client_sdk.wire import MetricDefinition

__all__ = ["categorical_trend", "trend_rows"]


def trend_rows(asked: Rows | None, k: int) -> Rows:
    """The values a trend shows: as asked, else every value of a domain of
    :data:`TREND_VALUES`, else the top :data:`TREND_VALUES`."""
    rows = asked or Rows()
    if rows.every or rows.how != ALL:  # asked for
        return rows
    if k <= TREND_VALUES:
        return Rows(every=True, columns=rows.columns)
    return Rows(top=TREND_VALUES, columns=rows.columns)


def categorical_trend(
    reader: Reader,
    definition: MetricDefinition,
    windows: list[str],
    ask: Ask,
    sequence: bool,
    fields: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    """The fields of a categorical :class:`~aggregator.query.answers.Trend` beyond its
    head: ``windows`` (or ``columns``, or ``compact`` with ``fields``: those statistics
    only, rounded to their standard errors), ``values_total``, ``shown``.

    Raises:
        ValueError: ``ask.rows`` names a value the metric does not have.
    """
    k = definition.k
    counts = read_counts_many(reader.client, definition, windows)
    n = np.array([c.n for c in counts], dtype=np.int64)
    support = np.array([c.support for c in counts], dtype=np.int64).reshape(len(counts), k)
    now = per_device_now(reader, definition)  # as a window's answer reads it
    created = reader.registry.created(definition.name, definition.version)
    bounds = [reports_per_device(definition, created, w, now).bound for w in windows]
    rows = trend_rows(ask.rows, k)
    shown = rows.pick(_pooled(definition, n, support), definition.domain)
    computed = TREND_FIELDS if fields is None else fields  # the full answer has them all
    series = estimate_series(
        definition.oracle,
        n,
        support,
        shown,
        ask.confidence,
        reports_per_device=np.array(bounds, dtype=float),
        estimand=ask.estimand,
        multiplicity=ask.mode,
        sequence=sequence and not {"cs_low", "cs_high"}.isdisjoint(computed),
        norm_sub="norm_sub" in computed,
    )
    labels = [definition.domain[i] for i in shown]
    hidden = k - len(set(shown.tolist()))
    out: dict[str, Any] = {"values_total": k, "shown": rows.how, "windows": []}
    if fields is not None:
        out["compact"] = _compact(series, windows, labels, hidden, fields)
    elif rows.columns:
        out["columns"] = _columns(series, windows, bounds, labels, hidden)
    else:
        out["windows"] = [
            _point(series, w, window, bounds[w], labels, hidden, sequence)
            for w, window in enumerate(windows)
        ]
    return out


def _pooled(definition: MetricDefinition, n: np.ndarray, support: np.ndarray) -> np.ndarray:
    """The estimate over every window at once: what the top values are ranked by."""
    total = int(n.sum())
    if not total or isinstance(definition.mechanism, PostRandomization):
        return support.sum(axis=0).astype(np.float64)  # PRAM: by support count
    return np.asarray(
        definition.oracle.debias(support.sum(axis=0).astype(np.float64), total), dtype=np.float64
    )


def _point(
    s: Series,
    w: int,
    window: str,
    bound: int,
    labels: list[str],
    hidden: int,
    sequence: bool,
) -> TrendPoint:
    empty = int(s.n[w]) == 0
    fields = {
        "value": np.asarray(labels, dtype=object),
        "frequency": s.frequency[w],
        "std_error": s.std_error[w],
        "ci_low": s.ci_low[w],
        "ci_high": s.ci_high[w],
        "norm_sub": s.norm_sub[w],
        "support_count": s.support[w],
        "cs_low": s.cs_low[w],
        "cs_high": s.cs_high[w],
        "p_value": s.p_value[w],
        "distinguishable_from_zero": None if empty else s.distinguishable[w],
        "cs_p_value": s.cs_p_value[w],
        "cs_distinguishable_from_zero": (
            None if empty or not sequence else s.cs_distinguishable[w]
        ),
    }
    table = columns_of(fields, np.arange(len(labels)))
    rest = None
    if hidden:
        rest = Rest(
            values=hidden,
            frequency=json_float(float(s.rest_frequency[w])),
            norm_sub=json_float(float(s.rest_norm_sub[w])),
        )
    return TrendPoint(
        window=window,
        n=int(s.n[w]),
        reports_per_device=bound,
        estimates=rows_of(table, EstimateRow),
        rest=rest,
    )


def _columns(
    s: Series, windows: list[str], bounds: list[int], labels: list[str], hidden: int
) -> TrendColumns:
    def by_value(a: np.ndarray) -> list[list[float | None]]:
        return [[None if x != x else x for x in column] for column in a.T.tolist()]

    return TrendColumns.model_construct(
        window=windows,
        n=s.n.tolist(),
        reports_per_device=bounds,
        values=labels,
        frequency=by_value(s.frequency),
        std_error=by_value(s.std_error),
        ci_low=by_value(s.ci_low),
        ci_high=by_value(s.ci_high),
        cs_low=by_value(s.cs_low),
        cs_high=by_value(s.cs_high),
        rest_frequency=[None if x != x or not hidden else x for x in s.rest_frequency.tolist()],
    )


def _compact(
    s: Series, windows: list[str], labels: list[str], hidden: int, fields: tuple[str, ...]
) -> TrendCompact:
    def by_value(a: np.ndarray) -> list[list[float | None]]:
        rounded = round_to_error(a, s.std_error)
        return [[None if x != x else x for x in column] for column in rounded.T.tolist()]

    found: dict[str, Any] = {name: by_value(getattr(s, name)) for name in fields}
    if hidden:
        live = s.n > 0
        finest = np.full(len(windows), np.nan)
        finest[live] = np.min(s.std_error[live], axis=1, initial=np.inf)
        rest = round_to_error(s.rest_frequency, finest)
        found["rest_frequency"] = [None if x != x else x for x in rest.tolist()]
    return TrendCompact.model_construct(
        window=windows, n=s.n.tolist(), values=labels, fields=list(fields), **found
    )

"""An export's rows: every window's counts and estimates, as ``ldp export`` writes them.

Flask-free, as the rest of the read side: ``GET /v1/export`` (which windows) and
``GET /v1/export/<name>`` (one window's rows) answer with these functions, and ``ldp
export`` / ``ldp estimates`` call them directly when they read Redis themselves. The
estimates are :func:`aggregator.query.estimators.estimate_window`'s, the function
``GET /v1/estimates`` answers with, from the same counts read once, so a row holds the
API's very numbers; the counts beside them (support counts, or a numeric metric's Σy and
Σy² as exact decimal text) let anyone recompute them later.
See docs/guides/data-lifecycle.md.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, date, datetime
from itertools import combinations
from typing import TYPE_CHECKING, Any

from aggregator.query.answers import (
    DistributionEstimates,
    Estimates,
    ExportRow,
    MeanEstimate,
    StringEstimates,
)
from aggregator.query.estimators import Ask, Reader, estimate_window, estimator_for
from aggregator.query.segments import segment_estimates
from aggregator.query.suppression import HiddenGroups, hidden_groups
from aggregator.query.window import list_windows
from aggregator.stats.intervals import check_estimand, json_float, population_refused, z_value
from aggregator.stats.joint import consistent_tables, estimate_marginal, marginal_support
from aggregator.stats.segments import DEFAULT_MIN_SEGMENT_REPORTS
from ldp_store import schema

if TYPE_CHECKING:
    import redis

    from client_sdk.wire import MetricDefinition

__all__ = ["COLUMNS", "DISTRIBUTION_COLUMNS", "distribution_rows", "export_windows", "window_rows"]

COLUMNS = tuple(ExportRow.model_fields)
"""One row's columns, in order (:class:`~aggregator.query.answers.ExportRow` says what
each holds)."""


def export_windows(
    client: redis.Redis, definition: MetricDefinition, granularity: str | None, since: date | None
) -> list[str]:
    """The version's windows to export, oldest first (``all`` last).

    Args:
        client: Redis.
        definition: the metric version.
        granularity: ``hour``, ``day`` or ``all`` only (None: every window).
        since: only hour and day windows starting on or after this UTC date.
    """

    chosen = []
    for window in list_windows(client, definition):
        kind = window.partition(":")[0]
        if granularity is not None and kind != granularity:
            continue
        span = schema.window_span(window)
        if since is not None:
            start = datetime.combine(since, datetime.min.time(), UTC).timestamp()
            if span is None or span[0] < start:
                continue
        chosen.append(window)
    return sorted(chosen, key=lambda w: (w == "all", w))


def _start(window: str) -> str:

    span = schema.window_span(window)
    if span is None:
        return ""
    return datetime.fromtimestamp(span[0], UTC).isoformat().replace("+00:00", "Z")


def window_rows(
    reader: Reader,
    definition: MetricDefinition,
    window: str,
    confidence: float,
    min_segment_reports: int | None = None,
    stats: Any = None,
    hidden: HiddenGroups | None = None,
    estimand: str = "reporters",
    ranges: Sequence[tuple[float, float]] = (),
    quantiles: Sequence[float] | None = None,
) -> Iterator[dict[str, Any]]:
    """The rows of one window: counts read once, estimated as the API does (a breakdown's
    hidden groups have no row, as ``?by=`` shows none: groups below
    ``min_segment_reports`` reports, default
    :data:`~aggregator.stats.segments.DEFAULT_MIN_SEGMENT_REPORTS`, and those held back
    with them across windows).

    ``stats``: the window's statistic if the caller read it (its estimator's ``read``);
    ``hidden``: every window's hidden groups if the caller read them (``ldp export`` reads
    them once for all its windows); read here otherwise. ``estimand``: whose share (or
    mean) the intervals are for, named in every row.

    Raises:
        ValueError: ``estimand`` population for a string metric (not offered: its
            discovered values' intervals are the reporters' only).
    """

    _check_offered(definition, estimand)
    m = definition.mechanism
    head = {
        "metric": definition.name,
        "version": definition.version,
        "kind": definition.kind,
        "mechanism": m.name,
        "epsilon": m.epsilon,
        "window": window,
        "window_start": _start(window),
        "confidence": confidence,
        "estimand": estimand,
    }
    if stats is None:
        stats = estimator_for(definition).read(reader, definition, window)
    if definition.kind == "joint":
        yield from _joint_rows(definition, stats.support, confidence, head, estimand)
        return
    ask = _ask(definition.kind, confidence, estimand, ranges, quantiles)
    body = estimate_window(reader, definition, window, ask, stats)
    if isinstance(body, DistributionEstimates):
        yield from distribution_rows(head, body)
        return
    if definition.dimensions and hidden is None:  # read after the counts: they only grow
        minimum = min_segment_reports or DEFAULT_MIN_SEGMENT_REPORTS
        hidden = hidden_groups(reader.client, definition, minimum, [window])
    if isinstance(body, StringEstimates):
        yield from _string_rows(head, body)
        return
    if isinstance(body, MeanEstimate):
        yield _mean_row(head, stats, body)
    else:
        assert isinstance(body, Estimates)  # joint metrics' rows are _joint_rows'
        yield from _frequency_rows(head, body)
    yield from _segment_rows(reader, definition, window, ask, head, hidden)


def _check_offered(definition: MetricDefinition, estimand: str) -> None:
    """Raises ValueError for an unknown estimand, or population where the metric's kind
    does not offer it."""
    check_estimand(estimand)
    why = population_refused(definition.kind, estimand)
    if why is not None:
        raise ValueError(
            f"estimand population is not offered for {definition.kind} metrics "
            f"({definition.name!r}): {why}"
        )


def _ask(
    kind: str,
    confidence: float,
    estimand: str,
    ranges: Sequence[tuple[float, float]],
    quantiles: Sequence[float] | None,
) -> Ask:
    """What the API is asked for a window of a metric of ``kind``: a distribution's
    ranges and quantiles too."""
    if kind != "distribution":
        return Ask(confidence=confidence, estimand=estimand)
    return Ask(
        confidence=confidence,
        estimand=estimand,
        ranges=list(ranges),
        quantiles=None if quantiles is None else list(quantiles),
    )


def _mean_row(head: dict[str, Any], stats: Any, body: MeanEstimate) -> dict[str, Any]:
    """A mean's row: its sums in units beside the estimate."""
    return {
        **head,
        "n": stats.n,
        "reports_per_device": 1,
        "sum_units": str(stats.total),
        "sum_sq_units": str(stats.total_sq),
        "estimate": body.mean,
        "std_error": body.std_error,
        "ci_low": body.ci_low,
        "ci_high": body.ci_high,
        "cs_low": body.cs_low,
        "cs_high": body.cs_high,
    }


def _string_rows(head: dict[str, Any], body: StringEstimates) -> Iterator[dict[str, Any]]:
    """A string metric's rows: one per discovered value."""
    for r in body.estimates:
        yield {
            **head,
            "n": body.n,
            "reports_per_device": 1,
            "value": r.value,
            "estimate": r.frequency,
            "std_error": r.std_error,
            "ci_low": r.ci_low,
            "ci_high": r.ci_high,
        }


def quantile_label(p: float) -> str:
    """``p50``, ``p95``, ``p99.9``: a quantile's row label."""
    return f"p{100 * p:.10g}"


DISTRIBUTION_COLUMNS = (
    "metric",
    "version",
    "window",
    "n",
    "confidence",
    "value",
    "estimate",
    "std_error",
    "ci_low",
    "ci_high",
    "band_low",
    "band_high",
)
"""A distribution's CSV from ``GET /v1/estimates/<name>?format=csv``: the export's rows
(:func:`distribution_rows`), the columns a distribution fills."""


def distribution_rows(head: dict[str, Any], body: Any) -> Iterator[dict[str, Any]]:
    """A distribution's rows: each quantile (``p50``…: the estimate is the value, the
    interval the band's inversion), each range asked (``range [a, b)``), each bin
    (``[a, b)``: its share), then the CDF at each band point (``< x``: the share below x,
    its pointwise interval and the simultaneous band)."""
    common = {**head, "n": body.n, "reports_per_device": 1}
    for q in body.quantiles:
        yield {
            **common,
            "value": quantile_label(q.p),
            "estimate": q.value,
            "std_error": None,
            "ci_low": q.ci_low,
            "ci_high": q.ci_high,
        }
    shares = [("range ", r) for r in body.ranges] + [("", b) for b in body.bins]
    for prefix, r in shares:
        yield {
            **common,
            "value": f"{prefix}[{r.low:.6g}, {r.high:.6g})",
            "estimate": r.share,
            "std_error": r.std_error,
            "ci_low": r.ci_low,
            "ci_high": r.ci_high,
        }
    z = z_value(body.confidence) if body.cdf else 0.0
    for point in body.cdf:
        yield {
            **common,
            "value": f"< {point.value:.6g}",
            "estimate": point.cdf,
            "std_error": point.std_error,
            "ci_low": point.cdf - z * point.std_error,
            "ci_high": point.cdf + z * point.std_error,
            "band_low": point.band_low,
            "band_high": point.band_high,
        }


def _segment_rows(
    reader: Any,
    definition: MetricDefinition,
    window: str,
    ask: Ask,
    head: dict[str, Any],
    hidden: HiddenGroups | None,
) -> Iterator[dict[str, Any]]:
    """The shown groups of a breakdown by each public dimension, as ``?by=`` answers
    them (suppressed groups have no row: an export releases what the API releases, under
    the same ``LDP_MIN_SEGMENT_REPORTS``)."""

    if hidden is None:  # no dimensions
        return
    for dimension, _ in definition.dimensions:
        breakdown = segment_estimates(
            reader, definition, window, dimension, ask, hidden.minimum, hidden
        )
        for group in breakdown.groups:
            found = group.estimates
            if found is None:
                continue
            tag = {**head, "segment": f"{dimension}={group.value}"}
            if isinstance(found, MeanEstimate):
                yield {
                    **tag,
                    "n": found.n,
                    "reports_per_device": 1,
                    "estimate": found.mean,
                    "std_error": found.std_error,
                    "ci_low": found.ci_low,
                    "ci_high": found.ci_high,
                    "cs_low": found.cs_low,
                    "cs_high": found.cs_high,
                }
            else:
                yield from _frequency_rows(tag, found)


def _frequency_rows(head: dict[str, Any], body: Any) -> Iterator[dict[str, Any]]:
    """A categorical estimate's rows, one per value."""
    for row in body.estimates:
        yield {
            **head,
            "n": body.n,
            "reports_per_device": body.reports_per_device,
            "value": row.value,
            "support_count": row.support_count,
            "estimate": row.frequency,
            "std_error": row.std_error,
            "ci_low": row.ci_low,
            "ci_high": row.ci_high,
            "cs_low": row.cs_low,
            "cs_high": row.cs_high,
            "norm_sub": row.norm_sub,
            "p_value": row.p_value,
            "distinguishable_from_zero": row.distinguishable_from_zero,
        }


def _joint_rows(
    definition: MetricDefinition,
    counts: Any,
    confidence: float,
    head: dict[str, Any],
    estimand: str,
) -> Iterator[dict[str, Any]]:
    """A joint metric's rows: every cell of every 1- and 2-way marginal, ``value`` as
    ``attr=label;attr=label``, ``n`` its group's reports, ``support_count`` the cell's
    summed support (C_S), ``norm_sub`` the consistent (post-processed) estimate."""

    m = definition.joint
    tables = consistent_tables(m, counts) if counts[: len(m.groups)].sum() else None
    d = len(definition.attributes)
    for attrs in [*((a,) for a in range(d)), *combinations(range(d), 2)]:
        est = estimate_marginal(m, counts, attrs, confidence, tables=tables, estimand=estimand)
        support = marginal_support(m, counts, attrs)[2]
        cells = [[]]  # type: list[list[str]]
        for a in attrs:
            name, labels = definition.attributes[a]
            cells = [[*c, f"{name}={label}"] for c in cells for label in labels]
        for i, cell in enumerate(cells):
            yield {
                **head,
                "n": est.n,
                "reports_per_device": 1,
                "value": ";".join(cell),
                "support_count": int(support[i]),
                "estimate": json_float(est.frequencies[i]),
                "std_error": json_float(est.std_errors[i]),
                "ci_low": json_float(est.ci_low[i]),
                "ci_high": json_float(est.ci_high[i]),
                "norm_sub": json_float(est.consistent[i]),
                "p_value": json_float(est.p_values[i]),
                "distinguishable_from_zero": bool(est.distinguishable[i]) if est.n else None,
            }

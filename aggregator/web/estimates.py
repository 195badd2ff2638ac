"""The estimates views: ``GET /v1/estimates/<name>`` (JSON, or CSV with ``?format=csv``),
``…/trend``, ``?marginal=`` for joint metrics and ``?by=`` for public dimensions.

The API keeps no state: every answer is computed from the counts in Redis by the read
package (:func:`aggregator.query.estimators.estimate_window`); these views parse the
request and render the answer. The fields of each answer: docs/reference/http.md; what
``frequency``, ``norm_sub``, the intervals and ``shuffled_epsilon`` mean:
docs/statistics/intervals.md and docs/statistics/shuffling.md.
"""

from __future__ import annotations

import csv
import functools
import io
import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, NoReturn

import redis
from flask import Blueprint, Flask, Response, current_app, request
from werkzeug.exceptions import BadRequest, NotFound

from aggregator.query.answers import (
    GRANULARITIES,
    TREND_DEFAULT_FIELDS,
    TREND_FIELDS,
    DistributionEstimates,
    Estimates,
    JointEstimates,
    MeanEstimate,
    SegmentEstimates,
    StringEstimates,
    Trend,
)
from aggregator.query.estimators import Ask, Reader, estimate_window, trend
from aggregator.query.estimators.numeric import NUMERIC_FIELDS
from aggregator.query.export import DISTRIBUTION_COLUMNS, distribution_rows
from aggregator.query.paging import Rows
from aggregator.query.segments import segment_estimates
from aggregator.query.warm import Replay, Warmer
from aggregator.safe_text import comma_list, csv_text, not_among
from aggregator.stats.intervals import (
    ESTIMANDS,
    REPORTERS,
    check_confidence,
    check_estimand,
    population_refused,
)
from aggregator.stats.lazy import scipy_special, scipy_stats
from aggregator.stats.multiplicity import MULTIPLICITIES, multiplicity_of
from aggregator.stats.segments import DEFAULT_MIN_SEGMENT_REPORTS, checked_min_segment_reports
from aggregator.web.access import UNAUTHORIZED, documented_read
from aggregator.web.downloads import csv_download
from aggregator.web.joint import joint_csv, requested
from aggregator.web.models import (
    COMPACT,
    DEFAULT_CONFIDENCE,
    FORMATS,
    MAX_CONFIDENCE,
    MAX_NUMBERS_QUERY,
    MIN_CONFIDENCE,
    NUMBERS_PATTERN,
    RANGE_PATTERN,
    TREND_FORMATS,
    EstimatesQuery,
    TrendQuery,
)
from aggregator.web.read_guard import GUARD, ReadGuard, discovery_replay, guarded
from aggregator.web.status import alarm_rate, retention_of
from aggregator.web.strings import parse_candidates
from client_sdk.wire import MetricDefinition
from ldp_api.context import Slot, on_worker_start, shared
from ldp_api.models import Error, MetricPath, answer
from ldp_api.openapi import UNAVAILABLE, Header, Media, Reply
from ldp_store import schema
from ldp_store.registry import Registry
from ldp_store.retention import expired_message

__all__ = [
    "bp",
    "confidence_asked",
    "definition_of",
    "estimand_asked",
    "install_warmer",
    "reads_forwarded",
    "min_segment_reports",
    "refuse_expired",
    "window_asked",
]

bp = Blueprint("estimates", __name__)

ROW_FIELDS = (
    "value",
    "frequency",
    "std_error",
    "ci_low",
    "ci_high",
    "norm_sub",
    "support_count",
    "cs_low",
    "cs_high",
    "p_value",
    "distinguishable_from_zero",
    "cs_p_value",
    "cs_distinguishable_from_zero",
)
"""A categorical estimate's CSV columns per value."""

_NOT_FOUND = Reply("No such metric or version.", Error)

CSV_HEAD = (
    "metric",
    "version",
    "window",
    "n",
    "confidence",
    "interval",
    "estimand",
    "reports_per_device",
)
"""A categorical estimate's CSV columns before the per-value ones."""

CSV_TAIL = ("multiplicity", "level")
"""A categorical estimate's CSV columns after the per-value ones: what its flags and
intervals account for (each, fdr, simultaneous) and the level each interval is read at."""

_CSV = Media(
    "With format=csv: one row per value (categorical: "
    f"{', '.join(CSV_HEAD)}, {', '.join(ROW_FIELDS)}, {', '.join(CSV_TAIL)}) or a single row "
    "(numeric: metric, version, window, n, confidence, range_low, range_high, "
    f"{', '.join(NUMERIC_FIELDS)}) or the export's rows (distribution: "
    f"{', '.join(DISTRIBUTION_COLUMNS)}; value p50…, range [a, b), [a, b) for a bin, < x for "
    "the CDF with its simultaneous band); empty cells for null."
)


def _services() -> tuple[redis.Redis, Registry]:
    ext = shared()
    return ext.redis, ext.registry


def definition_of(registry: Registry, name: str) -> MetricDefinition:
    """The metric version a request names (``?version=``, default the current one).

    Raises:
        BadRequest: a version that is not a positive integer.
        NotFound: no such metric or version.
    """
    raw_version = request.args.get("version")
    version: int | None = None
    if raw_version is not None:
        if not raw_version.isdigit() or int(raw_version) < 1:
            raise BadRequest(f"version must be a positive integer, got {raw_version!r}")
        version = int(raw_version)
    definition = registry.get(name, version)
    if definition is None:
        which = f"metric {name!r}" + (f" version {version}" if version else "")
        raise NotFound(f"unknown {which}")
    return definition


def window_asked() -> str:
    """``?window=`` (default all).

    Raises:
        BadRequest: not all, an hour or a day of a date that exists.
    """
    window = request.args.get("window", "all")
    try:
        schema.window_span(window)  # the pattern, and a date and hour that exist
    except ValueError:
        raise BadRequest(
            f"window must be 'all', 'hour:YYYY-MM-DDTHH' or 'day:YYYY-MM-DD' (UTC) of a date "
            f"that exists, got {window[:40]!r}"
        ) from None
    return window


def refuse_expired(registry: Registry, definition: MetricDefinition, window: str) -> None:
    """404 for a window past its retention; a window that ended before the version was
    created never existed and keeps its answer (no reports).

    Raises:
        NotFound: with when the window expired and how long its kind is kept.
    """
    policy = retention_of(definition)
    at = policy.expires_at(window)
    if at is None or at > time.time():
        return
    created = registry.created(definition.name, definition.version)
    span = schema.window_span(window)
    if created is not None and span is not None and span[1] <= created:
        return
    raise NotFound(expired_message(definition, window, policy))


def confidence_asked() -> float:
    """``?confidence=``, checked against the limits the query models document.

    Raises:
        BadRequest: not a number in [MIN_CONFIDENCE, MAX_CONFIDENCE].
    """
    raw = request.args.get("confidence", str(DEFAULT_CONFIDENCE))
    allowed = f"a number in [{MIN_CONFIDENCE}, {MAX_CONFIDENCE}]"
    try:
        confidence = float(raw)
    except ValueError:
        raise BadRequest(f"confidence must be {allowed}, got {raw[:40]!r}") from None
    if not (math.isfinite(confidence) and MIN_CONFIDENCE <= confidence <= MAX_CONFIDENCE):
        raise BadRequest(f"confidence must be {allowed}, got {raw[:40]!r}")
    return confidence


def _confidence() -> tuple[float, bool, str | None]:
    """The level, ``simultaneous`` and ``multiplicity`` asked for (checked together)."""
    confidence = confidence_asked()
    simultaneous = request.args.get("simultaneous", "false").lower() in ("1", "true", "yes")
    multiplicity = request.args.get("multiplicity")
    try:
        multiplicity_of(simultaneous, multiplicity)
    except ValueError:
        raise BadRequest(
            f"multiplicity must be one of {', '.join(MULTIPLICITIES)}"
            + (" (simultaneous=true asks for simultaneous)" if simultaneous else "")
            + f", got {(multiplicity or '')[:40]!r}"
        ) from None
    return confidence, simultaneous, multiplicity


def rows_asked(definition: MetricDefinition, fmt: str) -> Rows:
    """The rows asked for (``?top=``, ``?values=``, ``?offset=&limit=``, the column form);
    a CSV holds every row unless asked otherwise.

    Raises:
        BadRequest: a bad number, two ways of choosing rows at once, values a categorical
            metric does not have, or values of a joint metric (its cells: top or a page).
    """
    try:
        rows = Rows.parse(request.args)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    if rows.values is not None:
        if definition.kind == "joint":
            raise BadRequest(
                "values: a joint metric's cells are chosen with top, offset/limit or values=all"
            )
        if definition.kind == "categorical":
            unknown = not_among(rows.values, set(definition.domain))
            if unknown:
                raise BadRequest(f"values: not values of {definition.name!r}: {unknown[:5]}")
    if fmt == "csv" and rows == Rows():
        return Rows(every=True)
    return rows


def estimand_asked(definition: MetricDefinition) -> str:
    """``?estimand=`` (default reporters).

    Raises:
        BadRequest: not one of the estimands, or population of a string metric.
    """
    raw = request.args.get("estimand", REPORTERS)
    if raw not in ESTIMANDS:
        raise BadRequest(f"estimand must be reporters or population, got {raw[:40]!r}")
    why = population_refused(definition.kind, raw)
    if why is not None:
        raise BadRequest(
            f"estimand=population is not offered for {definition.kind} metrics "
            f"({definition.name!r}): {why} (estimand=reporters)"
        )
    return raw


def min_segment_reports(app: Flask | None = None) -> int:
    """The configured least reports of a shown group of a breakdown by a public dimension
    (``LDP_MIN_SEGMENT_REPORTS``, default
    :data:`~aggregator.stats.segments.DEFAULT_MIN_SEGMENT_REPORTS`).

    Raises:
        ValueError: not an integer of at least 1.
    """
    config = (app or current_app).config
    return checked_min_segment_reports(
        config.get("MIN_SEGMENT_REPORTS", DEFAULT_MIN_SEGMENT_REPORTS)
    )


def segments_csv(body: SegmentEstimates) -> Response:
    """A breakdown as CSV: one row per (group, value) of the shown groups (one row per
    group for a numeric metric), one row with the reason for each group not shown."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["by", "group", "shown", "reason", *CSV_HEAD, *ROW_FIELDS, *CSV_TAIL, "mean"])
    for group in body.groups:
        head = [csv_text(body.by), csv_text(group.value), group.shown, group.reason or ""]
        found = group.estimates
        if found is None or isinstance(found, MeanEstimate):
            n, mean = ("", "") if found is None else (found.n, found.mean)
            tail = [""] * (len(CSV_HEAD) - 5 + len(ROW_FIELDS) + len(CSV_TAIL))
            writer.writerow(
                [*head, body.metric, body.version, body.window, n, body.confidence, *tail, mean]
            )
            continue
        for row in found.estimates:
            writer.writerow(head + _csv_row(found, row) + [""])
    return csv_download(out.getvalue(), body, f"-by-{body.by}")


def _csv_row(body: Estimates, row: Any) -> list[Any]:
    """One estimate's cells: :data:`CSV_HEAD`'s, :data:`ROW_FIELDS`' (the value a label,
    never a formula), then the multiplicity and level of :data:`CSV_TAIL`."""
    cells = {**answer(row), "value": csv_text(row.value)}
    return (
        [body.metric, body.version, body.window, body.n, body.confidence]
        + [body.interval, body.estimand, body.reports_per_device]
        + ["" if cells[c] is None else cells[c] for c in ROW_FIELDS]
        + [body.multiplicity, "" if body.level is None else body.level]
    )


def _csv(body: Estimates) -> Response:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([*CSV_HEAD, *ROW_FIELDS, *CSV_TAIL])
    for row in body.estimates:
        writer.writerow(_csv_row(body, row))
    return csv_download(out.getvalue(), body)


def _numeric_csv(body: MeanEstimate) -> Response:
    out = io.StringIO()
    writer = csv.writer(out)
    head = ["metric", "version", "window", "n", "confidence", "range_low", "range_high"]
    writer.writerow([*head, *NUMERIC_FIELDS])
    cells = answer(body)
    writer.writerow(
        [body.metric, body.version, body.window, body.n, body.confidence]
        + body.range
        + ["" if cells[c] is None else cells[c] for c in NUMERIC_FIELDS]
    )
    return csv_download(out.getvalue(), body)


def _distribution_csv(body: DistributionEstimates) -> Response:
    """The export's rows of a distribution (quantiles, ranges, bins, CDF with its band)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, DISTRIBUTION_COLUMNS, extrasaction="ignore", restval="")
    writer.writeheader()
    head = {"metric": body.metric, "version": body.version, "window": body.window}
    for row in distribution_rows({**head, "confidence": body.confidence}, body):
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return csv_download(out.getvalue(), body)


MAX_RANGES = 20
"""Ranges one request may ask (each costs an O(D·h) solve)."""

MAX_QUANTILES = 50
"""Quantiles one request may ask."""


def _numbers(text: str, what: str, pattern: str) -> list[float]:
    """The numbers of ``?range=`` or ``?quantiles=``, as the document's pattern says."""
    if len(text) > MAX_NUMBERS_QUERY or re.fullmatch(pattern, text) is None:
        raise BadRequest(
            f"{what}: comma-separated decimal numbers (at most {MAX_NUMBERS_QUERY} "
            f"characters), got {text[:64]!r}"
        )
    return [float(x) for x in text.split(",")]


def distribution_asked(
    definition: MetricDefinition,
) -> tuple[list[tuple[float, float]], list[float] | None]:
    """``?range=a,b`` (repeatable) and ``?quantiles=p,…``: checked for their form on every
    metric (the document's pattern), for their values on a distribution metric (the only
    kind that reads them)."""
    ranges = []
    asked = request.args.getlist("range")
    pairs = [_numbers(text, "range", RANGE_PATTERN) for text in asked]
    text = request.args.get("quantiles")
    quantiles = None if text is None else _numbers(text, "quantiles", NUMBERS_PATTERN)
    if definition.kind != "distribution":
        return [], None
    if len(asked) > MAX_RANGES:
        raise BadRequest(f"range: at most {MAX_RANGES} ranges")
    for text, pair in zip(asked, pairs, strict=True):
        if not -math.inf < pair[0] <= pair[1] < math.inf:  # finite, ordered (NaN is not)
            raise BadRequest(f"range: two finite numbers a,b with a <= b, got {text[:64]!r}")
        ranges.append((pair[0], pair[1]))
    if quantiles is not None and (
        len(quantiles) > MAX_QUANTILES or not all(0 < p < 1 for p in quantiles)
    ):
        raise BadRequest(f"quantiles: at most {MAX_QUANTILES} numbers in (0, 1)")
    return ranges, quantiles


@bp.get("/v1/estimates/<name>")
@documented_read(
    "A metric's estimates with intervals in one window, as JSON or CSV.",
    {
        200: Reply(
            "The estimates.",
            (
                Estimates,
                MeanEstimate,
                StringEstimates,
                JointEstimates,
                DistributionEstimates,
                SegmentEstimates,
            ),
            {
                "Content-Disposition": Header(
                    'CSV only: attachment; filename="<metric>-v<version>-<window>.csv"'
                )
            },
            {"text/csv": _CSV},
        ),
        400: Reply(
            "A bad version, window, confidence, multiplicity, estimand (population of a "
            "string metric), format, or choice of rows (top, values, offset, limit).",
            Error,
        ),
        401: UNAUTHORIZED,
        404: Reply(
            "No such metric or version, or the window expired (the message says when, and "
            "how long its kind of window is kept).",
            Error,
        ),
        414: Reply(
            "The request line is longer than the web server takes (4,094 bytes, gunicorn's "
            "limit_request_line): every query parameter fits it alone, not all at their "
            "longest, percent-encoded, at once. Answered by the web server (not JSON)."
        ),
        503: UNAVAILABLE,
    },
    description="Computed from the counts in Redis on each request. Tables are sized to be "
    "read: every value (cell) while the answer holds at most 256 rows, else the top 256 "
    "by estimated frequency with the rest summed (rest); ?top=, ?values=, ?offset=&limit= "
    "choose others (?values=all: the full table) and ?format=columns sends each table as "
    "one array per field. Categorical metrics answer Estimates, numeric ones MeanEstimate "
    "(its kind is numeric), string ones "
    "StringEstimates (kind string: the discovered values, and ?candidates=a,b,c), joint "
    "ones JointEstimates (kind joint: ?marginal=a,b and ?by=a), distribution ones "
    "DistributionEstimates (kind distribution: the histogram, the CDF with a simultaneous "
    "band, ?range=a,b (repeatable) and ?quantiles=0.5,0.99); ?by=<dimension> of a metric "
    "with public dimensions answers SegmentEstimates (kind segments: one estimate per "
    "value, groups below LDP_MIN_SEGMENT_REPORTS not shown, nor any group a sum or "
    "difference of served figures in any windows would give, and why).",
    path=MetricPath,
    query=EstimatesQuery,
)
def get_estimates(name: str) -> Any:
    """Estimates of one metric version and window, as JSON or CSV."""
    client, registry = _services()
    definition = definition_of(registry, name)
    window = window_asked()
    refuse_expired(registry, definition, window)
    confidence, simultaneous, multiplicity = _confidence()
    estimand = estimand_asked(definition)
    fmt = _format_asked()
    rows = rows_asked(definition, fmt)
    candidates = _candidates_asked(definition, fmt)
    ask = Ask(confidence, simultaneous, estimand, multiplicity, rows=rows)
    by = request.args.get("by")
    if by is not None and by in dict(definition.dimensions):
        reader = Reader(client, registry, guarded)
        minimum = min_segment_reports()
        started = time.perf_counter()
        breakdown = segment_estimates(reader, definition, window, by, ask, minimum)
        spec = _warm_spec(definition, window, ask, by=by, minimum=minimum)
        _keep_warm(spec, definition, started)
        return segments_csv(breakdown) if fmt == "csv" else answer(breakdown)
    if by is not None and definition.kind != "joint":
        _refuse_dimension(definition, by)
    ranges, quantiles = distribution_asked(definition)
    marginals: list[list[int]] = []
    if definition.kind == "joint":
        marginals = requested(definition, request.args.get("marginal"), request.args.get("by"))
    ask = replace(
        ask,
        with_alarms=True,
        alarm_rate=alarm_rate(),
        candidates=candidates,
        marginals=marginals,
        ranges=ranges,
        quantiles=quantiles,
    )
    started = time.perf_counter()
    found = estimate_window(Reader(client, registry, guarded), definition, window, ask)
    if definition.kind in WARM_KINDS:
        _keep_warm(_warm_spec(definition, window, ask), definition, started)
    elif definition.kind == "string":  # the window's discovery and its intervals
        spec = {**_warm_head(definition, window, ask.confidence), "read": "discovery"}
        _keep_warm(spec, definition, started)
    return _csv_of(found) if fmt == "csv" else answer(found)


WARM_KINDS = ("categorical", "joint")
"""The kinds whose statistics a process keeps (:mod:`aggregator.query.memo`), hence
worth computing again before they are asked for (a breakdown: its groups' counts and
each group's statistics, whatever its kind). A string metric's window keeps its
discovery in the read guard, warmed through it (read ``discovery``)."""

WARM_ROWS = Rows(top=1)
"""The rows a warm-up builds: the statistics kept are those of every row, whichever are
shown; one row is the least answer to build around them."""

WARMER: Slot[Warmer] = Slot("ldp_warmer", Warmer)
"""The app's warmer (one per process: :mod:`aggregator.query.warm`)."""


def install_warmer(app: Flask) -> None:
    """Give ``app`` its warmer, reading with its Redis and registry, and started in each
    process that serves the app (its lane's recorded reads warm before a request)."""
    ext = shared(app=app)
    revive = functools.partial(_revive, GUARD.get(app))
    warmer = Warmer(Reader(ext.redis, ext.registry), revive=revive)
    WARMER.attach(app, warmer)
    on_worker_start(app, functools.partial(_worker_start, warmer))


def _worker_start(warmer: Warmer) -> None:
    """A web worker about to serve: one that answers reads loads scipy now (0.3–0.5 s of
    imports the first read would otherwise pay; the app imports it lazily, see
    :mod:`aggregator.stats.lazy`), then its warmer starts."""
    if warmer.revive is not None:  # not a process whose reads are forwarded
        scipy_special(), scipy_stats()
    warmer.start()


def reads_forwarded(app: Flask) -> None:
    """``app``'s estimates are served by other processes (``ldp serve``'s read workers):
    its warmer records, loads and warms nothing."""
    WARMER.get(app).revive = None


def _warm_spec(
    definition: MetricDefinition,
    window: str,
    ask: Ask,
    by: str | None = None,
    minimum: int | None = None,
) -> dict[str, Any]:
    """What a read's statistics are a function of, besides the counts (JSON, recorded in
    Redis: a metric version and query parameters, nothing of who asked): the rows shown
    and the form do not change them."""
    spec: dict[str, Any] = {
        **_warm_head(definition, window, ask.confidence),
        "simultaneous": ask.simultaneous,
        "estimand": ask.estimand,
        "multiplicity": ask.multiplicity,
    }
    if by is not None:
        return {**spec, "read": "segments", "by": by, "minimum": minimum}
    return {**spec, "read": "window", "marginals": [list(m) for m in ask.marginals]}


def _warm_head(definition: MetricDefinition, window: str, confidence: float) -> dict[str, Any]:
    """What every recorded read names: the metric version, the window, the confidence."""
    return {
        "metric": definition.name,
        "version": definition.version,
        "window": window,
        "confidence": confidence,
    }


def _warm_replay(guard: ReadGuard, definition: MetricDefinition, spec: Mapping[str, Any]) -> Replay:
    """The read of ``spec`` again, building the least answer (:data:`WARM_ROWS`); a
    string window's discovery through ``guard``.

    Raises:
        ValueError: a query no read asks (the read, a window, a level, a mode).
        KeyError, TypeError: a field missing or of another type.
    """
    window = str(spec["window"])
    schema.window_span(window)
    confidence = check_confidence(float(spec["confidence"]))
    if spec["read"] == "discovery" and definition.kind == "string":
        return discovery_replay(guard, definition, window, confidence)
    multiplicity = spec["multiplicity"]
    ask = Ask(
        confidence,
        bool(spec["simultaneous"]),
        check_estimand(str(spec["estimand"])),
        None if multiplicity is None else str(multiplicity),
        rows=WARM_ROWS,
    )
    ask.mode  # noqa: B018  # raises ValueError on an unknown mode
    if spec["read"] == "segments":
        by, minimum = str(spec["by"]), int(spec["minimum"])
        if by not in dict(definition.dimensions):
            raise ValueError(f"no dimension {by!r}")
        return lambda r: segment_estimates(r, definition, window, by, ask, minimum)
    if spec["read"] == "window" and definition.kind in WARM_KINDS:
        marginals = [[int(i) for i in m] for m in spec["marginals"]]
        warm = replace(ask, marginals=marginals)
        return lambda r: estimate_window(r, definition, window, warm)
    raise ValueError(f"no warm read {spec['read']!r} of a {definition.kind} metric")


def _revive(
    guard: ReadGuard, reader: Reader, spec: Mapping[str, Any]
) -> tuple[MetricDefinition, Replay] | None:
    """A recorded read's metric version and replay (a string window's discovery through
    ``guard``, the app's); None when the version is deleted or the metric retired
    (:data:`aggregator.query.warm.Revive`)."""
    name, version = str(spec["metric"]), int(spec["version"])
    definition = reader.registry.get(name, version)
    if definition is None or reader.registry.retired(name) is not None:
        return None
    return definition, _warm_replay(guard, definition, spec)


def _keep_warm(spec: dict[str, Any], definition: MetricDefinition, started: float) -> None:
    """Tell the app's warmer a read was served (it keeps the expensive ones warm)."""
    warmer = WARMER.find()
    if warmer is not None:
        seconds = time.perf_counter() - started
        warmer.note(spec, definition, _warm_replay(GUARD.get(), definition, spec), seconds)


def _format_asked() -> str:
    """``?format=``, one of :data:`FORMATS`."""
    fmt = request.args.get("format", FORMATS[0])
    if fmt not in FORMATS:
        raise BadRequest(f"format must be one of {', '.join(FORMATS)}, got {fmt[:40]!r}")
    return fmt


def _candidates_asked(definition: MetricDefinition, fmt: str) -> list[str]:
    """A string metric's ``?candidates=`` (and its estimates are JSON only)."""
    if definition.kind != "string":
        return []
    if fmt == "csv":
        raise BadRequest("a string metric's estimates are JSON only")
    try:
        return parse_candidates(request.args.get("candidates"))
    except ValueError as exc:
        raise BadRequest(f"candidates: {exc}") from None


def _refuse_dimension(definition: MetricDefinition, by: str) -> NoReturn:
    """The 400 of ``?by=`` naming no dimension of the metric."""
    names = [name for name, _ in definition.dimensions]
    raise BadRequest(
        f"by: metric {definition.name!r} has no dimension {by[:64]!r}; "
        + (f"its dimensions: {names}" if names else "it declares none")
    )


def _csv_of(found: Any) -> Any:
    """The CSV of an estimate (as JSON when its kind has none)."""
    writers: list[tuple[type, Callable[[Any], Any]]] = [
        (JointEstimates, joint_csv),
        (MeanEstimate, _numeric_csv),
        (DistributionEstimates, _distribution_csv),
        (Estimates, _csv),
    ]
    for kind, csv_of in writers:
        if isinstance(found, kind):
            return csv_of(found)
    return answer(found)


@bp.get("/v1/estimates/<name>/trend")
@documented_read(
    "One estimate per hour or day window, oldest first (a distribution: its quantiles).",
    {
        200: Reply("The windows.", Trend),
        400: Reply("A bad version, granularity, confidence, multiplicity or estimand.", Error),
        401: UNAUTHORIZED,
        404: _NOT_FOUND,
        503: UNAVAILABLE,
    },
    path=MetricPath,
    query=TrendQuery,
)
def get_trend(name: str) -> dict[str, Any]:
    """One estimate per hour or day window, oldest first."""
    client, registry = _services()
    definition = definition_of(registry, name)
    if definition.kind == "string":
        raise BadRequest(
            "a string metric has no trend: its values are discovered per window "
            "(GET /v1/estimates/<name>?window=hour:… for one window)"
        )
    if definition.kind == "joint":
        raise BadRequest(
            "a joint metric has no trend yet: ask one window's marginals "
            "(GET /v1/estimates/<name>?window=day:…&marginal=a,b)"
        )
    granularity = request.args.get("granularity", GRANULARITIES[0])
    if granularity not in GRANULARITIES:
        raise BadRequest(f"granularity must be hour or day, got {granularity!r}")
    confidence, simultaneous, multiplicity = _confidence()
    _, quantiles = distribution_asked(definition)
    fmt = request.args.get("format", COMPACT)
    if fmt not in TREND_FORMATS:
        raise BadRequest(f"format must be compact, json or columns, got {fmt[:40]!r}")
    fields = _trend_fields() if fmt == COMPACT else None
    ask = Ask(
        confidence=confidence,
        simultaneous=simultaneous,
        estimand=estimand_asked(definition),
        multiplicity=multiplicity,
        quantiles=quantiles,
        rows=rows_asked(definition, fmt),
    )
    reader = Reader(client, registry, guarded)
    found: Trend = trend(reader, definition, granularity, ask, fields=fields)
    return answer(found)


def _trend_fields() -> tuple[str, ...]:
    """``?fields=`` of a compact trend: statistics of :data:`TREND_FIELDS`, comma-separated
    (default :data:`TREND_DEFAULT_FIELDS`).

    Raises:
        BadRequest: an empty list, or a name not in :data:`TREND_FIELDS`.
    """
    raw = request.args.get("fields")
    if raw is None:
        return TREND_DEFAULT_FIELDS
    asked = tuple(dict.fromkeys(comma_list(raw)))
    unknown = not_among(asked, TREND_FIELDS)
    if unknown or not asked:
        raise BadRequest(f"fields must be some of {', '.join(TREND_FIELDS)}, got {unknown[:5]}")
    return asked

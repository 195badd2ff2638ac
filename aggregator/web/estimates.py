"""The estimates API: counts from Redis, turned into estimates with intervals on request.

``GET /v1/estimates/<name>`` answers the contract's JSON (or CSV with ``?format=csv``)::

    {"metric", "version", "mechanism", "epsilon", "n", "confidence", "window",
     "estimates": [{"value", "frequency", "std_error", "ci_low", "ci_high",
                    "norm_sub", "support_count", "distinguishable_from_zero"}],
     "alarms": [{"kind", "window", "statistic", "threshold", "p_value", "alpha",
                 "evidence", "values"}], "alarm_rate"}

``shuffled_epsilon`` is the central (ε, δ) towards whoever sees only the estimates
(amplification by shuffling, :mod:`aggregator.stats.shuffling`), with its condition.
``alarms`` lists the poisoning alarms (:mod:`aggregator.web.alarms`) of the window, or of
the newest hour and day windows when the window is ``all``.

``frequency`` is the unbiased estimate; ``norm_sub`` is the separately labelled
post-processed one (projected onto the probability simplex: biased, for display).
``GET /v1/estimates/<name>/trend?granularity=hour|day`` gives one estimate per window.
A window past its retention (:mod:`ldp_store.retention`) answers 404 with when it expired;
the trend leaves expired windows out.

A numeric metric's estimate is its mean, in the metric's units::

    {"metric", "version", "kind": "numeric", "mechanism", "epsilon", "n", "confidence",
     "window", "mean", "std_error", "ci_low", "ci_high", "range",
     "std_error_worst_case", "mean_clipped", "mechanism_params", "post_processing"}

``mean`` is unbiased; ``mean_clipped`` (clipped into the range) is post-processed. Its
trend has one ``{"window", "n", "mean", "std_error", "ci_low", "ci_high"}`` per window.
The API keeps no state: every answer is computed from the counts in Redis.
"""

from __future__ import annotations

import csv
import functools
import io
import math
import time
from typing import Any

import numpy as np
import redis
from flask import Blueprint, Response, request
from werkzeug.exceptions import BadRequest, NotFound

from aggregator.safe_text import csv_text
from aggregator.stats.anytime import frequency_cs, mean_cs
from aggregator.stats.codecs import Counts
from aggregator.stats.detect import DEFAULT_ALARM_RATE
from aggregator.stats.frequency import FrequencyEstimate, estimate_from_counts
from aggregator.stats.intervals import ESTIMANDS, POPULATION, REPORTERS, json_float
from aggregator.stats.numeric import NumericEstimate, NumericStats, estimate_mean
from aggregator.stats.shuffling import amplification
from aggregator.stream.counts import (
    ReportsPerDevice,
    list_windows,
    newest_arrival,
    read_counts,
    read_numeric,
    reports_per_device,
    reports_per_device_any,
)
from aggregator.web.access import READ_TOKEN, UNAUTHORIZED
from aggregator.web.alarms import alarm_models, alarm_rate, current_alarms, window_alarms
from aggregator.web.joint import JointEstimates, joint_csv, joint_estimates, requested
from aggregator.web.models import (
    DEFAULT_CONFIDENCE,
    FORMATS,
    GRANULARITIES,
    MAX_CONFIDENCE,
    MAX_TREND_WINDOWS,
    MIN_CONFIDENCE,
    EstimateRow,
    Estimates,
    EstimatesQuery,
    MeanEstimate,
    MeanTrendPoint,
    PoisoningAlarm,
    SegmentEstimates,
    ShuffledEpsilon,
    StringEstimates,
    Trend,
    TrendPoint,
    TrendQuery,
)
from aggregator.web.segments import min_segment_reports, segment_estimates
from aggregator.web.status import retention_of
from aggregator.web.strings import parse_candidates, string_estimates
from client_sdk.mechanisms import PostRandomization
from client_sdk.wire import MetricDefinition
from ldp_api.context import shared
from ldp_api.models import Error, Mechanism, MetricPath, answer
from ldp_api.openapi import UNAVAILABLE, Header, Media, Reply, documented
from ldp_store import schema
from ldp_store.registry import Registry
from ldp_store.retention import expired_message

__all__ = ["bp", "estimate_payload", "estimate_window", "numeric_payload"]

bp = Blueprint("estimates", __name__)

POST_PROCESSING_NOTE = (
    "norm_sub: the estimates projected onto the probability simplex (Norm-Sub); "
    "post-processed and biased, for display. frequency: unbiased."
)

NUMERIC_POST_PROCESSING_NOTE = (
    "mean_clipped: the mean clipped into the metric's range; post-processed and biased, "
    "for display. mean: unbiased (it can leave the range when n is small)."
)

NUMERIC_FIELDS = ("mean", "std_error", "ci_low", "ci_high", "cs_low", "cs_high")
"""A numeric estimate's fields per CSV row (cs_*: the confidence sequence)."""

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

_CSV = Media(
    "With format=csv: one row per value (categorical: "
    f"{', '.join(CSV_HEAD)}, {', '.join(ROW_FIELDS)}) or a single row (numeric: metric, version, "
    f"window, n, confidence, range_low, range_high, {', '.join(NUMERIC_FIELDS)}); empty "
    "cells for null."
)


def _services() -> tuple[redis.Redis, Registry]:
    ext = shared()
    return ext.redis, ext.registry


def _definition(registry: Registry, name: str) -> MetricDefinition:
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


def _refuse_expired(registry: Registry, definition: MetricDefinition, window: str) -> None:
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


def _confidence() -> tuple[float, bool]:
    raw = request.args.get("confidence", str(DEFAULT_CONFIDENCE))
    allowed = f"a number in [{MIN_CONFIDENCE}, {MAX_CONFIDENCE}]"
    try:
        confidence = float(raw)
    except ValueError:
        raise BadRequest(f"confidence must be {allowed}, got {raw[:40]!r}") from None
    if not (math.isfinite(confidence) and MIN_CONFIDENCE <= confidence <= MAX_CONFIDENCE):
        raise BadRequest(f"confidence must be {allowed}, got {raw[:40]!r}")
    simultaneous = request.args.get("simultaneous", "false").lower() in ("1", "true", "yes")
    return confidence, simultaneous


def _estimand() -> str:
    raw = request.args.get("estimand", REPORTERS)
    if raw not in ESTIMANDS:
        raise BadRequest(f"estimand must be reporters or population, got {raw[:40]!r}")
    return raw


def intervals_note(est: FrequencyEstimate) -> str:
    """One sentence on what the intervals and the flags promise."""
    level = f"{est.confidence:.0%}"
    which = (
        f"all {est.k} intervals hold together with {level} confidence (Bonferroni)"
        if est.simultaneous
        else f"each interval holds the true share with {level} confidence"
    )
    whose = (
        "that in a larger population the reporting devices are a random sample of "
        "(sampling spread included)"
        if est.estimand == POPULATION
        else f"that among the {est.n:,} devices that reported, not in a larger population "
        "they were drawn from (estimand=population gives that)"
    )
    how = "exact (counts too small for a normal tail)" if est.interval == "exact" else "score"
    return (
        f"{which} ({how} intervals, fixed n: valid for one look); the share is {whose}; "
        f"'distinguishable from zero' flags are wrong for at most {1 - est.confidence:.0%} "
        "of the flagged values on average (Benjamini–Hochberg false discovery rate)"
    )


ANYTIME_NOTE = (
    "the fixed-n interval is right 95 % of the time if you look once; if you keep "
    "watching and stop when it looks interesting, use 'valid while you watch' (a "
    "confidence sequence): it stays right at every look, at the price of more width "
    "(the 'distinguishable from zero' flags are still for one look)"
)

NUMERIC_ANYTIME_NOTE = ANYTIME_NOTE.removesuffix(
    " (the 'distinguishable from zero' flags are still for one look)"
)
"""A mean has no 'distinguishable from zero' flags to speak of."""


def _round_down(n: int) -> int:
    """n to two significant digits, rounded down: a smaller n only weakens the bound, and
    a page refreshing while reports arrive reuses one computation per bucket."""
    if n < 100:
        return n
    scale = 10 ** (len(str(n)) - 2)
    return n // scale * scale


UNBOUNDED_NOTE = (
    "; this metric has no budget, so nothing enforces one report per device: a device "
    "that sent r reports here is protected by the bound for r·ε only"
)
"""Said when a metric without a budget is shown ε_c for one report per device."""


@functools.lru_cache(maxsize=256)
def shuffled_epsilon(
    epsilon: float, n: int, reports_per_device: int | None
) -> ShuffledEpsilon | None:
    """``shuffled_epsilon`` of an answer: ε_c of n reports at ε, r per device at most
    (``None``: no budget bounds r; ε_c is shown for r = 1 and the condition says so)."""
    if n < 1:
        return None
    found = amplification(epsilon, _round_down(n), reports_per_device or 1)
    condition = found.condition + (UNBOUNDED_NOTE if reports_per_device is None else "")
    return ShuffledEpsilon(
        epsilon=math.ceil(found.epsilon * 1e4) / 1e4,  # rounded up: still a bound
        delta=found.delta,
        devices=found.devices,
        reports_per_device=found.reports_per_device,
        condition=condition,
    )


@functools.lru_cache(maxsize=256)
def relayed_epsilon(
    epsilon: float, batch: int, reports_per_device: int | None
) -> ShuffledEpsilon | None:
    """ε_c towards the collector's operator of reports that came through an Oblivious HTTP
    relay and reached the stream in shuffled batches of at least ``batch`` (B) reports,
    r per device in a batch at most (``None``: no budget; shown for r = 1, said so)."""
    if batch < 2:
        return None
    found = amplification(epsilon, batch, reports_per_device or 1)
    per = "one report" if found.reports_per_device == 1 else f"{found.reports_per_device} reports"
    condition = (
        f"holds towards whoever runs the collector and reads its Redis, for reports sent "
        f"through an Oblivious HTTP relay it does not control, released in shuffled batches "
        f"of at least {batch} (LDP_SHUFFLE_MIN_BATCH), if each device sent at most {per} of "
        f"a batch; if the relay and the collector collude, or without a relay, each report "
        f"is ε = {epsilon:.3g} (local DP) towards them"
    )
    condition += UNBOUNDED_NOTE if reports_per_device is None else ""
    return ShuffledEpsilon(
        epsilon=math.ceil(found.epsilon * 1e4) / 1e4,  # rounded up: still a bound
        delta=found.delta,
        devices=found.devices,
        reports_per_device=found.reports_per_device,
        condition=condition,
    )


PRAM_ANYTIME_NOTE = (
    "pram has no confidence sequence ('valid while you watch'): its estimate mixes all "
    "reported values through the inverse of its matrix; the fixed-n interval is right "
    "for one look"
)


def estimate_payload(
    definition: MetricDefinition,
    est: FrequencyEstimate,
    window: str,
    per_device: ReportsPerDevice | None = None,
    alarms: list[PoisoningAlarm] | None = None,
    alarm_rate: float = DEFAULT_ALARM_RATE,
    device_reports: int | None = None,
) -> Estimates:
    """The answer for one estimate, with the confidence sequence beside the intervals and
    the window's poisoning alarms; ``device_reports``: the budget's bound on one device's
    reports in the window, for the shuffled view's ε (None: no budget)."""
    m = definition.mechanism
    zero = est.indistinguishable_from_zero()
    note = ANYTIME_NOTE.replace("95 %", f"{est.confidence:.0%}")
    if isinstance(m, PostRandomization):  # no single p*, q*: no confidence sequence yet
        cs_low = cs_high = np.full(est.k, np.nan)
        note = PRAM_ANYTIME_NOTE
    elif est.n:
        cs_low, cs_high = (
            np.asarray(x, dtype=np.float64)
            for x in frequency_cs(
                est.mechanism,
                est.n,
                est.support_counts,
                (1.0 - est.confidence) / (est.k if est.simultaneous else 1),
                reports_per_device=est.reports_per_device,
                clip=False,
            )
        )
    else:
        cs_low = cs_high = np.full(est.k, np.nan)
    p_values = est.p_values if est.p_values is not None else [math.nan] * est.k
    per_device = per_device or ReportsPerDevice(1, "one report per device assumed")
    return Estimates(
        metric=definition.name,
        version=definition.version,
        mechanism=m.name,
        epsilon=m.epsilon,
        mechanism_params=Mechanism.model_validate(m.params()),
        n=est.n,
        confidence=est.confidence,
        simultaneous=est.simultaneous,
        window=window,
        interval=est.interval,
        estimand=est.estimand,
        intervals_note=intervals_note(est),
        anytime_note=note,
        reports_per_device=per_device.bound,
        reports_per_device_note=per_device.reason,
        post_processing=POST_PROCESSING_NOTE,
        estimates=[
            EstimateRow(
                value=label,
                frequency=json_float(est.frequencies[i]),
                std_error=json_float(est.std_errors[i]),
                ci_low=json_float(est.ci_low[i]),
                ci_high=json_float(est.ci_high[i]),
                norm_sub=json_float(est.norm_sub[i]),
                support_count=int(est.support_counts[i]),
                cs_low=json_float(cs_low[i]),
                cs_high=json_float(cs_high[i]),
                p_value=json_float(p_values[i]),
                distinguishable_from_zero=None if est.n == 0 else not bool(zero[i]),
            )
            for i, label in enumerate(definition.domain)
        ],
        alarms=alarms or [],
        alarm_rate=alarm_rate,
        shuffled_epsilon=shuffled_epsilon(m.epsilon, est.n, device_reports),
    )


def numeric_payload(
    definition: MetricDefinition, est: NumericEstimate, window: str
) -> MeanEstimate:
    """The answer for one numeric metric's mean, with its confidence sequence."""
    m = definition.mechanism
    body = est.to_dict()
    cs_low, cs_high = math.nan, math.nan
    if est.n:
        sums = est.stats
        cs_low, cs_high = mean_cs(
            est.mechanism,
            sums.n,
            sums.total,
            sums.total_sq,
            1.0 - est.confidence,
            value_range=est.value_range,
        )
    return MeanEstimate(
        metric=definition.name,
        version=definition.version,
        kind="numeric",
        mechanism=m.name,
        epsilon=m.epsilon,
        mechanism_params=Mechanism.model_validate(m.params()),
        n=est.n,
        confidence=est.confidence,
        window=window,
        range=body["range"],
        **{name: body[name] for name in NUMERIC_FIELDS if name in body},
        cs_low=json_float(cs_low),
        cs_high=json_float(cs_high),
        interval=est.interval,
        anytime_note=NUMERIC_ANYTIME_NOTE.replace("95 %", f"{est.confidence:.0%}"),
        std_error_worst_case=body["std_error_worst_case"],
        mean_clipped=body["mean_clipped"],
        post_processing=NUMERIC_POST_PROCESSING_NOTE,
    )


def _mean(
    client: redis.Redis,
    definition: MetricDefinition,
    window: str,
    confidence: float,
    stats: NumericStats | None = None,
) -> NumericEstimate:
    if stats is None:
        stats = read_numeric(client, definition, window)
    return estimate_mean(definition, stats, confidence)


def _estimate(
    client: redis.Redis,
    registry: Registry,
    definition: MetricDefinition,
    window: str,
    confidence: float,
    simultaneous: bool,
    with_alarms: bool = True,
    counts: Counts | None = None,
    estimand: str = REPORTERS,
) -> Estimates:
    """Read, estimate, answer: with the reports-per-device bound of a memoized version and
    the poisoning alarms of the window (of the newest hour and day for ``all``)."""
    now = time.time()
    if definition.budget is not None:
        # Never a bound that ends before reports arrived (this clock behind Redis's).
        now = max(now, newest_arrival(client, definition) or now)
    created = registry.created(definition.name, definition.version)
    per_device = reports_per_device(definition, created, window, now)
    device_reports = reports_per_device_any(definition, created, window, now)
    est = estimate_from_counts(
        definition.oracle,
        read_counts(client, definition, window) if counts is None else counts,
        confidence=confidence,
        simultaneous=simultaneous,
        labels=definition.domain,
        reports_per_device=per_device.bound,
        estimand=estimand,
    )
    rate = alarm_rate() if with_alarms else DEFAULT_ALARM_RATE  # the export has no app
    found = []
    if with_alarms:
        found = (
            current_alarms(client, definition, rate)
            if window == schema.ALL
            else window_alarms(client, definition, window, rate)
        )
    return estimate_payload(
        definition, est, window, per_device, alarm_models(definition, found), rate, device_reports
    )


def estimate_window(
    client: redis.Redis,
    registry: Registry,
    definition: MetricDefinition,
    window: str,
    confidence: float = DEFAULT_CONFIDENCE,
    counts: Counts | NumericStats | None = None,
    with_alarms: bool = False,
    estimand: str = REPORTERS,
) -> Estimates | MeanEstimate:
    """What ``GET /v1/estimates/<name>?window=…`` answers, as a model: the one function
    both the API and ``ldp export`` call, so an export holds the API's numbers.

    Args:
        client: Redis.
        registry: the metric registry (creation times of memoized versions).
        definition: the metric version.
        window: ``all``, ``hour:…`` or ``day:…``.
        confidence: the intervals' level.
        counts: the window's counts if the caller read them (``read_counts`` or, for a
            numeric metric, ``read_numeric``); read here otherwise.
        with_alarms: compute the window's poisoning alarms too (the API does; an export
            has no column for them, and they cost the trailing windows' reads).
        estimand: whose share a categorical metric's intervals are for ("reporters" or
            "population").
    """
    if definition.kind == "numeric":
        stats = counts if isinstance(counts, NumericStats) else None
        mean = _mean(client, definition, window, confidence, stats)
        return numeric_payload(definition, mean, window)
    found = counts if isinstance(counts, Counts) else None
    return _estimate(
        client,
        registry,
        definition,
        window,
        confidence,
        False,
        with_alarms=with_alarms,
        counts=found,
        estimand=estimand,
    )


def segments_csv(body: SegmentEstimates) -> Response:
    """A breakdown as CSV: one row per (group, value) of the shown groups, a row with
    the reason for each group not shown."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["by", "group", "shown", "reason", *CSV_HEAD, *ROW_FIELDS])
    for group in body.groups:
        head = [csv_text(body.by), csv_text(group.value), group.shown, group.reason or ""]
        found = group.estimates
        if found is None or isinstance(found, MeanEstimate):
            cells = {} if found is None else answer(found)
            mean = [cells.get("mean", "")] if found is not None else []
            n = found.n if found is not None else ""
            writer.writerow(
                [*head, body.metric, body.version, body.window, n, body.confidence, *mean]
            )
            continue
        for row in found.estimates:
            cells = {**answer(row), "value": csv_text(row.value)}
            writer.writerow(
                head
                + [found.metric, found.version, found.window, found.n, found.confidence]
                + [found.interval, found.estimand, found.reports_per_device]
                + ["" if cells[c] is None else cells[c] for c in ROW_FIELDS]
            )
    filename = f"{body.metric}-v{body.version}-{body.window.replace(':', '_')}-by-{body.by}.csv"
    return Response(
        out.getvalue(),
        mimetype="text/csv",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


def _csv(body: Estimates) -> Response:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([*CSV_HEAD, *ROW_FIELDS])
    for row in body.estimates:
        cells = {**answer(row), "value": csv_text(row.value)}  # a label: never a formula
        writer.writerow(
            [body.metric, body.version, body.window, body.n, body.confidence]
            + [body.interval, body.estimand, body.reports_per_device]
            + ["" if cells[c] is None else cells[c] for c in ROW_FIELDS]
        )
    filename = f"{body.metric}-v{body.version}-{body.window.replace(':', '_')}.csv"
    return Response(
        out.getvalue(),
        mimetype="text/csv",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


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
    filename = f"{body.metric}-v{body.version}-{body.window.replace(':', '_')}.csv"
    return Response(
        out.getvalue(),
        mimetype="text/csv",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


@bp.get("/v1/estimates/<name>")
@documented(
    "A metric's estimates with intervals in one window, as JSON or CSV.",
    {
        200: Reply(
            "The estimates.",
            (Estimates, MeanEstimate, StringEstimates, JointEstimates, SegmentEstimates),
            {
                "Content-Disposition": Header(
                    'CSV only: attachment; filename="<metric>-v<version>-<window>.csv"'
                )
            },
            {"text/csv": _CSV},
        ),
        400: Reply("A bad version, window, confidence, estimand or format.", Error),
        401: UNAUTHORIZED,
        404: Reply(
            "No such metric or version, or the window expired (the message says when, and "
            "how long its kind of window is kept).",
            Error,
        ),
        503: UNAVAILABLE,
    },
    description="Computed from the counts in Redis on each request. Categorical metrics "
    "answer Estimates, numeric ones MeanEstimate (its kind is numeric), string ones "
    "StringEstimates (kind string: the discovered values, and ?candidates=a,b,c), joint "
    "ones JointEstimates (kind joint: ?marginal=a,b and ?by=a); ?by=<dimension> of a metric "
    "with public dimensions answers SegmentEstimates (kind segments: one estimate per "
    "value, groups below LDP_MIN_SEGMENT_REPORTS not shown, and why).",
    path=MetricPath,
    query=EstimatesQuery,
    security=READ_TOKEN,
)
def get_estimates(name: str) -> Any:
    """Estimates of one metric version and window, as JSON or CSV."""
    client, registry = _services()
    definition = _definition(registry, name)
    window = request.args.get("window", "all")
    try:
        schema.window_span(window)  # the pattern, and a date and hour that exist
    except ValueError:
        raise BadRequest(
            f"window must be 'all', 'hour:YYYY-MM-DDTHH' or 'day:YYYY-MM-DD' (UTC) of a date "
            f"that exists, got {window[:40]!r}"
        ) from None
    _refuse_expired(registry, definition, window)
    confidence, simultaneous = _confidence()
    estimand = _estimand()
    fmt = request.args.get("format", FORMATS[0])
    if fmt not in FORMATS:
        raise BadRequest(f"format must be json or csv, got {fmt!r}")
    if definition.kind == "string":
        if fmt == "csv":
            raise BadRequest("a string metric's estimates are JSON only")
        try:
            candidates = parse_candidates(request.args.get("candidates"))
        except ValueError as exc:
            raise BadRequest(f"candidates: {exc}") from None
        return answer(
            string_estimates(client, definition, window, confidence, candidates, alarm_rate())
        )
    by = request.args.get("by")
    if by is not None and definition.dimensions and by in dict(definition.dimensions):
        minimum = min_segment_reports()
        breakdown = segment_estimates(
            client, registry, definition, window, by, confidence, minimum, estimate_window
        )
        return segments_csv(breakdown) if fmt == "csv" else answer(breakdown)
    if by is not None and definition.kind != "joint":
        names = [name for name, _ in definition.dimensions]
        raise BadRequest(
            f"by: metric {definition.name!r} has no dimension {by[:64]!r}; "
            + (f"its dimensions: {names}" if names else "it declares none")
        )
    if definition.kind == "joint":
        wanted = requested(definition, request.args.get("marginal"), request.args.get("by"))
        joint = joint_estimates(client, definition, window, confidence, simultaneous, wanted)
        return joint_csv(joint) if fmt == "csv" else answer(joint)
    if definition.kind == "numeric" or not simultaneous:
        found = estimate_window(
            client, registry, definition, window, confidence, with_alarms=True, estimand=estimand
        )
        if isinstance(found, MeanEstimate):
            return _numeric_csv(found) if fmt == "csv" else answer(found)
        return _csv(found) if fmt == "csv" else answer(found)
    body = _estimate(
        client, registry, definition, window, confidence, simultaneous, estimand=estimand
    )
    return _csv(body) if fmt == "csv" else answer(body)


@bp.get("/v1/estimates/<name>/trend")
@documented(
    "One estimate per hour or day window, oldest first.",
    {
        200: Reply("The windows.", Trend),
        400: Reply("A bad version, granularity, confidence or estimand.", Error),
        401: UNAUTHORIZED,
        404: _NOT_FOUND,
        503: UNAVAILABLE,
    },
    path=MetricPath,
    query=TrendQuery,
    security=READ_TOKEN,
)
def get_trend(name: str) -> dict[str, Any]:
    """One estimate per hour or day window, oldest first."""
    client, registry = _services()
    definition = _definition(registry, name)
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
    confidence, simultaneous = _confidence()
    estimand = _estimand()
    windows = [w for w in list_windows(client, definition) if w.startswith(granularity + ":")]
    windows = sorted(windows[:MAX_TREND_WINDOWS])
    points: list[TrendPoint | MeanTrendPoint] = []
    for window in windows:
        if definition.kind == "numeric":
            mean = numeric_payload(
                definition, _mean(client, definition, window, confidence), window
            )
            points.append(
                MeanTrendPoint(
                    window=window,
                    n=mean.n,
                    mean=mean.mean,
                    std_error=mean.std_error,
                    ci_low=mean.ci_low,
                    ci_high=mean.ci_high,
                    cs_low=mean.cs_low,
                    cs_high=mean.cs_high,
                )
            )
            continue
        body = _estimate(
            client, registry, definition, window, confidence, simultaneous, False, estimand=estimand
        )
        points.append(
            TrendPoint(
                window=window,
                n=body.n,
                reports_per_device=body.reports_per_device,
                estimates=body.estimates,
            )
        )
    trend = Trend(
        metric=definition.name,
        version=definition.version,
        granularity=granularity,
        confidence=confidence,
        estimand=estimand,
        windows=points,
    )
    return answer(trend)

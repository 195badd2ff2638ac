"""String metrics in the estimates API: discovered values, candidates, the threshold.

``GET /v1/estimates/<name>`` of a string metric answers :class:`StringEstimates`: the
values the discovery (:mod:`aggregator.stats.discovery`) called present, by decreasing
unadjusted estimate, each with its *selection-adjusted* frequency and interval
(:mod:`aggregator.stats.selection`: a value is listed because its estimate came out
high, and f̂ ± z·σ under-covers those near the threshold — 0.80 where many are) and the
unadjusted estimate's standard error; the values asked for with ``?candidates=a,b,c``
(normalised like a device's, estimated the same way), which were chosen before the data
and keep the plain, unbiased f̂ ± z·σ; the detection threshold at the current n; and the
window's poisoning alarms (:func:`aggregator.stats.detect.detect_sketch`: reports crafted
into a few of the sketch's rows). Each row says which it carries (``selection_adjusted``).

Discovery walks every level of the sketch (about a second of CPU at any n): a window
without reports (none yet, or outside the version's life) is answered empty without one,
and the others go through :mod:`aggregator.web.read_guard` (cached per window until its
counts change, bounded, off the event loop).
"""

from __future__ import annotations

import time
from statistics import NormalDist

import numpy as np
import redis
from flask import Blueprint, has_app_context, request
from werkzeug.exceptions import BadRequest

from aggregator.stats.codecs import Counts, codec_for
from aggregator.stats.detect import DEFAULT_ALARM_RATE, Alarm, detect_sketch
from aggregator.stats.discovery import Discovery, detection_threshold, discover
from aggregator.stats.intervals import json_float
from aggregator.stats.string_planning import collision_floor, detectable_curve, string_plan
from aggregator.stats.strings import SketchEstimator, padded_array
from aggregator.stream.counts import read_counts
from aggregator.web.access import READ_TOKEN, UNAUTHORIZED
from aggregator.web.alarms import alarm_models
from aggregator.web.models import (
    MAX_CANDIDATES,
    MAX_CANDIDATES_QUERY,
    MAX_N,
    StringCurve,
    StringCurveQuery,
    StringEstimates,
    StringPlan,
    StringPlanQuery,
    StringRow,
)
from aggregator.web.plan import n_grid
from aggregator.web.read_guard import cached, guarded
from client_sdk.mechanisms.strings import StringSketch, display, normalise
from client_sdk.wire import MetricDefinition
from ldp_api.context import shared
from ldp_api.models import Error, Mechanism, answer
from ldp_api.openapi import Reply, documented
from ldp_store import schema
from ldp_store.registry import Registry

__all__ = ["bp", "overview_alarms", "parse_candidates", "string_estimates"]

bp = Blueprint("strings", __name__)

CLOCK_SLACK_SECONDS = 300.0
"""Windows are named by Redis's clock (the stream entry ids), the version's creation time
and "now" by this machine's: a window is outside the version's life only by more than
this, so a few minutes of skew never hide real reports."""

INTERVAL = (
    "candidates: normal, f̂ ± z·√Var, Var = the inner oracle's variance per row plus the "
    "sketch's collision variance (estimated from the sketch); discovered values "
    "(selection_adjusted): the conditional estimate and interval given that the value was "
    "discovered (truncated normal at the Benjamini–Hochberg cutoff, Lee et al. 2016)"
)


def parse_candidates(raw: str | None) -> list[str]:
    """The values of ``?candidates=a,b,c`` (empty ones dropped).

    Raises:
        ValueError: more than :data:`MAX_CANDIDATES` values or
            :data:`~aggregator.web.models.MAX_CANDIDATES_QUERY` characters, or a NUL.
    """
    if not raw:
        return []
    values = [v for v in raw.split(",") if v]
    if len(values) > MAX_CANDIDATES:
        raise ValueError(f"at most {MAX_CANDIDATES} candidates, got {len(values)}")
    if len(raw) > MAX_CANDIDATES_QUERY:
        raise ValueError(f"at most {MAX_CANDIDATES_QUERY} characters, got {len(raw)}")
    if any("\x00" in v for v in values):
        raise ValueError("a candidate must not contain NUL")
    return values


def _in_life(created: float | None, window: str, now: float) -> bool:
    """Whether ``window`` overlaps the version's life, from its creation to now (give or
    take :data:`CLOCK_SLACK_SECONDS`)."""
    span = schema.window_span(window)
    if span is None:  # all
        return True
    if span[0] > now + CLOCK_SLACK_SECONDS:
        return False
    return created is None or span[1] > created - CLOCK_SLACK_SECONDS


def _discovery(
    client: redis.Redis, definition: MetricDefinition, window: str, created: float | None
) -> tuple[Discovery, SketchEstimator]:
    codec = codec_for(definition.sketch)
    if _in_life(created, window, time.time()):
        counts = read_counts(client, definition, window)
    else:  # before the version existed, or still to come: no reports, nothing to read
        counts = Counts.zeros(definition.k)
    est = SketchEstimator(codec, counts)
    if counts.n == 0:
        return Discovery.empty(), est
    key = (definition.name, definition.version, window)
    # The estimator is kept with its discovery: candidates are estimated as it was made.
    return guarded(key, counts.n, lambda: (discover(est), est))


def overview_alarms(definition: MetricDefinition, alpha: float) -> tuple[list[Alarm], list[str]]:
    """The all-time window's alarms as the overview shows them, without a discovery of its
    own (about a second of CPU): those of the discovery this process last made for it
    (:func:`~aggregator.web.read_guard.cached`), with its discovered values' labels; none
    when it has made none.

    Args:
        definition: a string metric version.
        alpha: the false-alarm rate per window.
    """
    hit = cached((definition.name, definition.version, "all"))
    if hit is None:
        return [], []
    found, est = hit
    return detect_sketch(est, "all", found.values, found.known, alpha), found.labels


def _row(
    value: str,
    f: float,
    var: float,
    p: float,
    z: float,
    discovered: bool,
    adjusted: tuple[float, float, float] | None = None,
) -> StringRow:
    """One row; ``adjusted``: the selection-adjusted (estimate, low, high) of a value
    listed because it was discovered, reported instead of f̂ ± z·σ."""
    se = float(np.sqrt(var)) if np.isfinite(var) else float("nan")
    f_out, low, high = adjusted if adjusted is not None else (f, f - z * se, f + z * se)
    return StringRow(
        value=value,
        frequency=json_float(f_out),
        std_error=json_float(se),
        ci_low=json_float(low),
        ci_high=json_float(high),
        p_value=json_float(p),
        discovered=discovered,
        selection_adjusted=adjusted is not None,
    )


def string_estimates(
    client: redis.Redis,
    definition: MetricDefinition,
    window: str,
    confidence: float,
    candidates: list[str],
    alarm_rate: float = DEFAULT_ALARM_RATE,
) -> StringEstimates:
    """The answer of the estimates API for a string metric's window, its alarms tested
    at false-alarm rate ``alarm_rate``."""
    sketch = definition.sketch
    registry = shared().registry if has_app_context() else Registry(client)
    created = registry.created(definition.name, definition.version)
    found, est = _discovery(client, definition, window, created)
    alarms = detect_sketch(est, window, found.values, found.known, alarm_rate)
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    adj = found.adjusted(confidence)
    rows = [
        _row(display(v), float(f), float(var), float(p), z, True, (float(a), float(lo), float(hi)))
        for v, f, var, p, a, lo, hi in zip(
            found.values,
            found.frequency,
            found.variance,
            found.p_values,
            adj.frequency,
            adj.low,
            adj.high,
            strict=True,
        )
    ]
    asked: list[StringRow] = []
    if candidates:
        padded = [normalise(c, sketch.max_length) for c in candidates]
        got = found.estimate(est, padded_array(padded, sketch.max_length))
        known = set(found.values)
        for c, v, f, var, p in zip(
            candidates, padded, got.frequency, got.variance, got.p_values(), strict=True
        ):
            asked.append(_row(c, float(f), float(var), float(p), z, v in known))
    return StringEstimates(
        metric=definition.name,
        version=definition.version,
        kind="string",
        mechanism=sketch.name,
        epsilon=sketch.epsilon,
        mechanism_params=Mechanism.model_validate(sketch.params()),
        n=est.n,
        confidence=confidence,
        window=window,
        max_length=sketch.max_length,
        alpha=found.alpha,
        tested=found.tested,
        detection_threshold=json_float(
            detection_threshold(found.null_std, found.tested, found.alpha)
        ),
        interval=INTERVAL,
        estimates=rows,
        candidates=asked,
        alarms=alarm_models(definition, alarms, found.labels),
        alarm_rate=alarm_rate,
    )


def _arg(name: str, default: float | None = None) -> float | None:
    raw = request.args.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise BadRequest(f"{name} must be a number, got {raw[:40]!r}") from None
    if not np.isfinite(value):
        raise BadRequest(f"{name} must be a finite number")
    return value


def _planned() -> tuple[float, int, float, float]:
    """ε, max_length, concentration and power of a planning query, checked.

    Raises:
        BadRequest: a missing or bad parameter.
    """
    epsilon = _arg("epsilon")
    if epsilon is None:
        raise BadRequest("epsilon is required")
    length = _arg("max_length", 16.0)
    assert length is not None
    if length != int(length) or not 1 <= length <= 64:
        raise BadRequest(f"max_length must be an integer in [1, 64], got {length:g}")
    concentration = _arg("concentration", 0.0)
    power = _arg("power", 0.5)
    assert concentration is not None and power is not None
    if not 0 <= concentration <= 1:
        raise BadRequest(f"concentration must be in [0, 1], got {concentration:g}")
    if not 0.01 <= power <= 0.99:
        raise BadRequest(f"power must be in [0.01, 0.99], got {power:g}")
    try:
        StringSketch(epsilon=epsilon, max_length=int(length))
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    return epsilon, int(length), concentration, power


@bp.get("/v1/plan/strings")
@documented(
    "What a string metric can find: the frequency N users find, or the users needed to "
    "find values of a frequency.",
    {
        200: Reply("The answer (users null: no number of users suffices).", StringPlan),
        400: Reply("A missing or bad parameter, or both or neither of users/frequency.", Error),
        401: UNAUTHORIZED,
    },
    description="Give exactly one of users and frequency.",
    query=StringPlanQuery,
    security=READ_TOKEN,
)
def get_string_plan() -> dict[str, object]:
    """The frequency ``users`` find, or the users a ``frequency`` needs."""
    epsilon, length, concentration, power = _planned()
    users, frequency = _arg("users"), _arg("frequency")
    if (users is None) == (frequency is None):
        raise BadRequest("give exactly one of users and frequency")
    if users is not None and (users != int(users) or not 1 <= users <= MAX_N):
        raise BadRequest(f"users must be an integer in [1, {MAX_N:.0e}], got {users:g}")
    if frequency is not None and not 0 < frequency < 1:
        raise BadRequest(f"frequency must be in (0, 1), got {frequency:g}")
    found = string_plan(
        epsilon,
        length,
        None if users is None else int(users),
        frequency,
        concentration,
        power,
    )
    return answer(StringPlan(**found.to_dict()))


@bp.get("/v1/plan/strings/curve")
@documented(
    "The frequency N users find against N on a log grid, down to the collision floor: "
    "the explorer's string mode.",
    {
        200: Reply("The detectable frequency at each N.", StringCurve),
        400: Reply("A missing or bad parameter.", Error),
        401: UNAUTHORIZED,
    },
    query=StringCurveQuery,
    security=READ_TOKEN,
)
def get_string_curve() -> dict[str, object]:
    """The frequency found with probability ``power`` at each N of a geometric grid."""
    epsilon, length, concentration, power = _planned()
    n = n_grid()
    sketch = StringSketch(epsilon=epsilon, max_length=length)
    body = StringCurve(
        epsilon=sketch.epsilon,
        max_length=length,
        rows=sketch.rows,
        cells=sketch.cells,
        concentration=concentration,
        power=power,
        floor=collision_floor(sketch, concentration, power=power),
        n=[float(x) for x in n],
        frequency=detectable_curve(sketch, n, concentration, power=power),
    )
    return answer(body)

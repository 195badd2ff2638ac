"""String metrics in the estimates API: discovered values, candidates, the threshold.

``GET /v1/estimates/<name>`` of a string metric answers :class:`StringEstimates`: the
values the discovery (:mod:`aggregator.stats.discovery`) called present, most frequent
first, each with its unbiased frequency, standard error and interval; the values asked
for with ``?candidates=a,b,c`` (normalised like a device's, estimated the same way); and
the detection threshold at the current n.

Discovery walks every level of the sketch (seconds at 10⁶ reports), so its result is
kept per (metric, version, window) in the process and recomputed when the window's n has
changed and the last result is older than :data:`REDISCOVER_SECONDS`.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from statistics import NormalDist

import numpy as np
import redis

from aggregator.stats.codecs import codec_for
from aggregator.stats.discovery import Discovery, detection_threshold, discover
from aggregator.stats.intervals import json_float
from aggregator.stats.strings import SketchEstimator, padded_array
from aggregator.stream.counts import read_counts
from aggregator.web.models import MAX_CANDIDATES, StringEstimates, StringRow
from client_sdk.mechanisms.strings import display, normalise
from client_sdk.wire import MetricDefinition
from ldp_api.models import Mechanism

__all__ = ["REDISCOVER_SECONDS", "parse_candidates", "string_estimates"]

REDISCOVER_SECONDS = 30.0
"""How long a window's discovery is reused while its reports keep arriving: a discovery
costs seconds of CPU at 10⁶ reports; the dashboard refreshes far more often."""

CACHED_WINDOWS = 64
"""Discoveries kept per process (the newest windows of a few dozen string metrics)."""

INTERVAL = (
    "normal: f̂ ± z·√Var, Var = the inner oracle's variance per row plus the sketch's "
    "collision variance (estimated from the sketch)"
)

_cache: OrderedDict[tuple[str, int, str], tuple[int, float, Discovery, SketchEstimator]] = (
    OrderedDict()
)
_lock = threading.Lock()


def parse_candidates(raw: str | None) -> list[str]:
    """The values of ``?candidates=a,b,c`` (empty ones dropped).

    Raises:
        ValueError: more than :data:`MAX_CANDIDATES`, or a value with NUL.
    """
    if not raw:
        return []
    values = [v for v in raw.split(",") if v]
    if len(values) > MAX_CANDIDATES:
        raise ValueError(f"at most {MAX_CANDIDATES} candidates, got {len(values)}")
    if any("\x00" in v for v in values):
        raise ValueError("a candidate must not contain NUL")
    return values


def _discovery(
    client: redis.Redis, definition: MetricDefinition, window: str
) -> tuple[Discovery, SketchEstimator]:
    key = (definition.name, definition.version, window)
    counts = read_counts(client, definition, window)
    now = time.monotonic()
    with _lock:
        hit = _cache.get(key)
    if hit is not None and (hit[0] == counts.n or now - hit[1] < REDISCOVER_SECONDS):
        return hit[2], hit[3]
    est = SketchEstimator(codec_for(definition.sketch), counts)
    found = discover(est)
    with _lock:
        _cache[key] = (counts.n, now, found, est)
        _cache.move_to_end(key)
        while len(_cache) > CACHED_WINDOWS:
            _cache.popitem(last=False)
    return found, est


def _row(value: str, f: float, var: float, p: float, z: float, discovered: bool) -> StringRow:
    se = float(np.sqrt(var)) if np.isfinite(var) else float("nan")
    return StringRow(
        value=value,
        frequency=json_float(f),
        std_error=json_float(se),
        ci_low=json_float(f - z * se),
        ci_high=json_float(f + z * se),
        p_value=json_float(p),
        discovered=discovered,
    )


def string_estimates(
    client: redis.Redis,
    definition: MetricDefinition,
    window: str,
    confidence: float,
    candidates: list[str],
) -> StringEstimates:
    """The answer of the estimates API for a string metric's window."""
    sketch = definition.sketch
    found, est = _discovery(client, definition, window)
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    rows = [
        _row(display(v), float(f), float(var), float(p), z, True)
        for v, f, var, p in zip(
            found.values, found.frequency, found.variance, found.p_values, strict=True
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
    )

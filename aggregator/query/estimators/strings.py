"""The string kind's estimator: discovery in a window's sketch, then each value's share.
See docs/statistics/strings.md.
"""

from __future__ import annotations

import time
from statistics import NormalDist
from typing import ClassVar

import numpy as np

from aggregator.query.alarms import alarm_models
from aggregator.query.answers import (
    StringEstimates,
    StringRow,
)
from aggregator.query.estimators.base import (
    Ask,
    Reader,
    answer_head,
)
from aggregator.query.window import read_counts
from aggregator.stats.codecs import Counts
from aggregator.stats.detect import detect_sketch
from aggregator.stats.discovery import Discovery, detection_threshold, discover
from aggregator.stats.intervals import json_float
from aggregator.stats.kinds import codec_for
from aggregator.stats.strings import SketchEstimator, padded_array
from client_sdk.mechanisms.strings import display, normalise
from client_sdk.wire import MetricDefinition
from ldp_store import schema

# -- strings ----------------------------------------------------------------------------------

CLOCK_SLACK_SECONDS = 300.0
"""Windows are named by Redis's clock (the stream entry ids), the version's creation time
and "now" by this machine's: a window is outside the version's life only by more than
this, so a few minutes of skew never hide real reports."""

STRING_INTERVAL = (
    "candidates: normal, f̂ ± z·√Var, Var = the inner oracle's variance per row plus the "
    "sketch's collision variance (estimated from the sketch); discovered values "
    "(selection_adjusted): the conditional estimate and interval given that the value was "
    "discovered (truncated normal at the Benjamini–Hochberg cutoff, Lee et al. 2016)"
)


def in_life(created: float | None, window: str, now: float) -> bool:
    """Whether ``window`` overlaps the version's life, from its creation to now (give or
    take :data:`CLOCK_SLACK_SECONDS`)."""
    span = schema.window_span(window)
    if span is None:  # all
        return True
    if span[0] > now + CLOCK_SLACK_SECONDS:
        return False
    return created is None or span[1] > created - CLOCK_SLACK_SECONDS


def _string_row(
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


class StringEstimator:
    """String metrics (the sketch): the values the discovery
    (:mod:`aggregator.stats.discovery`) calls present, each with its selection-adjusted
    frequency and interval (:mod:`aggregator.stats.selection`), the values asked for as
    candidates with the plain f̂ ± z·σ, the detection threshold, and the window's alarms
    (:func:`aggregator.stats.detect.detect_sketch`). No confidence sequence.

    Discovery walks every level of the sketch (about a second of CPU at any n): a window
    without reports (none yet, or outside the version's life) is answered empty without
    one, and the others run through ``reader.run`` (the web app's read guard: cached per
    window until its counts change, bounded, off the event loop).
    """

    sequence: ClassVar[bool] = False
    no_sequence: ClassVar[str] = "a string metric's discovered values have no sequence"

    def read(self, reader: Reader, definition: MetricDefinition, window: str) -> Counts:
        """The sketch's counts; zeros for a window outside the version's life (before it
        existed, or still to come: no reports, nothing to read)."""
        created = reader.registry.created(definition.name, definition.version)
        if in_life(created, window, time.time()):
            return read_counts(reader.client, definition, window)
        return Counts.zeros(definition.k)

    def discovery(
        self, reader: Reader, definition: MetricDefinition, window: str, counts: Counts
    ) -> tuple[Discovery, SketchEstimator]:
        """The window's discovery, with the estimator it was made with (candidates are
        estimated as it was made)."""
        est = SketchEstimator(codec_for(definition.sketch), counts)
        if counts.n == 0:
            return Discovery.empty(), est
        key = (definition.name, definition.version, window)
        found: tuple[Discovery, SketchEstimator] = reader.run(
            key, counts.n, lambda: (discover(est), est)
        )
        return found

    def estimate(
        self, reader: Reader, definition: MetricDefinition, window: str, stats: Counts, ask: Ask
    ) -> StringEstimates:
        """The discovered values and the candidates, alarms tested at ``ask.alarm_rate``."""
        sketch = definition.sketch
        found, est = self.discovery(reader, definition, window, stats)
        alarms = detect_sketch(est, window, found.values, found.known, ask.alarm_rate)
        z = NormalDist().inv_cdf(0.5 + ask.confidence / 2)
        adj = found.adjusted(ask.confidence)
        rows = [
            _string_row(
                display(v),
                float(f),
                float(var),
                float(p),
                z,
                True,
                (float(a), float(lo), float(hi)),
            )
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
        if ask.candidates:
            padded = [normalise(c, sketch.max_length) for c in ask.candidates]
            got = found.estimate(est, padded_array(padded, sketch.max_length))
            known = set(found.values)
            for c, v, f, var, p in zip(
                ask.candidates, padded, got.frequency, got.variance, got.p_values(), strict=True
            ):
                asked.append(_string_row(c, float(f), float(var), float(p), z, v in known))
        return StringEstimates(
            **answer_head(definition, sketch, est.n, window),
            kind="string",
            confidence=ask.confidence,
            estimand="reporters",
            max_length=sketch.max_length,
            alpha=found.alpha,
            tested=found.tested,
            detection_threshold=json_float(
                detection_threshold(found.null_std, found.tested, found.alpha)
            ),
            interval=STRING_INTERVAL,
            estimates=rows,
            candidates=asked,
            alarms=alarm_models(definition, alarms, found.labels),
            alarm_rate=ask.alarm_rate,
        )

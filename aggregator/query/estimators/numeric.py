"""The numeric kinds' estimator: a window's mean with its intervals.
See docs/statistics/numeric.md.
"""

from __future__ import annotations

import math
from typing import ClassVar

from aggregator.query.answers import MeanEstimate, MeanTrendPoint
from aggregator.query.estimators.base import (
    ANYTIME_NOTE,
    Ask,
    Reader,
    answer_head,
)
from aggregator.query.window import read_numeric
from aggregator.stats.anytime import mean_cs_many
from aggregator.stats.intervals import json_float
from aggregator.stats.numeric import NumericEstimate, NumericStats, estimate_mean
from client_sdk.wire import MetricDefinition

# -- numeric means ----------------------------------------------------------------------------

NUMERIC_POST_PROCESSING_NOTE = (
    "mean_clipped: the mean clipped into the metric's range; post-processed and biased, "
    "for display. mean: unbiased (it can leave the range when n is small)."
)

NUMERIC_ANYTIME_NOTE = ANYTIME_NOTE.removesuffix(
    " (beside it, a value is flagged when the sequence misses 0: cs_distinguishable_from_zero)"
)
"""A mean has no 'distinguishable from zero' flags to speak of."""

NUMERIC_FIELDS = ("mean", "std_error", "ci_low", "ci_high", "cs_low", "cs_high")
"""A numeric estimate's fields per CSV row (cs_*: the confidence sequence)."""


class NumericEstimator:
    """Numeric means (duchi, pm, hybrid): Σy and Σy² in, the mean with its interval and
    confidence sequence out."""

    sequence: ClassVar[bool] = True
    no_sequence: ClassVar[str] = ""

    def read(self, reader: Reader, definition: MetricDefinition, window: str) -> NumericStats:
        """The window's sums (:func:`~aggregator.query.window.read_numeric`)."""
        return read_numeric(reader.client, definition, window)

    def estimate(
        self,
        reader: Reader,
        definition: MetricDefinition,
        window: str,
        stats: NumericStats,
        ask: Ask,
    ) -> MeanEstimate:
        """The window's mean, in the metric's units."""
        est: NumericEstimate = estimate_mean(definition, stats, ask.confidence)
        m = definition.mechanism
        body = est.to_dict()
        cs_low, cs_high = est.confidence_sequence() if est.n else (math.nan, math.nan)
        return MeanEstimate(
            **answer_head(definition, m, est.n, window),
            kind="numeric",
            confidence=est.confidence,
            estimand=ask.estimand,
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

    def trend(
        self, definition: MetricDefinition, windows: list[str], sums: list[NumericStats], ask: Ask
    ) -> list[MeanTrendPoint]:
        """Each window's mean as :meth:`estimate` has it, the confidence sequences of all
        windows in one root-finding pass (:func:`~aggregator.stats.anytime.mean_cs_many`)."""
        found = [estimate_mean(definition, stats, ask.confidence) for stats in sums]
        if not found:
            return []
        first = found[0]
        lows, highs = mean_cs_many(
            first.mechanism,
            [s.n for s in sums],
            [s.total for s in sums],
            [s.total_sq for s in sums],
            1.0 - first.confidence,
            value_range=first.value_range,
        )
        return [
            MeanTrendPoint(
                window=window,
                n=est.n,
                mean=json_float(est.mean),
                std_error=json_float(est.std_error),
                ci_low=json_float(est.ci_low),
                ci_high=json_float(est.ci_high),
                cs_low=json_float(float(low)),
                cs_high=json_float(float(high)),
            )
            for window, est, low, high in zip(windows, found, lows, highs, strict=True)
        ]

"""The frequency oracles' estimators: fresh-noise mechanisms, memoized ones and PRAM.
See docs/statistics/intervals.md.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from aggregator.query.alarms import (
    alarm_models,
    baseline_of,
    current_checks,
    tested,
    window_checks,
)
from aggregator.query.answers import (
    EstimateColumns,
    EstimateRow,
    Estimates,
    PoisoningBaseline,
)
from aggregator.query.estimators.base import (
    ANYTIME_NOTE,
    POST_PROCESSING_NOTE,
    PRAM_ANYTIME_NOTE,
    Ask,
    CountsRead,
    Reader,
    _per_device,
    answer_head,
    flags_note,
    intervals_note,
    shuffled_epsilon,
)
from aggregator.query.memo import counts_key, off_loop, remembered
from aggregator.query.paging import Rows, columns_of, rest_of, rows_of
from aggregator.stats.codecs import Counts
from aggregator.stats.detect import Alarm
from aggregator.stats.frequency import FrequencyEstimate, estimate_from_counts
from aggregator.stats.intervals import json_float
from aggregator.stats.multiplicity import ZeroRead
from client_sdk.wire import MetricDefinition
from ldp_store import schema


class FrequencyEstimator(CountsRead):
    """The frequency oracles whose reports carry fresh noise: the GRR family (rr, grr,
    subset selection), the unary encodings (sue, oue), local hashing (olh, blh) and
    Hadamard response. One implementation serves them all: each is debiased through the
    p*, q* of its own mechanism object (:func:`aggregator.stats.frequency.estimate_from_counts`),
    and a local-hashing window's seed histogram is read by its alarms."""

    sequence: ClassVar[bool] = True
    no_sequence: ClassVar[str] = ""

    def sequence_read(self, est: FrequencyEstimate) -> ZeroRead:
        """The answer's cs_low, cs_high with their flags and p-values, in the answer's
        multiplicity mode (NaN and no flags without reports or without a sequence)."""
        if not self.sequence or not est.n:
            nan = np.full(est.k, np.nan)
            return ZeroRead(nan, nan, nan, np.zeros(est.k, dtype=bool), math.nan)
        return est.sequence_read()

    def estimate(
        self, reader: Reader, definition: MetricDefinition, window: str, stats: Counts, ask: Ask
    ) -> Estimates:
        """The window's frequencies with intervals, confidence sequence, the reports per
        device they assume, the shuffled view's ε and (``ask.with_alarms``) its alarms (of
        the newest hour and day for ``all``)."""
        per_device = _per_device(reader, definition, window)
        key = counts_key(
            definition,
            stats.n,
            stats.support,
            type(self).__name__,
            ask.confidence,
            ask.estimand,
            ask.mode,
            per_device.bound,
        )

        def compute() -> tuple[FrequencyEstimate, ZeroRead]:
            est = estimate_from_counts(
                definition.oracle,
                stats,
                confidence=ask.confidence,
                labels=definition.domain,
                reports_per_device=per_device.bound,
                estimand=ask.estimand,
                multiplicity=ask.mode,
            )
            return est, self.sequence_read(est)

        est, cs = remembered(key, lambda: off_loop(compute))
        found, baseline = _alarms(reader, definition, window, ask, est.n)
        m = definition.mechanism
        zero = est.indistinguishable_from_zero()
        p_values = (
            np.asarray(est.p_values, dtype=float)
            if est.p_values is not None
            else np.full(est.k, math.nan)
        )
        empty = est.n == 0
        rows = (ask.rows or Rows(every=True)).resolve(est.k)
        shown = rows.pick(np.asarray(est.frequencies, dtype=float), definition.domain)
        fields = {
            "value": np.asarray(definition.domain, dtype=object),
            "frequency": est.frequencies,
            "std_error": est.std_errors,
            "ci_low": est.ci_low,
            "ci_high": est.ci_high,
            "norm_sub": est.norm_sub,
            "support_count": est.support_counts,
            "cs_low": cs.low,
            "cs_high": cs.high,
            "p_value": p_values,
            "distinguishable_from_zero": None if empty else ~np.asarray(zero, dtype=bool),
            "cs_p_value": cs.p_values,
            "cs_distinguishable_from_zero": (
                None if empty or not self.sequence else np.asarray(cs.flags, dtype=bool)
            ),
        }
        table: dict[str, Any] = columns_of(fields, shown)
        extra: dict[str, Any] = {}
        if rows.columns:
            extra["columns"] = EstimateColumns.model_construct(**table)
        return Estimates(
            **answer_head(definition, m, est.n, window),
            confidence=est.confidence,
            simultaneous=est.simultaneous,
            multiplicity=est.multiplicity,
            level=json_float(est.level),
            cs_level=json_float(cs.level),
            interval=est.interval,
            estimand=est.estimand,
            intervals_note=intervals_note(est),
            flags_note=flags_note(est.multiplicity, est.confidence, est.k),
            anytime_note=self.no_sequence or ANYTIME_NOTE.replace("95 %", f"{est.confidence:.0%}"),
            reports_per_device=per_device.bound,
            reports_per_device_note=per_device.reason,
            post_processing=POST_PROCESSING_NOTE,
            estimates=[] if rows.columns else rows_of(table, EstimateRow),
            values_total=est.k,
            shown=rows.how,
            rest=rest_of(shown, np.asarray(est.frequencies, dtype=float), np.asarray(est.norm_sub)),
            **extra,
            alarms=alarm_models(definition, found),
            alarm_rate=ask.alarm_rate,
            poisoning_baseline=baseline,
            shuffled_epsilon=shuffled_epsilon(m.epsilon, est.n, per_device.budgeted),
        )


def _alarms(
    reader: Reader, definition: MetricDefinition, window: str, ask: Ask, n: int
) -> tuple[list[Alarm], PoisoningBaseline | None]:
    """The window's alarms (of the newest hour and day for ``all``) and its poisoning
    baseline (None for an untested metric), if the ask wants them."""
    if not ask.with_alarms:
        return [], None
    found, reports = (
        current_checks(reader.client, definition, ask.alarm_rate)
        if window == schema.ALL
        else window_checks(reader.client, definition, window, ask.alarm_rate)
    )
    return found, baseline_of(definition, n, reports) if tested(definition) else None


class MemoizedEstimator(FrequencyEstimator):
    """Memoized (longitudinal) frequency oracles: a device's reports share its permanent
    response, so the intervals and the sequence assume the budget's r reports per device
    (:func:`aggregator.stats.accounting.reports_per_device`), and their counts are not
    tested for poisoning (:func:`aggregator.query.alarms.tested`)."""


class PramEstimator(FrequencyEstimator):
    """Post-randomization (pram): debiased through the inverse of its matrix; no single
    p*, q*, hence no confidence sequence."""

    sequence: ClassVar[bool] = False
    no_sequence: ClassVar[str] = PRAM_ANYTIME_NOTE

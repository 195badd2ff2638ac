"""The joint kind's estimator: the marginals asked for, raw and consistent.
See docs/statistics/joint.md.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from aggregator.query.answers import (
    JointCell,
    JointColumns,
    JointEstimates,
    JointMarginal,
)
from aggregator.query.estimators.base import (
    Ask,
    CountsRead,
    Reader,
)
from aggregator.query.memo import counts_key, off_loop, remembered
from aggregator.query.paging import Rows, columns_of, rest_of, rows_of
from aggregator.stats.codecs import Counts
from aggregator.stats.intervals import json_float
from aggregator.stats.joint import MarginalEstimate, consistent_tables, estimate_marginal
from client_sdk.wire import MetricDefinition

# -- joint metrics ----------------------------------------------------------------------------

JOINT_POST_PROCESSING = (
    "frequency is unbiased; consistent is post-processed (shared 1-way margins made to "
    "agree across the groups at their inverse-variance mean, each table projected onto the "
    "simplex, repeated): biased, for display"
)


def _joint_marginal(
    definition: MetricDefinition, est: MarginalEstimate, seq: MarginalEstimate, rows: Rows
) -> JointMarginal:
    labels = [definition.attributes[a][1] for a in est.attributes]
    frequencies = np.asarray(est.frequencies, dtype=float)
    shown = rows.pick(frequencies, ())
    where = np.unravel_index(shown, est.shape)
    named = [np.asarray(labels[j], dtype=object)[w].tolist() for j, w in enumerate(where)]
    cells = [list(names) for names in zip(*named, strict=True)]
    table: dict[str, Any] = {"cell": cells} | columns_of(
        {
            "frequency": frequencies,
            "std_error": est.std_errors,
            "ci_low": est.ci_low,
            "ci_high": est.ci_high,
            "cs_low": seq.ci_low,
            "cs_high": seq.ci_high,
            "p_value": est.p_values,
            "distinguishable_from_zero": np.asarray(est.distinguishable, dtype=bool),
            "cs_p_value": seq.p_values if est.n else None,
            "cs_distinguishable_from_zero": (
                np.asarray(seq.distinguishable, dtype=bool) if est.n else None
            ),
            "consistent": est.consistent,
        },
        shown,
    )
    extra: dict[str, Any] = {}
    if rows.columns:
        extra["columns"] = JointColumns.model_construct(**table)
    return JointMarginal(
        attributes=[definition.attributes[a][0] for a in est.attributes],
        n=est.n,
        interval=est.interval,
        level=json_float(est.level),
        cs_level=json_float(seq.level),
        cells=[] if rows.columns else rows_of(table, JointCell),
        cells_total=len(frequencies),
        shown=rows.how,
        rest=rest_of(shown, frequencies),
        **extra,
    )


class JointEstimator(CountsRead):
    """Joint metrics (a tuple of attributes at one ε): the 1- and 2-way marginals asked
    for (``ask.marginals``; every 1-way one by default), each cell's unbiased frequency
    with its interval and confidence sequence, and the consistent (post-processed)
    estimate beside it (:mod:`aggregator.stats.joint`)."""

    sequence: ClassVar[bool] = True
    no_sequence: ClassVar[str] = ""

    def estimate(
        self, reader: Reader, definition: MetricDefinition, window: str, stats: Counts, ask: Ask
    ) -> JointEstimates:
        """The marginals of the window."""
        m = definition.joint
        wanted = [list(a) for a in ask.marginals] or [
            [a] for a in range(len(definition.attributes))
        ]
        cells = sum(math.prod(m.sizes[a] for a in attrs) for attrs in wanted)
        rows = (ask.rows or Rows(every=True)).resolve(cells, len(wanted))

        def compute() -> list[tuple[MarginalEstimate, ...]]:
            tables = consistent_tables(m, stats.support) if stats.n else None
            return [
                tuple(
                    estimate_marginal(
                        m,
                        stats.support,
                        attrs,
                        ask.confidence,
                        anytime=anytime,
                        tables=tables,
                        estimand=ask.estimand,
                        multiplicity=ask.mode,
                    )
                    for anytime in (False, True)
                )
                for attrs in wanted
            ]

        marginal = tuple(tuple(attrs) for attrs in wanted)
        key = counts_key(
            definition,
            stats.n,
            stats.support,
            "joint",
            marginal,
            ask.confidence,
            ask.estimand,
            ask.mode,
        )
        kept = remembered(key, lambda: off_loop(compute))
        out = [_joint_marginal(definition, est, seq, rows) for est, seq in kept]
        return JointEstimates(
            metric=definition.name,
            version=definition.version,
            kind="joint",
            mechanism=m.method,
            mechanism_reason=definition.mechanism_reason,
            epsilon=m.epsilon,
            n=stats.n,
            confidence=ask.confidence,
            estimand=ask.estimand,
            multiplicity=ask.mode,
            window=window,
            marginals=out,
            post_processing=JOINT_POST_PROCESSING,
        )

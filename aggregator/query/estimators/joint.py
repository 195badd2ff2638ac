"""The joint kind's estimator: the marginals asked for, raw and consistent.
See docs/statistics/joint.md.
"""

from __future__ import annotations

from typing import ClassVar

from aggregator.query.answers import (
    JointCell,
    JointEstimates,
    JointMarginal,
)
from aggregator.query.estimators.base import (
    Ask,
    Reader,
)
from aggregator.query.window import read_counts
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
    definition: MetricDefinition, est: MarginalEstimate, seq: MarginalEstimate
) -> JointMarginal:
    labels = [definition.attributes[a][1] for a in est.attributes]
    data = est.to_dict(labels)
    sequence = seq.to_dict(labels)["cells"]
    return JointMarginal(
        attributes=[definition.attributes[a][0] for a in est.attributes],
        n=est.n,
        interval=est.interval,
        level=json_float(est.level),
        cs_level=json_float(seq.level),
        cells=[
            JointCell(
                cell=row["cell"],
                frequency=row["frequency"],
                std_error=row["std_error"],
                ci_low=row["ci_low"],
                ci_high=row["ci_high"],
                cs_low=cs["ci_low"],
                cs_high=cs["ci_high"],
                p_value=row["p_value"],
                distinguishable_from_zero=row["distinguishable"],
                cs_p_value=cs["p_value"] if est.n else None,
                cs_distinguishable_from_zero=cs["distinguishable"] if est.n else None,
                consistent=row["consistent"],
            )
            for row, cs in zip(data["cells"], sequence, strict=True)
        ],
    )


class JointEstimator:
    """Joint metrics (a tuple of attributes at one ε): the 1- and 2-way marginals asked
    for (``ask.marginals``; every 1-way one by default), each cell's unbiased frequency
    with its interval and confidence sequence, and the consistent (post-processed)
    estimate beside it (:mod:`aggregator.stats.joint`)."""

    sequence: ClassVar[bool] = True
    no_sequence: ClassVar[str] = ""

    def read(self, reader: Reader, definition: MetricDefinition, window: str) -> Counts:
        """The window's counts over the groups' cells."""
        return read_counts(reader.client, definition, window)

    def estimate(
        self, reader: Reader, definition: MetricDefinition, window: str, stats: Counts, ask: Ask
    ) -> JointEstimates:
        """The marginals of the window."""
        m = definition.joint
        tables = consistent_tables(m, stats.support) if stats.n else None
        wanted = [list(a) for a in ask.marginals] or [
            [a] for a in range(len(definition.attributes))
        ]
        out = [
            _joint_marginal(
                definition,
                *(
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
                ),
            )
            for attrs in wanted
        ]
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

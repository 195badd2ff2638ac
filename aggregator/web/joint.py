"""The estimates API's answer for a joint metric: its 1- and 2-way marginals.

``GET /v1/estimates/<name>`` of a joint metric answers :class:`JointEstimates`: every
1-way marginal by default; ``?marginal=a,b`` the marginal over those attributes (one or
two; all of them where the layout is ``joint``); ``?by=a`` the marginal grouped by ``a``
(first), alone or with ``marginal``. Each cell has the unbiased ``frequency`` with its
interval and the ``consistent`` estimate beside it (post-processed, labelled).

In full: ``docs/statistics/joint.md``.
"""

from __future__ import annotations

import csv
import io

import redis
from flask import Response
from werkzeug.exceptions import BadRequest

from aggregator.safe_text import csv_text
from aggregator.stats.joint import MarginalEstimate, consistent_tables, estimate_marginal
from aggregator.stream.counts import read_counts
from client_sdk.wire import MetricDefinition
from ldp_api.models import Model

__all__ = ["JointCell", "JointEstimates", "JointMarginal", "joint_csv", "joint_estimates"]


class JointCell(Model):
    """One cell of a marginal: a label of each of its attributes."""

    cell: list[str]
    frequency: float | None
    """Unbiased estimate of the share of reporters in this cell."""
    std_error: float | None
    ci_low: float | None
    ci_high: float | None
    cs_low: float | None
    """The confidence sequence: valid at every n at once, however often one looks."""
    cs_high: float | None
    distinguishable_from_zero: bool
    """Above zero with the false discovery rate over the marginal's cells ≤ 1 − confidence."""
    consistent: float | None
    """Post-processed (shared margins agree across marginals, cells ≥ 0): biased."""


class JointMarginal(Model):
    """One marginal over some of the metric's attributes."""

    attributes: list[str]
    n: int
    """Reports of the group this marginal is read from."""
    interval: str
    """score, exact (small counts) or anytime."""
    cells: list[JointCell]


class JointEstimates(Model):
    """A joint metric's marginals in one window."""

    metric: str
    version: int
    kind: str
    mechanism: str
    """``joint`` (one oracle over the product domain) or ``marginals`` (pairwise groups)."""
    mechanism_reason: str
    epsilon: float
    n: int
    """Every report of the window (each device's tuple once)."""
    confidence: float
    window: str
    marginals: list[JointMarginal]
    post_processing: str


POST_PROCESSING = (
    "frequency is unbiased; consistent is post-processed (shared 1-way margins made to "
    "agree across the groups at their inverse-variance mean, each table projected onto the "
    "simplex, repeated): biased, for display"
)


def _attributes(definition: MetricDefinition, raw: str | None, what: str) -> list[int]:
    names = [name for name, _ in definition.attributes]
    if raw is None:
        return []
    wanted = [part.strip() for part in raw.split(",") if part.strip()]
    unknown = [w[:40] for w in wanted if w not in names]
    if unknown or not wanted:
        raise BadRequest(f"{what} must name attributes of {definition.name!r}: {names}")
    return [names.index(w) for w in wanted]


def requested(
    definition: MetricDefinition, marginal: str | None, by: str | None
) -> list[list[int]]:
    """The marginals asked for: ``by`` first, then ``marginal``; default every 1-way one.

    Raises:
        BadRequest: unknown or repeated attributes, or a marginal no group holds.
    """
    attrs = _attributes(definition, by, "by") + _attributes(definition, marginal, "marginal")
    if not attrs:
        return [[a] for a in range(len(definition.attributes))]
    if len(set(attrs)) != len(attrs):
        raise BadRequest("an attribute is named twice across marginal and by")
    if not definition.joint.sources(tuple(attrs)):
        raise BadRequest(
            f"no estimate of a {len(attrs)}-way marginal: this metric's reports are grouped by "
            f"{definition.joint.method} (any 1- or 2-way marginal is answered)"
        )
    return [attrs]


def _marginal(
    definition: MetricDefinition, est: MarginalEstimate, seq: MarginalEstimate
) -> JointMarginal:
    labels = [definition.attributes[a][1] for a in est.attributes]
    data = est.to_dict(labels)
    sequence = seq.to_dict(labels)["cells"]
    return JointMarginal(
        attributes=[definition.attributes[a][0] for a in est.attributes],
        n=est.n,
        interval=est.interval,
        cells=[
            JointCell(
                cell=row["cell"],
                frequency=row["frequency"],
                std_error=row["std_error"],
                ci_low=row["ci_low"],
                ci_high=row["ci_high"],
                cs_low=cs["ci_low"],
                cs_high=cs["ci_high"],
                distinguishable_from_zero=row["distinguishable"],
                consistent=row["consistent"],
            )
            for row, cs in zip(data["cells"], sequence, strict=True)
        ],
    )


def joint_estimates(
    client: redis.Redis,
    definition: MetricDefinition,
    window: str,
    confidence: float,
    simultaneous: bool,
    marginals: list[list[int]],
) -> JointEstimates:
    """The answer of the estimates API for a joint metric's window."""
    m = definition.joint
    counts = read_counts(client, definition, window)
    tables = consistent_tables(m, counts.support) if counts.n else None
    out = [
        _marginal(
            definition,
            *(
                estimate_marginal(
                    m,
                    counts.support,
                    attrs,
                    confidence,
                    simultaneous=simultaneous,
                    anytime=anytime,
                    tables=tables,
                )
                for anytime in (False, True)
            ),
        )
        for attrs in marginals
    ]
    return JointEstimates(
        metric=definition.name,
        version=definition.version,
        kind="joint",
        mechanism=m.method,
        mechanism_reason=definition.mechanism_reason,
        epsilon=m.epsilon,
        n=counts.n,
        confidence=confidence,
        window=window,
        marginals=out,
        post_processing=POST_PROCESSING,
    )


def joint_csv(body: JointEstimates) -> Response:
    """CSV of the marginals: one row per cell."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    header = [
        "marginal",
        "cell",
        "frequency",
        "std_error",
        "ci_low",
        "ci_high",
        "cs_low",
        "cs_high",
    ]
    writer.writerow([*header, "distinguishable_from_zero", "consistent", "n"])
    for marginal in body.marginals:
        for c in marginal.cells:
            writer.writerow(
                [
                    csv_text("×".join(marginal.attributes)),
                    csv_text("×".join(c.cell)),
                    c.frequency,
                    c.std_error,
                    c.ci_low,
                    c.ci_high,
                    c.cs_low,
                    c.cs_high,
                    c.distinguishable_from_zero,
                    c.consistent,
                    marginal.n,
                ]
            )
    name = f"{body.metric}-v{body.version}-{body.window.replace(':', '_')}.csv"
    return Response(
        out.getvalue(),
        mimetype="text/csv",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )

"""The estimates API's query and CSV for a joint metric: its 1- and 2-way marginals.

``GET /v1/estimates/<name>`` of a joint metric answers
:class:`~aggregator.query.answers.JointEstimates`
(:class:`aggregator.query.estimators.JointEstimator` computes it): every
1-way marginal by default; ``?marginal=a,b`` the marginal over those attributes (one or
two; all of them where the layout is ``joint``); ``?by=a`` the marginal grouped by ``a``
(first), alone or with ``marginal``. Each cell has the unbiased ``frequency`` with its
interval and the ``consistent`` estimate beside it (post-processed, labelled).

In full: ``docs/statistics/joint.md``.
"""

from __future__ import annotations

import csv
import io

from flask import Response
from werkzeug.exceptions import BadRequest

from aggregator.query.answers import JointEstimates
from aggregator.safe_text import comma_list, csv_text, not_among
from aggregator.web.downloads import csv_download
from client_sdk.wire import MetricDefinition

__all__ = ["joint_csv", "requested"]


def _attributes(definition: MetricDefinition, raw: str | None, what: str) -> list[int]:
    names = [name for name, _ in definition.attributes]
    if raw is None:
        return []
    wanted = comma_list(raw)
    unknown = not_among(wanted, names)
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
    return csv_download(out.getvalue(), body)

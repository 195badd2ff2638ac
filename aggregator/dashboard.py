"""Operators' pages: every metric at a glance, and one metric's estimates with intervals.

Server-rendered from the same functions the estimates API uses; the pages keep no
state of their own.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, render_template
from werkzeug.exceptions import NotFound

from aggregator.counts import lag, read_counts
from aggregator.estimate import estimate_from_counts
from aggregator.web import estimate_payload

__all__ = ["bp"]

bp = Blueprint("dashboard", __name__, template_folder="templates")


@bp.get("/")
def overview() -> str:
    """Every metric: version, mechanism, ε, n so far, backlog."""
    ext = current_app.extensions["ldp"]
    rows: list[dict[str, Any]] = []
    for definition in ext.registry.all_current():
        counts = read_counts(ext.redis, definition)
        rows.append(
            {
                "definition": definition,
                "n": counts.n,
                "backlog": lag(ext.redis, definition),
            }
        )
    return render_template("overview.html", rows=rows)


@bp.get("/ui/metric/<name>")
def metric(name: str) -> str:
    """One metric: unbiased estimates with intervals, Norm-Sub beside them."""
    ext = current_app.extensions["ldp"]
    definition = ext.registry.get(name)
    if definition is None:
        raise NotFound(f"unknown metric {name!r}")
    est = estimate_from_counts(
        definition.mechanism, read_counts(ext.redis, definition), labels=definition.domain
    )
    body = estimate_payload(definition, est, "all")
    return render_template("metric.html", d=definition, body=body)

"""``POST /v1/reports``: the ingestion endpoint every app sends its batches to."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, request

from collector.body import read_json
from collector.context import services
from collector.ingest import ingest
from collector.models import IngestError, IngestResult, ReportBatch
from ldp_api.models import Error, answer
from ldp_api.openapi import UNAVAILABLE, Reply, documented

__all__ = ["bp"]

bp = Blueprint("reports", __name__)


@bp.post("/v1/reports")
@documented(
    "Append a batch of perturbed reports.",
    {
        202: Reply("Stored (the valid reports).", IngestResult),
        400: Reply("Malformed, or no valid report (then each is in rejected).", IngestError),
        410: Reply(
            "Every report names a retired metric: stop reporting it (retired lists them).",
            IngestError,
        ),
        413: Reply("Too many reports, metric versions or bytes: split the batch.", Error),
        415: Reply("The body is not UTF-8 JSON.", Error),
        503: UNAVAILABLE,
    },
    description="Each report is validated strictly against its metric version; valid ones "
    "are appended (once: replayed ids count as duplicates), invalid ones are listed by "
    "index. 4xx: drop the batch; 503: retry it.",
    body=ReportBatch,
)
def post_reports() -> tuple[dict[str, Any], int]:
    """Validate and append ``{"reports": [...]}``; 202 once Redis has them."""
    body = read_json(request, current_app.config["MAX_BODY_BYTES"])
    result = ingest(body, services(), current_app.config["MAX_REPORTS"])
    return answer(result), 202

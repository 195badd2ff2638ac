"""``POST /v1/reports``: the ingestion endpoint every app sends its batches to."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, request

from collector.body import read_json
from collector.context import services
from collector.ingest import ingest

__all__ = ["bp"]

bp = Blueprint("reports", __name__)


@bp.post("/v1/reports")
def post_reports() -> tuple[dict[str, Any], int]:
    """Validate and append ``{"reports": [...]}``; 202 once Redis has them."""
    body = read_json(request, current_app.config["MAX_BODY_BYTES"])
    result = ingest(body, services(), current_app.config["MAX_REPORTS"])
    return result.to_dict(), 202

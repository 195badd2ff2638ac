"""``POST /v1/reports``: the ingestion endpoint every app sends its batches to."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, request

from collector import plain, quotas
from collector.body import parse_json, read_body
from collector.context import Services, services
from collector.ingest import ingest, reports_of
from collector.models import IngestError, IngestRefusal, IngestResult, ReportBatch
from collector.ohttp_gateway import OBLIVIOUS_ENVIRON_KEY
from collector.ohttp_shuffle import relayed
from ldp_api import projects
from ldp_api.models import Error, answer
from ldp_api.openapi import UNAVAILABLE, Header, Reply, Scheme, documented
from ldp_edge.admission import SOURCE_ENVIRON_KEY, TooManyRequests

__all__ = ["INGEST_KEY", "bp"]

bp = Blueprint("reports", __name__)

INGEST_KEY = Scheme(
    "ingestKey",
    "bearer",
    "An ingest key (a scoped token with scope ingest: ldp tokens create --kind ingest), "
    "asked for only when LDP_REQUIRE_INGEST_KEY is set; public, embedded in apps.",
    setting="REQUIRE_INGEST_KEY",
    unset="absent",
)
"""What ``POST /v1/reports`` wants once ingest keys are required."""

TOO_MANY = Reply(
    "This source (address) sent more requests or reports than its limit allows, or the "
    "project is at its reports-per-minute or memory quota (LDP_PROJECT_QUOTAS); nothing "
    "of the request was stored. Retry after Retry-After seconds.",
    Error,
    {"Retry-After": Header("Seconds until the bucket can pay for the request.", "integer")},
)


@bp.post("/v1/reports")
@documented(
    "Append a batch of perturbed reports.",
    {
        202: Reply("Stored (the valid reports).", IngestResult),
        400: Reply(
            "Malformed, or no valid report (then each is in rejected: invalid, or "
            "implausible under its metric's mechanism).",
            IngestError,
        ),
        401: Reply(
            "Ingest keys are required and none valid was sent: drop the batch.",
            Error,
            {"WWW-Authenticate": Header("Bearer.")},
        ),
        403: Reply("The token sent does not grant ingest.", Error),
        410: Reply(
            "Every report names a retired metric: stop reporting it (retired lists them).",
            IngestError,
        ),
        413: Reply("Too many reports, metric versions or bytes: split the batch.", Error),
        415: Reply("The body is not UTF-8 JSON.", Error),
        429: TOO_MANY,
        503: Reply(
            "Storage could not take (all or some of) the batch now; retry after Retry-After "
            "seconds. With retry, storage took the rest (a Redis Cluster shard down, a "
            "stream's backlog full): send the listed positions alone; the other fields say "
            "what became of the rest, as a 202's do. Without it: send the whole batch. "
            "Resending what was stored is safe: it counts as duplicates.",
            IngestRefusal,
            UNAVAILABLE.headers,
        ),
    },
    description="Each report is validated strictly against its metric version; valid ones "
    "are appended (once: replayed ids count as duplicates), invalid ones, ones of a retired "
    "metric (410 when all are) and ones the "
    "mechanism produces only with negligible probability are listed by index. Each source "
    "has a request and a report budget (429 when spent). 4xx but 429: drop the batch; "
    "429 and 503: retry it after Retry-After (a 503 that lists retry: those positions).",
    body=ReportBatch,
    security=[INGEST_KEY],
    scope="ingest",
)
def post_reports() -> tuple[dict[str, Any], int]:
    """Admit, validate and append ``{"reports": [...]}``; 202 once Redis has them."""
    ctx = services()
    if request.environ.get(OBLIVIOUS_ENVIRON_KEY):  # relayed: to the shuffle pools
        ctx = relayed(ctx)
    body = _admitted(ctx)
    max_reports = current_app.config["MAX_REPORTS"]
    project = projects.current()
    plain_batch = isinstance(body, plain.PlainBatch)
    count = len(body.reports) if plain_batch else len(reports_of(body, max_reports))
    quotas.QUOTAS.get(current_app).admit_reports(ctx.redis, project, count)
    result = ingest(body, ctx, max_reports, project=project)
    return answer(result), 202


def _admitted(ctx: Services) -> Any:
    """The request's body (a :class:`~collector.plain.PlainBatch` when it is one), once its
    source's buckets paid for the request and its reports.

    Raises:
        TooManyRequests: a bucket is empty (counted by limit); nothing was taken from it.
        ApiError: the body is not acceptable JSON (as :func:`~collector.body.read_json`).
    """
    source = request.environ.get(SOURCE_ENVIRON_KEY)
    count = 0  # reports of a request refused before its body was read: not known
    try:
        if source is not None:
            ctx.admission.admit_request(source)
        raw = read_body(request, current_app.config["MAX_BODY_BYTES"])
        max_reports = current_app.config["MAX_REPORTS"]
        body = plain.decode(raw, max_reports) or parse_json(raw)
        if source is not None:
            count = len(reports_of(body, max_reports))
            ctx.admission.admit_reports(source, count)
    except TooManyRequests as exc:
        ctx.telemetry.rate_limited.labels(limit=exc.limit).inc()
        ctx.telemetry.rate_limited_reports.labels(limit=exc.limit).inc(count)
        assert source is not None  # only a known source is refused
        ctx.throttle_log.refused(source, exc.limit, count)
        raise
    return body

"""``GET /v1/audit-log``: the admin actions, newest first (scope ``audit:read``).

Docs: docs/guides/teams.md; the log itself: :mod:`ldp_store.auditlog`.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, request
from pydantic import ValidationError

from collector.api_metrics import ADMIN_TOKEN
from collector.errors import ApiError
from collector.models import AuditEntry, AuditPage, AuditQuery
from ldp_api import auditing, auth
from ldp_api.models import Error, answer
from ldp_api.openapi import UNAVAILABLE, Header, Reply, documented

__all__ = ["bp"]

bp = Blueprint("audit", __name__)


@bp.get("/v1/audit-log")
@documented(
    "The audit log: every admin action with actor, project, time and outcome.",
    {
        200: Reply("Entries, newest first.", AuditPage),
        400: Reply("A bad limit or cursor.", Error),
        401: Reply("No bearer token.", Error, {"WWW-Authenticate": Header("Bearer.")}),
        403: Reply("Wrong token, or one without audit:read.", Error),
        503: UNAVAILABLE,
    },
    query=AuditQuery,
    security=[ADMIN_TOKEN],
    scope="audit:read",
    audit="audit.read",
)
def audit_log() -> dict[str, Any]:
    """The newest ``limit`` entries (before ``before``) the caller's project may see."""
    try:
        query = AuditQuery.model_validate(request.args.to_dict())
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
        raise ApiError(400, "invalid audit-log query", problems) from None
    who = auth.current()
    project = who.project if who is not None else None
    entries = auditing.AUDIT.get().read(query.limit, query.before)
    shown = [e for e in entries if project is None or e.project == project]
    cursor = entries[-1].id if len(entries) == query.limit else None
    return answer(AuditPage(entries=[AuditEntry(**e.to_dict()) for e in shown], next=cursor))

"""Every admin action into the audit log, from one ``after_request`` hook.

A view names its action beside its route (``@documented(..., audit="metric.retire")``);
after it answers, :func:`install`'s hook appends who (the request's token, by name or
prefix), the project, the target (the metric or token of the URL, or the token made),
the outcome (``ok``, ``refused`` for 401/403, ``failed``) and the status to
:class:`ldp_store.auditlog.AuditLog`. Nothing of the request's origin or of any device.
Docs: docs/guides/teams.md.
"""

from __future__ import annotations

import logging

import redis
from flask import Flask, Response, current_app, request
from redis.exceptions import RedisClusterException

from ldp_api import auth, projects
from ldp_api.context import Slot
from ldp_api.openapi import operation_of
from ldp_store.auditlog import AuditLog, AuditRecord
from ldp_store.tokens import parse

__all__ = ["AUDIT", "action_of", "install", "outcome_of"]

log = logging.getLogger(__name__)

AUDIT: Slot[AuditLog] = Slot("ldp.audit", AuditLog)
"""The app's audit log (:func:`install` attaches it)."""


def outcome_of(status: int) -> str:
    """``ok`` below 400, ``refused`` for 401 and 403, else ``failed``."""
    if status < 400:
        return "ok"
    return "refused" if status in (401, 403) else "failed"


def action_of(app: Flask, endpoint: str, status: int) -> str | None:
    """The audit action of a call of ``endpoint`` answered ``status`` (None: not audited).
    A metric's PUT is ``metric.create`` when it made a version (201)."""
    view = app.view_functions.get(endpoint)
    operation = operation_of(view) if view is not None else None
    action = operation.audit if operation is not None else None
    if action == "metric.change" and status == 201:
        return "metric.create"
    return action


def _actor() -> str:
    who = auth.current()
    if who is not None:
        return who.actor
    # Refused: name a scoped token by its prefix (not secret); anything else by nothing.
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    found = parse(value.strip()) if scheme.lower() == "bearer" else None
    return f"ldp_{found}" if found else "anonymous"


def _target(response: Response) -> str:
    args = request.view_args or {}
    target = str(args.get("name") or args.get("prefix") or "")
    if (
        response.status_code == 201
        and response.is_json
        and request.endpoint == "tokens.create_token"
    ):
        body = response.get_json(silent=True) or {}
        target = str(body.get("prefix", target))
    return target


def record(response: Response) -> Response:
    """The ``after_request`` hook: append the call's entry when its view is audited."""
    endpoint = request.endpoint
    if endpoint is None or request.method == "OPTIONS":
        return response
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    action = action_of(app, endpoint, response.status_code)
    if action is None:
        return response
    entry = AuditRecord(
        action=action,
        actor=_actor(),
        project=projects.current(),
        target=_target(response),
        outcome=outcome_of(response.status_code),
        status=response.status_code,
    )
    try:
        AUDIT.get(app).append(entry)
    except (redis.RedisError, RedisClusterException) as exc:
        # The action happened (or was refused) whatever the log says: it is logged here.
        log.error("audit entry not written (%s): %s", type(exc).__name__, entry)
    return response


def install(app: Flask, audit_log: AuditLog) -> None:
    """Attach ``audit_log`` and the hook to ``app`` (once)."""
    if AUDIT.find(app) is not None:
        return
    AUDIT.attach(app, audit_log)
    app.after_request(record)

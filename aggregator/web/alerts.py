"""``/v1/alerts``: alert rules, their state, the history and the dead letters.

Reading wants the read token (when one is set), changing a rule the admin token (as a
metric change does). The views decode and call :class:`aggregator.alerts.evaluate.Alerts`,
which the workers and ``ldp alerts`` use too. Guide: ``docs/guides/alerts.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any

from flask import Blueprint, current_app, request
from pydantic import Field, ValidationError
from werkzeug.exceptions import BadRequest, Conflict, NotFound

from aggregator.alerts.evaluate import Alerts, RuleRefused
from aggregator.alerts.rules import AlertSpec
from aggregator.web.access import UNAUTHORIZED, documented_read
from aggregator.web.estimates import min_segment_reports
from ldp_api.context import shared
from ldp_api.models import Error, Model, answer
from ldp_api.openapi import UNAVAILABLE, Header, Reply, Scheme, View, documented
from ldp_store import alerts as store

__all__ = ["ADMIN", "AlertList", "AlertRule", "bp"]

bp = Blueprint("alerts", __name__)

ADMIN = Scheme(
    "adminToken",
    "bearer",
    "LDP_ADMIN_TOKEN: metric changes. It also grants reads.",
    setting="ADMIN_TOKEN",
    unset="disabled",
)
"""What a change to a rule wants (the same scheme as a metric change)."""


def _operator(
    summary: str, replies: Mapping[int, Reply], audit: str, **more: Any
) -> Callable[[View], View]:
    """:func:`documented` for a change of rules: the admin token, audited."""
    return documented(
        summary, replies, security=[ADMIN], scope="metrics:write", audit=audit, **more
    )


MAX_SILENCE_SECONDS = 30 * 86400
"""The longest silence: a month; a rule nobody wants for longer should be deleted."""


class AlertRule(Model):
    """A rule with its arming and state."""

    id: str
    """The rule's id."""
    spec: AlertSpec
    """The rule as defined."""
    summary: str
    """The rule in words."""
    created: float
    """When it was defined (Unix seconds)."""
    version: int
    """The metric version it is armed on."""
    armed_at: float | None
    """Since when its reports are tested (Unix seconds): creation, a resolve or a new
    metric version; None while it waits (``waiting``)."""
    origin: list[int] | None
    """(n, Σ, Σ²) of the metric's reports when armed: the test uses the reports since."""
    waiting: str | None = None
    """Why the rule is not armed yet: its group is hidden from the metric's breakdown
    (``LDP_MIN_SEGMENT_REPORTS``), and its figures would disclose it. Armed once shown."""
    baseline: dict[str, Any] | None
    """``change``: the baseline's n, estimate and interval (at α/2), frozen when armed."""
    expected_delay: dict[str, Any] | None
    """Reports until it typically fires if the estimand is ``truth`` (a 2× change)."""
    status: str
    """``ok``, ``firing`` or ``acknowledged``."""
    firing: dict[str, Any] | None
    """The firing (what was sent), while it fires."""
    acknowledged: dict[str, Any] | None
    """The acknowledgement of the firing, if any."""
    silenced_until: float | None
    """No notifications until then (Unix seconds)."""
    last: dict[str, Any] | None
    """The latest evaluation: n, estimate, interval, firing."""


class AlertList(Model):
    """Every rule, the newest events and the newest dead letters."""

    rules: list[AlertRule]
    """Every rule."""
    events: list[dict[str, Any]]
    """What happened, newest first (fired, acknowledged, resolved, silenced, ...)."""
    dead_letters: list[dict[str, Any]]
    """Notifications that failed every attempt, newest first."""


class AlertPath(Model):
    """The ``<rule_id>`` of a rule's URL."""

    rule_id: Annotated[str, Field(max_length=64)]
    """The rule's id."""


class AlertNote(Model):
    """An optional note on an acknowledgement or a resolve."""

    closed = True

    note: Annotated[str, Field(max_length=500)] = ""
    """Free text kept with the event."""


class AlertSilence(Model):
    """How long to send no notifications of a rule."""

    closed = True

    seconds: Annotated[int, Field(ge=0, le=MAX_SILENCE_SECONDS)]
    """Seconds from now (0: unsilence)."""


_ADMIN_REPLIES = {
    401: Reply("No bearer token.", Error, {"WWW-Authenticate": Header("Bearer.")}),
    403: Reply("Wrong token, or changes are disabled (no LDP_ADMIN_TOKEN).", Error),
    503: UNAVAILABLE,
}


def _body(model: type[Model], optional: bool = False) -> Any:
    raw = request.get_json(silent=True)
    if raw is None:
        if optional and not request.get_data():
            raw = {}
        else:
            raise BadRequest("the body must be a JSON object")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        problems = [f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors()]
        raise BadRequest("; ".join(problems)[:1000]) from None


def _alerts() -> Alerts:
    ext = shared()
    return Alerts(
        ext.redis,
        ext.registry,
        current_app.config.get("PUBLIC_URL") or "",
        min_segment_reports=min_segment_reports(),
    )


def _one(alerts: Alerts, rule_id: str) -> dict[str, Any]:
    for rule in alerts.listing():
        if rule["id"] == rule_id:
            return answer(AlertRule.model_validate(rule))
    raise NotFound(f"unknown alert rule {rule_id!r}")


@bp.get("/v1/alerts")
@documented_read(
    "Every alert rule with its state, the recent events and the dead letters.",
    {200: Reply("The rules.", AlertList), 401: UNAUTHORIZED, 503: UNAVAILABLE},
)
def list_alerts() -> dict[str, Any]:
    """Every rule, the newest 100 events, the newest 100 dead letters."""
    alerts = _alerts()
    body = AlertList(
        rules=[AlertRule.model_validate(r) for r in alerts.listing()],
        events=store.recent_events(alerts.redis),
        dead_letters=store.dead_letters(alerts.redis),
    )
    return answer(body)


@bp.post("/v1/alerts")
@_operator(
    "Define an alert rule (operators only); it is armed at once.",
    {
        201: Reply("The rule, armed.", AlertRule),
        400: Reply("A rule its metric cannot hold; every problem in the error.", Error),
        **_ADMIN_REPLIES,
    },
    "alert.create",
    body=AlertSpec,
)
def create_alert() -> tuple[dict[str, Any], int]:
    """Store and arm a rule."""
    spec = _body(AlertSpec)
    alerts = _alerts()
    try:
        rule = alerts.create(spec)
    except RuleRefused as exc:
        raise BadRequest(str(exc)[:1000]) from None
    return _one(alerts, rule["id"]), 201


@bp.get("/v1/alerts/<rule_id>")
@documented_read(
    "One alert rule with its state.",
    {
        200: Reply("The rule.", AlertRule),
        401: UNAUTHORIZED,
        404: Reply("No such rule.", Error),
        503: UNAVAILABLE,
    },
    path=AlertPath,
)
def get_alert(rule_id: str) -> dict[str, Any]:
    """One rule."""
    return _one(_alerts(), rule_id)


@bp.delete("/v1/alerts/<rule_id>")
@_operator(
    "Delete an alert rule (operators only).",
    {204: Reply("Deleted."), 404: Reply("No such rule.", Error), **_ADMIN_REPLIES},
    "alert.delete",
    path=AlertPath,
)
def delete_alert(rule_id: str) -> tuple[str, int]:
    """Forget a rule."""
    try:
        _alerts().delete(rule_id)
    except KeyError:
        raise NotFound(f"unknown alert rule {rule_id!r}") from None
    return "", 204


def _change(rule_id: str, action: str) -> dict[str, Any]:
    alerts = _alerts()
    try:
        if action == "silence":
            alerts.silence(rule_id, _body(AlertSilence).seconds)
        elif action == "acknowledge":
            alerts.acknowledge(rule_id, _body(AlertNote, optional=True).note)
        else:
            alerts.resolve(rule_id, _body(AlertNote, optional=True).note)
    except KeyError:
        raise NotFound(f"unknown alert rule {rule_id!r}") from None
    except RuleRefused as exc:
        raise Conflict(str(exc)[:1000]) from None
    return _one(alerts, rule_id)


_CHANGE_REPLIES = {
    200: Reply("The rule, changed.", AlertRule),
    400: Reply("A body that is not the documented object.", Error),
    404: Reply("No such rule.", Error),
    409: Reply(
        "Not possible in the rule's state (acknowledging a rule not firing; "
        "re-arming without a baseline).",
        Error,
    ),
    **_ADMIN_REPLIES,
}


_CHANGES: dict[str, tuple[str, type[Model], str]] = {
    "acknowledge": (
        "Acknowledge a firing rule (operators only).",
        AlertNote,
        "Someone is on it: the rule stays firing, marked acknowledged.",
    ),
    "resolve": (
        "Resolve a rule: end its firing and re-arm it from now (operators only).",
        AlertNote,
        "End the firing; the rule tests the reports from now on, with its own α.",
    ),
    "silence": (
        "Send no notifications of a rule for a while (operators only).",
        AlertSilence,
        "Silence (or, with 0 seconds, unsilence) a rule's notifications.",
    ),
}
"""The changes of a rule's state: ``POST /v1/alerts/<rule_id>/<action>``, each with its
summary, its body and its view's docstring."""


def _change_view(action: str, summary: str, body: type[Model], doc: str) -> None:
    def view(rule_id: str) -> dict[str, Any]:
        return _change(rule_id, action)

    view.__name__ = view.__qualname__ = f"{action}_alert"
    view.__doc__ = doc
    operation = _operator(summary, _CHANGE_REPLIES, f"alert.{action}", path=AlertPath, body=body)
    bp.post(f"/v1/alerts/<rule_id>/{action}")(operation(view))


for _action, (_summary, _body_model, _doc) in _CHANGES.items():
    _change_view(_action, _summary, _body_model, _doc)

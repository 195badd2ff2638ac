"""The project a request acts in, and its metric names qualified, in one hook.

A scoped token acts in its own project; a configured token (and a request without
one, on the routes that stay open) in the one ``?project=`` names, else ``default``.
A scoped token asked to act in another project is refused (403), one no longer valid
(401: it names no project, and the default one is not its app's), and a report to a
project of ``LDP_INGEST_KEY_PROJECTS`` without an ingest key (401). :func:`enter` runs
after the scope check (:mod:`ldp_api.auth`): it sets
:data:`ldp_store.projects.CURRENT` (every listing of the registry then holds the
project's metrics only) and turns the URL's ``<name>`` into the stored, qualified name,
so no view names another project's metric. URLs the app makes keep the project
(:func:`keep_project`). Docs: docs/guides/teams.md.
"""

from __future__ import annotations

from contextvars import Token as VarToken
from typing import Any

from flask import Flask, Response, current_app, g, jsonify, request

from ldp_api import auth
from ldp_api.models import Error, answer
from ldp_store import projects

__all__ = ["DEFAULT_ONLY", "current", "enter", "install", "qualified"]

DEFAULT_ONLY = frozenset({"alerts", "dashboard.alerts_page", "ops.prometheus"})
"""Blueprints and endpoints of the default project only: alert rules (not yet per
project) and ``/metrics`` (the deployment's own telemetry, for its operators). Another
project's request gets 404 there."""


DEPLOYMENT_WIDE = frozenset({"ops.prometheus"})
"""Endpoints that list every project's metrics (for the default project's requests):
``/metrics``, the platform team's scrape (counts and lag by stored name, no estimate)."""

DEFINITIONS = frozenset({"metrics.list_metrics", "metrics.get_metric"})
"""The open endpoints that serve a project's definitions to apps (the app's ingest key
says which project)."""

NOT_METRICS = frozenset({"sdk"})
"""Blueprints whose ``<name>`` is no metric's (the SDK module's files): left as sent."""


def current() -> str:
    """The project of the current request: as :func:`enter` found it, else (a request
    refused before it) the scoped token's, else ``default``."""
    if "ldp_project" in g:
        return str(g.ldp_project)
    who = auth.current()
    return who.project if who is not None and who.project else projects.DEFAULT


def qualified(name: str) -> str:
    """``name`` (a bare metric name) as stored in the current request's project."""
    return projects.qualify(current(), name)


def _refuse(status: int, error: str, details: list[str]) -> Response:
    response = jsonify(answer(Error(error=error, details=details)))
    response.status_code = status
    return response


def enter() -> Response | None:
    """The ``before_request`` hook (after :func:`ldp_api.auth.check`): None to go on."""
    req = request._get_current_object()  # type: ignore[attr-defined]  # one proxy look-up
    endpoint = req.endpoint
    if endpoint is None:
        return None
    state = g._get_current_object()
    who, stale = _principal(state)
    own = who.project if who is not None and who.token is not None else None
    query = req.args
    asked = query["project"] if "project" in query else None  # .get raises inside: slow
    refused = _stale_token(endpoint) if stale else None
    if refused is None:
        refused = _check_asked(asked, own)
    if refused is not None:
        return refused
    project = own or asked or projects.DEFAULT
    if _needs_ingest_key(project, who, endpoint):
        # This project's reports need one of its keys (a key of another project was
        # refused above, when it asked for this one; without ?project= it acts in its own).
        return auth.refuse_json("ingest", "missing" if who is None else "invalid")
    state.ldp_project = project
    state.ldp_project_asked = asked
    # /metrics is the deployment's: its gauges cover every project's metrics.
    listed = None if endpoint in DEPLOYMENT_WIDE else project
    state.ldp_project_var = projects.CURRENT.set(listed)
    return _qualify_name(req, project, endpoint)


def _principal(state: Any) -> tuple[auth.Principal | None, bool]:
    """Who sent the request, and whether they sent a scoped token that is not valid."""
    if "ldp_principal" in state:  # the scope check read the credential
        return state.ldp_principal, "ldp_stale_token" in state
    who = auth.sent_principal()
    return who, who is None and auth.sent_scoped_token()


def _check_asked(asked: str | None, own: str | None) -> Response | None:
    """The refusal of a ``?project=`` that is not a project name, or not the token's own."""
    if asked is None:
        return None
    try:
        projects.check_project(asked)
    except ValueError as exc:
        return _refuse(400, "invalid project", [str(exc)])
    if own is not None and asked != own:
        return _refuse(
            403,
            f"this token is of project {own!r}, not {asked!r}",
            ["a scoped token acts in its own project only"],
        )
    return None


def _needs_ingest_key(project: str, who: auth.Principal | None, endpoint: str) -> bool:
    """Whether a report route of a project of ``LDP_INGEST_KEY_PROJECTS`` lacks the key."""
    return (
        project in current_app.config.get("INGEST_KEY_PROJECTS", ())
        and (who is None or "ingest" not in who.scopes)
        and auth.scope_of(current_app, endpoint) == "ingest"
    )


def _qualify_name(req: Any, project: str, endpoint: str) -> Response | None:
    """Turn the URL's ``<name>`` into the project's stored name (or refuse the route)."""
    if project == projects.DEFAULT:
        name = (req.view_args or {}).get("name")
        if isinstance(name, str) and "/" in name:  # never a bare name: no route reaches
            return _unknown()  # another project's metric this way
        return None
    if req.blueprint in DEFAULT_ONLY or endpoint in DEFAULT_ONLY:
        return _refuse(
            404,
            f"not available in project {project!r}",
            ["alert rules and /metrics are the default project's (docs/guides/teams.md)"],
        )
    args = req.view_args
    if args and isinstance(args.get("name"), str) and req.blueprint not in NOT_METRICS:
        if "/" in args["name"]:
            return _unknown()
        args["name"] = projects.qualify(project, args["name"])
    return None


def _stale_token(endpoint: str) -> Response | None:
    """The refusal of a scoped token that is no longer valid (revoked, expired, unknown) on
    a route that acts in a project: it names no project any more, and the default one is
    not its app's (its reports would count in a metric of the same name there)."""
    scope = auth.scope_of(current_app, endpoint)
    if scope is None and endpoint not in DEFINITIONS:
        return None  # health, the document, the assets: nothing of a project's
    if scope is None or scope == "ingest":
        return auth.refuse_json("ingest", "invalid")
    return auth.refuse(scope, "invalid")


def _unknown() -> Response:
    return _refuse(404, "unknown metric", ["a metric name has no '/'"])


def leave(_: BaseException | None) -> None:
    """The ``teardown_request`` hook: the request's project is no longer current."""
    var: VarToken[str | None] | None = g.pop("ldp_project_var", None)
    if var is not None:
        try:
            projects.CURRENT.reset(var)
        except ValueError:  # set in another context (a copied one): leave it be
            projects.CURRENT.set(None)


def keep_project(endpoint: str, values: dict[str, Any]) -> None:
    """The ``url_defaults`` hook: a URL made in a request names the bare metric, and the
    project when the request named one (``?project=``)."""
    name = values.get("name")
    if isinstance(name, str):
        values["name"] = projects.bare(name)
    asked = g.get("ldp_project_asked") if g else None
    if asked and "project" not in values:
        values["project"] = asked


def install(app: Flask) -> None:
    """Attach the hooks to ``app`` (after :func:`ldp_api.auth.install`)."""
    app.before_request(enter)
    app.teardown_request(leave)
    app.url_defaults(keep_project)

"""``/v1/tokens``: scoped tokens over the API (scope ``tokens:manage``), as ``ldp tokens``.

Create (the text is answered once; only its prefix is kept and shown), list, rotate
(a new token, the old one working for an overlap) and revoke (refused by every worker
once the answer comes: :meth:`ldp_store.tokens.TokenStore.revoke`). A scoped token can
give no scope it does not hold itself, and acts on its own project only. Docs:
docs/guides/teams.md.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, TypeVar

from flask import Blueprint, current_app, request
from pydantic import BaseModel, ValidationError

from collector.api_metrics import ADMIN_TOKEN
from collector.body import read_json
from collector.errors import ApiError
from collector.models import (
    NewToken,
    RotateRequest,
    TokenInfo,
    TokenList,
    TokenOfKind,
    TokenPath,
    TokenRequest,
)
from ldp_api import auth, projects
from ldp_api.models import Error, answer
from ldp_api.openapi import UNAVAILABLE, Header, Reply, documented
from ldp_store.tokens import KINDS, Token, TokenStore, UnknownToken

__all__ = ["bp", "info"]

bp = Blueprint("tokens", __name__)

M = TypeVar("M", bound=BaseModel)

_AUTH: dict[int, Reply] = {
    401: Reply("No bearer token.", Error, {"WWW-Authenticate": Header("Bearer.")}),
    403: Reply(
        "Wrong token, one without tokens:manage, asking for scopes it lacks itself, or "
        "admin actions are disabled.",
        Error,
    ),
    503: UNAVAILABLE,
}
_UNKNOWN = {404: Reply("No such token (or one of another project).", Error)}


def _iso(stamp: float | None) -> str | None:
    if stamp is None:
        return None
    return datetime.fromtimestamp(stamp, UTC).isoformat().replace("+00:00", "Z")


def info(token: Token, now: float) -> dict[str, Any]:
    """A token's record as the API answers it (never the secret)."""
    return {
        "prefix": token.prefix,
        "name": token.name,
        "project": token.project,
        "scopes": sorted(token.scopes),
        "created": _iso(token.created),
        "expires": _iso(token.expires),
        "revoked": _iso(token.revoked),
        "created_by": token.created_by,
        "replaced_by": token.replaced_by,
        "active": token.valid(now),
    }


def _body(model: type[M]) -> M:
    raw = read_json(request, current_app.config["MAX_BODY_BYTES"])
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()
        ]
        raise ApiError(400, "invalid token request", problems) from None


def _who() -> auth.Principal:
    who = auth.current()
    if who is None:  # the hook let no one without tokens:manage through
        raise ApiError(403, "the admin token is not valid")
    return who


def _store() -> TokenStore:
    return auth.POLICY.get().tokens


def _mine(prefix: str) -> Token:
    """The token ``prefix`` if the caller's project holds it (404 otherwise: whether
    another project has it is not the caller's to know)."""
    try:
        token = _store().get(prefix)
    except UnknownToken:
        token = None
    who = _who()
    if token is None or (who.project is not None and token.project != who.project):
        raise ApiError(404, f"no token {prefix}", ["GET /v1/tokens lists them"])
    return token


@bp.post("/v1/tokens")
@documented(
    "Create a scoped token: its text is in this answer only.",
    {
        201: Reply("Created.", NewToken),
        400: Reply("Invalid request; every problem is in details.", Error),
        413: Reply("The body is too large.", Error),
        415: Reply("The body is not UTF-8 JSON.", Error),
        **_AUTH,
    },
    body=TokenRequest,
    security=[ADMIN_TOKEN],
    scope="tokens:manage",
    audit="token.create",
)
def create_token() -> tuple[dict[str, Any], int]:
    """Make a token of a kind (or with scopes) for the caller's project."""
    spec = _body(TokenRequest).root
    scopes = KINDS[spec.kind] if isinstance(spec, TokenOfKind) else frozenset(spec.scopes)
    who = _who()
    beyond = sorted(scopes - who.scopes)
    if beyond:
        raise ApiError(403, f"this token cannot give scopes it does not hold: {beyond}")
    store = _store()
    project = who.project or projects.current()  # a configured token: ?project=, or default
    text, token = store.create(spec.name, scopes, project, spec.expires_in, who.actor)
    return answer(NewToken(token=text, **info(token, store.clock()))), 201


@bp.get("/v1/tokens")
@documented(
    "Every token of the caller's project (prefixes only, revoked and expired too).",
    {200: Reply("The tokens.", TokenList), **_AUTH},
    security=[ADMIN_TOKEN],
    scope="tokens:manage",
    audit="token.list",
)
def list_tokens() -> dict[str, Any]:
    """The tokens the caller may manage."""
    store = _store()
    now = store.clock()
    asked = request.args.get("project")  # a configured token's choice (else: every project)
    tokens = store.list(_who().project or asked)
    return answer(TokenList(tokens=[TokenInfo(**info(t, now)) for t in tokens]))


@bp.post("/v1/tokens/<prefix>/rotate")
@documented(
    "Replace a token: a new one with the same scopes; the old one works for the overlap.",
    {
        201: Reply("The new token (its text in this answer only).", NewToken),
        400: Reply("Invalid request, or the token is revoked or expired.", Error),
        **_UNKNOWN,
        **_AUTH,
    },
    path=TokenPath,
    body=RotateRequest,
    security=[ADMIN_TOKEN],
    scope="tokens:manage",
    audit="token.rotate",
)
def rotate_token(prefix: str) -> tuple[dict[str, Any], int]:
    """Rotate ``prefix``: the old token expires ``overlap`` seconds from now."""
    spec = _body(RotateRequest) if request.content_length else RotateRequest()
    old = _mine(prefix)
    store = _store()
    try:
        text, new, _ = store.rotate(old.id, spec.overlap, _who().actor)
    except ValueError as exc:
        raise ApiError(400, str(exc)) from None
    return answer(NewToken(token=text, **info(new, store.clock()))), 201


@bp.post("/v1/tokens/<prefix>/revoke")
@documented(
    "Revoke a token: once this answers, every worker refuses it.",
    {200: Reply("Revoked.", TokenInfo), **_UNKNOWN, **_AUTH},
    path=TokenPath,
    security=[ADMIN_TOKEN],
    scope="tokens:manage",
    audit="token.revoke",
)
def revoke_token(prefix: str) -> dict[str, Any]:
    """Revoke ``prefix`` (again: no change)."""
    token = _mine(prefix)
    store = _store()
    return answer(TokenInfo(**info(store.revoke(token.id), store.clock())))

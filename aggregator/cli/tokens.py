"""``ldp tokens create|list|rotate|revoke``: scoped tokens over ``/v1/tokens``.

Each command calls the API with a token granting ``tokens:manage`` (``--token`` or
``LDP_ADMIN_TOKEN``); a new token's text is printed once, on stdout alone, so
``TOKEN=$(ldp tokens create ...)`` keeps it. Docs: docs/guides/teams.md.
"""

from __future__ import annotations

from typing import Any

import click
from rich.table import Table

from aggregator.cli.console import echo_json, err, out
from aggregator.cli.metrics import URL_OPTION
from aggregator.cli.remote import request_json
from ldp_store.tokens import SCOPES

__all__ = ["tokens"]

TOKEN_OPTION = click.option(
    "--token",
    envvar="LDP_ADMIN_TOKEN",
    help="A token granting tokens:manage (or LDP_ADMIN_TOKEN).",
)


def _need(token: str | None) -> str:
    if not token:
        raise click.UsageError(
            "a token granting tokens:manage is needed: --token or LDP_ADMIN_TOKEN"
        )
    return token


def _url(url: str, path: str = "") -> str:
    return f"{url.rstrip('/')}/v1/tokens{path}"


def _prefix(ctx: click.Context, param: click.Parameter, value: str) -> str:
    text = value if value.startswith("ldp_") else f"ldp_{value}"
    if len(text) != 16 or any(c not in "0123456789abcdef" for c in text[4:]):
        raise click.BadParameter(f"a token prefix is ldp_ and 12 hex digits, got {value!r}")
    return text


PREFIX_ARGUMENT = click.argument("prefix", callback=_prefix)


def _show_new(body: dict[str, Any], as_json: bool) -> None:
    if as_json:
        echo_json(body)
        return
    click.echo(body["token"])
    expires = body["expires"] or "never"
    err.print(
        f"created {body['prefix']} ({body['name']}; {', '.join(body['scopes'])}; expires "
        f"{expires}). The line above is the token: it is shown only now."
    )


@click.group()
def tokens() -> None:
    """Scoped tokens: create, list, rotate, revoke (stored hashed; shown once)."""


@tokens.command("create")
@click.argument("name")
@click.option(
    "--kind",
    type=click.Choice(["ingest", "read", "admin"]),
    help="ingest (apps' reports), read (estimates, dashboard) or admin (all but ingest).",
)
@click.option(
    "--scope", "scopes", multiple=True, type=click.Choice(SCOPES), help="A scope (repeatable)."
)
@click.option("--expires-in", type=click.IntRange(min=1), help="Seconds until it expires.")
@URL_OPTION
@TOKEN_OPTION
@click.option("--json", "as_json", is_flag=True, help="The answer as JSON (with the token).")
def tokens_create(
    name: str,
    kind: str | None,
    scopes: tuple[str, ...],
    expires_in: int | None,
    url: str,
    token: str | None,
    as_json: bool,
) -> None:
    """Create a token NAME of a --kind, or with --scope(s); print it once."""
    if (kind is None) == (not scopes):
        raise click.UsageError("give exactly one of --kind and --scope")
    body: dict[str, Any] = {"name": name}
    if kind:
        body["kind"] = kind
    else:
        body["scopes"] = list(scopes)
    if expires_in is not None:
        body["expires_in"] = expires_in
    _show_new(request_json(_url(url), "POST", body, _need(token)), as_json)


@tokens.command("list")
@URL_OPTION
@TOKEN_OPTION
@click.option("--json", "as_json", is_flag=True, help="The answer as JSON.")
def tokens_list(url: str, token: str | None, as_json: bool) -> None:
    """List the tokens (prefixes, scopes, expiry, revocation; never the secrets)."""
    body = request_json(_url(url), token=_need(token))
    if as_json:
        echo_json(body)
        return
    table = Table("prefix", "name", "project", "scopes", "expires", "state")
    for t in body["tokens"]:
        state = "revoked" if t["revoked"] else ("active" if t["active"] else "expired")
        if t["replaced_by"] and t["active"]:
            state = f"active until rotated out ({t['replaced_by']})"
        table.add_row(
            t["prefix"],
            t["name"],
            t["project"],
            " ".join(t["scopes"]),
            t["expires"] or "never",
            state,
        )
    out.print(table)


@tokens.command("rotate")
@PREFIX_ARGUMENT
@click.option(
    "--overlap",
    type=click.IntRange(min=0),
    default=86400,
    show_default=True,
    help="Seconds the old token keeps working (0: none).",
)
@URL_OPTION
@TOKEN_OPTION
@click.option("--json", "as_json", is_flag=True, help="The answer as JSON (with the token).")
def tokens_rotate(prefix: str, overlap: int, url: str, token: str | None, as_json: bool) -> None:
    """Replace token PREFIX by a new one (printed once); the old one works --overlap more."""
    body = request_json(_url(url, f"/{prefix}/rotate"), "POST", {"overlap": overlap}, _need(token))
    _show_new(body, as_json)


@tokens.command("revoke")
@PREFIX_ARGUMENT
@URL_OPTION
@TOKEN_OPTION
def tokens_revoke(prefix: str, url: str, token: str | None) -> None:
    """Revoke token PREFIX: once this returns, every worker refuses it."""
    body = request_json(_url(url, f"/{prefix}/revoke"), "POST", {}, _need(token))
    out.print(f"revoked {body['prefix']} ({body['name']})")

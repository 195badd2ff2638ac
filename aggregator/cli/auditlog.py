"""``ldp audit-log``: the admin actions, newest first, from ``GET /v1/audit-log``.

Needs a token granting ``audit:read`` (``--token`` or ``LDP_ADMIN_TOKEN``).
Docs: docs/guides/teams.md.
"""

from __future__ import annotations

import urllib.parse

import click
from rich.table import Column, Table

from aggregator.cli.console import echo_json, out
from aggregator.cli.metrics import URL_OPTION
from aggregator.cli.remote import request_json

__all__ = ["audit_log"]

MAX_PAGE = 1000
"""Entries one request asks for at most (the API's own limit)."""


@click.command("audit-log")
@click.option(
    "--limit",
    type=click.IntRange(1, 100_000),
    default=50,
    show_default=True,
    help="Entries to show, newest first.",
)
@URL_OPTION
@click.option("--token", envvar="LDP_ADMIN_TOKEN", help="A token granting audit:read.")
@click.option("--json", "as_json", is_flag=True, help="The entries as JSON.")
def audit_log(limit: int, url: str, token: str | None, as_json: bool) -> None:
    """Who did which admin action (metrics, tokens, exports), when, and how it ended."""
    if not token:
        raise click.UsageError("a token granting audit:read is needed: --token or LDP_ADMIN_TOKEN")
    entries: list[dict[str, str]] = []
    before: str | None = None
    while len(entries) < limit:
        query = {"limit": str(min(MAX_PAGE, limit - len(entries)))}
        if before:
            query["before"] = before
        page = request_json(
            f"{url.rstrip('/')}/v1/audit-log?{urllib.parse.urlencode(query)}", token=token
        )
        entries += page["entries"]
        before = page["next"]
        if not before:
            break
    if as_json:
        echo_json({"entries": entries})
        return
    names = ("time", "actor", "action", "target", "project", "outcome")
    table = Table(*(Column(n, overflow="fold") for n in names))  # whole, on any width
    for e in entries:
        outcome = e["outcome"] if e["outcome"] == "ok" else f"{e['outcome']} ({e['status']})"
        table.add_row(e["time"], e["actor"], e["action"], e["target"], e["project"], outcome)
    out.print(table)

"""``ldp alerts``: define, list, acknowledge, resolve, silence and delete alert rules.

Every command talks to the ``ldp serve`` at ``--url`` (``LDP_URL``) through
``/v1/alerts`` (:mod:`aggregator.web.alerts`); changes want the admin token
(``LDP_ADMIN_TOKEN``), the listing the read token or the admin token. Guide:
docs/guides/alerts.md.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from typing import Any

import click
from rich.table import Table

from aggregator.cli.console import echo_json, out
from aggregator.cli.metrics import URL_OPTION
from aggregator.cli.options import stacked
from aggregator.cli.remote import exchange, request_json

__all__ = ["alerts"]

_KINDS = ("share_above", "share_below", "mean_above", "mean_below", "change")

URL = URL_OPTION
ADMIN = click.option("--token", envvar="LDP_ADMIN_TOKEN", help="Admin token (or LDP_ADMIN_TOKEN).")


def _base(url: str) -> str:
    return f"{url.rstrip('/')}/v1/alerts"


def _rule_url(url: str, rule_id: str) -> str:
    return f"{_base(url)}/{urllib.parse.quote(rule_id, safe='')}"


def _need(token: str | None) -> str:
    if not token:
        raise click.UsageError("an admin token is needed: --token or LDP_ADMIN_TOKEN")
    return token


def _line(rule: dict[str, Any]) -> str:
    delay = rule.get("expected_delay") or {}
    when = (
        f"; typically fires {delay['reports']:,} reports after the estimand reaches "
        f"{delay['truth']:.4g}"
        if delay.get("reports")
        else ""
    )
    return f"{rule['id']} {rule['status']}: {rule['summary']} (α={rule['spec']['alpha']}){when}"


@click.group()
def alerts() -> None:
    """Alert rules on the estimates, with a false-alarm guarantee (docs: Alerts guide)."""


@alerts.command("list")
@URL
@click.option(
    "--token",
    envvar=["LDP_READ_TOKEN", "LDP_ADMIN_TOKEN"],
    help="Read (or admin) token (or LDP_READ_TOKEN / LDP_ADMIN_TOKEN).",
)
@click.option("--json", "as_json", is_flag=True, help="The whole answer as JSON.")
def alerts_list(url: str, token: str | None, as_json: bool) -> None:
    """Every rule and its state, then the dead letters (notifications that failed)."""
    body = request_json(_base(url), token=token)
    if as_json:
        echo_json(body)
        return
    table = Table("id", "status", "rule", "n since armed", "now [interval]")
    for r in body["rules"]:
        last = r.get("last") or {}
        now = (
            f"{last['estimate']:.4g} [{last['ci'][0]:.4g}, {last['ci'][1]:.4g}]"
            if "ci" in last
            else last.get("error") or r.get("waiting") or last.get("waiting") or "—"
        )
        table.add_row(r["id"], r["status"], r["summary"], f"{last.get('n', 0):,}", now)
    out.print(table)
    if body["dead_letters"]:
        out.print(f"[red]{len(body['dead_letters'])} dead letters[/] (failed every attempt):")
        for d in body["dead_letters"][:10]:
            out.print(f"  {d['channel']} → {d['target']}: {d.get('error', '')}", markup=False)


@alerts.command("create")
@URL
@click.option("--metric", required=True, help="The metric watched.")
@click.option("--kind", type=click.Choice(_KINDS), required=True, help="What is tested.")
@click.option("--value", help="The domain value whose share is watched (categorical).")
@click.option("--level", type=float, help="The level (a share in (0, 1), or a mean).")
@click.option("--min-change", type=float, help="change: the least change worth an alert.")
@click.option("--baseline-days", type=int, help="change: last N complete days (0: all before).")
@click.option("--dimension", help="Watch one group: a public dimension ...")
@click.option("--group", help="... and its value.")
@click.option("--alpha", type=float, help="False-alarm probability per arming [default: 0.05].")
@click.option("--webhook", help="A URL the alert is POSTed to (signed JSON).")
@click.option("--email", multiple=True, help="An address to mail (repeatable).")
@click.option("--description", help="Free text shown with the alert.")
@ADMIN
def alerts_create(url: str, token: str | None, **flags: Any) -> None:
    """Define a rule; prints its id and the typical delay of a 2× change."""
    token = _need(token)
    spec = {k: v for k, v in flags.items() if v is not None and v != ()}
    if "email" in spec:
        spec["email"] = list(spec["email"])
    _, body = exchange(_base(url), "POST", spec, token)
    out.print(_line(body), markup=False)


def _action(url: str, token: str | None, rule_id: str, action: str, body: Any) -> None:
    _, rule = exchange(f"{_rule_url(url, rule_id)}/{action}", "POST", body, _need(token))
    out.print(_line(rule), markup=False)


NOTE = click.option("--note", default="", help="Kept with the event.")


def _on_rule(name: str, *options: Any) -> Callable[[Callable[..., None]], click.Command]:
    """An ``ldp alerts`` command on one rule: ``--url``, ``RULE_ID``, ``options``, then the
    admin ``--token``, in the order ``--help`` lists them."""

    def make(command: Callable[..., None]) -> click.Command:
        return alerts.command(name)(
            stacked(URL, click.argument("rule_id"), *options, ADMIN)(command)
        )

    return make


@_on_rule("ack", NOTE)
def alerts_ack(url: str, rule_id: str, note: str, token: str | None) -> None:
    """Acknowledge a firing rule."""
    _action(url, token, rule_id, "acknowledge", {"note": note})


@_on_rule("resolve", NOTE)
def alerts_resolve(url: str, rule_id: str, note: str, token: str | None) -> None:
    """End a firing and re-arm the rule from now."""
    _action(url, token, rule_id, "resolve", {"note": note})


@_on_rule(
    "silence",
    click.option(
        "--seconds",
        type=click.IntRange(min=0),
        default=3600,
        show_default=True,
        help="How long (0: unsilence).",
    ),
)
def alerts_silence(url: str, rule_id: str, seconds: int, token: str | None) -> None:
    """Send no notifications of a rule for a while."""
    _action(url, token, rule_id, "silence", {"seconds": seconds})


@_on_rule("delete")
def alerts_delete(url: str, rule_id: str, token: str | None) -> None:
    """Forget a rule."""
    exchange(_rule_url(url, rule_id), "DELETE", None, _need(token))
    out.print(f"deleted {rule_id}")

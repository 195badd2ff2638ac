"""``ldp metrics list|show|create``: the metric registry over HTTP, as GET/PUT do."""

from __future__ import annotations

import urllib.parse
from typing import Any

import click
from rich.table import Table

from aggregator.cli.console import echo_json, or_dash, out
from aggregator.cli.options import DEFAULT_URL
from aggregator.cli.remote import exchange, request_json
from aggregator.cli.spec_flags import build_spec, flags_of, read_spec_file, spec_options
from client_sdk.errors import DefinitionError
from client_sdk.wire import MetricDefinition, check_name, parse_spec
from ldp_store.lifecycle import human_bytes

__all__ = ["metrics"]


def _metric_url(url: str, name: str, query: str = "") -> str:
    """``<url>/v1/metrics/<name>``, the name quoted as one path segment."""
    return f"{url.rstrip('/')}/v1/metrics/{urllib.parse.quote(name, safe='')}{query}"


def _check_name(ctx: click.Context, param: click.Parameter, name: str) -> str:
    """The NAME argument, checked with the server's own rule before any request."""
    try:
        return check_name(name)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


NAME_ARGUMENT = click.argument("name", callback=_check_name)

URL_OPTION = click.option(
    "--url",
    envvar="LDP_URL",
    default=DEFAULT_URL,
    show_default=True,
    help="The collector (or LDP_URL).",
)


def _definition_problems(problems: list[str]) -> str:
    """The collector's 400 for a bad spec, as the CLI says it: each problem, with its flag."""
    lines = []
    for problem in problems:
        flags = flags_of(problem)
        lines.append(f"  - {problem}" + (f" ({', '.join(flags)})" if flags else ""))
    return "invalid metric definition:\n" + "\n".join(lines)


def _values(metric: dict[str, Any]) -> str:
    """What a metric's reports hold: ``k=3`` labels, or a numeric ``range [0, 100]``."""
    if "domain" in metric:
        return f"k={len(metric['domain'])}"
    if "range" in metric:
        return "range [{:g}, {:g}]".format(*metric["range"])
    if "max_length" in metric:
        return f"strings ≤ {metric['max_length']} bytes"
    return metric.get("kind", "")


@click.group()
def metrics() -> None:
    """The metric registry: list, show, create or change metrics (as GET/PUT do)."""


@metrics.command("list")
@URL_OPTION
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="The collector's answer as it is (GET /v1/metrics): the columns' sources are "
    "mechanism.epsilon, mechanism.permanent_epsilon (ε∞), budget and retired_at.",
)
def metrics_list(url: str, as_json: bool) -> None:
    """List every metric's current definition: ε per report, ε∞ of a memoized metric,
    its device-side budget, and whether it is retired."""
    body = request_json(f"{url.rstrip('/')}/v1/metrics")
    if as_json:
        echo_json(body)
        return
    table = Table()
    for col in ("metric", "v", "mechanism", "ε", "ε∞", "budget", "values", "retired"):
        table.add_column(col, no_wrap=col in ("metric", "retired"))
    for m in body.get("metrics", []):
        per_report, permanent = _epsilons(m)
        table.add_row(
            m["name"],
            str(m["version"]),
            m["mechanism"]["mechanism"],
            f"{per_report:g}",
            or_dash(permanent, "g"),
            _budget(m.get("budget"), per_report),
            _values(m),
            (m.get("retired_at") or "no")[:10],  # the day is enough; --json has the time
        )
    out.print(table)


def _epsilons(metric: dict[str, Any]) -> tuple[float, float | None]:
    """ε of one report and ε∞ (None unless memoized), as the SDK's ledger reads them
    (:meth:`MetricDefinition.privacy_bounds`); from the raw parameters when this CLI
    cannot rebuild the definition (a collector newer than it)."""
    try:
        bounds = MetricDefinition.from_dict(metric).privacy_bounds()
    except DefinitionError:
        params = metric["mechanism"]
        return float(params["epsilon"]), params.get("permanent_epsilon")
    return bounds["per_report"], bounds["unlimited_same_value"]


def _budget(budget: dict[str, Any] | None, epsilon: float) -> str:
    """A device-side budget for people: ``3/day ε≤3``, the reports it allows per period
    and the ε they cost together at most (sequential composition); ``none`` without one."""
    if not budget:
        return "none"
    reports = budget["reports_per_period"]
    return f"{reports}/{budget['period']} ε≤{reports * epsilon:g}"


@metrics.command("show")
@URL_OPTION
@NAME_ARGUMENT
@click.option("--version", type=click.IntRange(min=1), help="A specific version.")
def metrics_show(url: str, name: str, version: int | None) -> None:
    """Show one metric's definition as JSON."""
    suffix = f"?version={version}" if version else ""
    echo_json(request_json(_metric_url(url, name, suffix)))


@metrics.command("create")
@URL_OPTION
@NAME_ARGUMENT
@click.option(
    "--spec",
    "spec_file",
    type=click.Path(dir_okay=False),
    help="A file (.toml, else JSON) with the metric's whole spec, as PUT takes it; "
    "the flags below override its keys.",
)
@spec_options
@click.option("--token", envvar="LDP_ADMIN_TOKEN", help="Admin token (or LDP_ADMIN_TOKEN).")
def metrics_create(
    url: str, name: str, spec_file: str | None, token: str | None, **flags: Any
) -> None:
    """Create a metric, or change it (a new version if ε, domain, mechanism or shards change).

    Every key of a spec has a flag (or give a whole spec with --spec); the spec is checked
    as the collector checks it, with its messages, before anything is sent. Prints the
    version made, its ε per report (and ε∞ of a memoized metric) and why its mechanism.
    """
    if not token:
        raise click.UsageError("an admin token is needed: --token or LDP_ADMIN_TOKEN")
    spec = build_spec(read_spec_file(spec_file) if spec_file else {}, flags)
    try:
        parse_spec(name, spec)
    except DefinitionError as exc:
        raise click.UsageError(_definition_problems(exc.problems)) from None
    status, body = exchange(_metric_url(url, name), "PUT", spec, token)
    version = body["version"]
    per_report, permanent = _epsilons(body)
    privacy = (  # a memoized metric has two bounds: say both, as its dashboard page does
        f"ε={per_report:g}"
        if permanent is None
        else f"ε={per_report:g} per report, ε∞={permanent:g} for an unchanged value"
    )
    out.print(
        f"{body['name']} v{version}: {body['mechanism']['mechanism']} {privacy}, {_values(body)}"
        + ("" if status == 201 else " (unchanged version: same ε, domain, mechanism and shards)")
    )
    if body.get("mechanism_reason"):
        out.print(body["mechanism_reason"], markup=False)  # pram's says "P[x, y]"
    if status == 201 and version > 1:  # 201: a new version; 200: the current one kept
        out.print(_new_version_note(url, name, version))


def _new_version_note(url: str, name: str, version: int) -> str:
    """What a new version means for the earlier ones' estimates, true to what is left:
    the latest earlier version still kept (``ldp metrics delete`` may have removed some),
    or none."""
    earlier = next((v for v in range(version - 1, 0, -1) if _version_exists(url, name, v)), None)
    note = (
        f"[yellow]note:[/] {name} now has version {version}. Reports are counted per "
        f"version: counts start at zero for v{version}. "
    )
    if earlier is None:
        return note + "The earlier versions were deleted: no earlier estimates remain."
    estimates = f"{url.rstrip('/')}/v1/estimates/{urllib.parse.quote(name, safe='')}"
    gone = {version - 1: "", version - 2: f" (v{version - 1} was deleted)"}.get(
        earlier, f" (v{earlier + 1}–v{version - 1} were deleted)"
    )
    return note + f"v{earlier}'s estimates stay readable{gone}: {estimates}?version={earlier}"


def _version_exists(url: str, name: str, version: int) -> bool:
    """Whether the collector still has ``version`` of ``name`` (not deleted)."""
    try:
        exchange(_metric_url(url, name, f"?version={version}"))
    except click.ClickException as exc:
        if exc.message.startswith("404"):
            return False
        raise
    return True


TOKEN_OPTION = click.option(
    "--token", envvar="LDP_ADMIN_TOKEN", help="Admin token (or LDP_ADMIN_TOKEN)."
)
YES_OPTION = click.option("--yes", "-y", is_flag=True, help="Do not ask (for scripts).")


def _need_token(token: str | None) -> str:
    if not token:
        raise click.UsageError("an admin token is needed: --token or LDP_ADMIN_TOKEN")
    return token


def _removal(body: dict[str, Any]) -> str:
    """What a delete removes, for people: keys by kind and their memory."""
    kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(body["by_kind"].items())) or "none"
    versions = ", ".join(f"v{v}" for v in body["versions"])
    return (
        f"{body['metric']} {versions}: {body['keys']} keys ({kinds}), {human_bytes(body['bytes'])}"
    )


@metrics.command("retire")
@URL_OPTION
@NAME_ARGUMENT
@TOKEN_OPTION
@YES_OPTION
def metrics_retire(url: str, name: str, token: str | None, yes: bool) -> None:
    """Retire a metric: the collector refuses its reports (410) and apps stop reporting it;
    its estimates stay readable. Every version; undo with `ldp metrics unretire`."""
    token = _need_token(token)
    current = request_json(_metric_url(url, name), token=token)
    if not yes:
        click.confirm(
            f"Retire {name} (current v{current['version']})? Its reports will be refused and "
            "apps drop what they queue of it; its estimates stay readable",
            abort=True,
        )
    body = request_json(_metric_url(url, name, "/retire"), "POST", {}, token)
    out.print(f"{name} retired on {body['retired_at']}: reports are refused (410)")


@metrics.command("unretire")
@URL_OPTION
@NAME_ARGUMENT
@TOKEN_OPTION
@YES_OPTION
def metrics_unretire(url: str, name: str, token: str | None, yes: bool) -> None:
    """Take a retired metric's reports again: apps that learnt it was retired report it
    again once they refetch its definition (their metrics_ttl, 5 minutes by default).
    Nothing to confirm: ``--yes`` is accepted so scripts can pass it to every command."""
    request_json(_metric_url(url, name, "/unretire"), "POST", {}, _need_token(token))
    out.print(f"{name} takes reports again")


@metrics.command("delete")
@URL_OPTION
@NAME_ARGUMENT
@click.option("--version", type=click.IntRange(min=1), help="One version (default: all).")
@TOKEN_OPTION
@YES_OPTION
def metrics_delete(url: str, name: str, version: int | None, token: str | None, yes: bool) -> None:
    """Delete every key of a metric's versions (or one): streams, counts, replay sets, dead
    letters, definitions. Says what it will remove and asks first. Export before
    (`ldp export`): estimates cannot be recomputed after."""
    token = _need_token(token)
    query = f"?version={version}" if version else ""
    preview = request_json(_metric_url(url, name, f"/keys{query}"), token=token)
    out.print(f"will remove {_removal(preview)}")
    if not yes:
        click.confirm("Delete them? This cannot be undone", abort=True)
    body = request_json(_metric_url(url, name, query), "DELETE", None, token)
    out.print(f"removed {_removal(body)}")

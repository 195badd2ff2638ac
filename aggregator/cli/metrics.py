"""``ldp metrics list|show|create``: the metric registry over HTTP, as GET/PUT do."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from aggregator.cli.console import echo_json, out
from client_sdk import mechanisms
from client_sdk.wire import MAX_RETENTION_SECONDS, MAX_SHARDS, MIN_RETENTION_SECONDS, check_name

__all__ = ["metrics"]


def _request(url: str, method: str = "GET", body: Any = None, token: str | None = None) -> Any:
    """The JSON body of a request to the collector; errors become ``ClickException``."""
    return _exchange(url, method, body, token)[1]


def _exchange(
    url: str, method: str = "GET", body: Any = None, token: str | None = None
) -> tuple[int, Any]:
    """A request's status and JSON body; HTTP and network errors become ``ClickException``."""
    if not url.startswith(("http://", "https://")):
        raise click.UsageError(f"--url must start with http:// or https://, got {url!r}")
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Accept", "application/json")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as exc:
        try:
            payload = json.loads(exc.read())
            message = payload.get("error", exc.reason)
            details = payload.get("details") or []
        except (ValueError, AttributeError):
            message, details = exc.reason, []
        lines = "\n".join(f"  - {x}" for x in details)
        raise click.ClickException(
            f"{exc.code}: {message}" + (f"\n{lines}" if lines else "")
        ) from None
    except urllib.error.URLError as exc:
        raise click.ClickException(f"cannot reach {url}: {exc.reason}") from None
    except (ValueError, OSError) as exc:  # e.g. a URL without http://
        raise click.ClickException(f"cannot reach {url}: {exc}") from None


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
    default="http://127.0.0.1:8000",
    show_default=True,
    help="The collector (or LDP_URL).",
)


@click.group()
def metrics() -> None:
    """The metric registry: list, show, create or change metrics (as GET/PUT do)."""


@metrics.command("list")
@URL_OPTION
@click.option("--json", "as_json", is_flag=True)
def metrics_list(url: str, as_json: bool) -> None:
    """List every metric's current definition."""
    body = _request(f"{url.rstrip('/')}/v1/metrics")
    if as_json:
        echo_json(body)
        return
    table = Table()
    for col in ("metric", "version", "mechanism", "ε", "values"):
        table.add_column(col)
    for m in body.get("metrics", []):
        table.add_row(
            m["name"],
            str(m["version"]),
            m["mechanism"]["mechanism"],
            f"{m['mechanism']['epsilon']:g}",
            str(len(m["domain"]))
            if "domain" in m
            else f"strings ≤ {m['max_length']} bytes"
            if "max_length" in m
            else "range [{:g}, {:g}]".format(*m["range"]),
        )
    out.print(table)


@metrics.command("show")
@URL_OPTION
@NAME_ARGUMENT
@click.option("--version", type=click.IntRange(min=1), help="A specific version.")
def metrics_show(url: str, name: str, version: int | None) -> None:
    """Show one metric's definition as JSON."""
    suffix = f"?version={version}" if version else ""
    echo_json(_request(_metric_url(url, name, suffix)))


@metrics.command("create")
@URL_OPTION
@NAME_ARGUMENT
@click.option("--domain", "-d", help="Comma-separated labels, or @file.json (categorical).")
@click.option(
    "--epsilon",
    "-e",
    required=True,
    type=float,
    help="ε of one report: the privacy each report keeps (smaller: more private, noisier).",
)
@click.option(
    "--mechanism",
    "-m",
    default="auto",
    show_default=True,
    help="Frequency oracle: auto (least variance for this ε and k) or one of "
    + ", ".join(n for n in mechanisms.NAMES if n != "auto")
    + ".",
)
@click.option(
    "--description",
    default="",
    help="What the metric measures (changing only this keeps the version).",
)
@click.option(
    "--shards",
    default=1,
    show_default=True,
    type=click.IntRange(1, MAX_SHARDS),
    help="Streams to spread a hot metric over (hash slots of a Redis Cluster).",
)
@click.option(
    "--retention-hour",
    type=click.IntRange(MIN_RETENTION_SECONDS, MAX_RETENTION_SECONDS),
    default=None,
    help="Seconds this metric's hour windows are kept after they end "
    "[default: the deployment's, LDP_RETENTION_HOUR_SECONDS, 14 days].",
)
@click.option(
    "--retention-day",
    type=click.IntRange(MIN_RETENTION_SECONDS, MAX_RETENTION_SECONDS),
    default=None,
    help="Seconds its day windows are kept after they end "
    "[default: the deployment's, LDP_RETENTION_DAY_SECONDS, 400 days].",
)
@click.option("--token", envvar="LDP_ADMIN_TOKEN", help="Admin token (or LDP_ADMIN_TOKEN).")
# -- string metrics (kind string): no domain, values are discovered --
@click.option(
    "--kind",
    type=click.Choice(["categorical", "string"]),
    default="categorical",
    show_default=True,
    help="string: an open domain.",
)
@click.option("--max-length", type=click.IntRange(1, 64), help="string: bytes per value.")
@click.option("--rows", type=click.IntRange(1, 256), help="string: rows per level.")
@click.option("--cells", type=click.IntRange(2, 65536), help="string: cells per row.")
def metrics_create(
    url: str,
    name: str,
    domain: str | None,
    epsilon: float,
    mechanism: str,
    description: str,
    shards: int,
    retention_hour: int | None,
    retention_day: int | None,
    token: str | None,
    kind: str,
    max_length: int | None,
    rows: int | None,
    cells: int | None,
) -> None:
    """Create a metric, or change it (a new version if ε, domain, mechanism or shards change)."""
    if not token:
        raise click.UsageError("an admin token is needed: --token or LDP_ADMIN_TOKEN")
    if kind == "string":
        _create_string(url, name, epsilon, description, shards, max_length, rows, cells, token)
        return
    if domain is None:
        raise click.UsageError("a categorical metric needs --domain")
    if domain.startswith("@"):
        try:
            labels = json.loads(Path(domain[1:]).read_text())
        except (OSError, ValueError) as exc:
            raise click.UsageError(f"cannot read {domain[1:]}: {exc}") from None
    else:
        labels = [x.strip() for x in domain.split(",")]
    spec = {
        "domain": labels,
        "epsilon": epsilon,
        "mechanism": mechanism,
        "description": description,
    }
    if shards != 1:  # 1 is the default: leave it out, as a spec written by hand would
        spec["shards"] = shards
    if retention_hour is not None or retention_day is not None:
        spec["retention"] = {"hour": retention_hour, "day": retention_day}
    status, body = _exchange(_metric_url(url, name), "PUT", spec, token)
    version = body["version"]
    out.print(
        f"{body['name']} v{version}: {body['mechanism']['mechanism']} "
        f"ε={body['mechanism']['epsilon']:g}, k={len(body['domain'])}"
        + ("" if status == 201 else " (unchanged version: same ε, domain, mechanism and shards)")
    )
    if body.get("mechanism_reason"):
        out.print(body["mechanism_reason"])
    if status == 201 and version > 1:  # 201: a new version; 200: the current one kept
        estimates = f"{url.rstrip('/')}/v1/estimates/{urllib.parse.quote(name, safe='')}"
        out.print(
            f"[yellow]note:[/] {name} now has version {version} (its parameters differ from "
            f"v{version - 1}'s). Reports are counted per version: counts start at zero for "
            f"v{version}. v{version - 1}'s estimates stay readable: {estimates}"
            f"?version={version - 1}"
        )


def _create_string(
    url: str,
    name: str,
    epsilon: float,
    description: str,
    shards: int,
    max_length: int | None,
    rows: int | None,
    cells: int | None,
    token: str,
) -> None:
    """``metrics create --kind string``: PUT a string metric's spec."""
    if max_length is None:
        raise click.UsageError("a string metric needs --max-length (bytes per value)")
    spec: dict[str, object] = {
        "kind": "string",
        "max_length": max_length,
        "epsilon": epsilon,
        "description": description,
    }
    options = {k: v for k, v in (("rows", rows), ("cells", cells)) if v is not None}
    if options:
        spec["options"] = options
    if shards != 1:
        spec["shards"] = shards
    status, body = _exchange(_metric_url(url, name), "PUT", spec, token)
    out.print(
        f"{body['name']} v{body['version']}: strings ≤ {body['max_length']} bytes, "
        f"ε={body['mechanism']['epsilon']:g}" + ("" if status == 201 else " (unchanged version)")
    )
    out.print(body.get("mechanism_reason", ""))


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
    from ldp_store.lifecycle import human_bytes

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
    current = _request(_metric_url(url, name), token=token)
    if not yes:
        click.confirm(
            f"Retire {name} (current v{current['version']})? Its reports will be refused and "
            "apps drop what they queue of it; its estimates stay readable",
            abort=True,
        )
    body = _request(_metric_url(url, name, "/retire"), "POST", {}, token)
    out.print(f"{name} retired on {body['retired_at']}: reports are refused (410)")


@metrics.command("unretire")
@URL_OPTION
@NAME_ARGUMENT
@TOKEN_OPTION
def metrics_unretire(url: str, name: str, token: str | None) -> None:
    """Take a retired metric's reports again (apps that learnt it was retired stay quiet)."""
    _request(_metric_url(url, name, "/unretire"), "POST", {}, _need_token(token))
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
    preview = _request(_metric_url(url, name, f"/keys{query}"), token=token)
    out.print(f"will remove {_removal(preview)}")
    if not yes:
        click.confirm("Delete them? This cannot be undone", abort=True)
    body = _request(_metric_url(url, name, query), "DELETE", None, token)
    out.print(f"removed {_removal(body)}")

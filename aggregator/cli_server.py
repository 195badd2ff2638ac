"""``ldp serve``, ``ldp demo`` and ``ldp metrics``: the commands that run the system."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import click
from rich.table import Table

from aggregator.console import echo_json, err, out, progress_bar
from client_sdk import mechanisms
from client_sdk.wire import MAX_SHARDS, check_name

__all__ = ["demo", "metrics", "serve"]


def _print_urls(server: Any) -> None:
    out.print(f"[bold green]ldp-telemetry is running[/] (Redis: {server.redis_url})")
    out.print(f"  dashboard        {server.url}/")
    out.print(f"  metrics API      {server.url}/v1/metrics")
    out.print(f"  reports          POST {server.url}/v1/reports")
    out.print(f"  estimates        {server.url}/v1/estimates/<metric>")
    out.print(f"  health           {server.url}/healthz  {server.url}/readyz  {server.url}/metrics")
    if os.environ.get("LDP_ADMIN_TOKEN"):  # what Server uses when given no token
        out.print("  admin token      taken from LDP_ADMIN_TOKEN")
        return
    token_file = Path(server.data_dir) / "admin-token"
    where = f" (in {token_file})" if token_file.exists() else ""
    out.print(f"  admin token{where}: set LDP_ADMIN_TOKEN to choose your own")


def _wait_until_stopped(server: Any) -> None:
    stopping = {"now": False}

    def handler(signum: int, frame: FrameType | None) -> None:
        stopping["now"] = True

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
    while not stopping["now"]:
        problem = server.check()
        if problem:
            err.print(f"[red]{problem}: stopping[/]")
            break
        time.sleep(0.5)
    err.print("stopping: aggregator workers finish their batch, then the web service and Redis")


def _server_option_list(data_dir: str) -> list[Any]:
    return [
        click.option(
            "--host", default="127.0.0.1", show_default=True, help="Address to listen on."
        ),
        click.option(
            "--port",
            default=8000,
            show_default=True,
            type=click.IntRange(0, 65535),
            help="0: a free port.",
        ),
        click.option(
            "--redis-url",
            envvar="REDIS_URL",
            default=None,
            help="Use this Redis (or REDIS_URL); default: start an embedded redis-server.",
        ),
        click.option(
            "--data-dir",
            default=data_dir,
            show_default=True,
            type=click.Path(file_okay=False),
            help="Kept here: the embedded Redis's AOF and snapshots (redis/), the generated admin "
            "token (admin-token, unless LDP_ADMIN_TOKEN is set) and the services' logs "
            "(web.log, aggregator-N.log, redis/redis.log).",
        ),
        click.option(
            "--web-workers",
            default=2,
            show_default=True,
            type=click.IntRange(1, 64),
            help="Gunicorn worker processes of the web service (collector, API and dashboard).",
        ),
        click.option(
            "--aggregators",
            default=1,
            show_default=True,
            type=click.IntRange(1, 64),
            help="Aggregator worker processes counting the report streams (as `ldp aggregate`).",
        ),
    ]


def server_options(data_dir: str) -> Callable[[Any], Any]:
    """The options ``serve`` and ``demo`` share, with their own default data folder (the
    demo's metrics and counts must not land in the folder ``ldp serve`` keeps)."""

    def apply(f: Any) -> Any:
        for option in reversed(_server_option_list(data_dir)):
            f = option(f)
        return f

    return apply


def _start(
    host: str, port: int, redis_url: str | None, data_dir: str, web_workers: int, aggregators: int
) -> Any:
    from aggregator.embedded_redis import free_port  # noqa: PLC0415
    from aggregator.serve import Server  # noqa: PLC0415

    server = Server(
        host=host,
        port=port or free_port(),
        redis_url=redis_url,
        data_dir=data_dir,
        web_workers=web_workers,
        aggregators=aggregators,
        quiet=True,
    )
    try:
        return server.start()
    except (RuntimeError, FileNotFoundError, OSError) as exc:
        raise click.ClickException(f"could not start: {exc} (logs in {data_dir})") from None


@click.command()
@server_options("ldp-data")
@click.option(
    "--metrics",
    "metrics_file",
    type=click.Path(exists=True, dir_okay=False),
    help="JSON or TOML file of metric definitions to create or update at start.",
)
def serve(
    host: str,
    port: int,
    redis_url: str | None,
    data_dir: str,
    web_workers: int,
    aggregators: int,
    metrics_file: str | None,
) -> None:
    """Run collector, aggregator workers and dashboard; embedded Redis unless --redis-url."""
    from aggregator.serve import load_metrics_file  # noqa: PLC0415
    from client_sdk.errors import DefinitionError  # noqa: PLC0415
    from collector.registry import Registry  # noqa: PLC0415

    specs = {}
    if metrics_file:
        try:
            specs = load_metrics_file(metrics_file)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
    server = _start(host, port, redis_url, data_dir, web_workers, aggregators)
    try:
        if specs:
            from collector.connection import connect  # noqa: PLC0415

            registry = Registry(connect(server.redis_url))
            for name, spec in specs.items():
                try:
                    change = registry.put(name, spec)
                except DefinitionError as exc:
                    raise click.ClickException(f"metric {name!r}: {exc}") from None
                d = change.definition
                out.print(
                    f"metric {d.name} v{d.version}: {d.mechanism.name} ε={d.mechanism.epsilon:g}"
                )
        _print_urls(server)
        _wait_until_stopped(server)
    finally:
        server.stop()


@click.command()
@server_options("ldp-demo-data")
@click.option(
    "--users",
    "-n",
    default=100_000,
    show_default=True,
    type=click.IntRange(min=1),
    help="Simulated users; each reports one value of every demo metric.",
)
@click.option(
    "--processes",
    "-p",
    default=max(2, os.cpu_count() or 2),
    show_default=True,
    type=click.IntRange(1, 64),
    help="Processes simulating devices in parallel.",
)
@click.option("--seed", default=2017, show_default=True, help="Seed for the users' true values.")
@click.option(
    "--serve/--no-serve",
    "keep_serving",
    default=True,
    show_default=True,
    help="Keep serving the dashboard afterwards (Ctrl-C stops).",
)
def demo(
    host: str,
    port: int,
    redis_url: str | None,
    data_dir: str,
    web_workers: int,
    aggregators: int,
    users: int,
    processes: int,
    seed: int,
    keep_serving: bool,
) -> None:
    """Serve, define demo metrics, simulate users through real HTTP, compare with the truth."""
    from aggregator import demo as d  # noqa: PLC0415
    from collector.connection import connect  # noqa: PLC0415
    from collector.registry import Registry  # noqa: PLC0415

    started = time.perf_counter()
    server = _start(host, port, redis_url, data_dir, web_workers, aggregators)
    try:
        client = connect(server.redis_url)
        definitions = d.define_metrics(Registry(client))
        before = {x.name: d.read_counts(client, x).n for x in definitions}
        _print_urls(server)
        out.print(
            f"simulating {users:,} users × {len(definitions)} metrics in {processes} processes "
            "(real SDK, CSPRNG perturbation, real HTTP)…"
        )
        truth, accepted, dropped, sim_seconds = d.run_population(server.url, users, processes, seed)
        sent = int(sum(t.sum() for t in truth.values()))
        out.print(
            f"  {sent:,} reports made, {accepted:,} accepted by the collector in "
            f"{sim_seconds:.1f} s ({accepted / sim_seconds:,.0f} reports/s)"
            + (f"; dropped: {dropped}" if dropped else "")
        )
        expected = {x.name: before[x.name] + int(truth[x.name].sum()) for x in definitions}
        with progress_bar("aggregating", sum(expected.values()) - sum(before.values())) as advance:
            agg_seconds = d.wait_for_counts(client, definitions, expected, progress=advance)
        out.print(f"  aggregator caught up {agg_seconds:.1f} s after the last upload")
        estimates = d.estimates_for(client, definitions)
        result = d.DemoResult(truth, accepted, dropped, sim_seconds, agg_seconds, estimates)
        _print_estimates(result, fresh=all(v == 0 for v in before.values()))
        out.print(f"wall time: {time.perf_counter() - started:.1f} s for {users:,} users")
        if keep_serving:
            out.print(f"dashboard: {server.url}/  (Ctrl-C to stop)")
            _wait_until_stopped(server)
    finally:
        server.stop()


def _print_estimates(result: Any, fresh: bool) -> None:
    for name, est in result.estimates.items():
        share = result.truth[name] / max(1, result.truth[name].sum())
        table = Table(
            title=f"{name}: {est.mechanism.name} ε={est.mechanism.epsilon:g}, n={est.n:,}"
        )
        for col in ("value", "true share", "estimate", "95% interval", ""):
            table.add_column(col, justify="right")
        order = sorted(range(len(share)), key=lambda i: -share[i])
        for i in order[:12]:
            miss = not (est.ci_low[i] <= share[i] <= est.ci_high[i])
            table.add_row(
                est.labels[i],
                f"{share[i]:.2%}",
                f"{est.frequencies[i]:.2%}",
                f"[{est.ci_low[i]:.2%}, {est.ci_high[i]:.2%}]",
                "[red]missed[/]" if miss else "",
            )
        if len(share) > 12:
            table.add_row(f"… {len(share) - 12} more", "", "", "", "")
        out.print(table)
    missed, total = result.misses()
    note = "" if fresh else " (counts include earlier runs, so the truth shown is only this run's)"
    out.print(
        f"[bold]{total - missed} of {total} intervals cover the true share "
        f"({missed} missed; about {0.05 * total:.0f} expected at 95%){note}[/]"
    )


# -- ldp metrics: the registry over HTTP, as PUT/GET do ------------------------------------


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
            str(len(m["domain"])) if "domain" in m else "range [{:g}, {:g}]".format(*m["range"]),
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
@click.option("--domain", "-d", required=True, help="Comma-separated labels, or @file.json.")
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
@click.option("--token", envvar="LDP_ADMIN_TOKEN", help="Admin token (or LDP_ADMIN_TOKEN).")
def metrics_create(
    url: str,
    name: str,
    domain: str,
    epsilon: float,
    mechanism: str,
    description: str,
    shards: int,
    token: str | None,
) -> None:
    """Create a metric, or change it (a new version if ε, domain, mechanism or shards change)."""
    if not token:
        raise click.UsageError("an admin token is needed: --token or LDP_ADMIN_TOKEN")
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


def register(group: click.Group) -> None:
    """Add these commands to the ``ldp`` group."""
    for command in (serve, demo, metrics):
        group.add_command(command)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: ldp serve | ldp demo | ldp metrics")

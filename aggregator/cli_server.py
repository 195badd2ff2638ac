"""``ldp serve``, ``ldp demo`` and ``ldp metrics``: the commands that run the system."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import FrameType
from typing import Any

import click
from rich.table import Table

from aggregator.console import err, out, progress_bar
from client_sdk.wire import MAX_SHARDS

__all__ = ["demo", "metrics", "serve"]


def _print_urls(server: Any) -> None:
    out.print(f"[bold green]ldp-telemetry is running[/] (Redis: {server.redis_url})")
    out.print(f"  dashboard        {server.url}/")
    out.print(f"  metrics API      {server.url}/v1/metrics")
    out.print(f"  reports          POST {server.url}/v1/reports")
    out.print(f"  estimates        {server.url}/v1/estimates/<metric>")
    out.print(f"  health           {server.url}/healthz  {server.url}/readyz  {server.url}/metrics")
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


SERVER_OPTIONS = [
    click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on."),
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
        default="ldp-data",
        show_default=True,
        type=click.Path(file_okay=False),
        help="Where the embedded Redis keeps its AOF and snapshots.",
    ),
    click.option("--web-workers", default=2, show_default=True, type=click.IntRange(1, 64)),
    click.option("--aggregators", default=1, show_default=True, type=click.IntRange(1, 64)),
]


def server_options(f: Any) -> Any:
    """Apply the options ``serve`` and ``demo`` share."""
    for option in reversed(SERVER_OPTIONS):
        f = option(f)
    return f


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
@server_options
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
    from client_sdk.wire import DefinitionError  # noqa: PLC0415
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
@server_options
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
            return json.loads(r.read() or b"null")
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
    body = _request(f"{url}/v1/metrics")
    if as_json:
        click.echo(json.dumps(body, indent=2))
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
@click.argument("name")
@click.option("--version", type=click.IntRange(min=1), help="A specific version.")
def metrics_show(url: str, name: str, version: int | None) -> None:
    """Show one metric's definition as JSON."""
    suffix = f"?version={version}" if version else ""
    click.echo(json.dumps(_request(f"{url}/v1/metrics/{name}{suffix}"), indent=2))


@metrics.command("create")
@URL_OPTION
@click.argument("name")
@click.option("--domain", "-d", required=True, help="Comma-separated labels, or @file.json.")
@click.option("--epsilon", "-e", required=True, type=float)
@click.option("--mechanism", "-m", default="auto", show_default=True)
@click.option("--description", default="")
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
    body = _request(f"{url}/v1/metrics/{name}", "PUT", spec, token)
    out.print(
        f"{body['name']} v{body['version']}: {body['mechanism']['mechanism']} "
        f"ε={body['mechanism']['epsilon']:g}, k={len(body['domain'])}"
    )
    if body.get("mechanism_reason"):
        out.print(body["mechanism_reason"])


def register(group: click.Group) -> None:
    """Add these commands to the ``ldp`` group."""
    for command in (serve, demo, metrics):
        group.add_command(command)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: ldp serve | ldp demo | ldp metrics")

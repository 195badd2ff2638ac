"""``ldp serve`` and ``ldp demo``: the commands that run the whole system; ``ldp wait``
for a script that started ``ldp serve`` in the background."""

from __future__ import annotations

import dataclasses
import os
import signal
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

import click
from rich.table import Table

from aggregator.cli.console import err, out, progress_bar
from aggregator.cli.options import ServerSettings, server_options, shown

__all__ = ["apply_metrics", "demo", "serve", "wait"]


def _print_urls(server: Any) -> None:
    from ldp_store.connection import redacted  # noqa: PLC0415

    where = redacted(server.redis_url)  # the embedded one's password stays in redis-url
    out.print(f"[bold green]ldp-telemetry is running[/] (Redis: {where})")
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


def _wait_until_stopped(server: Any) -> bool:
    """Serve until Ctrl-C or SIGTERM (False), or until the supervisor gave up on a child
    that kept failing (True: the caller exits non-zero). Crashed children are restarted
    meanwhile, each restart said on stderr and in supervisor.log."""
    stopping = {"now": False}

    def handler(signum: int, frame: FrameType | None) -> None:
        stopping["now"] = True

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
    gave_up = False
    while not stopping["now"]:
        problem = server.check()
        if problem:
            err.print(f"[red]{problem}: stopping everything[/]")
            gave_up = True
            break
        time.sleep(0.5)
    err.print("stopping: aggregator workers finish their batch, then the web service and Redis")
    return gave_up


def _start(settings: ServerSettings) -> Any:
    from ldp_server.app import check_tokens  # noqa: PLC0415
    from ldp_server.serve import Server  # noqa: PLC0415
    from ldp_store.embedded import free_port  # noqa: PLC0415

    try:
        check_tokens()
    except ValueError as exc:  # the collector's ConfigError
        raise click.ClickException(f"could not start: {exc}") from None

    data_dir = settings.data_dir
    server = Server(
        **{**dataclasses.asdict(settings), "port": settings.port or free_port(settings.host)},
        quiet=True,
    )
    try:
        return server.start()
    except (RuntimeError, FileNotFoundError, OSError) as exc:
        # A failed start removes what it made, the data dir too unless its logs say why.
        logs = f" (logs in {data_dir})" if Path(data_dir).is_dir() else ""
        raise click.ClickException(f"could not start: {exc}{logs}") from None


@click.command()
@server_options("ldp-data")
@click.option(
    "--metrics",
    "metrics_file",
    type=click.Path(exists=True, dir_okay=False),
    help="JSON or TOML file of metric definitions to create or update at start; a metrics "
    "registry (with an [app] table) only if it lints clean (ldp lint).",
)
def serve(settings: ServerSettings, metrics_file: str | None) -> None:
    """Run collector, aggregator workers and dashboard; embedded Redis unless --redis-url."""
    from client_sdk.bundle import load_metrics_file, split_version  # noqa: PLC0415

    specs: dict[str, tuple[dict[str, Any], int | None]] = {}
    if metrics_file:
        _lint_gate(metrics_file)
        try:
            specs = {
                name: split_version(name, table)
                for name, table in load_metrics_file(metrics_file).items()
            }
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
    server = _start(settings)
    try:
        if specs:
            from ldp_store.connection import connect  # noqa: PLC0415

            assert metrics_file is not None
            apply_metrics(connect(server.redis_url), metrics_file, specs)
        _print_urls(server)
        gave_up = _wait_until_stopped(server)
    finally:
        server.stop()
    if gave_up:
        raise SystemExit(1)


def apply_metrics(
    client: Any, path: str, specs: dict[str, tuple[dict[str, Any], int | None]]
) -> None:
    """Create or update each metric of the file at ``path``, saying what changed for each
    (new, a new version, updated, unchanged), and keep the file for the dashboard's
    privacy dictionary.

    Raises:
        click.ClickException: a spec the registry refuses, or a declared version that is
            not the one the registry holds.
    """
    from client_sdk.errors import DefinitionError  # noqa: PLC0415
    from ldp_store.registry import Registry  # noqa: PLC0415
    from ldp_store.registry_source import save_source  # noqa: PLC0415

    registry = Registry(client)
    for name, (spec, declared) in specs.items():
        try:
            change = registry.put(name, spec)
        except DefinitionError as exc:
            raise click.ClickException(f"metric {name!r}: {exc}") from None
        d = change.definition
        if declared is not None and declared != d.version:
            # Apps bundle this file: their offline reports claim `declared`.
            raise click.ClickException(
                f"metric {name!r}: the file declares version {declared}, the "
                f"registry holds this spec as version {d.version}; apps bundling "
                f"the file would report under the wrong version: set version = "
                f"{d.version}"
            )
        out.print(
            f"metric {d.name} v{d.version}: {d.mechanism.name} ε={d.mechanism.epsilon:g} "
            f"({_what_changed(change)})",
            highlight=False,
        )
    save_source(client, Path(path).name, Path(path).read_text())


def _lint_gate(path: str) -> None:
    """Refuse a registry (a file with an ``[app]`` table) that does not lint clean, before
    anything starts; print its warnings. A plain metrics file (no ``[app]``) is not a
    registry: its specs are checked as ever, by the server's own validation.

    Raises:
        click.ClickException: the registry has errors (each printed, file:line: rule).
    """
    from aggregator.catalog.lint import lint_file  # noqa: PLC0415

    try:
        result = lint_file(path, datetime.now(UTC).date())
    except ValueError:
        return  # unreadable: the metrics file's own reading says why, below
    if "app" not in result.registry.top_level:
        return
    for finding in result.findings:
        err.print(str(finding), highlight=False, markup=False)
    errors = sum(not f.warning for f in result.findings)
    if errors:
        raise click.ClickException(
            f"{path} does not lint clean ({errors} errors): nothing applied, nothing "
            "started; `ldp lint` says the same"
        )


def _what_changed(change: Any) -> str:
    """How a put changed a metric, in words: new, a new version, updated or unchanged."""
    d = change.definition
    if change.created:
        return "new" if d.version == 1 else f"changed: new version (v{d.version - 1} before)"
    if change.changed:
        return "updated: description, budget or retention; same version"
    return "unchanged"


@click.command()
@server_options("ldp-demo-data")
@shown(
    ("--users", "-n"),
    100_000,
    click.IntRange(min=1),
    "Simulated users; each reports one value of every demo metric.",
)
@shown(
    ("--processes", "-p"),
    max(2, os.cpu_count() or 2),
    click.IntRange(1, 64),
    "Processes simulating devices in parallel.",
)
@shown("--seed", 2017, None, "Seed for the users' true values.")
@shown(
    ("--serve/--no-serve", "keep_serving"),
    True,
    None,
    "Keep serving the dashboard afterwards (Ctrl-C stops).",
)
def demo(
    settings: ServerSettings,
    users: int,
    processes: int,
    seed: int,
    keep_serving: bool,
) -> None:
    """Serve, define demo metrics, simulate users through real HTTP, compare with the truth."""
    from ldp_server import demo as d  # noqa: PLC0415
    from ldp_store.connection import connect  # noqa: PLC0415
    from ldp_store.registry import Registry  # noqa: PLC0415

    started = time.perf_counter()
    redis_url, data_dir = settings.redis_url, settings.data_dir
    _check_port_free(settings.host, settings.port)  # before any earlier run's data is removed
    # The simulated devices all come from this machine's address: one source to the
    # collector's per-source limits, which would throttle the whole population to one
    # device's share. Off for the demo unless set (a real deployment keeps them).
    for limit in ("LDP_SOURCE_REQUESTS_PER_SECOND", "LDP_SOURCE_REPORTS_PER_MINUTE"):
        os.environ.setdefault(limit, "0")
    if redis_url is None:  # the embedded store: a fresh one for each run
        server = _start_fresh(dataclasses.replace(settings, data_dir=_fresh_folder(data_dir)))
    else:
        server = _start(settings)
    try:
        client = connect(server.redis_url)
        definitions = d.define_metrics(Registry(client))
        before = {x.name: d.read_counts(client, x).n for x in definitions}
        _print_urls(server)
        if any(before.values()):
            out.print(
                f"[yellow]note:[/] {redis_url} already holds {sum(before.values()):,} reports "
                "of the demo metrics (earlier runs): the estimates pool them with this run's "
                "users, so coverage of this run's truth is not checked. Without --redis-url "
                "each run has its own fresh store."
            )
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
        gave_up = False
        if keep_serving:
            out.print(f"dashboard: {server.url}/  (Ctrl-C to stop)")
            gave_up = _wait_until_stopped(server)
    finally:
        server.stop()
    if gave_up:
        raise SystemExit(1)


def _fresh_folder(data_dir: str) -> str:
    """A fresh folder under ``data_dir`` for a demo run's embedded store (earlier runs'
    data removed, and said so)."""
    from ldp_server import demo as d  # noqa: PLC0415

    run_dir, removed = d.fresh_run_folder(data_dir)
    if removed:
        runs = (
            "1 earlier demo run's data"
            if len(removed) == 1
            else (f"{len(removed)} earlier demo runs' data")
        )
        out.print(f"fresh data for this run in {run_dir} (removed {runs} from {data_dir})")
    return str(run_dir)


def _start_fresh(settings: ServerSettings) -> Any:
    """:func:`_start` in a fresh run folder, removed again if a failed start left it empty."""
    try:
        return _start(settings)
    except click.ClickException:
        run = Path(settings.data_dir)
        if run.is_dir() and not any(run.iterdir()):
            run.rmdir()
        raise


WAIT_TIMEOUT = 180.0
"""``ldp wait``'s default: longer than a start of ``ldp serve`` may take (Redis, then up
to ``READY_TIMEOUT``, 120 s, for the web services on a slow machine)."""


@click.command()
@shown("--url", "http://127.0.0.1:8000", None, "The server (or LDP_URL).", envvar="LDP_URL")
@shown(
    "--timeout",
    WAIT_TIMEOUT,
    click.FloatRange(min=0),
    "Seconds to wait before giving up (exit status 1).",
)
def wait(url: str, timeout: float) -> None:
    """Wait until the server at --url is ready (answers /readyz), e.g. after `ldp serve &`:
    by then its admin token is in <data-dir>/admin-token."""

    if not url.startswith(("http://", "https://")):
        raise click.UsageError(f"--url must start with http:// or https://, got {url!r}")
    deadline = time.monotonic() + timeout
    last = "no answer"
    while True:
        try:
            with urllib.request.urlopen(url.rstrip("/") + "/readyz", timeout=2) as r:
                if r.status == 200:
                    out.print(f"{url} is ready")
                    return
        except urllib.error.HTTPError as exc:
            last = f"/readyz answers {exc.code}"
        except OSError as exc:
            last = f"no answer ({getattr(exc, 'reason', exc)})"
        if time.monotonic() >= deadline:
            raise click.ClickException(
                f"{url} is not ready after {timeout:g} s: {last}; is ldp serve running "
                "(its logs are in its --data-dir)?"
            )
        time.sleep(0.2)


def _check_port_free(host: str, port: int) -> None:
    """Refuse early, with the way out, when the web port is taken (0: any free port).

    Raises:
        click.ClickException: another process listens on ``host:port``.
    """
    if port == 0:
        return
    from ldp_server.serve import check_port  # noqa: PLC0415

    try:
        check_port(host, port)
    except RuntimeError as exc:
        raise click.ClickException(f"{exc}; nothing was changed") from None


def _print_estimates(result: Any, fresh: bool) -> None:
    for name, est in result.estimates.items():
        share = result.truth[name] / max(1, result.truth[name].sum())
        table = Table(
            title=f"{name}: {est.mechanism.name} ε={est.mechanism.epsilon:g}, n={est.n:,}"
        )
        columns = ("value", "true share", "estimate", "95 % interval", "interval vs truth")
        for col in columns:
            table.add_column(col, justify="right")
        order = sorted(range(len(share)), key=lambda i: -share[i])
        for i in order[:12]:
            miss = not (est.ci_low[i] <= share[i] <= est.ci_high[i])
            table.add_row(
                est.labels[i],
                f"{share[i]:.2%}",
                f"{est.frequencies[i]:.2%}",
                f"[{est.ci_low[i]:.2%}, {est.ci_high[i]:.2%}]",
                "[red]missed[/]" if miss else "covers",
            )
        if len(share) > 12:
            table.add_row(f"… {len(share) - 12} more", "", "", "", "")
        out.print(table)
    if not fresh:  # pooled with earlier runs' reports: this run's truth is not theirs
        out.print("coverage not checked: the counts include earlier runs' reports")
        return
    missed, total = result.misses()
    mean, low, high = result.expected_misses()
    out.print(
        f"[bold]{missed} of {total} intervals missed the true share; about {mean:.0f} "
        f"expected at 95 % (most runs: {low}–{high})[/]"
    )

"""``ldp serve``: the command that runs the whole system, and what ``ldp demo`` shares of
it (starting the server, printing its addresses, serving until stopped)."""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

import click

from aggregator.catalog.lint import lint_file
from aggregator.cli.console import err, out
from aggregator.cli.options import ServerSettings, server_options
from client_sdk.bundle import load_metrics_file, split_version
from client_sdk.errors import DefinitionError
from ldp_api.text_settings import ConfigError, check_tokens, tokens_from_env
from ldp_server.serve import Server
from ldp_store.connection import connect, redacted
from ldp_store.embedded import free_port
from ldp_store.registry import Registry
from ldp_store.registry_source import save_source

__all__ = ["apply_metrics", "print_urls", "serve", "start", "wait_until_stopped"]


def print_urls(server: Any) -> None:
    """Say where the running server answers, and where its admin token is."""
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


def wait_until_stopped(server: Any) -> bool:
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


def start(settings: ServerSettings) -> Any:
    """The server the settings describe, started (on a free port when theirs is 0).

    Raises:
        click.ClickException: a token or the start refused, with where the logs are.
    """
    try:
        check_tokens(tokens_from_env())  # the app would refuse them: say so before a child dies
    except ConfigError as exc:
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
    server = start(settings)
    try:
        if specs:
            assert metrics_file is not None
            apply_metrics(connect(server.redis_url), metrics_file, specs)
        print_urls(server)
        gave_up = wait_until_stopped(server)
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

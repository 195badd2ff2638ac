"""``ldp demo``: serve, define demo metrics, simulate a population through real HTTP and
compare the estimates with the truth (:mod:`ldp_server.demo`)."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from aggregator.cli.console import out, progress_bar
from aggregator.cli.options import ServerSettings, server_options, shown
from ldp_server import demo as d
from ldp_server.commands import print_urls, start, wait_until_stopped
from ldp_server.serve import check_port
from ldp_store.connection import connect
from ldp_store.registry import Registry

__all__ = ["demo"]


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
        server = start(settings)
    try:
        client = connect(server.redis_url)
        definitions = d.define_metrics(Registry(client))
        before = {x.name: d.read_counts(client, x).n for x in definitions}
        print_urls(server)
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
            gave_up = wait_until_stopped(server)
    finally:
        server.stop()
    if gave_up:
        raise SystemExit(1)


def _fresh_folder(data_dir: str) -> str:
    """A fresh folder under ``data_dir`` for a demo run's embedded store (earlier runs'
    data removed, and said so)."""
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
    """:func:`~ldp_server.commands.start` in a fresh run folder, removed again if a failed
    start left it empty."""
    try:
        return start(settings)
    except click.ClickException:
        run = Path(settings.data_dir)
        if run.is_dir() and not any(run.iterdir()):
            run.rmdir()
        raise


def _check_port_free(host: str, port: int) -> None:
    """Refuse early, with the way out, when the web port is taken (0: any free port).

    Raises:
        click.ClickException: another process listens on ``host:port``.
    """
    if port == 0:
        return
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

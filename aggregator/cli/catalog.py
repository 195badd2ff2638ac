"""``ldp lint``, ``ldp generate`` and ``ldp dictionary``: the metrics registry as code.

See ``docs/guides/metrics-as-code.md``.
"""

from __future__ import annotations

import math
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import click

from aggregator.catalog import generate as gen
from aggregator.catalog.dictionary import render_page
from aggregator.catalog.lint import lint_file
from aggregator.catalog.registry_file import read_registry
from aggregator.cli.console import echo_json, or_dash

__all__ = ["COMMANDS", "lint"]


def _today(given: str | None) -> date:
    if given is None:
        return datetime.now(UTC).date()
    try:
        return date.fromisoformat(given)
    except ValueError:
        raise click.BadParameter(f"expected a date like 2026-12-02, got {given!r}") from None


def _lint(path: str, today: str | None) -> Any:
    try:
        return lint_file(path, _today(today))
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None


def _eps(value: float) -> str:
    return "unbounded" if math.isinf(value) else f"{value:.3g}"


def _metric_row(result: Any, entry: Any, windows: list[str]) -> list[str]:
    """A metric's row of the report: its ε per report, budget, and worst case (and share
    of the app's budget) in each window."""
    d = entry.definition
    b = d.budget
    budget = f"{b.reports_per_period}/{b.period}" if b else "none"
    if d.longitudinal:
        budget += f", ε∞={d.privacy_bounds()['unlimited_same_value']:g}"
    row = [entry.name, f"{d.mechanism.epsilon:g}", budget]
    for w in windows:
        value = result.account.windows[w].per_metric[entry.name]
        share = result.share(entry.name, w)
        row.append(_eps(value) + ("" if share is None else f" ({share:.0%})"))
    return row


def report_lines(result: Any) -> list[str]:
    """The privacy-loss report under the findings: each metric's worst case and share."""
    windows = result.windows()
    lines = [
        "",
        f"worst-case privacy loss per device, by {result.account.theorem}:",
    ]
    header = ["metric", "ε/report", "budget"] + [f"per {w}" for w in windows]
    rows = [header]
    rows += [
        _metric_row(result, e, windows) for e in result.registry.entries if e.definition is not None
    ]
    total = ["total (caps applied)", "", ""]
    limits = ["app budget", "", ""]
    for w in windows:
        loss = result.account.windows[w]
        total.append(_eps(loss.total))
        limit = result.limit(w)
        limits.append(or_dash(limit, "g"))
    rows += [total, limits]
    notes = []
    if result.account.delta is not None:
        advanced = [f"advanced, δ={result.account.delta:g}", "", ""]
        advanced += [_eps(result.account.windows[w].advanced or 0.0) for w in windows]
        rows.append(advanced)
        notes.append(
            f"  advanced: {result.account.alternatives[0]}; sound for these pure ε-LDP "
            "reports composed adaptively, and smaller only where many small reports add up"
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for row in rows:
        lines.append("  " + "  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip())
    return lines + notes


@click.command("lint")
@click.argument("registry", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: one line per finding (file:line: rule: message), then the report; json: both.",
)
@click.option("--strict", is_flag=True, help="Warnings fail too (exit status 1).")
@click.option("--quiet", "-q", is_flag=True, help="Only the findings, not the privacy report.")
@click.option("--today", help="Check expiry against this date (YYYY-MM-DD; default: today, UTC).")
@click.option(
    "--html",
    type=click.Path(dir_okay=False, writable=True),
    help="Also write the privacy dictionary page (static HTML) to this file.",
)
def lint(
    registry: str, fmt: str, strict: bool, quiet: bool, today: str | None, html: str | None
) -> None:
    """Check a metrics registry and add up each device's privacy loss across its metrics.

    Exit status 1 when any error is found (with --strict, any warning too).
    """
    result = _lint(registry, today)
    if html:
        _write_dictionary(result, html)
    if fmt == "json":
        echo_json(result.to_dict())
    else:
        for finding in result.findings:
            click.echo(str(finding))
        if not quiet:
            for line in report_lines(result):
                click.echo(line)
            errors = sum(not f.warning for f in result.findings)
            warnings = len(result.findings) - errors
            click.echo(
                f"{errors} errors, {warnings} warnings in {len(result.registry.entries)} metrics"
            )
    if result.failed(strict):
        raise SystemExit(1)


@click.command("generate")
@click.argument("language", type=click.Choice(["python", "ts", "java"]))
@click.argument("registry", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "-o",
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Folder to write the generated source into (made if missing).",
)
@click.option(
    "--package",
    default="ldp.generated",
    show_default=True,
    help="Java: the package of the generated class.",
)
def generate(language: str, registry: str, out_dir: str, package: str) -> None:
    """Typed metric APIs from a registry: Python (Literal types, for mypy), TypeScript for
    the browser SDK (for tsc), Java for the JVM SDK (enums, for javac)."""
    try:
        reg = read_registry(registry)
        source = Path(registry).name
        if language == "java":
            files = gen.java(reg, source, package)
        else:
            files = gen.generate(language, reg, source)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    for file in files:
        target = Path(out_dir) / file.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(file.text, encoding="utf-8")
        click.echo(f"wrote {target}")


def _write_dictionary(result: Any, path: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(render_page(result))
    except OSError as exc:
        raise click.ClickException(f"cannot write {path}: {exc}") from None


@click.command("dictionary")
@click.argument("registry", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "-o",
    "--out",
    "out_file",
    required=True,
    type=click.Path(dir_okay=False, writable=True),
    help="The HTML file to write.",
)
@click.option("--today", help="Check expiry against this date (YYYY-MM-DD; default: today, UTC).")
def dictionary(registry: str, out_file: str, today: str | None) -> None:
    """Write the privacy dictionary of a registry as one static HTML page: every metric,
    what it asks, its ε and share of the budget, owner, expiry, and what one report can
    and cannot reveal."""
    result = _lint(registry, today)
    _write_dictionary(result, out_file)
    click.echo(f"wrote {out_file} ({len(result.registry.entries)} metrics)")


COMMANDS: tuple[click.Command, ...] = (lint, generate, dictionary)
"""The registry's commands, mounted by :mod:`aggregator.cli`."""

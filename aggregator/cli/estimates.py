"""``ldp estimates NAME [--by DIMENSION]``: one window's estimates with intervals.

The rows are :func:`aggregator.query.export.window_rows`'s, the ones ``ldp export``
writes (computed by the function ``GET /v1/estimates`` answers with): a table for people
(values made visible, escapes highlighted; ``~0`` marks a value whose interval holds 0),
CSV (the export's columns; text cells formula-safe) or JSON (one object per row, raw
values; the API's JSON has the notes and alarms too). ``--by`` shows the breakdown by a
public dimension, the groups under the minimum held back as ``?by=`` holds them. Reads
where ``ldp export`` reads (:mod:`aggregator.cli.source`): a local Redis, or the API of an
``ldp serve`` with a read token. Docs: ``docs/concepts/dimensions.md``.
"""

from __future__ import annotations

import time
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from aggregator.cli.console import echo_json, err, or_dash, out
from aggregator.cli.export import write_csv_stdout
from aggregator.cli.options import (
    EstimateAsks,
    ReadFrom,
    estimate_asks,
    read_options,
)
from aggregator.cli.source import Asked, Local, Source, checked_name, reading
from aggregator.query.segments import NOT_PROTECTED
from aggregator.query.window import list_windows
from aggregator.safe_text import visible_parts
from aggregator.stats.segments import DEFAULT_MIN_SEGMENT_REPORTS
from ldp_store import schema
from ldp_store.retention import RetentionPolicy, expired_message

__all__ = ["estimand_line", "estimates", "points", "shown_value"]


def points(x: float) -> str:
    """A half-width in percentage points, enough digits to see it (as the dashboard)."""
    pp = x * 100
    return f"{pp:.1f}" if pp >= 10 else f"{pp:.2f}" if pp >= 0.1 else f"{pp:.2g}"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:.2f}%"


def _num(x: float | None) -> str:
    return or_dash(x, ".4g")


def _flag(row: dict[str, Any]) -> str:
    """What follows an interval: ``~0`` where it holds 0 (not distinguishable from zero),
    ``<0`` where it lies below 0 (no true share does: chance or fake reports), else blanks
    (the intervals stay aligned)."""
    flagged = row.get("distinguishable_from_zero")
    if flagged is None:
        return ""
    return " ~0" if not flagged else " <0" if (row.get("ci_high") or 0) < 0 else "   "


def shown_value(value: str) -> Text:
    """A value or label for a terminal: hidden characters as escapes in reverse video
    (:func:`aggregator.safe_text.visible_parts`), rich markup not interpreted."""

    text = Text()
    for part, escaped in visible_parts(value):
        text.append(part, style="reverse" if escaped else None)
    return text


def _group(row: dict[str, Any]) -> list[Text]:
    """The group cell of a breakdown's row (none for the whole metric's)."""
    segment = row.get("segment")
    return [shown_value(segment.split("=", 1)[1])] if segment else []


def _distribution_table(rows: list[dict[str, Any]]) -> Table:
    """A distribution's quantiles (its bins are in --format csv/json and the export)."""
    table = Table()
    for col in ("quantile", "value", "interval (simultaneous)"):
        table.add_column(col, justify="right", no_wrap=True)
    for r in rows:
        if not str(r.get("value", "")).startswith("p"):
            continue
        table.add_row(
            r["value"],
            _num(r.get("estimate")),
            f"[{_num(r.get('ci_low'))}, {_num(r.get('ci_high'))}]",
        )
    return table


def _table(rows: list[dict[str, Any]], kind: str, by: str | None = None) -> Table:
    """The rows for people: a numeric metric's means, a distribution's quantiles, or each
    value's share."""
    if kind == "distribution":
        return _distribution_table(rows)
    return _numeric_table(rows, by) if kind == "numeric" else _value_table(rows, kind, by)


def _numeric_table(rows: list[dict[str, Any]], by: str | None) -> Table:
    table = Table()
    if by:
        table.add_column(by, overflow="fold")
    for col in ("mean", "± half-width", "interval", "std error", "n"):
        table.add_column(col, justify="right", no_wrap=True)
    for r in rows:
        low, high, mean = r.get("ci_low"), r.get("ci_high"), r.get("estimate")
        table.add_row(
            *_group(r),
            _num(mean),
            "—" if high is None or mean is None else f"±{_num(high - mean)}",
            "—" if low is None else f"[{_num(low)}, {_num(high)}]",
            _num(r.get("std_error")),
            f"{r.get('n', 0):,}",
        )
    return table


def _value_table(rows: list[dict[str, Any]], kind: str, by: str | None) -> Table:
    table = Table()
    if by:
        table.add_column(by, overflow="fold")
    table.add_column("value", overflow="fold")  # a value is never cut short
    columns = ["estimate", "± (pp)", "interval"]
    columns += ["Norm-Sub", "support"] if kind != "string" else []
    for col in columns:
        table.add_column(col, justify="right", no_wrap=True)
    for r in rows:
        f, low, high = r.get("estimate"), r.get("ci_low"), r.get("ci_high")
        cells = [
            _pct(f),
            "—" if high is None or f is None else f"±{points(high - f)}",
            "—" if low is None else f"[{_pct(low)}, {_pct(high)}]{_flag(r)}",
        ]
        if kind != "string":
            cells += [_pct(r.get("norm_sub")), f"{r.get('support_count', 0):,}"]
        table.add_row(*_group(r), shown_value(r["value"]), *cells)
    return table


@click.command()
@click.argument("name")
@click.option(
    "--window",
    default="all",
    show_default=True,
    help="all, hour:YYYY-MM-DDTHH or day:YYYY-MM-DD (UTC).",
)
@click.option("--version", type=click.IntRange(min=1), help="A version (default: the current).")
@click.option(
    "--format",
    "fmt",
    default="table",
    show_default=True,
    type=click.Choice(["table", "csv", "json"]),
    help="csv: the columns of ldp export; json: one object per row, values raw.",
)
@click.option(
    "--by",
    metavar="DIMENSION",
    help="The breakdown by one of the metric's public dimensions (as ?by= answers it; "
    "dimensions are not protected by ε).",
)
@estimate_asks
@read_options
@click.pass_context
def estimates(
    ctx: click.Context,
    name: str,
    window: str,
    version: int | None,
    fmt: str,
    by: str | None,
    asks: EstimateAsks,
    read_from: ReadFrom,
) -> None:
    """Print one window's estimates with intervals (as GET /v1/estimates computes them).

    Without --by: the whole metric (CSV and JSON add the shown groups of every breakdown,
    as ldp export does); with --by: each group of that dimension. Reads where ldp export
    reads: the ldp serve running here (--data-dir), --redis-url, or the API at --url with
    its read token (--token)."""

    _check_window(checked_name(name), window)
    with reading(ctx, read_from, asks.min_segment_reports) as (source, minimum):
        definition = _definition(source, name, version, by)
        if isinstance(source, Local):  # the API refuses an expired window itself (404)
            _refuse_expired(source, definition, window)
        asked = Asked.of(window, asks, minimum)
        n, rows = source.rows(definition, asked)
        waiting = source.waiting_note(definition) if fmt == "table" else None
    rows = _rows_shown(rows, by, fmt)
    if fmt == "csv":
        write_csv_stdout(rows)
    elif fmt == "json":
        echo_json(rows)
    else:
        header = (
            f"{definition.name} v{definition.version} · {definition.kind} · "
            f"{definition.mechanism.name} ε={definition.mechanism.epsilon:g} · window {window} "
            f"· n = {n:,} · {asks.confidence:.0%} intervals"
        )
        out.print(Text(header))
        out.print(Text(estimand_line(definition.kind, asks.estimand)))
        if waiting is not None:
            out.print(Text(waiting))
        if by is not None:
            _breakdown(rows, definition, by, asks.min_segment_reports)
        else:
            _whole(rows, definition)


def _rows_shown(rows: list[dict[str, Any]], by: str | None, fmt: str) -> list[dict[str, Any]]:
    """The rows of the breakdown ``by`` only; else, in a table, the whole metric's only (a
    breakdown is asked for by name), or every row (CSV and JSON add the breakdowns')."""
    if by is not None:
        return [r for r in rows if str(r.get("segment") or "").startswith(f"{by}=")]
    if fmt == "table":
        return [r for r in rows if not r.get("segment")]
    return rows


def estimand_line(kind: str, estimand: str) -> str:
    """Whose share (or mean) the intervals are for, in one line."""
    what = "mean" if kind == "numeric" else "share"
    whose = (
        "a larger population the reporting devices are a random sample of"
        if estimand == "population"
        else "the devices that reported"
    )
    return f"estimand {estimand}: each interval is for the {what} of {whose}"


def _check_window(name: str, window: str) -> None:
    """Refuse a window that is not ``all``, an hour or a day that exists.

    Raises:
        click.BadParameter: saying the forms a window takes.
    """

    try:
        schema.window_span(window)
    except ValueError:
        raise click.BadParameter(
            f"{window!r}: 'all', 'hour:YYYY-MM-DDTHH' or 'day:YYYY-MM-DD' (UTC) of a date "
            "that exists",
            param_hint="--window",
        ) from None


def _definition(source: Source, name: str, version: int | None, by: str | None) -> Any:
    """The metric version to read, with ``by`` one of its dimensions.

    Raises:
        click.ClickException: no such metric or version.
        click.BadParameter: ``by`` is not a dimension of it.
    """
    definition = source.definition(name, version)
    if definition is None:
        which = f"metric {name!r}" + (f" version {version}" if version else "")
        raise click.ClickException(f"unknown {which}")
    declared = [d for d, _ in definition.dimensions]
    if by is not None and by not in declared:
        raise click.BadParameter(
            f"{by!r} is not a dimension of {name}: "
            + (f"one of {', '.join(declared)}" if declared else "it declares none"),
            param_hint="--by",
        )
    return definition


def _whole(rows: list[dict[str, Any]], definition: Any) -> None:
    """Print the whole metric's rows, then what its marks mean."""
    if not rows:
        err.print("no values found yet" if definition.kind == "string" else "no rows")
        return
    out.print(_table(rows, definition.kind))
    declared = [d for d, _ in definition.dimensions]
    if declared:
        out.print(f"breakdowns (not protected by ε): --by {' | '.join(declared)}")
    bins = sum(1 for r in rows if str(r.get("value", "")).startswith("["))
    notes = {
        "string": "discovered values: selection-adjusted estimates and intervals",
        "numeric": None,
        "distribution": f"quantiles from the CDF's simultaneous band; {bins} bins' shares "
        "with their intervals: --format csv or json (or ldp export)",
    }
    note = notes.get(
        definition.kind,
        "~0: the interval holds 0 (not distinguishable from zero); <0: it lies below 0 "
        "(chance or fake reports); each interval and flag is for its value alone (the "
        "API's ?multiplicity=fdr|simultaneous accounts for many values)",
    )
    if note is not None:
        out.print(note)
    if definition.kind == "joint":
        out.print(
            "every 1- and 2-way marginal's cells; Norm-Sub column: the consistent estimate "
            "(post-processed); each marginal is read from one group of the reports"
        )


def _refuse_expired(source: Any, definition: Any, window: str) -> None:
    """A window past its retention is refused with when it expired (as the API's 404).

    Raises:
        click.ClickException: saying so.
    """
    if window == schema.ALL or window in list_windows(source.client, definition):
        return
    policy = RetentionPolicy.from_environ().for_metric(definition)
    at = policy.expires_at(window)
    if at is not None and at <= time.time():
        raise click.ClickException(expired_message(definition, window, policy))


def _breakdown(
    rows: list[dict[str, Any]], definition: Any, by: str, min_segment_reports: int | None
) -> None:
    """Print a breakdown's shown groups, then the held-back ones."""
    minimum = min_segment_reports or DEFAULT_MIN_SEGMENT_REPORTS
    out.print(Text(NOT_PROTECTED))
    shown = {str(r["segment"]).split("=", 1)[1] for r in rows}
    if rows:
        out.print(_table(rows, definition.kind, by))
    hidden = [v for v in dict(definition.dimensions)[by] if v not in shown]
    if hidden:
        out.print(
            Text(
                f"not shown: {', '.join(hidden)} (a group needs {minimum} reports, and others "
                "are held back with the small ones, in this window and across its hours, "
                "days and all time, so that no sum or difference of what is served gives a "
                "hidden group's counts; GET /v1/estimates/<name>?by= says why for each)"
            )
        )

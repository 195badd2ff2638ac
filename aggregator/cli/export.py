"""``ldp export``: every window's counts and estimates to a file (or standard output), so
history survives expiry.

Reads a Redis directly (``--redis-url``, or the ``ldp serve`` running on ``--data-dir``)
or the HTTP API of an ``ldp serve`` (``--url`` / ``LDP_URL``, with a read token):
:mod:`aggregator.cli.source`. Either way the rows are :mod:`aggregator.query.export`'s:
the counts themselves (support counts, or a numeric metric's Σy and Σy²), which let anyone
recompute the estimates later, beside the estimates ``GET /v1/estimates`` answers.

One row per window and value (categorical) or per window (numeric), every metric in one
table with a ``metric`` column (``--all``), as CSV or, with pyarrow installed, Parquet.
Values and labels are written raw in Parquet; in CSV they are made visible and
formula-safe (:func:`aggregator.safe_text.csv_text`). ``ldp estimates`` prints the same
rows of one window.
Σy and Σy² are exact integers in units of 2⁻³⁰ and 2⁻⁶⁰ (larger than 64 bits), written
as decimal text.
"""

from __future__ import annotations

import csv
import io
import sys
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO

import click

from aggregator.cli.console import err, progress_bar
from aggregator.cli.options import (
    EstimateAsks,
    ReadFrom,
    estimate_asks,
    read_options,
)
from aggregator.cli.source import Asked, Source, checked_name, reading
from aggregator.query.export import COLUMNS
from aggregator.safe_text import csv_text

if TYPE_CHECKING:
    from client_sdk.wire import MetricDefinition

__all__ = ["export", "write_csv", "write_csv_stdout"]

INTEGER_COLUMNS = {"version", "n", "reports_per_device", "support_count"}
FLOAT_COLUMNS = {
    "epsilon",
    "confidence",
    "estimate",
    "std_error",
    "ci_low",
    "ci_high",
    "cs_low",
    "cs_high",
    "band_low",
    "band_high",
    "norm_sub",
    "p_value",
}
BOOL_COLUMNS = {"distinguishable_from_zero"}

PROGRESS_FROM = 20
"""Windows from which a progress bar is shown: a few are exported in a blink."""


TEXT_COLUMNS = {"value"}
"""Columns of device- or admin-written text: made visible and formula-safe in CSV
(:func:`~aggregator.safe_text.csv_text`), raw in Parquet. Numbers keep their minus."""


def write_csv(out: TextIO, rows: list[dict[str, Any]]) -> None:
    """``rows`` as CSV with the :data:`~aggregator.query.export.COLUMNS` header, text cells
    made safe."""
    writer = csv.DictWriter(out, COLUMNS, restval="")
    writer.writeheader()
    for row in rows:
        writer.writerow(
            {
                k: "" if v is None else csv_text(v) if k in TEXT_COLUMNS else v
                for k, v in row.items()
            }
        )


def write_csv_stdout(rows: list[dict[str, Any]]) -> None:
    """:func:`write_csv` to standard output, in UTF-8 whatever the terminal's encoding
    (as the files are)."""
    sys.stdout.flush()
    stream = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", newline="")
    write_csv(stream, rows)
    stream.detach()  # flushes; stdout's buffer stays open


def _write_parquet(out: Path | BinaryIO, rows: list[dict[str, Any]]) -> None:
    # the optional "export" extra, for --format parquet alone
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]  # noqa: PLC0415
    import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

    def kind(column: str) -> Any:
        if column in INTEGER_COLUMNS:
            return pa.int64()
        if column in BOOL_COLUMNS:
            return pa.bool_()
        return pa.float64() if column in FLOAT_COLUMNS else pa.string()

    schema = pa.schema([(c, kind(c)) for c in COLUMNS])
    table = pa.table({c: [row.get(c) for row in rows] for c in COLUMNS}, schema=schema)
    pq.write_table(table, out)


@click.command()
@click.argument("name", required=False)
@click.option("--all", "every", is_flag=True, help="Every metric (one table, a metric column).")
@click.option("--version", type=click.IntRange(min=1), help="One version (default: all).")
@click.option(
    "--window",
    "granularity",
    type=click.Choice(["hour", "day", "all"]),
    help="Only hour windows, day windows or the all-time window (default: every window).",
)
@click.option(
    "--since",
    type=click.DateTime(["%Y-%m-%d"]),
    help="Only hour and day windows starting on or after this UTC date (YYYY-MM-DD).",
)
@click.option(
    "--out",
    "out_path",
    required=True,
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    help="The file to write; - for standard output.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["csv", "parquet"]),
    help="Default: parquet for a .parquet file, csv otherwise. Parquet needs pyarrow "
    "(pip install 'ldp-telemetry[export]').",
)
@estimate_asks
@read_options
@click.pass_context
def export(
    ctx: click.Context,
    name: str | None,
    every: bool,
    version: int | None,
    granularity: str | None,
    since: datetime | None,
    out_path: Path,
    fmt: str | None,
    asks: EstimateAsks,
    read_from: ReadFrom,
) -> None:
    """Write every window's counts and estimates with intervals to a file (CSV or Parquet).

    Reads the Redis of the ldp serve running here (--data-dir), or --redis-url, or the API
    of an ldp serve at --url with its read token (--token). Hour and day windows expire
    with retention: export them before, e.g. daily from cron. The estimates equal GET
    /v1/estimates' (same code, same counts).
    """
    _check_selection(name, every, version, granularity, since)
    fmt = _format_of(out_path, fmt)
    with reading(ctx, read_from, asks.min_segment_reports) as (source, minimum):
        plan = _plan(source, name, version, granularity, since, asks.estimand)
        rows = _read_rows(source, plan, Asked.of("all", asks, minimum))
    _write(out_path, fmt, rows)
    metrics = len({d.name for d, _ in plan})
    where = "standard output" if str(out_path) == "-" else out_path
    err.print(
        f"exported {len(plan)} windows of {metrics} metrics ({len(rows)} rows, intervals "
        f"for estimand {asks.estimand}) from {source.where} to {where}"
    )


def _check_selection(
    name: str | None,
    every: bool,
    version: int | None,
    granularity: str | None,
    since: datetime | None,
) -> None:
    """Refuse a selection that names nothing, or asks for what cannot be.

    Raises:
        click.UsageError: saying which options do not go together.
    """
    if every == (name is not None):
        raise click.UsageError("name one metric, or pass --all (not both)")
    if name is not None:
        checked_name(name)
    if every and version is not None:
        raise click.UsageError("--version is for one metric, not --all")
    if since is not None and granularity == "all":
        raise click.UsageError("--since selects hour and day windows; --window all has none")


def _format_of(out_path: Path, fmt: str | None) -> str:
    """The format asked for, else the file's (parquet for ``.parquet``, else csv).

    Raises:
        click.UsageError: Parquet without pyarrow installed.
    """
    fmt = fmt or ("parquet" if out_path.suffix == ".parquet" else "csv")
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise click.UsageError(
                "Parquet needs pyarrow: pip install 'ldp-telemetry[export]' (or use CSV)"
            ) from None
    return fmt


def _plan(
    source: Source,
    name: str | None,
    version: int | None,
    granularity: str | None,
    since: datetime | None,
    estimand: str,
) -> list[tuple[MetricDefinition, str]]:
    """Each window to export beside its metric version's definition, oldest first. A
    population export leaves out the string metrics (said so) or, one asked for by name,
    refuses it.

    Raises:
        click.ClickException: a string metric asked for by name with population.
    """
    plan: list[tuple[MetricDefinition, str]] = []
    left_out: set[str] = set()
    for item in source.plan(name, version, granularity, since.date() if since else None):
        definition = source.definition(item.metric, item.version)
        if definition is None:  # deleted since the plan was made
            continue
        if estimand == "population" and definition.kind == "string":
            if name is not None:
                raise click.ClickException(
                    f"estimand population is not offered for string metrics ({name!r}): a "
                    "discovered value's interval is for the share among the devices that "
                    "reported (--estimand reporters)"
                )
            left_out.add(definition.name)
            continue
        plan += [(definition, w) for w in item.windows]
    if left_out:
        which = ", ".join(sorted(left_out))
        err.print(f"left out (string metrics offer estimand reporters only): {which}")
    return plan


def _read_rows(
    source: Source, plan: list[tuple[MetricDefinition, str]], asked: Asked
) -> list[dict[str, Any]]:
    """Every planned window's rows, each version's hidden groups decided at once
    (``asked``: everything but the window and the windows read together)."""
    together: dict[tuple[str, int], list[str]] = {}
    for definition, window in plan:
        together.setdefault((definition.name, definition.version), []).append(window)
    rows: list[dict[str, Any]] = []
    with progress_bar("exporting windows", len(plan), len(plan) >= PROGRESS_FROM) as advance:
        for definition, window in plan:
            same = together[(definition.name, definition.version)]
            rows += source.rows(definition, replace(asked, window=window, together=same))[1]
            advance(1)
    return rows


def _write(out_path: Path, fmt: str, rows: list[dict[str, Any]]) -> None:
    """``rows`` to ``out_path`` (``-``: standard output) in ``fmt``.

    Raises:
        click.ClickException: the file cannot be written.
    """
    to_stdout = str(out_path) == "-"
    try:
        if to_stdout and fmt == "parquet":
            _write_parquet(sys.stdout.buffer, rows)
        elif to_stdout:
            write_csv_stdout(rows)
        else:
            out_path.parent.mkdir(parents=True, exist_ok=True)
            if fmt == "parquet":
                _write_parquet(out_path, rows)
            else:
                with out_path.open("w", newline="", encoding="utf-8") as f:
                    write_csv(f, rows)
    except OSError as exc:
        raise click.ClickException(f"cannot write {out_path}: {exc}") from None

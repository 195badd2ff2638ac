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
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO, TypeVar

import click

from aggregator.cli.console import err, progress_bar
from aggregator.cli.source import read_options, source_of

if TYPE_CHECKING:
    from client_sdk.wire import MetricDefinition

__all__ = [
    "CONFIDENCE",
    "ESTIMAND",
    "MIN_SEGMENT_REPORTS",
    "export",
    "redis_options",
    "redis_url_of",
    "write_csv",
    "write_csv_stdout",
]

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
    "norm_sub",
    "p_value",
}
BOOL_COLUMNS = {"distinguishable_from_zero"}

PROGRESS_FROM = 20
"""Windows from which a progress bar is shown: a few are exported in a blink."""


CONFIDENCE = click.option(
    "--confidence",
    default=0.95,
    show_default=True,
    type=click.FloatRange(0.5, 0.9999),
    help="Level of the intervals.",
)
"""The intervals' level, as ``ldp export`` and ``ldp estimates`` take it."""

ESTIMAND = click.option(
    "--estimand",
    default="reporters",
    show_default=True,
    type=click.Choice(["reporters", "population"]),
    help="Whose share (or mean) the intervals are for: reporters, the devices that "
    "reported, or population, a larger population they are a random sample of (wider; "
    "as the API's ?estimand=). Every row names it; string metrics offer reporters only.",
)
"""Whose share the intervals are for, as ``ldp export`` and ``ldp estimates`` take it."""

MIN_SEGMENT_REPORTS = click.option(
    "--min-segment-reports",
    type=click.IntRange(min=1),
    envvar="LDP_MIN_SEGMENT_REPORTS",
    help="Reports a group of a breakdown by a public dimension needs to be shown "
    "(default: the API's LDP_MIN_SEGMENT_REPORTS, read from the same variable, else 50).",
)
"""The least reports of a shown group, as the API reads it: ``ldp export`` and ``ldp
estimates`` never release a group the API hides."""


TEXT_COLUMNS = {"value"}
"""Columns of device- or admin-written text: made visible and formula-safe in CSV
(:func:`~aggregator.safe_text.csv_text`), raw in Parquet. Numbers keep their minus."""


def write_csv(out: TextIO, rows: list[dict[str, Any]]) -> None:
    """``rows`` as CSV with the :data:`~aggregator.query.export.COLUMNS` header, text cells
    made safe."""
    from aggregator.query.export import COLUMNS
    from aggregator.safe_text import csv_text

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
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
    import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

    from aggregator.query.export import COLUMNS

    def kind(column: str) -> Any:
        if column in INTEGER_COLUMNS:
            return pa.int64()
        if column in BOOL_COLUMNS:
            return pa.bool_()
        return pa.float64() if column in FLOAT_COLUMNS else pa.string()

    schema = pa.schema([(c, kind(c)) for c in COLUMNS])
    table = pa.table({c: [row.get(c) for row in rows] for c in COLUMNS}, schema=schema)
    pq.write_table(table, out)


F = TypeVar("F", bound=Callable[..., Any])


def redis_options(command: F) -> F:
    """``--redis-url`` and ``--data-dir``: where the counts are read (resolve them with
    :func:`redis_url_of`)."""
    command = click.option(
        "--data-dir",
        default="ldp-data",
        show_default=True,
        type=click.Path(file_okay=False, path_type=Path),
        help="Data dir of a running ldp serve, whose embedded Redis is read without --redis-url.",
    )(command)
    return click.option(
        "--redis-url",
        envvar=["REDIS_URL", "LDP_REDIS_URL"],
        default=None,
        help="Redis holding the counts (default: $REDIS_URL, then $LDP_REDIS_URL, then the "
        "embedded Redis of the ldp serve running on --data-dir).",
    )(command)


def redis_url_of(redis_url: str | None, data_dir: Path) -> str:
    """The URL given, or that of the embedded Redis of the ``ldp serve`` on ``data_dir``.

    Raises:
        click.UsageError: neither.
    """
    if redis_url:
        return redis_url
    from ldp_store.embedded import REDIS_URL_FILE  # noqa: PLC0415

    found = data_dir / REDIS_URL_FILE
    if not found.is_file():
        raise click.UsageError(
            f"no Redis to read: no ldp serve is running on {data_dir} (pass --data-dir "
            "of the one that is), or pass --redis-url / set REDIS_URL"
        )
    return found.read_text().strip()


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
@CONFIDENCE
@ESTIMAND
@MIN_SEGMENT_REPORTS
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
    confidence: float,
    estimand: str,
    min_segment_reports: int | None,
    url: str | None,
    token: str | None,
    redis_url: str | None,
    data_dir: Path,
) -> None:
    """Write every window's counts and estimates with intervals to a file (CSV or Parquet).

    Reads the Redis of the ldp serve running here (--data-dir), or --redis-url, or the API
    of an ldp serve at --url with its read token (--token). Hour and day windows expire
    with retention: export them before, e.g. daily from cron. The estimates equal GET
    /v1/estimates' (same code, same counts).
    """
    import redis as redis_py

    from client_sdk.wire import check_name

    if every == (name is not None):
        raise click.UsageError("name one metric, or pass --all (not both)")
    if name is not None:
        try:
            check_name(name)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="NAME") from None
    if every and version is not None:
        raise click.UsageError("--version is for one metric, not --all")
    if since is not None and granularity == "all":
        raise click.UsageError("--since selects hour and day windows; --window all has none")
    fmt = fmt or ("parquet" if out_path.suffix == ".parquet" else "csv")
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise click.UsageError(
                "Parquet needs pyarrow: pip install 'ldp-telemetry[export]' (or use CSV)"
            ) from None
    try:
        source = source_of(redis_url, url, token, data_dir)
        minimum = local_minimum(ctx, source, min_segment_reports)
        day = since.date() if since else None
        planned = source.plan(name, version, granularity, day)
        plan: list[tuple[MetricDefinition, str]] = []
        for item in planned:
            definition = source.definition(item.metric, item.version)
            if definition is None:  # deleted since the plan was made
                continue
            if estimand == "population" and definition.kind == "string":
                raise click.ClickException(
                    f"estimand population is not offered for string metrics "
                    f"({definition.name!r}): a discovered value's interval is for the share "
                    "among the devices that reported (--estimand reporters)"
                )
            plan += [(definition, w) for w in item.windows]
        rows: list[dict[str, Any]] = []
        together: dict[tuple[str, int], list[str]] = {}  # hidden groups: decided at once
        for definition, window in plan:
            together.setdefault((definition.name, definition.version), []).append(window)
        with progress_bar("exporting windows", len(plan), len(plan) >= PROGRESS_FROM) as advance:
            for definition, window in plan:
                same = together[(definition.name, definition.version)]
                rows += source.rows(definition, window, confidence, minimum, same, estimand)[1]
                advance(1)
    except (redis_py.RedisError, redis_py.exceptions.RedisClusterException) as exc:
        raise click.ClickException(f"Redis is unreachable: {exc}") from None
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
    metrics = len({d.name for d, _ in plan})
    where = "standard output" if to_stdout else out_path
    err.print(
        f"exported {len(plan)} windows of {metrics} metrics ({len(rows)} rows, intervals "
        f"for estimand {estimand}) from {source.where} to {where}"
    )


def local_minimum(ctx: click.Context, source: Any, minimum: int | None) -> int | None:
    """``--min-segment-reports`` for a Redis read here; the API applies the server's own
    ``LDP_MIN_SEGMENT_REPORTS`` (a client cannot lower it).

    Raises:
        click.UsageError: the option given on the command line with the API as source.
    """
    from aggregator.cli.source import Api  # noqa: PLC0415

    if not isinstance(source, Api):
        return minimum
    given = ctx.get_parameter_source("min_segment_reports")
    if given == click.core.ParameterSource.COMMANDLINE:
        raise click.UsageError(
            f"--min-segment-reports is for a Redis read here; {source.where} applies its own "
            "LDP_MIN_SEGMENT_REPORTS"
        )
    return None

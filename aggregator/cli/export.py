"""``ldp export``: every window's counts and estimates to a file (or standard output), so
history survives expiry.

Reads Redis directly (``--redis-url``, as ``ldp aggregate`` does): the counts themselves
(support counts, or a numeric metric's Σy and Σy²) are what lets anyone recompute the
estimates later, and the API answers estimates, not sums. The estimates are computed by
:func:`aggregator.query.estimators.estimate_window`, the function ``GET /v1/estimates``
answers with, from the same counts read once, so a file holds the API's very numbers.

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
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO, TypeVar

import click

from aggregator.cli.console import err, progress_bar

if TYPE_CHECKING:
    import redis

    from aggregator.query.suppression import HiddenGroups
    from client_sdk.wire import MetricDefinition
    from ldp_store.registry import Registry

__all__ = [
    "COLUMNS",
    "export",
    "redis_options",
    "redis_url_of",
    "window_rows",
    "write_csv",
    "write_csv_stdout",
]

COLUMNS = (
    "metric",
    "version",
    "kind",
    "mechanism",
    "epsilon",
    "window",
    "window_start",
    "n",
    "confidence",
    "reports_per_device",
    "value",
    "support_count",
    "sum_units",
    "sum_sq_units",
    "estimate",
    "std_error",
    "ci_low",
    "ci_high",
    "cs_low",
    "cs_high",
    "norm_sub",
    "segment",
)
"""One row: the version and window; its counts (``support_count`` of ``value``, or a
numeric metric's ``sum_units`` Σy and ``sum_sq_units`` Σy²); the estimate (a value's
frequency, or the mean) with its standard error, interval, confidence sequence and (for
frequencies) the Norm-Sub post-processed share; ``segment`` (``platform=ios``): a row of
one group of a breakdown by a public dimension (shown groups only, as ``?by=`` answers;
empty for the metric's own rows). Empty where a kind has no such field."""

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
}

PROGRESS_FROM = 20
"""Windows from which a progress bar is shown: a few are exported in a blink."""


def _windows(
    client: redis.Redis, definition: MetricDefinition, granularity: str | None, since: date | None
) -> list[str]:
    """The version's windows to export, oldest first (``all`` last)."""
    from aggregator.query.window import list_windows
    from ldp_store import schema

    chosen = []
    for window in list_windows(client, definition):
        kind = window.partition(":")[0]
        if granularity is not None and kind != granularity:
            continue
        span = schema.window_span(window)
        if since is not None:
            start = datetime.combine(since, datetime.min.time(), UTC).timestamp()
            if span is None or span[0] < start:
                continue
        chosen.append(window)
    return sorted(chosen, key=lambda w: (w == "all", w))


def _start(window: str) -> str:
    from ldp_store import schema

    span = schema.window_span(window)
    if span is None:
        return ""
    return datetime.fromtimestamp(span[0], UTC).isoformat().replace("+00:00", "Z")


def window_rows(
    client: redis.Redis,
    registry: Registry,
    definition: MetricDefinition,
    window: str,
    confidence: float,
    min_segment_reports: int | None = None,
    hidden: HiddenGroups | None = None,
) -> Iterator[dict[str, Any]]:
    """The rows of one window: counts read once, estimated as the API does (a breakdown's
    hidden groups have no row, as ``?by=`` shows none: groups below
    ``min_segment_reports`` reports, default
    :data:`~aggregator.stats.segments.DEFAULT_MIN_SEGMENT_REPORTS`, and those held back
    with them across windows; ``hidden``: every window's, read once by the caller)."""
    from aggregator.query.answers import Estimates, MeanEstimate, StringEstimates
    from aggregator.query.estimators import Ask, Reader, estimate_window, estimator_for
    from aggregator.query.suppression import hidden_groups
    from aggregator.stats.segments import DEFAULT_MIN_SEGMENT_REPORTS

    m = definition.mechanism
    head = {
        "metric": definition.name,
        "version": definition.version,
        "kind": definition.kind,
        "mechanism": m.name,
        "epsilon": m.epsilon,
        "window": window,
        "window_start": _start(window),
        "confidence": confidence,
    }
    if definition.kind == "joint":
        yield from _joint_rows(client, definition, window, confidence, head)
        return
    reader = Reader(client, registry)
    stats = estimator_for(definition).read(reader, definition, window)
    body = estimate_window(reader, definition, window, Ask(confidence=confidence), stats)
    if definition.dimensions and hidden is None:
        hidden = hidden_groups(
            client, definition, min_segment_reports or DEFAULT_MIN_SEGMENT_REPORTS, [window]
        )
    if isinstance(body, MeanEstimate):
        yield {
            **head,
            "n": stats.n,
            "reports_per_device": 1,
            "sum_units": str(stats.total),
            "sum_sq_units": str(stats.total_sq),
            "estimate": body.mean,
            "std_error": body.std_error,
            "ci_low": body.ci_low,
            "ci_high": body.ci_high,
            "cs_low": body.cs_low,
            "cs_high": body.cs_high,
        }
        yield from _segment_rows(reader, definition, window, confidence, head, hidden)
        return
    if isinstance(body, StringEstimates):  # the discovered values
        for r in body.estimates:
            yield {
                **head,
                "n": body.n,
                "reports_per_device": 1,
                "value": r.value,
                "estimate": r.frequency,
                "std_error": r.std_error,
                "ci_low": r.ci_low,
                "ci_high": r.ci_high,
            }
        return
    assert isinstance(body, Estimates)  # joint metrics' rows are _joint_rows'
    yield from _frequency_rows(head, body)
    yield from _segment_rows(reader, definition, window, confidence, head, hidden)


def _segment_rows(
    reader: Any,
    definition: MetricDefinition,
    window: str,
    confidence: float,
    head: dict[str, Any],
    hidden: HiddenGroups | None,
) -> Iterator[dict[str, Any]]:
    """The shown groups of a breakdown by each public dimension, as ``?by=`` answers
    them (suppressed groups have no row: an export releases what the API releases, under
    the same ``LDP_MIN_SEGMENT_REPORTS``)."""
    from aggregator.query.answers import MeanEstimate
    from aggregator.query.estimators import Ask
    from aggregator.query.segments import segment_estimates

    if hidden is None:  # no dimensions
        return
    for dimension, _ in definition.dimensions:
        ask = Ask(confidence=confidence)
        breakdown = segment_estimates(
            reader, definition, window, dimension, ask, hidden.minimum, hidden
        )
        for group in breakdown.groups:
            found = group.estimates
            if found is None:
                continue
            tag = {**head, "segment": f"{dimension}={group.value}"}
            if isinstance(found, MeanEstimate):
                yield {
                    **tag,
                    "n": found.n,
                    "reports_per_device": 1,
                    "estimate": found.mean,
                    "std_error": found.std_error,
                    "ci_low": found.ci_low,
                    "ci_high": found.ci_high,
                    "cs_low": found.cs_low,
                    "cs_high": found.cs_high,
                }
            else:
                yield from _frequency_rows(tag, found)


def _frequency_rows(head: dict[str, Any], body: Any) -> Iterator[dict[str, Any]]:
    """A categorical estimate's rows, one per value."""
    for row in body.estimates:
        yield {
            **head,
            "n": body.n,
            "reports_per_device": body.reports_per_device,
            "value": row.value,
            "support_count": row.support_count,
            "estimate": row.frequency,
            "std_error": row.std_error,
            "ci_low": row.ci_low,
            "ci_high": row.ci_high,
            "cs_low": row.cs_low,
            "cs_high": row.cs_high,
            "norm_sub": row.norm_sub,
        }


def _joint_rows(
    client: redis.Redis,
    definition: MetricDefinition,
    window: str,
    confidence: float,
    head: dict[str, Any],
) -> Iterator[dict[str, Any]]:
    """A joint metric's rows: every cell of every 1- and 2-way marginal, ``value`` as
    ``attr=label;attr=label``, ``n`` its group's reports, ``support_count`` the cell's
    summed support (C_S), ``norm_sub`` the consistent (post-processed) estimate."""
    from itertools import combinations

    from aggregator.query.window import read_counts
    from aggregator.stats.intervals import json_float
    from aggregator.stats.joint import consistent_tables, estimate_marginal, marginal_support

    m = definition.joint
    counts = read_counts(client, definition, window).support
    tables = consistent_tables(m, counts) if counts[: len(m.groups)].sum() else None
    d = len(definition.attributes)
    for attrs in [*((a,) for a in range(d)), *combinations(range(d), 2)]:
        est = estimate_marginal(m, counts, attrs, confidence, tables=tables)
        support = marginal_support(m, counts, attrs)[2]
        cells = [[]]  # type: list[list[str]]
        for a in attrs:
            name, labels = definition.attributes[a]
            cells = [[*c, f"{name}={label}"] for c in cells for label in labels]
        for i, cell in enumerate(cells):
            yield {
                **head,
                "n": est.n,
                "reports_per_device": 1,
                "value": ";".join(cell),
                "support_count": int(support[i]),
                "estimate": json_float(est.frequencies[i]),
                "std_error": json_float(est.std_errors[i]),
                "ci_low": json_float(est.ci_low[i]),
                "ci_high": json_float(est.ci_high[i]),
                "norm_sub": json_float(est.consistent[i]),
            }


CONFIDENCE = click.option(
    "--confidence",
    default=0.95,
    show_default=True,
    type=click.FloatRange(0.5, 0.9999),
    help="Level of the intervals.",
)
"""The intervals' level, as ``ldp export`` and ``ldp estimates`` take it."""

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
    """``rows`` as CSV with the :data:`COLUMNS` header, text cells made safe."""
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

    def kind(column: str) -> Any:
        if column in INTEGER_COLUMNS:
            return pa.int64()
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
@MIN_SEGMENT_REPORTS
@redis_options
def export(
    name: str | None,
    every: bool,
    version: int | None,
    granularity: str | None,
    since: datetime | None,
    out_path: Path,
    fmt: str | None,
    confidence: float,
    min_segment_reports: int | None,
    redis_url: str | None,
    data_dir: Path,
) -> None:
    """Write every window's counts and estimates with intervals to a file (CSV or Parquet).

    Hour and day windows expire with retention: export them before, e.g. daily from cron.
    The estimates equal GET /v1/estimates' (same code, same counts).
    """
    import redis as redis_py

    from aggregator.query.suppression import hidden_groups
    from aggregator.stats.segments import DEFAULT_MIN_SEGMENT_REPORTS
    from client_sdk.wire import check_name
    from ldp_store.connection import connect
    from ldp_store.registry import Registry

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
        client = connect(redis_url_of(redis_url, data_dir))
        registry = Registry(client)
        names = registry.names() if every else [name or ""]
        plan: list[tuple[MetricDefinition, str]] = []
        for metric in names:
            versions = [version] if version else registry.versions(metric)
            if not every and not versions:
                raise click.ClickException(f"unknown metric {metric!r}")
            for v in versions:
                definition = registry.get(metric, v)
                if definition is None:
                    if not every:
                        raise click.ClickException(f"unknown metric {metric!r} version {v}")
                    continue
                day = since.date() if since else None
                plan += [(definition, w) for w in _windows(client, definition, granularity, day)]
        rows: list[dict[str, Any]] = []
        hidden: dict[tuple[str, int], HiddenGroups] = {}  # every window's, read once
        minimum = min_segment_reports or DEFAULT_MIN_SEGMENT_REPORTS
        with progress_bar("exporting windows", len(plan), len(plan) >= PROGRESS_FROM) as advance:
            for definition, window in plan:
                ident = (definition.name, definition.version)
                if definition.dimensions and ident not in hidden:
                    windows = [w for d, w in plan if (d.name, d.version) == ident]
                    hidden[ident] = hidden_groups(client, definition, minimum, windows)
                rows += window_rows(
                    client,
                    registry,
                    definition,
                    window,
                    confidence,
                    min_segment_reports,
                    hidden.get(ident),
                )
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
    err.print(f"exported {len(plan)} windows of {metrics} metrics ({len(rows)} rows) to {where}")

"""``ldp plan``: the interval half-width N users buy, or the N a half-width needs, for
each kind of metric: categorical, distribution, joint and string (how many users find
values of frequency ≥ x, or which frequency N users find, with a table across ε).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from aggregator.cli.console import echo_json, or_dash, out
from aggregator.cli.options import (
    AS_JSON,
    CONCENTRATION,
    EPSILON,
    FIND,
    MAX_LENGTH,
    MIN_WIDTH,
    PLAN_KIND,
    POWER,
    confidence_option,
    domain_option,
    fake_fraction_option,
    refuse_given,
    usage_errors,
    users_option,
)
from aggregator.stats.distribution_plan import plan_quantile
from aggregator.stats.joint import plan_joint
from aggregator.stats.planning import plan as make_plan
from aggregator.stats.string_planning import tradeoff
from client_sdk import mechanisms
from client_sdk.mechanisms.joint import choose_joint
from client_sdk.mechanisms.strings import StringSketch

__all__ = ["plan", "show_distribution_plan", "show_joint_plan", "show_string_plan"]


@click.command()
@PLAN_KIND
@EPSILON
@domain_option(required=False)
@click.option(
    "--sizes",
    default=None,
    help="--kind joint: each attribute's number of values, comma-separated (e.g. 3,4,16).",
)
@users_option(
    "Users: print the half-width they buy (--kind string: the frequency they find).",
    required=False,
)
@click.option(
    "--width",
    "-w",
    type=click.FloatRange(MIN_WIDTH, 1, max_open=True),
    help="Target half-width, a fraction (0.01 = ±1 percentage point): print the users needed.",
)
@confidence_option(0.95)
@fake_fraction_option(0.01, "β, the share of reports from fake clients, for the robustness column.")
@click.option(
    "--matrix",
    default=None,
    help="A pram transition matrix to plan beside the others (k×k JSON, rows the true "
    "value), or @file.json; planned at the ε it realises.",
)
@MAX_LENGTH
@FIND
@CONCENTRATION
@POWER
@click.option(
    "--bins",
    type=click.IntRange(4, 4096),
    default=None,
    help="--kind distribution: the bins over the range (a power of two; default 1024).",
)
@click.option(
    "--quantile",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.95,
    show_default=True,
    help="--kind distribution: the quantile planned for.",
)
@click.option(
    "--mechanism",
    type=click.Choice(("auto", "hh", "haar")),
    default=None,
    help="--kind distribution: the hierarchical histogram auto picks (auto, hh) or HaarHRR "
    "(haar). [default: auto]",
)
@AS_JSON
@click.pass_context
def plan(
    ctx: click.Context,
    kind: str,
    epsilon: float,
    domain_size: int | None,
    sizes: str | None,
    users: int | None,
    width: float | None,
    confidence: float,
    beta: float,
    matrix: str | None,
    max_length: int,
    frequency: float | None,
    concentration: float,
    power: float,
    bins: int | None,
    quantile: float,
    mechanism: str | None,
    as_json: bool,
) -> None:
    """Interval half-width N users buy, or N needed for a half-width, per mechanism.

    And how far fake clients (a share β of the reports, Cao et al.'s maximal gain attack)
    can move one value's estimate with each: robustness (see ``ldp attack poison``).

    --kind string: the users needed to find values of frequency ≥ --find, or the frequency
    --users find, and the same across ε.

    --kind joint --sizes 3,4,16: a marginal cell's half-width (or the users for one), for
    every 1- and 2-way marginal, per layout auto weighs.
    """
    if kind == "distribution":
        refuse_given(
            ctx,
            ("domain_size", "sizes", "beta", "matrix", "max_length", "frequency"),
            "is not for --kind distribution (give --bins)",
        )
        show_distribution_plan(
            epsilon, bins or 1024, quantile, users, width, confidence, mechanism or "auto", as_json
        )
        return
    if bins is not None or mechanism is not None:
        raise click.UsageError("--bins and --mechanism are for --kind distribution")
    if kind == "joint":
        refuse_given(
            ctx,
            ("domain_size", "beta", "matrix", "max_length", "frequency", "concentration", "power"),
            "is not for --kind joint (give --sizes)",
        )
        show_joint_plan(epsilon, sizes, users, width, confidence, as_json)
        return
    if sizes is not None:
        raise click.UsageError("--sizes is for --kind joint")

    if kind == "string":
        refuse_given(
            ctx,
            ("domain_size", "width", "confidence", "beta", "matrix"),
            "is not for --kind string (a string metric has no k; ask with --users or --find)",
        )
        show_string_plan(epsilon, max_length, users, frequency, concentration, power, as_json)
        return
    refuse_given(
        ctx,
        ("max_length", "frequency", "concentration", "power"),
        "is for string metrics: add --kind string",
    )
    if domain_size is None:
        raise click.UsageError("Missing option '--domain-size' / '-k' (or --kind string)")
    _categorical_plan(epsilon, domain_size, matrix, users, width, confidence, beta, as_json)


def _categorical_plan(
    epsilon: float,
    domain_size: int,
    matrix: str | None,
    users: int | None,
    width: float | None,
    confidence: float,
    beta: float,
    as_json: bool,
) -> None:
    """``ldp plan`` of a categorical metric: each mechanism's half-width or users (and a
    given pram matrix's), and its robustness to a share ``beta`` of fake clients."""
    if (users is None) == (width is None):
        raise click.UsageError("give exactly one of --users and --width")
    given = None if matrix is None else _pram_of(matrix, domain_size)
    with usage_errors():
        rows = make_plan(
            epsilon,
            domain_size,
            users=users,
            width=width,
            confidence=confidence,
            fake_fraction=beta,
            given=given,
        )
    if as_json:
        echo_json([r.__dict__ for r in rows])
        return
    _show_plan(rows, epsilon, domain_size, users, width, confidence, beta)


def _show_plan(
    rows: list[Any],
    epsilon: float,
    domain_size: int,
    users: int | None,
    width: float | None,
    confidence: float,
    beta: float,
) -> None:
    """``ldp plan``'s table of a categorical metric: each mechanism's half-width or users,
    and how far fake clients move a value."""
    if users:
        what = f"{users:,} users"
    else:
        points = (width or 0) * 100
        unit = "point" if points == 1 else "points"
        what = f"half-width ±{points:g} percentage {unit} (--width {width:g})"
    table = Table(
        title=f"ε={epsilon:g}, k={domain_size}: {what}, {confidence:.0%} intervals near f = 0"
    )
    # shares and their errors in percentage points throughout (0.01 = 1 point)
    moved = f"{beta * 100:g} % fakes move (points)"
    for col in ("mechanism", "Var*", "report bytes", "± half-width (points)", "users", moved):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(
            r.name + (" (auto)" if r.auto else ""),
            or_dash(r.variance_star, ".4g"),
            or_dash(r.wire_bytes),
            f"{r.half_width * 100:.4f}",
            f"{r.users:,}",
            f"+{r.max_gain * 100:.3g}",
        )
    out.print(table)
    out.print("central laplace: the trusted-curator alternative (the server sees true values)")
    out.print(
        f"last column: how far fake clients sending {beta * 100:g} % of the reports move one value "
        "(maximal gain attack; ldp attack poison measures it)"
    )
    out.print(mechanisms.choose(epsilon, domain_size).reason)


def show_distribution_plan(
    epsilon: float,
    bins: int,
    p: float,
    users: int | None,
    width: float | None,
    confidence: float,
    mechanism: str,
    as_json: bool,
) -> None:
    """``ldp plan --kind distribution``: a quantile's half-width or the users for one."""
    if (users is None) == (width is None):
        raise click.UsageError("give exactly one of --users and --width")
    with usage_errors():
        row = plan_quantile(
            epsilon, bins, users=users, width=width, p=p, confidence=confidence, mechanism=mechanism
        )
    if as_json:
        echo_json([row.__dict__])
        return
    label = f"p{100 * p:g}"
    how = (
        "HaarHRR, one bit per report"
        if row.mechanism == "haar"
        else f"hierarchical histogram, B = {row.branching}"
    )
    out.print(
        f"ε={epsilon:g}, {bins} bins ({how}): "
        f"{row.users:,} users give {label} within ±{row.half_width * 100:.3g} % of the range "
        f"({confidence:.0%}, simultaneous band c = {row.band_critical:.2f})"
    )
    out.print(
        "for a uniform distribution over the range; where the density at the quantile is d "
        "times the uniform's, the interval is about 1/d as wide (a heavy tail's p95: d < 1, wider)"
    )


def show_joint_plan(
    epsilon: float,
    sizes: str | None,
    users: int | None,
    width: float | None,
    confidence: float,
    as_json: bool,
) -> None:
    """``ldp plan --kind joint``: a marginal cell's half-width or users, per layout."""
    if sizes is None:
        raise click.UsageError("Missing option '--sizes' (e.g. --sizes 3,4,16) for --kind joint")
    try:
        parsed = tuple(int(part) for part in sizes.split(","))
        rows = plan_joint(epsilon, parsed, users=users, width=width, confidence=confidence)
    except ValueError as exc:
        raise click.UsageError(f"--sizes {sizes!r}: {exc}") from None
    if as_json:
        echo_json([r.__dict__ for r in rows])
        return
    what = f"{users:,} users" if users else f"half-width ±{(width or 0) * 100:g} points"
    table = Table(
        title=f"ε={epsilon:g}, sizes {parsed}: {what}, {confidence:.0%} intervals on a cell near 0"
    )
    for col in ("layout", "marginal", "n·Var*", "± half-width (points)", "users"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(
            r.layout + (" (auto)" if r.auto else ""),
            "×".join(f"#{a}" for a in r.attributes),
            f"{r.variance_star:.4g}",
            f"{r.half_width * 100:.4f}",
            f"{r.users:,}",
        )
    out.print(table)
    out.print(choose_joint(epsilon, parsed).reason)


def _pram_of(matrix: str, domain_size: int) -> mechanisms.FrequencyOracle:
    """The pram mechanism of ``--matrix`` (JSON or @file.json), or a usage error saying
    what is wrong with the matrix."""
    try:
        text = Path(matrix[1:]).read_text() if matrix.startswith("@") else matrix
        rows = json.loads(text)
    except (OSError, ValueError) as exc:
        raise click.UsageError(f"--matrix: not a JSON matrix ({exc})") from None
    try:
        return mechanisms.create("pram", domain_size=domain_size, matrix=rows)
    except ValueError as exc:
        raise click.UsageError(f"--matrix: {exc}") from None


def show_string_plan(
    epsilon: float,
    max_length: int,
    users: int | None,
    frequency: float | None,
    concentration: float,
    power: float,
    as_json: bool,
) -> None:
    """Print the answer for ``epsilon`` and a table of the same question across ε.

    JSON: the answer's fields (as ``GET /v1/plan/strings``) and ``by_epsilon``, the
    table's rows.

    Raises:
        click.UsageError: both or neither of ``users`` and ``frequency``, or ε refused.
    """

    if (users is None) == (frequency is None):
        raise click.UsageError("give exactly one of --users and --find")
    with usage_errors():
        rows = tradeoff(epsilon, max_length, users, frequency, concentration, power)
    found = next(r for r in rows if r.epsilon == epsilon)
    if as_json:
        echo_json({**found.to_dict(), "by_epsilon": [r.to_dict() for r in rows]})
        return
    sketch = StringSketch(epsilon=epsilon, max_length=max_length)
    shape = f"{sketch.levels} levels × {sketch.rows} rows × {sketch.cells} cells"
    if users is not None and found.frequency >= 1:
        out.print(
            f"ε={epsilon:g}, {max_length} bytes ({shape}): {users:,} users are too few to "
            f"find any value {power:.0%} of the time"
        )
    elif users is not None:
        out.print(
            f"ε={epsilon:g}, {max_length} bytes ({shape}): {users:,} users find values of "
            f"frequency ≥ [bold]{found.frequency:.3%}[/] (found {power:.0%} of the time)"
        )
    elif found.users is None:
        out.print(
            f"ε={epsilon:g}: no number of users finds values of {frequency:.3%}: the sketch's "
            f"collision floor is {found.floor:.3%} at Σf² = {concentration:g}"
        )
    else:
        out.print(
            f"ε={epsilon:g}, {max_length} bytes ({shape}): [bold]{found.users:,}[/] users find "
            f"values of frequency ≥ {frequency:.3%} ({power:.0%} of the time)"
        )
    if concentration > 0:
        out.print(
            f"collision floor {found.floor:.3%} at Σf² = {concentration:g}: no number of "
            "users finds rarer values (more cells per level would)"
        )
    else:
        out.print(
            "collision floor ignored (Σf² = 0); --concentration sets the Σf² of the values "
            "left unfound (a Zipf 1.1 population of 10⁵ words has 0.027 in all)"
        )
    out.print(_tradeoff_table(rows, epsilon, users, frequency, power))


def _tradeoff_table(
    rows: list[Any], epsilon: float, users: int | None, frequency: float | None, power: float
) -> Table:

    asked = (
        f"frequency {users:,} users find" if users is not None else f"users to find {frequency:.3%}"
    )
    table = Table(title=f"the same question across ε (found {power:.0%} of the time)")
    for col in ("ε", "rows × cells", asked, "collision floor"):
        table.add_column(col, justify="right")
    for r in rows:
        sketch = StringSketch(epsilon=r.epsilon, max_length=r.max_length)
        if users is not None:
            answer = "none (over 100 %)" if r.frequency >= 1 else f"{r.frequency:.3%}"
        else:
            answer = "none suffices" if r.users is None else f"{r.users:,}"
        mark = "bold" if r.epsilon == epsilon else None
        table.add_row(
            f"{r.epsilon:g}",
            f"{sketch.rows} × {sketch.cells}",
            answer,
            f"{r.floor:.3%}" if r.floor > 0 else "ignored",
            style=mark,
        )
    return table

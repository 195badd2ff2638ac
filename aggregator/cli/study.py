"""``ldp simulate``, ``plan``, ``audit`` and ``tradeoff``: the offline study commands.

Each parses its options, calls one function of :mod:`aggregator.analysis` (imported when
the command runs, so ``ldp --help`` stays fast), and prints a table or JSON.
"""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from aggregator.cli.console import echo_json, err, or_dash, out, progress_bar
from aggregator.cli.options import (
    AS_JSON,
    CONCENTRATION,
    EPSILON,
    FIND,
    KIND,
    MAX_LENGTH,
    MEMOIZED,
    MIN_WIDTH,
    PERMANENT_EPSILON,
    PLAN_KIND,
    POWER,
    SEED,
    VOCABULARY,
    ZIPF_S,
    build_mechanism,
    confidence_option,
    distribution_option,
    domain_option,
    fake_fraction_option,
    mechanism_option,
    refuse_given,
    shown,
    trials_option,
    usage_errors,
    users_option,
)
from aggregator.cli.strings import run_string_simulation, show_string_plan
from client_sdk import mechanisms

__all__ = ["COMMANDS", "audit", "inconclusive", "plan", "simulate", "tradeoff"]


@click.command()
@KIND
@mechanism_option(required=False)
@EPSILON
@domain_option(required=False)
@users_option("Users per population.", required=True)
@shown(("--reps", "-r"), 1, click.IntRange(min=1), "Populations.")
@distribution_option("users'")
@shown(
    "--method",
    "counts",
    click.Choice(["counts", "reports"]),
    "counts: sample sufficient statistics; reports: perturb and decode every report.",
)
@confidence_option(0.95)
@SEED
@PERMANENT_EPSILON
@MAX_LENGTH
@VOCABULARY
@ZIPF_S
@AS_JSON
@click.pass_context
def simulate(
    ctx: click.Context,
    kind: str,
    mechanism: str | None,
    epsilon: float,
    domain_size: int | None,
    users: int,
    reps: int,
    dist: str,
    method: str,
    confidence: float,
    seed: int | None,
    permanent_epsilon: float | None,
    max_length: int,
    vocabulary: int,
    zipf_s: float,
    as_json: bool,
) -> None:
    """Simulate populations: MSE against the exact variance, and interval coverage.

    A simulation (numpy's PCG64 generator, not a CSPRNG): devices use the SDK. Each user
    reports once, so a memoized mechanism is simulated as one report of each device.

    --kind string: a Zipf population of synthetic words through the string sketch; what
    discovery finds, scored against the truth.
    """
    from aggregator.analysis.simulation import simulate as run

    if kind == "string":
        refuse_given(
            ctx,
            ("mechanism", "domain_size", "reps", "dist", "method", "confidence"),
            "is not for --kind string (a string sketch over synthetic words)",
        )
        refuse_given(ctx, ("permanent_epsilon",), "is not for --kind string")
        run_string_simulation(epsilon, max_length, users, vocabulary, zipf_s, seed, as_json)
        return
    refuse_given(
        ctx, ("max_length", "vocabulary", "zipf_s"), "is for string metrics: add --kind string"
    )
    if mechanism is None:
        raise click.UsageError("Missing option '--mechanism' / '-m' (or --kind string)")
    if domain_size is None:
        raise click.UsageError("Missing option '--domain-size' / '-k' (or --kind string)")
    m = build_mechanism(mechanism, epsilon, domain_size, permanent_epsilon)
    with progress_bar(f"simulating {m.name}", reps, enabled=not as_json) as advance:
        result = run(m, users, reps, dist, seed, confidence, method, progress=advance)
    if as_json:
        echo_json(result.to_dict())
        return
    table = Table(
        title=f"{m.name} ε={m.epsilon:g} k={m.domain_size}, {users:,} users, {dist}, "
        f"method={method} (simulation: numpy PCG64)"
    )
    for col in ("run", "MSE", "expected MSE", "ratio", "covered", "norm-sub MSE"):
        table.add_column(col, justify="right")
    for r in result.runs:
        table.add_row(
            str(r.run),
            f"{r.mse:.4e}",
            f"{r.expected_mse:.4e}",
            f"{r.mse_ratio:.3f}",
            f"{r.covered}/{r.intervals}",
            or_dash(r.norm_sub_mse, ".4e"),
        )
    out.print(table)
    out.print(
        f"MSE / exact expected MSE: [bold]{result.mse_ratio:.3f}[/]   "
        f"coverage of {confidence:.0%} intervals: [bold]{result.coverage:.2%}[/] "
        f"of {result.intervals:,}"
    )
    gain = result.norm_sub_gain()
    if gain is not None:
        out.print(f"Norm-Sub (post-processed) MSE is {1 / gain:.3f}× the raw MSE")
    elif m.name in ("olh", "ss"):
        out.print(
            f"{m.name}: per-value counts sampled exactly; their joint law is not "
            "(use --method reports for Norm-Sub)"
        )


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
    from aggregator.stats.planning import plan as make_plan

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
    from aggregator.stats.distribution_plan import plan_quantile

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
    from aggregator.stats.joint import plan_joint
    from client_sdk.mechanisms.joint import choose_joint

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


AUDIT_MECHANISMS = (*mechanisms.NAMES, *mechanisms.NUMERIC_MECHANISMS)
"""What ``ldp audit`` takes: every frequency oracle (and auto), every numeric mechanism."""


def _audit_targets(
    name: str,
    epsilon: float,
    domain_size: int | None,
    permanent_epsilon: float | None,
    bound: str | None,
) -> tuple[Any, tuple[str, ...]]:
    """The mechanism to audit and the bounds to check, or a clear usage error."""
    if name in mechanisms.NUMERIC_MECHANISMS:
        given = {"--domain-size": domain_size, "--permanent-epsilon": permanent_epsilon}
        return _numeric_audit_target(name, epsilon, bound, given)
    if domain_size is None:
        raise click.UsageError(f"{name} needs --domain-size (-k)")
    m = build_mechanism(name, epsilon, domain_size, permanent_epsilon)
    memoized = isinstance(m, mechanisms.Memoized)
    if bound in ("permanent", "both") and not memoized:
        raise click.UsageError(
            f"--bound {bound}: {m.name} is not memoized (no permanent response); "
            f"the memoized mechanisms are {', '.join(MEMOIZED)}"
        )
    if bound == "both" or (bound is None and memoized):
        return m, ("report", "permanent")
    return m, (bound or "report",)


def _numeric_audit_target(
    name: str, epsilon: float, bound: str | None, given: dict[str, Any]
) -> tuple[Any, tuple[str, ...]]:
    """A numeric mechanism to audit (one report's bound only: none is memoized), or a
    usage error for an option of ``given`` (by flag) that is not for it."""
    for option, value in given.items():
        if value is not None:
            raise click.UsageError(f"{option} is not for numeric mechanisms ({name})")
    if bound not in (None, "report"):
        raise click.UsageError(f"--bound {bound}: {name} is not memoized; only 'report'")
    with usage_errors():
        return mechanisms.create_numeric(name, epsilon), ("report",)


@click.command()
@click.option(
    "--mechanism",
    "-m",
    required=True,
    type=click.Choice(list(AUDIT_MECHANISMS)),
    help="Mechanism to audit: a frequency oracle (needs --domain-size), a memoized one "
    "(also --permanent-epsilon), or a numeric one (duchi, pm, hybrid: no -k).",
)
@EPSILON
@click.option(
    "--domain-size", "-k", type=int, default=None, help="k, number of values (frequency oracles)."
)
@trials_option("-t", 200_000, 100, "Perturbations per input.")
@click.option(
    "--bound",
    type=click.Choice(["report", "permanent", "both"]),
    default=None,
    help="report: one report's ε; permanent: a memoized mechanism's permanent response, "
    "the ε∞ of any number of reports of one value; both (the default for memoized "
    "mechanisms, which alone have a permanent response).",
)
@confidence_option(0.99)
@PERMANENT_EPSILON
@click.option(
    "--seed",
    type=int,
    default=None,
    help="Run perturb with a seeded generator (random.Random) to reproduce an audit; "
    "default: the CSPRNG the devices use.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def audit(
    mechanism: str,
    epsilon: float,
    domain_size: int | None,
    trials: int,
    bound: str | None,
    confidence: float,
    permanent_epsilon: float | None,
    seed: int | None,
    as_json: bool,
) -> None:
    """Lower-bound the ε the real perturb code realises; exit 1 if above the declared ε.

    Frequency oracles: inputs 0 and 1, events from which of them an output supports.
    Numeric mechanisms: inputs at the two ends of the range (x = −1 and 1 scaled), events
    intervals of the output. Memoized mechanisms: one report of a fresh device against
    --epsilon, and the permanent response alone (a fresh device secret per trial)
    against --permanent-epsilon.
    """
    from aggregator.analysis.audit import audit as run_audit

    m, bounds = _audit_targets(mechanism, epsilon, domain_size, permanent_epsilon, bound)
    rng = None if seed is None else random.Random(seed)
    results = []
    for which in bounds:
        label = f"auditing {m.name}" + (" (permanent response)" if which == "permanent" else "")
        with progress_bar(label, 2 * trials, enabled=not as_json) as advance:
            results.append(
                run_audit(
                    m, trials=trials, confidence=confidence, progress=advance, bound=which, rng=rng
                )
            )
    passed = all(r.passed for r in results)
    if as_json:
        if len(results) == 1:
            echo_json(results[0].to_dict())
        else:
            echo_json({"passed": passed, "audits": [r.to_dict() for r in results]})
    for result in results:
        _report_audit(m, result, confidence, trials, as_json)
    if not passed:
        sys.exit(1)


def _report_audit(m: Any, result: Any, confidence: float, trials: int, as_json: bool) -> None:
    """One audit's verdict as text (unless ``as_json``), and on stderr a warning when a
    pass is inconclusive."""
    if not as_json:
        _print_audit(m, result, confidence)
    warning = inconclusive(result, trials) if result.passed else None
    if warning:
        err.print(f"[yellow bold]warning:[/] {warning}")


def _print_audit(m: Any, result: Any, confidence: float) -> None:
    verdict = "[green]PASS[/]" if result.passed else "[red bold]FAIL[/]"
    if result.bound == "permanent":
        what = f"permanent response ε∞={result.declared_epsilon:g}"
    else:
        what = f"ε={m.epsilon:g}"
    size = "" if isinstance(m, mechanisms.NumericMechanism) else f" k={m.domain_size}"
    out.print(
        f"{verdict} {m.name} {what}{size}: empirical ε ≥ "
        f"[bold]{result.epsilon_lower_bound:.4f}[/] with {confidence:.0%} confidence "
        f"(declared {result.declared_epsilon:g})"
    )
    out.print(
        f"event: {result.event}; hits {result.hits[0]:,} vs {result.hits[1]:,} "
        f"of {result.trials:,} each"
    )
    if result.bound == "permanent":
        out.print(
            "(the permanent response is all that any number of reports of one unchanged "
            "value reveal: its ε is their ε)"
        )


@click.command()
@click.option(
    "--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Output folder."
)
@shown(
    ("--domain-size", "-k"),
    64,
    click.IntRange(2, mechanisms.MAX_DOMAIN_SIZE),
    "k of the k-ary mechanisms.",
)
@shown(
    "--reps",
    20,
    click.IntRange(min=2),
    "Simulated populations per point (binary RR: 10× as many).",
)
@shown("--seed", 2017, int, "Seed of the simulation generator (numpy PCG64).")
def tradeoff(out_dir: str, domain_size: int, reps: int, seed: int) -> None:
    """Privacy–utility–N: CSV and plots of error vs ε and N, per mechanism, vs central Laplace.

    Theory is the exact variance; the markers are a simulation (numpy PCG64, not a CSPRNG).
    """
    from aggregator.analysis.plots import run_tradeoff
    from aggregator.analysis.tradeoff import total_points, total_steps

    sweep, done = total_points(), 0

    with progress_bar("sweeping ε × N × mechanism", total_steps()) as advance:

        def step(n: int) -> None:  # the sweep's points first, then the files (5 plots)
            nonlocal done
            done += n
            advance(n, description="drawing the plots" if done >= sweep else None)

        try:
            written = run_tradeoff(
                out_dir, domain_size=domain_size, reps=reps, seed=seed, progress=step
            )
        except OSError as exc:
            raise click.ClickException(f"cannot write to {out_dir}: {exc}") from None
    for path in written:
        out.print(f"wrote {path}")


AUDIT_SUGGESTED_TRIALS = 200_000
"""The audit's default: at ε ≈ 1 its bound then lands within about 5 % of the declared ε."""


def inconclusive(result: Any, trials: int) -> str | None:
    """Why a PASS says nothing about the mechanism, or None if the bound means something.

    A PASS is only a check if the audit could have failed. With n evaluation trials per
    input the highest ε any mechanism can show is that of the most extreme outcome (every
    trial in the event under x, none under x'): ln(TPR_lower / FPR_upper) of the same
    Clopper–Pearson bounds the audit uses. If that is not above the declared ε, no broken
    mechanism could fail; and a lower bound of 0 means the trials showed nothing either way.

    Args:
        result: an :class:`aggregator.analysis.audit.AuditResult`.
        trials: the ``--trials`` given (perturbations per input, both halves).

    Returns:
        The warning to print, or None.
    """
    from aggregator.analysis.audit import clopper_pearson

    n, alpha = result.trials, 1.0 - result.confidence
    best_tpr = clopper_pearson(n, n, alpha)[0]
    best_fpr = clopper_pearson(0, n, alpha)[1]
    ceiling = math.log(best_tpr / best_fpr)
    more = f"rerun with more trials, e.g. --trials {max(10 * trials, AUDIT_SUGGESTED_TRIALS):,}"
    if ceiling <= result.declared_epsilon:
        return (
            f"inconclusive: with {n:,} evaluation trials per input the bound cannot exceed "
            f"{ceiling:.3f}, so this audit could not fail at ε={result.declared_epsilon:g}; " + more
        )
    if result.epsilon_lower_bound <= 0.0:
        return (
            f"inconclusive: {trials:,} trials are too few for the bound to show any ε "
            f"(ε ≥ 0 holds for every mechanism), so PASS says nothing here; " + more
        )
    return None


COMMANDS = (simulate, plan, audit, tradeoff)

"""``ldp attack poison``: fake clients, measured. Cao et al.'s maximal gain attack and the
input-manipulation baseline against simulated genuine reports and the real decoders
(:mod:`aggregator.analysis.poisoning`), each target's gain printed beside its theoretical
value, with the defences' verdicts.
"""

from __future__ import annotations

from typing import Any

import click
import numpy as np
from rich import box
from rich.table import Table

from aggregator.analysis.defences import AggregateDetection, plausibility
from aggregator.analysis.poisoning import simulate_poisoning
from aggregator.cli.console import echo_json, out, progress_bar
from aggregator.cli.options import (
    AS_JSON,
    DOMAIN,
    EPSILON,
    MECHANISM,
    PERMANENT_EPSILON,
    SEED,
    build_mechanism,
    distribution_option,
    fake_fraction_option,
    trials_option,
    usage_errors,
    users_option,
)
from aggregator.safe_text import comma_list
from aggregator.stats.detect import DEFAULT_ALARM_RATE, TRAILING
from aggregator.stats.robustness import fake_count

__all__ = ["parse_targets", "poison"]

DEFAULT_USERS = 100_000
"""Genuine reports per run unless --users says otherwise: the issue's measurement, and
large enough that the estimate's own noise (±1.5 points for GRR at k = 64) is small
beside the gains shown."""


def parse_targets(text: str, k: int) -> tuple[int | None, list[int] | None]:
    """``--targets``: a count (``8``) or explicit values (``3,17``; one value: ``3,``).

    Returns:
        (count, None) or (None, values).

    Raises:
        click.BadParameter: neither form, or a value out of range.
    """
    text = text.strip()
    try:
        if "," not in text:
            count = int(text)
            if count < 1:
                raise click.BadParameter(f"a count of targets must be at least 1, got {count}")
            return count, None
        values = [int(part) for part in comma_list(text)]
    except ValueError:
        raise click.BadParameter(
            f"{text[:40]!r} is neither a count (8) nor a list of values (3,17 or 3,)"
        ) from None
    if not values:
        raise click.BadParameter("give at least one target value")
    bad = [v for v in values if not 0 <= v < k]
    if bad:
        raise click.BadParameter(f"target values {bad} are outside range(0, {k})")
    return None, values


@click.command()
@MECHANISM
@EPSILON
@DOMAIN
@fake_fraction_option(
    None,
    "β, the fakes' share of all reports (Cao et al.'s m/(n+m)); default 0.01. Not with --fakes.",
)
@click.option(
    "--fakes",
    type=click.IntRange(min=1),
    default=None,
    help="m, the number of crafted reports per run, instead of --fake-fraction.",
)
@click.option(
    "--targets",
    "-t",
    "targets_text",
    default="1",
    show_default=True,
    help="How many values to promote (drawn at random with --seed), or the values "
    "themselves: 3,17 (one value: 3,).",
)
@users_option(f"Genuine reports per run [default: {DEFAULT_USERS:,}].", required=False)
@trials_option("-r", 10, 1, "Independent runs (a new genuine population each).")
@distribution_option("genuine users'")
@SEED
@click.option(
    "--alarm-rate",
    type=click.FloatRange(0, 0.5, min_open=True, max_open=True),
    default=None,
    help="α of the aggregate detection, the false-alarm rate per window (the "
    "collector's LDP_ALARM_RATE) [default: 0.001].",
)
@click.option(
    "--baseline-windows",
    type=click.IntRange(min=0),
    default=None,
    help="Honest windows of the same population the detection compares the poisoned "
    "one with; 0: none, as for a fresh metric or the all-time window (then only the "
    "baseline-free tests run) [default: 6].",
)
@PERMANENT_EPSILON
@AS_JSON
def poison(
    mechanism: str,
    epsilon: float,
    domain_size: int,
    beta: float | None,
    fakes: int | None,
    targets_text: str,
    users: int | None,
    trials: int,
    dist: str,
    seed: int | None,
    alarm_rate: float | None,
    baseline_windows: int | None,
    permanent_epsilon: float | None,
    as_json: bool,
) -> None:
    """Fake clients: the maximal gain attack against the real decoders, per target.

    Fake devices skip the randomizer and send the valid report that supports the most
    targets (Cao, Jia & Gong, USENIX Security 2021). Each target's gain (estimate with
    the fakes − without) is printed beside Cao et al.'s expected gain and the gain of
    the baseline, fakes that report a target through the honest SDK randomizer. Then
    the defences, run on every trial: the collector's plausibility check of each
    crafted report, and the aggregate's poisoning alarms on the poisoned window against
    honest trailing windows of the same population. A simulation (numpy's PCG64, not a
    CSPRNG).
    """

    if beta is not None and fakes is not None:
        raise click.UsageError("give --fake-fraction or --fakes, not both")
    m = build_mechanism(mechanism, epsilon, domain_size, permanent_epsilon)
    n = DEFAULT_USERS if users is None else users
    values = _targets(targets_text, m.domain_size, seed)
    m_fakes = fakes if fakes is not None else fake_count(n, 0.01 if beta is None else beta)
    detection = AggregateDetection(
        DEFAULT_ALARM_RATE if alarm_rate is None else alarm_rate,
        TRAILING["hour"] if baseline_windows is None else baseline_windows,
    )
    with progress_bar(f"poisoning {m.name}", trials, enabled=not as_json) as advance:
        with usage_errors((ValueError, TypeError)):
            result = simulate_poisoning(
                m,
                values,
                n,
                m_fakes,
                trials,
                dist,
                seed,
                defences=(plausibility, detection),
                progress=advance,
            )
    if as_json:
        echo_json(
            {**result.to_dict(), "alarm_rate": detection.alpha, "trailing": detection.trailing}
        )
        return
    _print(m, result, trials)
    _print_defences(result, detection)


def _targets(text: str, k: int, seed: int | None) -> list[int]:
    """The values ``--targets`` names, or a count of them drawn at random (``seed``).

    Raises:
        click.BadParameter: more targets than the domain has values.
    """
    count, values = parse_targets(text, k)
    if count is None:
        assert values is not None
        return values
    if count > k:
        raise click.BadParameter(
            f"{count} targets: the domain has {k} values", param_hint="--targets"
        )
    return sorted(np.random.default_rng(seed).choice(k, count, replace=False))


def _print(m: Any, result: Any, trials: int) -> None:
    pts = 100.0
    table = Table(
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        title=f"{m.name} ε={m.epsilon:g} k={m.domain_size}: {result.users:,} genuine + "
        f"{result.fakes:,} crafted reports (β = {result.beta:.4g}), {trials} run"
        f"{'s' if trials > 1 else ''}, {result.distribution}",
        caption="simulation: numpy PCG64, not a CSPRNG",
    )
    columns = ("target", "true f", "MGA gain", "± se", "theory", "σ run")
    for col in (*columns, "baseline", "± se", "theory"):
        table.add_column(col, justify="right", no_wrap=True)
    for g in result.targets:
        table.add_row(
            str(g.value),
            *(
                f"{x * pts:+.2f}" if signed else f"{x * pts:.2f}"
                for x, signed in (
                    (g.frequency, False),
                    (g.gain, True),
                    (g.gain_se, False),
                    (g.theory, True),
                    (g.theory_std, False),
                    (g.baseline, True),
                    (g.baseline_se, False),
                    (g.baseline_theory, True),
                )
            ),
        )
    out.print(table)
    out.print(
        "in percentage points; gain: after − before on the same genuine reports (± se: "
        "its standard error over the runs); theory: Cao et al.'s expected gain "
        "β(s − q*)/(p* − q*) − β·f, and σ of one run; baseline: fakes that report a target "
        "through the honest SDK randomizer"
    )
    total = sum(g.gain for g in result.targets)
    out.print(
        f"MGA moved the {len(result.targets)} target(s) by {total * pts:+.2f} points in all: "
        f"one crafted report weighs as much as {total / result.beta:.1f} genuine reports "
        f"of a target (the baseline's weigh 1)"
    )


PER_TRIAL_SHOWN = 40
"""Trials drawn one mark each in the defences' table; more are summed only (the JSON
lists every trial)."""


def _print_defences(result: Any, detection: Any) -> None:
    pts = 100.0
    table = Table(
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        title="defences, on every trial's crafted reports",
        caption=f"plausibility: the collector's check of each report (mechanism.implausible); "
        f"detection: the aggregate's alarms on the poisoned window against "
        f"{detection.trailing} honest windows of the same population and size (shift, seeds, "
        f"support; with none, the baseline-free floor, seeds, support), "
        f"α = {detection.alpha:g} per window",
    )
    for col in ("defence", "attack", "caught", "per trial", "refused", "gain left", "alarms"):
        table.add_column(col, justify="left" if col in ("defence", "attack") else "right")
    for s in result.defence_summary:
        marks = "".join("●" if hit else "○" for hit in s.per_trial[:PER_TRIAL_SHOWN])
        table.add_row(
            s.defence,
            s.attack,
            f"{'[red bold]' if s.caught else '[yellow]'}{s.caught} of {s.trials}[/]",
            marks + ("…" if s.trials > PER_TRIAL_SHOWN else ""),
            "—" if s.defence != "plausibility" else f"{100 * s.flagged_share:.2f} %",
            "—" if s.gain is None else f"{s.gain * pts:+.2f}",
            ", ".join(f"{kind} ×{count}" for kind, count in s.alarms.items()) or "—",
        )
    out.print(table)
    out.print(
        "caught: trials in which the defence raised the alarm (● caught, ○ missed); "
        "refused: the share of crafted reports the collector refuses as implausible; "
        "gain left: the targets' total gain in points once those are dropped"
    )

"""``ldp audit``: a lower bound on the ε the real perturb code realises, checked against
the declared ε (:mod:`aggregator.analysis.audit`)."""

from __future__ import annotations

import math
import random
import sys
from typing import Any

import click

from aggregator.analysis.audit import audit as run_audit
from aggregator.analysis.audit import clopper_pearson
from aggregator.cli.console import echo_json, err, out, progress_bar
from aggregator.cli.options import (
    EPSILON,
    MEMOIZED,
    PERMANENT_EPSILON,
    build_mechanism,
    confidence_option,
    trials_option,
    usage_errors,
)
from client_sdk import mechanisms

__all__ = ["audit", "inconclusive"]


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

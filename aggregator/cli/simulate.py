"""``ldp simulate``: simulated populations through the SDK's mechanisms, their error
against the exact variance and their intervals' coverage; with ``--kind string``, a Zipf
population over a synthetic vocabulary, perturbed, discovered and scored against the
truth (numpy's generator: a simulation).
"""

from __future__ import annotations

import time

import click
import numpy as np
from rich.table import Table

from aggregator.analysis.simulation import simulate as run
from aggregator.analysis.string_simulation import score, simulate_counts
from aggregator.analysis.vocabulary import synthetic_vocabulary, zipf_shares
from aggregator.cli.console import echo_json, err, or_dash, out, progress_bar
from aggregator.cli.options import (
    AS_JSON,
    EPSILON,
    KIND,
    MAX_LENGTH,
    PERMANENT_EPSILON,
    SEED,
    VOCABULARY,
    ZIPF_S,
    build_mechanism,
    confidence_option,
    distribution_option,
    domain_option,
    mechanism_option,
    refuse_given,
    shown,
    usage_errors,
    users_option,
)
from aggregator.stats.discovery import detection_threshold, discover
from aggregator.stats.kinds import codec_for
from aggregator.stats.strings import SketchEstimator
from client_sdk.mechanisms.strings import StringSketch

__all__ = ["run_string_simulation", "simulate"]


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


def run_string_simulation(
    epsilon: float,
    max_length: int,
    users: int,
    vocabulary: int,
    zipf_s: float,
    seed: int | None,
    as_json: bool,
) -> None:
    """Simulate, discover, score and print: a progress bar on stderr while the reports
    are perturbed (10⁶ take seconds) and a spinner while discovery walks the levels.

    Raises:
        click.UsageError: ``max_length`` below 3 (the synthetic words' shortest), or ε
            refused.
    """
    if max_length < 3:
        raise click.UsageError("--max-length must be at least 3 for synthetic words")
    gen = np.random.default_rng(seed)
    with usage_errors():
        sketch = StringSketch(
            epsilon=epsilon, max_length=max_length, salt=f"{gen.integers(1 << 32):08x}"
        )
    words = synthetic_vocabulary(vocabulary, max_length, seed=0 if seed is None else seed)
    shares = zipf_shares(vocabulary, zipf_s)
    with progress_bar("perturbing reports", users, enabled=not as_json) as advance:
        counts, truth = simulate_counts(sketch, words, shares, users, gen, progress=advance)
    start = time.perf_counter()
    if as_json:
        found = discover(SketchEstimator(codec_for(sketch), counts))
    else:
        with err.status("discovering: walking the prefix tree level by level"):
            found = discover(SketchEstimator(codec_for(sketch), counts))
    seconds = time.perf_counter() - start
    scores = {k: score(found, words, truth, k) for k in (20, 100)}
    result = {
        "epsilon": epsilon,
        "max_length": max_length,
        "users": users,
        "found": len(found.values),
        "tested": found.tested,
        "detection_threshold": detection_threshold(found.null_std, found.tested),
        "discovery_seconds": seconds,
        **{
            f"top{k}_{what}": getattr(s, what)
            for k, s in scores.items()
            for what in ("precision", "recall")
        },
        "values": [
            {"value": v, "frequency": float(f)}
            for v, f in zip(found.labels[:20], found.frequency[:20], strict=True)
        ],
    }
    if as_json:
        echo_json(result)
        return
    out.print(
        f"ε={epsilon:g}, {max_length} bytes, {users:,} users, {vocabulary:,} words, "
        f"Zipf {zipf_s:g} (simulation: numpy PCG64)"
    )
    out.print(
        f"found {len(found.values)} of {found.tested:,} tested in {seconds:.1f} s; "
        f"detection threshold {result['detection_threshold']:.3%}"
    )
    for k, s in scores.items():
        out.print(f"top-{k}: precision {s.precision:.2f}, recall {s.recall:.2f}")

"""``ldp strings plan|simulate``: planning and simulating string metrics offline.

``plan`` answers "how many users to find values of frequency ≥ x" (or which frequency N
users find); ``simulate`` draws a Zipf population over a synthetic vocabulary, perturbs
it, discovers and scores the top k against the truth (numpy's generator: a simulation).
Creating a string metric is ``ldp metrics create NAME --kind string --max-length L -e E``.
"""

from __future__ import annotations

import time

import click

from aggregator.cli.console import echo_json, out
from aggregator.cli.options import EPSILON, users_option

__all__ = ["strings"]

MAX_LENGTH = click.option(
    "--max-length",
    "-L",
    default=16,
    show_default=True,
    type=click.IntRange(1, 64),
    help="Bytes per value (after NFC and UTF-8).",
)


@click.group()
def strings() -> None:
    """String metrics (kind string): plan and simulate discovery without a dictionary."""


@strings.command("plan")
@EPSILON
@MAX_LENGTH
@users_option("Users: print the frequency they find.", required=False)
@click.option(
    "--find",
    "frequency",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    help="A frequency (0.005 = 0.5 %): print the users needed to find it.",
)
@click.option(
    "--concentration",
    default=0.0,
    show_default=True,
    type=click.FloatRange(0, 1),
    help="Σf² of the values left unfound (the collision floor).",
)
@click.option(
    "--power",
    default=0.5,
    show_default=True,
    type=click.FloatRange(0.01, 0.99),
    help="Probability of finding a value at that frequency.",
)
@click.option("--json", "as_json", is_flag=True)
def plan(
    epsilon: float,
    max_length: int,
    users: int | None,
    frequency: float | None,
    concentration: float,
    power: float,
    as_json: bool,
) -> None:
    """Users needed to find values of a frequency, or the frequency N users find."""
    from aggregator.analysis.string_planning import detectable_frequency, users_to_find
    from client_sdk.mechanisms.strings import StringSketch

    if (users is None) == (frequency is None):
        raise click.UsageError("give exactly one of --users and --find")
    try:
        sketch = StringSketch(epsilon=epsilon, max_length=max_length)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if users is not None:
        found = detectable_frequency(sketch, users, concentration, power=power)
    else:
        assert frequency is not None
        found = users_to_find(sketch, frequency, concentration, power=power)
    if as_json:
        echo_json(found.__dict__)
        return
    shape = f"{sketch.levels} levels × {sketch.rows} rows × {sketch.cells} cells"
    if users is not None:
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


@strings.command("simulate")
@EPSILON
@MAX_LENGTH
@users_option("Users (reports).", required=True)
@click.option(
    "--vocabulary",
    default=100_000,
    show_default=True,
    type=click.IntRange(10, 10**6),
    help="Synthetic words (3..max-length lowercase letters).",
)
@click.option("--zipf-s", default=1.1, show_default=True, type=click.FloatRange(0.1, 5))
@click.option("--seed", type=int, default=None)
@click.option("--json", "as_json", is_flag=True)
def simulate(
    epsilon: float,
    max_length: int,
    users: int,
    vocabulary: int,
    zipf_s: float,
    seed: int | None,
    as_json: bool,
) -> None:
    """Simulate a Zipf population of words: what discovery finds, scored against the truth."""
    import numpy as np

    from aggregator.analysis.string_simulation import score, simulate_counts
    from aggregator.analysis.vocabulary import synthetic_vocabulary, zipf_shares
    from aggregator.stats.codecs import codec_for
    from aggregator.stats.discovery import detection_threshold, discover
    from aggregator.stats.strings import SketchEstimator
    from client_sdk.mechanisms.strings import StringSketch

    if max_length < 3:
        raise click.UsageError("--max-length must be at least 3 for synthetic words")
    gen = np.random.default_rng(seed)
    sketch = StringSketch(
        epsilon=epsilon, max_length=max_length, salt=f"{gen.integers(1 << 32):08x}"
    )
    words = synthetic_vocabulary(vocabulary, max_length, seed=0 if seed is None else seed)
    counts, truth = simulate_counts(sketch, words, zipf_shares(vocabulary, zipf_s), users, gen)
    start = time.perf_counter()
    found = discover(SketchEstimator(codec_for(sketch), counts))
    seconds = time.perf_counter() - start
    scores = {k: score(found, words, truth, k) for k in (20, 100)}
    result = {
        "epsilon": epsilon,
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
        f"ε={epsilon:g}, {users:,} users, {vocabulary:,} words, Zipf {zipf_s:g} "
        "(simulation: numpy PCG64)"
    )
    out.print(
        f"found {len(found.values)} of {found.tested:,} tested in {seconds:.1f} s; "
        f"detection threshold {result['detection_threshold']:.3%}"
    )
    for k, s in scores.items():
        out.print(f"top-{k}: precision {s.precision:.2f}, recall {s.recall:.2f}")

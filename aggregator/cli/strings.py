"""String metrics in ``ldp plan --kind string`` and ``ldp simulate --kind string``.

Planning answers "how many users to find values of frequency ≥ x" (or which frequency N
users find), with a table across ε; simulating draws a Zipf population over a synthetic
vocabulary, perturbs it, discovers and scores the top k against the truth (numpy's
generator: a simulation). Creating a string metric is
``ldp metrics create NAME --kind string --max-length L -e E``.
"""

from __future__ import annotations

import time
from typing import Any

import click
from rich.table import Table

from aggregator.cli.console import echo_json, err, out, progress_bar
from aggregator.cli.options import usage_errors
from aggregator.stats.string_planning import tradeoff
from client_sdk.mechanisms.strings import StringSketch

__all__ = ["run_string_simulation", "show_string_plan"]


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
    import numpy as np

    from aggregator.analysis.string_simulation import score, simulate_counts
    from aggregator.analysis.vocabulary import synthetic_vocabulary, zipf_shares
    from aggregator.stats.discovery import detection_threshold, discover
    from aggregator.stats.kinds import codec_for
    from aggregator.stats.strings import SketchEstimator

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

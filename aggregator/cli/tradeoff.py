"""``ldp tradeoff``: the privacy–utility–N sweep, as CSV and plots
(:mod:`aggregator.analysis.tradeoff`, drawn by :mod:`aggregator.analysis.plots`)."""

from __future__ import annotations

import click

from aggregator.analysis.plots import run_tradeoff
from aggregator.analysis.tradeoff import total_points, total_steps
from aggregator.cli.console import out, progress_bar
from aggregator.cli.options import shown
from client_sdk import mechanisms

__all__ = ["tradeoff"]


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

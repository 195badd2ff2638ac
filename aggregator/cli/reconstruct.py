"""``ldp attack reconstruct``: Dinur & Nissim's reconstruction attack against exact,
noisy, central-DP and local-DP answers (:mod:`aggregator.analysis.reconstruction`).
"""

from __future__ import annotations

from pathlib import Path

import click
from rich import box
from rich.table import Table

from aggregator.analysis.plots import plot_reconstruction
from aggregator.analysis.reconstruction import run_reconstruction, total_runs
from aggregator.cli.console import echo_json, or_dash, out, progress_bar
from aggregator.cli.options import AS_JSON, SEED, trials_option, usage_errors, users_option

__all__ = ["reconstruct"]

RECONSTRUCTION_USERS = 100
"""n of ``attack reconstruct`` unless --users says otherwise: √n = 10 separates the noise
levels clearly and the whole sweep (50-odd linear programs) takes seconds."""

MAX_RECONSTRUCTION_USERS = 2000
"""Largest n: one linear program has n + 4n variables and 8n constraints over a dense
4n × n matrix (8·10⁶ entries at n = 2000), minutes per program beyond."""


@click.command()
@users_option("n, the secret bits of the database [default: 100].", required=False)
@click.option(
    "--queries",
    "-q",
    type=click.IntRange(min=1),
    default=None,
    help="m, random subset-sum queries per database [default: 4n].",
)
@trials_option("-r", 3, 1, "Databases per protection (fresh bits and queries each).")
@SEED
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also draw the recovered fraction against the noise to this PNG.",
)
@AS_JSON
def reconstruct(
    users: int | None,
    queries: int | None,
    trials: int,
    seed: int | None,
    out_path: Path | None,
    as_json: bool,
) -> None:
    """Dinur & Nissim's reconstruction attack: exact aggregates give the data back.

    A database of n secret bits answers m random subset-sum queries (a) exactly, (b) with
    noise bounded by E from 1 to 16√n, (c) with central Laplace noise at ε per answer,
    (d) from ε-LDP randomized bits. The attacker decodes with a linear program (L1,
    scipy's HiGHS) and rounds: the table shows the fraction of bits recovered, beside
    the theory's threshold √n and, for LDP, the most one report reveals, e^ε/(e^ε+1).
    A simulation (numpy's PCG64, not a CSPRNG).
    """
    n = RECONSTRUCTION_USERS if users is None else users
    if n > MAX_RECONSTRUCTION_USERS:
        raise click.BadParameter(
            f"{n} bits: at most {MAX_RECONSTRUCTION_USERS} (one linear program has "
            f"n + m variables and 2m constraints)",
            param_hint="--users",
        )
    with progress_bar("reconstructing", total_runs(n, trials), enabled=not as_json) as advance:
        with usage_errors():
            result = run_reconstruction(n, queries, trials, seed, progress=advance)
    if out_path is not None:
        plot_reconstruction(result, out_path)
    if as_json:
        echo_json(result.to_dict())
        return
    table = Table(
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        title=f"n = {result.users} secret bits, m = {result.queries} subset-sum queries, "
        f"{trials} database{'s' if trials > 1 else ''} each; √n = {n**0.5:.3g}",
        caption="simulation: numpy PCG64, not a CSPRNG",
    )
    for col in ("answers", "E or ε", "noise σ", "recovered", "± se", "bound"):
        table.add_column(col, justify="left" if col == "answers" else "right", no_wrap=True)
    names = {
        "exact": "exact",
        "bounded": "noise ≤ E",
        "laplace": "Laplace, ε/answer",
        "ldp": "local DP, ε/bit",
    }
    for p in result.points:
        table.add_row(
            names[p.kind],
            "—" if p.kind == "exact" else f"{p.level:g}",
            f"{p.noise_std:.3g}",
            f"{p.recovered:.3f}",
            f"{p.recovered_se:.3f}",
            or_dash(p.bound, ".3f"),
        )
    out.print(table)
    out.print(
        "recovered: the share of the n bits the attack got right (½ is guessing); noise "
        "σ: standard deviation of one answer's noise; Dinur–Nissim: noise o(√n) gives "
        "almost every bit back. Laplace at ε per answer composes to m·ε over the m "
        "answers. bound (LDP): e^ε/(e^ε+1), the best guess of a bit from its own report"
    )
    if out_path is not None:
        out.print(f"plot: {out_path}")

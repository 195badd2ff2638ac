"""Dinur–Nissim reconstruction: exact answers leak every bit, LDP caps what leaks."""

from __future__ import annotations

import math

import pytest
from click.testing import CliRunner

from aggregator.analysis.reconstruction import ldp_bound, run_reconstruction
from ldp_server.cli import main

N, TRIALS = 100, 5


def _only(kind: str, level: float, seed: int) -> float:
    result = run_reconstruction(
        N,
        trials=TRIALS,
        seed=seed,
        bounds=[int(level)] if kind == "bounded" else [],
        laplace=[level] if kind == "laplace" else [],
        ldp=[level] if kind == "ldp" else [],
    )
    return next(p for p in result.points if p.kind == kind).recovered


def test_exact_answers_give_the_data_back() -> None:
    result = run_reconstruction(N, trials=TRIALS, seed=7, bounds=[], laplace=[], ldp=[])
    assert result.points[0].kind == "exact"
    assert result.points[0].recovered >= 0.95


def test_ldp_answers_recover_what_each_report_reveals_and_no_more() -> None:
    """Each bit's report matches it with probability b = e/(1+e): the fraction of the
    N·TRIALS bits the attack gets right is at most about Binomial(N·TRIALS, b)/(N·TRIALS)."""
    bound = ldp_bound(1.0)
    assert bound == pytest.approx(math.e / (1 + math.e))
    sigma = math.sqrt(bound * (1 - bound) / (N * TRIALS))
    assert abs(_only("ldp", 1.0, seed=11) - bound) <= 3 * sigma


def test_noise_far_above_root_n_protects() -> None:
    """E = 16√n: the answers say almost nothing; guessing scores ½ ± 0.5/√(N·TRIALS)."""
    recovered = _only("bounded", 16 * math.sqrt(N), seed=3)
    assert recovered <= 0.5 + 3 * 0.5 / math.sqrt(N * TRIALS) + 0.03  # + the little left


def test_laplace_per_answer_leaks_when_composed_over_many_answers() -> None:
    """ε = 1 per answer, 4n answers: the total is 400, and the noise (√2) is ≪ √n."""
    assert _only("laplace", 1.0, seed=5) >= 0.95


def test_the_command_prints_the_table_and_draws(tmp_path: object) -> None:
    from pathlib import Path

    out = Path(str(tmp_path)) / "r.png"
    args = ["attack", "reconstruct", "-n", "30", "-r", "1", "--seed", "1", "--out", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "exact" in result.output and "local DP" in result.output
    assert out.stat().st_size > 10_000
    bad = CliRunner().invoke(main, ["attack", "reconstruct", "-n", "5000"])
    assert bad.exit_code == 2 and "at most 2000" in bad.output

"""``ldp tradeoff``: the privacy–utility–N sweep, its CSV, its plots and its command.

The simulated RMSE is checked against the theory with a tolerance derived, not tuned:
each value's error e_v is ≈ normal with variance V_v (the exact variance), so e_v² has
variance 2V_v², and the MSE summed over R populations and k values has relative standard
deviation √(2·ΣV_v²/R)/ΣV_v = √(2/(R·k_eff)) with k_eff = (ΣV_v)²/ΣV_v², the number of
values that effectively carry the error (k when the variances are equal; fewer on a Zipf
population at large ε, where the largest frequencies dominate). Capped at k − 1: grr's
estimates always sum to 1, and binary RR's two are f̂ and 1 − f̂ (one error, not two).
Over the default sweep's 285 points these z-scores have mean −0.04, sd 1.02, max 2.9:
the derivation holds.
"""

from __future__ import annotations

import csv
import json
import math
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from aggregator.analysis import plots, tradeoff
from aggregator.analysis.simulation import distribution
from aggregator.cli import tradeoff as tradeoff_command
from aggregator.stats.planning import central_laplace_std
from client_sdk import mechanisms
from client_sdk.mechanisms import BinaryRR
from ldp_server.cli import main as ldp_main

EPSILONS = (0.5, 2.0, 6.0)
USERS = (1_000, 100_000)
REPS = 10
SEED = 20170
Z_TOLERANCE = 5.0
"""5σ per point, not 4: the MSE is a sum of squares, χ²-like and heavier in its right tail
than a normal when few terms carry it (binary RR: one per population). Over 30 seeds of
the sweep below (1,320 points) the largest |z| was 4.5; a decoder or variance that is off
by a factor shows up as tens of σ (the f ≈ 0 variance alone as theory: z = 8 to 31 for
grr, oue, olh and ss at ε = 6)."""

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PNGS = (
    "error_vs_epsilon.png",
    "error_vs_users.png",
    "binary_rr_vs_central.png",
    "users_needed.png",
    "shuffled_epsilon.png",
)


FILES_AT_CALL: list[set[str]] = []
"""The files of the sweep's folder at each progress call of :func:`swept`."""


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path], list[int]]:
    """One small sweep into a temporary folder: (folder, files written, progress calls).

    Each call is recorded as its n, and the files in the folder at that moment are kept in
    ``FILES_AT_CALL`` (the steps must follow the files being written)."""
    out = tmp_path_factory.mktemp("tradeoff")
    calls: list[int] = []
    FILES_AT_CALL.clear()

    def record(n: int) -> None:
        calls.append(n)
        FILES_AT_CALL.append({p.name for p in out.iterdir()})

    written = plots.run_tradeoff(
        out,
        domain_size=64,
        reps=REPS,
        seed=SEED,
        progress=record,
        epsilons=EPSILONS,
        users=USERS,
    )
    return out, written, calls


@pytest.fixture(scope="module")
def rows(swept: tuple[Path, list[Path], list[int]]) -> list[dict[str, str]]:
    with (swept[0] / "tradeoff.csv").open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_files_written(swept: tuple[Path, list[Path], list[int]]) -> None:
    out, written, _ = swept
    assert written == [out / "tradeoff.csv", *(out / name for name in PNGS)]
    assert all(p.is_file() for p in written)


def test_progress_counts_every_point(
    swept: tuple[Path, list[Path], list[int]], rows: list[dict[str, str]]
) -> None:
    _, _, calls = swept
    total = tradeoff.total_points(EPSILONS, USERS)
    assert total == (len(tradeoff.MECHANISMS) + 1) * len(EPSILONS) * len(USERS) + len(USERS)
    assert total == len(rows)
    assert sum(calls) == len(calls) == tradeoff.total_steps(EPSILONS, USERS)


def test_progress_follows_the_plots_to_the_last_file(
    swept: tuple[Path, list[Path], list[int]],
) -> None:
    """Review finding: the bar was full once the sweep ended, then sat there while the
    plots took as long again (the shuffled-ε bound most). The steps after the sweep's
    points now follow every file written, and the shuffled plot's lines one by one."""
    _, written, calls = swept
    points = tradeoff.total_points(EPSILONS, USERS)
    after_sweep = FILES_AT_CALL[points:]
    assert len(after_sweep) == len(written) + len(tradeoff.SHUFFLED_EPSILONS)
    assert after_sweep[0] == {"tradeoff.csv"}  # one step per file, as it is written
    assert after_sweep[4] == {p.name for p in written[:5]}
    lines = after_sweep[5 : 5 + len(tradeoff.SHUFFLED_EPSILONS)]
    assert all("shuffled_epsilon.png" not in files for files in lines)  # while it draws
    assert after_sweep[-1] == {p.name for p in written}  # the last step: every file


def test_csv_columns_and_rows(rows: list[dict[str, str]]) -> None:
    assert list(rows[0]) == tradeoff.csv_header()
    assert len(rows[0]) == len(fields(tradeoff.TradeoffPoint))
    # one unit per kind of number, named in the header: errors in percentage points
    for col in ("theory_se_pp", "simulated_rmse_pp", "central_laplace_se_pp", "simulation"):
        assert col in rows[0]
    keys = [(r["mechanism"], r["form"], float(r["epsilon"]), int(r["users"])) for r in rows]
    assert len(set(keys)) == len(keys)
    for name in tradeoff.MECHANISMS:
        grid = {(e, n) for m, f, e, n in keys if m == name}
        assert grid == {(e, n) for e in EPSILONS for n in USERS}
        assert {int(r["domain_size"]) for r in rows if r["mechanism"] == name} == {64}
    rr = [r for r in rows if r["mechanism"] == "rr"]
    assert {int(r["domain_size"]) for r in rr} == {2}
    coin = [r for r in rr if r["form"] == tradeoff.COIN_FLIP]
    assert sorted(int(r["users"]) for r in coin) == list(USERS)
    assert {float(r["epsilon"]) for r in coin} == {BinaryRR.coin_flip().epsilon}
    assert all(json.loads(r["params"])["keep_probability"] == 0.75 for r in coin)
    assert all(r["simulation"].startswith("numpy PCG64") for r in rows)
    assert all(r["distribution"] == "zipf" for r in rows)


def test_auto_marks_the_chosen_mechanism(rows: list[dict[str, str]]) -> None:
    for eps in EPSILONS:
        marked = {
            r["mechanism"] for r in rows if r["auto"] == "True" and float(r["epsilon"]) == eps
        }
        assert marked == {mechanisms.choose(eps, 64).mechanism.name}


def test_theory_columns_are_the_sdk_variance_exactly(rows: list[dict[str, str]]) -> None:
    for r in rows:
        m = mechanisms.from_params(json.loads(r["params"]))
        assert m.name == r["mechanism"] and m.epsilon == float(r["epsilon"])
        n = int(r["users"])
        probs = distribution(r["distribution"], m.domain_size)
        var = float(np.mean(m.variance(n, probs)))
        assert float(r["theory_variance_pp2"]) == var * 100**2
        assert float(r["theory_se_pp"]) == math.sqrt(var) * 100
        assert float(r["theory_se_at_zero_pp"]) == math.sqrt(float(m.variance(n))) * 100
        assert float(r["central_laplace_se_pp"]) == central_laplace_std(n, m.epsilon) * 100
        laplace = 100 * math.sqrt(2) / (n * m.epsilon)
        assert float(r["central_laplace_se_pp"]) == pytest.approx(laplace)
        assert int(r["wire_bytes"]) == m.wire_bytes
        # Robustness: the maximal gain attack's shift of one value with 1 % fake reports.
        gain = 100 * 0.01 * (1 - m.q) / (m.p - m.q)  # in points, like the other errors
        assert float(r["poisoning_gain_pp"]) == pytest.approx(gain)


def _z_score(row: dict[str, str]) -> float:
    """(simulated MSE / theory − 1) in units of its standard deviation √(2/(R·k_eff))."""
    m = mechanisms.from_params(json.loads(row["params"]))
    per_value = np.asarray(
        m.variance(int(row["users"]), distribution(row["distribution"], m.domain_size))
    )
    k_eff = min(per_value.sum() ** 2 / (per_value**2).sum(), m.domain_size - 1)
    reps = int(row["simulated_reps"])
    ratio = float(row["simulated_rmse_pp"]) ** 2 / float(row["theory_variance_pp2"])
    return (ratio - 1.0) / math.sqrt(2.0 / (reps * k_eff))


def test_simulation_matches_theory(rows: list[dict[str, str]]) -> None:
    z = np.array([_z_score(r) for r in rows])
    worst = rows[int(np.argmax(np.abs(z)))]
    assert np.abs(z).max() < Z_TOLERANCE, (worst, z.max(), z.min())
    # Pooled: the mean of M independent z-scores has standard deviation 1/√M.
    assert abs(z.mean()) < 4.0 / math.sqrt(len(z))


def test_simulated_reps_and_ratio(rows: list[dict[str, str]]) -> None:
    for r in rows:
        factor = tradeoff.BINARY_REPS_FACTOR if r["mechanism"] == "rr" else 1
        assert int(r["simulated_reps"]) == REPS * factor
        # The per-run expected MSE averages the variance over values, whose frequencies
        # always average 1/k: it equals the theory column whatever the sampled population.
        ratio = float(r["simulated_rmse_pp"]) ** 2 / float(r["theory_variance_pp2"])
        assert float(r["simulated_mse_ratio"]) == pytest.approx(ratio, rel=1e-9)


def test_pngs_are_valid_slides(swept: tuple[Path, list[Path], list[int]]) -> None:
    out = swept[0]
    for name in PNGS:
        data = (out / name).read_bytes()
        assert data[:8] == PNG_SIGNATURE, name
        assert data[12:16] == b"IHDR"
        width, height = struct.unpack(">II", data[16:24])
        assert width >= 1200 and height >= 800, (name, width, height)  # 150 dpi, ≥ 8 in wide
        assert len(data) > 30_000, name  # a real plot, not an empty canvas


def test_sweep_is_reproducible() -> None:
    kwargs: dict[str, Any] = {"epsilons": (1.0,), "users": (1_000,)}
    first = tradeoff.sweep(16, 3, 7, **kwargs)
    assert first == tradeoff.sweep(16, 3, 7, **kwargs)
    assert first != tradeoff.sweep(16, 3, 8, **kwargs)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="reps"):
        tradeoff.sweep(16, 0, 1, epsilons=(1.0,), users=(100,))
    with pytest.raises(ValueError, match="empty"):
        plots.run_tradeoff("unused", epsilons=())
    with pytest.raises(ValueError):
        tradeoff.sweep(16, 1, 1, epsilons=(1.0,), users=(0,))


def test_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    totals: list[int] = []
    advanced: list[int] = []

    stages: list[str] = []

    @contextmanager
    def recording_bar(description: str, total: int, enabled: bool = True) -> Iterator[Any]:
        totals.append(total)
        stages.append(description)

        def advance(n: int, description: str | None = None) -> None:
            advanced.append(n)
            if description is not None and description != stages[-1]:
                stages.append(description)

        yield advance

    monkeypatch.setattr(tradeoff_command, "progress_bar", recording_bar)
    out = tmp_path / "slides"
    result = CliRunner().invoke(ldp_main, ["tradeoff", "--out", str(out), "--reps", "2"])
    assert result.exit_code == 0, result.output
    assert totals == [tradeoff.total_steps()]
    assert sum(advanced) == tradeoff.total_steps()
    assert stages == ["sweeping ε × N × mechanism", "drawing the plots"]
    for name in ("tradeoff.csv", *PNGS):
        assert (out / name).is_file()
        assert f"wrote {out / name}" in result.output.replace("\n", "")
    with (out / "tradeoff.csv").open(newline="", encoding="utf-8") as fh:
        assert sum(1 for _ in csv.DictReader(fh)) == tradeoff.total_points()


def test_cli_rejects_bad_options(tmp_path: Path) -> None:
    result = CliRunner().invoke(ldp_main, ["tradeoff", "--out", str(tmp_path), "--reps", "1"])
    assert result.exit_code == 2
    assert "--reps" in result.output

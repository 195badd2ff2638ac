"""``ldp simulate | plan | audit``: output, exit codes, and clear errors."""

from __future__ import annotations

import json
import subprocess
import sys

from click.testing import CliRunner

from aggregator.cli import main


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def test_simulate_json() -> None:
    code, out = run(
        "simulate",
        "-m",
        "oue",
        "-e",
        "1",
        "-k",
        "64",
        "-n",
        "100000",
        "-r",
        "3",
        "--seed",
        "4",
        "--json",
    )
    assert code == 0
    data = json.loads(out)
    assert data["users"] == 100_000 and len(data["runs"]) == 3 and data["intervals"] == 192
    assert data["randomness"].startswith("simulation")
    assert 0.7 < data["mse_ratio"] < 1.3
    assert data["mechanism"]["mechanism"] == "oue"


def test_simulate_table_and_auto() -> None:
    code, out = run(
        "simulate", "-m", "auto", "-e", "1", "-k", "1024", "-n", "1000000", "--seed", "1"
    )
    assert code == 0
    assert "olh ε=1 k=1024" in out and "coverage" in out and "joint law" in out


def test_plan_users_and_width() -> None:
    code, out = run("plan", "-e", "2", "-k", "1024", "-w", "0.01", "--json")
    assert code == 0
    rows = {r["name"]: r for r in json.loads(out)}
    # FORMULAS.md: OUE at ε = 2 needs ≈ 2.8·10⁴ users for ±1 %.
    assert 27_000 < rows["oue"]["users"] < 29_000
    assert rows["central laplace"]["users"] < 1000
    code, out = run("plan", "-e", "1", "-k", "16", "-n", "10000")
    assert code == 0 and "central laplace" in out and "(auto)" in out


def test_audit_exit_codes() -> None:
    code, out = run("audit", "-m", "grr", "-e", "1", "-k", "4", "-t", "4000")
    assert code == 0 and "PASS" in out
    code, out = run("audit", "-m", "hr", "-e", "1", "-k", "4", "-t", "2000", "--json")
    assert code == 0 and json.loads(out)["passed"] is True


def test_bad_input_is_a_clear_usage_error() -> None:
    for args, message in [
        (("simulate", "-m", "oue", "-e", "-1", "-k", "8", "-n", "10"), "epsilon must be finite"),
        (("simulate", "-m", "nope", "-e", "1", "-k", "8", "-n", "10"), "'nope' is not one of"),
        (("simulate", "-m", "oue", "-e", "1", "-k", "1", "-n", "10"), "domain_size must be in"),
        (("simulate", "-m", "oue", "-e", "1", "-k", "8", "-n", "0"), "0 is not in the range"),
        (("plan", "-e", "1", "-k", "8"), "exactly one of --users and --width"),
        (("plan", "-e", "1", "-k", "8", "-w", "2"), "2"),
        (("audit", "-m", "rr", "-e", "1", "-k", "3"), "rr is binary"),
    ]:
        code, out = run(*args)
        assert code == 2, (args, out)
        assert message in out and "Traceback" not in out


def test_console_script_is_installed() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "aggregator.cli", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for command in ("simulate", "plan", "audit", "tradeoff"):
        assert command in out

"""``ldp simulate | plan | audit``: output, exit codes, and clear errors."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from aggregator.cli import audit as audit_command
from client_sdk import mechanisms
from tests.cli_helpers import ldp as run


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
    # docs/concepts/formulas.md: OUE at ε = 2 needs ≈ 2.8·10⁴ users for ±1 %.
    assert 27_000 < rows["oue"]["users"] < 29_000
    assert rows["central laplace"]["users"] < 1000
    code, out = run("plan", "-e", "1", "-k", "16", "-n", "10000")
    assert code == 0 and "central laplace" in out and "(auto)" in out
    # Robustness: 1 % of fake GRR reports move one of 64 values by 37.7 points.
    code, out = run("plan", "-e", "1", "-k", "64", "-n", "10000", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert rows["grr"]["max_gain"] == pytest.approx(0.01 * (1 + 63 / (math.e - 1)), rel=1e-9)
    code, out = run("plan", "-e", "1", "-k", "64", "-n", "10000", "-b", "0.05")
    assert code == 0 and "5 % fakes" in out and "(points)" in out and "+188 " in out
    # one unit for shares and their errors, said in the headers: percentage points
    code, out = run("plan", "-e", "2", "-k", "1024", "-w", "0.01")
    flat = " ".join(out.split())
    assert code == 0 and "half-width ±1 percentage point (--width 0.01)" in flat
    assert "(points)" in out and "1.0000" in out and "1.0000 %" not in out


def test_audit_exit_codes() -> None:
    # Seeded: a correct mechanism fails a 99 % audit up to 1 % of the time by design.
    code, out = run("audit", "-m", "grr", "-e", "1", "-k", "4", "-t", "4000", "--seed", "1")
    assert code == 0 and "PASS" in out
    code, out = run(
        "audit", "-m", "hr", "-e", "1", "-k", "4", "-t", "2000", "--json", "--seed", "2"
    )
    assert code == 0 and json.loads(out)["passed"] is True


def test_audit_takes_numeric_mechanisms_without_a_domain_size() -> None:
    code, out = run("audit", "-m", "duchi", "-e", "1", "-t", "4000", "--seed", "3")
    assert code == 0 and "PASS duchi ε=1:" in out and "y in [" in out
    code, out = run("audit", "-m", "hybrid", "-e", "2", "-t", "2000", "--json", "--seed", "4")
    body = json.loads(out)
    assert code == 0 and body["passed"] is True and sorted(body["inputs"]) == [-1.0, 1.0]


def test_audit_checks_both_bounds_of_a_memoized_mechanism() -> None:
    base = ("audit", "-m", "memo-oue", "-e", "1", "--permanent-epsilon", "4", "-k", "16")
    base = (*base, "--seed", "5")
    code, out = run(*base, "-t", "4000")
    assert code == 0 and out.count("PASS") == 2
    assert "ε=1 k=16" in out and "permanent response ε∞=4 k=16" in out
    code, out = run(*base, "-t", "2000", "--json")
    body = json.loads(out)
    assert code == 0 and body["passed"] is True
    assert [a["bound"] for a in body["audits"]] == ["report", "permanent"]
    assert [a["declared_epsilon"] for a in body["audits"]] == [1.0, 4.0]
    code, out = run(*base, "-t", "2000", "--bound", "permanent", "--json")
    assert code == 0 and json.loads(out)["bound"] == "permanent"


def test_audit_exits_1_when_a_bound_exceeds_the_declared_epsilon(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from test_audit import SteepDuchi
    from test_memoized_audit import HotPermanentGRR

    monkeypatch.setattr(mechanisms, "create_numeric", lambda name, eps: SteepDuchi(eps))
    code, out = run("audit", "-m", "duchi", "-e", "1", "-t", "4000")
    assert code == 1 and "FAIL duchi" in out
    broken = HotPermanentGRR(epsilon=1.0, domain_size=8, permanent_epsilon=4.0)
    monkeypatch.setattr(audit_command, "build_mechanism", lambda *args: broken)
    # 20,000 trials an input, not the default 200,000: the permanent bound found is ε∞ ≥ 5.19
    # (the broken response is drawn at ε∞ + 2 = 6), far above the declared 4; what this test
    # checks is the CLI's verdicts and exit code, the audit's power is test_memoized_audit's.
    memo = ("audit", "-m", "memo-grr", "-e", "1", "--permanent-epsilon", "4", "-k", "8")
    code, out = run(*memo, "--seed", "6", "-t", "20000")
    assert code == 1 and "PASS broken-prr-grr ε=1" in out
    assert "FAIL broken-prr-grr permanent response ε∞=4" in out


def test_bad_input_is_a_clear_usage_error() -> None:
    for args, message in [
        (("simulate", "-m", "oue", "-e", "-1", "-k", "8", "-n", "10"), "epsilon must be finite"),
        (("simulate", "-m", "nope", "-e", "1", "-k", "8", "-n", "10"), "'nope' is not one of"),
        (("simulate", "-m", "oue", "-e", "1", "-k", "1", "-n", "10"), "domain_size must be in"),
        (("simulate", "-m", "oue", "-e", "1", "-k", "8", "-n", "0"), "0 is not in the range"),
        (("plan", "-e", "1", "-k", "8"), "exactly one of --users and --width"),
        (("plan", "-e", "1", "-k", "8", "-w", "2"), "2"),
        (("audit", "-m", "rr", "-e", "1", "-k", "3"), "rr is binary"),
        (("audit", "-m", "grr", "-e", "1"), "grr needs --domain-size"),
        (("audit", "-m", "pm", "-e", "1", "-k", "8"), "--domain-size is not for numeric"),
        (("audit", "-m", "pm", "-e", "1", "--bound", "both"), "pm is not memoized"),
        (("audit", "-m", "pm", "-e", "1", "--permanent-epsilon", "2"), "not for numeric"),
        (("audit", "-m", "duchi", "-e", "30"), "epsilon must be finite"),
        (("audit", "-m", "oue", "-e", "1", "-k", "8", "--bound", "permanent"), "not memoized"),
    ]:
        code, out = run(*args)
        assert code == 2, (args, out)
        assert message in out and "Traceback" not in out


def test_console_script_is_installed() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ldp_server", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for command in ("simulate", "plan", "audit", "tradeoff"):
        assert command in out

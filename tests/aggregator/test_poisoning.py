"""Fake clients (issue 13): crafted reports are valid, and move the estimates as Cao et al. say.

Tolerances. Given the genuine population, one run's gain of target t is
(C_f/N − β·C_g/n)/(p* − q*) with C_f ~ Bin(m, s_t) (the fakes) and C_g a sum of n
independent Bernoulli(p*) or Bernoulli(q*) (the genuine reports), so its variance is
σ² = (m·s(1 − s)/N² + β²·V_g/n²)/(p* − q*)² (``gain_std``, eq. (2) of
:mod:`aggregator.analysis.poisoning`), and the mean of R independent runs has variance
mean(σ²)/R. Each comparison allows 4.5 of those standard deviations: with the ~200 gains
compared below, a correct implementation fails one with probability < 2·10⁻³ (normal
tail 6.8·10⁻⁶ each), and the runs are seeded, so a pass is reproducible.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from aggregator.analysis.crafting import InputManipulation, MaximalGain
from aggregator.analysis.poisoning import DefenceVerdict, PoisonedBatch, simulate_poisoning
from aggregator.stats.robustness import expected_gain, fake_count, max_gain
from client_sdk import mechanisms
from client_sdk.wire import MetricDefinition, check_report, new_report_id, parse_spec
from tests.cli_helpers import ldp

Z = 4.5
"""Standard deviations allowed per comparison (see the module docstring)."""

CRAFTED = ("rr", "grr", "sue", "oue", "olh", "blh", "hr", "ss")


def definition(name: str, k: int, epsilon: float = 1.0) -> MetricDefinition:
    domain = [f"v{i}" for i in range(k)]
    return parse_spec("app.poisoned", {"domain": domain, "epsilon": epsilon, "mechanism": name})


def targets_for(k: int, r: int) -> list[int]:
    return [int(t) for t in np.linspace(0, k - 1, r).round()]


# -- crafting --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", CRAFTED)
@pytest.mark.parametrize("r", [1, 2, 8])
def test_crafted_reports_are_reports_the_collector_accepts(name: str, r: int) -> None:
    k = 2 if name == "rr" else 64
    if r > k:
        pytest.skip("rr has two values")
    d = definition(name, k)
    targets = targets_for(k, r)
    gen = np.random.default_rng(1)
    for attack in (MaximalGain(d.oracle, targets, gen), InputManipulation(d.oracle, targets)):
        for payload in attack.payloads(300, gen):
            report = {
                "metric": d.name,
                "version": d.version,
                "id": new_report_id(),
                "payload": payload,
            }
            checked, _, canonical = check_report(report, lambda n, v: d)
            assert checked is d and canonical == payload


@pytest.mark.parametrize("name", CRAFTED)
def test_each_crafted_report_supports_what_the_attack_claims(name: str) -> None:
    """s_t, the support rate the theory uses, is what the SDK's own decoder sees."""
    k = 2 if name == "rr" else 64
    m = definition(name, k).oracle
    targets = targets_for(k, 2 if name == "rr" else 8)
    gen = np.random.default_rng(2)
    attack = MaximalGain(m, targets, gen)
    payloads = attack.payloads(4000, gen)
    hits = np.array([[m.supports(p, t) for t in targets] for p in payloads])
    s = attack.support()
    sd = np.sqrt(s * (1 - s) / len(payloads))
    assert np.all(np.abs(hits.mean(axis=0) - s) <= Z * sd + 1e-12)
    if name in ("sue", "oue", "hr", "olh", "blh", "ss"):
        assert s.max() == 1.0  # a report that supports a target always does, not by luck
    if name in ("sue", "oue"):
        ones = [len(m.support(p)) for p in payloads]
        assert set(ones) == {round(m.p + (k - 1) * m.q)}  # 17 for OUE: a normal-looking count


def test_the_olh_search_finds_seeds_that_hash_every_target_together_when_they_exist() -> None:
    m = mechanisms.create("olh", epsilon=1.0, domain_size=64)  # g = 4, P = 67
    attack = MaximalGain(m, [3, 40], np.random.default_rng(0))
    assert list(attack.support()) == [1.0, 1.0]
    best = max(
        sum(m.hash(a, b, t) == y for t in range(8))
        for a in range(1, 67, 3)
        for b in range(67)
        for y in range(4)
    )
    eight = MaximalGain(m, list(range(8)), np.random.default_rng(0))
    assert eight.support().sum() >= best  # at least as good as a coarse search by hand


# -- theory against the paper ----------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("k", [16, 64, 1024])
@pytest.mark.parametrize("r", [1, 4])
def test_expected_gains_are_cao_jia_gongs_closed_forms(epsilon: float, k: int, r: int) -> None:
    """Summed over the targets, eq. (1) is Theorems 1-3 of the paper (at f = 0.01 each)."""
    e, beta, f = math.exp(epsilon), 0.02, 0.01
    targets, f_T = targets_for(k, r), r * 0.01

    def overall(name: str, attack: str = "mga") -> float:
        m = mechanisms.create(name, epsilon=epsilon, domain_size=k)
        cls = MaximalGain if attack == "mga" else InputManipulation
        support = cls(m, targets, np.random.default_rng(0)) if attack == "mga" else cls(m, targets)
        return float(np.sum(expected_gain(m, support.support(), beta, f)))

    assert overall("grr") == pytest.approx(beta * (1 - f_T) + beta * (k - r) / (e - 1), rel=1e-9)
    assert overall("oue") == pytest.approx(beta * (2 * r * e / (e - 1) - f_T), rel=1e-9)
    olh = mechanisms.create("olh", epsilon=epsilon, domain_size=k)
    g = olh.g
    if r == 1:  # with r > 1 it depends on the seeds found: checked by simulation below
        # The paper's OLH q* is 1/g; the SDK's exact q* differs by O(g/P) (the hash family).
        paper = beta * (r * (e + g - 1) / (e - 1) - f_T)
        assert overall("olh") == pytest.approx(paper, rel=3 * g / olh.prime)
    for name in ("grr", "oue", "olh", "hr", "ss"):
        assert overall(name, "input") == pytest.approx(beta * (1 - f_T), rel=1e-9)


def test_grr_is_the_least_robust_for_large_k_at_the_same_epsilon() -> None:
    gains = {
        name: max_gain(mechanisms.create(name, epsilon=1.0, domain_size=1024), 0.01)
        for name in ("grr", "oue", "olh", "hr", "ss")
    }
    assert gains["grr"] > 100 * max(v for n, v in gains.items() if n != "grr")
    assert gains["oue"] == pytest.approx(0.01 * 2 * math.e / (math.e - 1), rel=1e-9)


def test_the_fake_count_follows_the_papers_beta() -> None:
    assert fake_count(100_000, 0.01) == 1010  # β = m/(n + m)
    assert 1000 / (100_000 + 1000) == pytest.approx(0.0099, abs=1e-5)  # the issue's "1 %"
    with pytest.raises(ValueError, match=r"\(0, 1\)"):
        fake_count(100, 1.0)


# -- simulation against theory ---------------------------------------------------------------


def assert_matches_theory(result: Any) -> None:
    R = result.runs
    for g in result.targets:
        assert abs(g.gain - g.theory) <= Z * g.theory_std / math.sqrt(R) + 1e-12, g
        assert abs(g.baseline - g.baseline_theory) <= Z * g.baseline_std / math.sqrt(R), g


@pytest.mark.parametrize("name", CRAFTED)
@pytest.mark.parametrize("r", [1, 8])
def test_measured_gains_equal_the_formulas(name: str, r: int) -> None:
    k = 2 if name == "rr" else 64
    if r > k:
        pytest.skip("rr has two values")
    m = definition(name, k).oracle
    result = simulate_poisoning(m, targets_for(k, r), 20_000, 400, runs=6, seed=7)
    assert_matches_theory(result)
    assert result.beta == pytest.approx(400 / 20_400)


def test_the_theoretical_sd_is_the_spread_of_the_runs() -> None:
    """Eq. (2) is not just a loose bound: 40 runs' spread agrees with it (χ² bounds)."""
    m = mechanisms.create("grr", epsilon=1.0, domain_size=64)
    result = simulate_poisoning(m, [0, 20, 40, 60], 10_000, 500, runs=40, seed=3)
    for g in result.targets:
        ratio = (g.gain_se * math.sqrt(40)) / g.theory_std  # sample sd / σ
        assert 0.55 < ratio < 1.45  # χ²₃₉ quantiles 0.001 and 0.999, as sd ratios: 0.64, 1.4


# -- the issue's table (k = 64, ε = 1, 100,000 genuine reports and 1,000 crafted) ------------


ISSUE = {("grr", 1): 37.3, ("oue", 1): 3.1, ("olh", 1): 3.3}


@pytest.fixture(scope="module")
def issue_runs() -> dict[tuple[str, int], Any]:
    out = {}
    for name in ("grr", "oue", "olh"):
        m = mechanisms.create(name, epsilon=1.0, domain_size=64)
        for r in (1, 8):
            targets = [63] if r == 1 else list(range(7, 64, 8))  # the zipf tail: f < 1.5 %
            out[name, r] = simulate_poisoning(m, targets, 100_000, 1000, runs=3, seed=13)
    return out


@pytest.mark.parametrize(("name", "r"), sorted(ISSUE))
def test_one_target_gains_reproduce_the_issue(issue_runs: Any, name: str, r: int) -> None:
    result = issue_runs[name, r]
    assert_matches_theory(result)
    (g,) = result.targets
    # The issue gives one decimal place: ±0.05 points of rounding, plus the simulation's σ.
    assert abs(100 * g.gain - ISSUE[name, r]) <= 0.05 + Z * 100 * g.theory_std


def test_eight_target_gains_reproduce_the_issue(issue_runs: Any) -> None:
    grr, oue, olh = (issue_runs[name, 8] for name in ("grr", "oue", "olh"))
    for result in (grr, oue, olh):
        assert_matches_theory(result)
    # GRR: +3.5 to +5.3 in the issue, one run: each target's expected gain is +4.2 ± 0.4.
    assert all(3.5 <= 100 * g.theory <= 5.3 for g in grr.targets)
    # OUE: +2.9 to +3.1 (every target's bit is set in every crafted report).
    assert all(2.9 <= 100 * g.gain <= 3.15 for g in oue.targets)
    # OLH: +3.3 for a target every crafted report supports (for these eight the search finds
    # seeds hashing all of them together: the issue's heading); a target the best seeds leave
    # out gains less, down to −β·q*/(p* − q*) = −1.1 points (the issue's +0.2 for one).
    assert olh.mga_support == [1.0] * 8
    assert all(100 * g.gain == pytest.approx(3.3, abs=0.1) for g in olh.targets)
    assert max(100 * g.gain for g in olh.targets) == pytest.approx(3.3, abs=0.05)


# -- the defence hook ------------------------------------------------------------------------


def test_defences_see_each_attacks_crafted_reports_and_their_verdicts_are_kept() -> None:
    m = mechanisms.create("oue", epsilon=1.0, domain_size=64)
    seen: list[PoisonedBatch] = []

    def too_many_targets(batch: PoisonedBatch) -> DefenceVerdict:
        seen.append(batch)
        flagged = sum(
            all(batch.mechanism.supports(p, t) for t in (1, 2, 3)) for p in batch.payloads
        )
        return DefenceVerdict(
            "three-bits", batch.attack, flagged, len(batch.payloads), flagged > 50
        )

    result = simulate_poisoning(
        m, [1, 2, 3], 5000, 200, runs=2, seed=1, defences=[too_many_targets]
    )
    assert [(b.attack, b.run) for b in seen] == [(a, r) for r in (0, 1) for a in ("mga", "input")]
    assert seen[0].poisoned.n == 5200 and seen[0].genuine.n == 5000
    assert seen[0].targets == (1, 2, 3) and seen[0].honest is seen[1].honest  # shared per run
    mga, base, _, _ = result.defences
    assert (mga.flagged, mga.alarm) == (200, True)
    assert base.flagged < 20 and not base.alarm
    assert result.to_dict()["defences"][0]["defence"] == "three-bits"
    summary = result.to_dict()["defence_summary"]
    assert [(s["attack"], s["caught"], s["trials"]) for s in summary] == [
        ("mga", 2, 2),
        ("input", 0, 2),
    ]


def test_with_no_defence_given_no_verdict_is_made_up() -> None:
    m = mechanisms.create("grr", epsilon=1.0, domain_size=8)
    assert simulate_poisoning(m, [1], 1000, 10, seed=1, defences=()).defences == []


def test_the_defences_do_not_move_the_gains() -> None:
    """They draw from a generator spawned from the simulation's: same seed, same gains."""
    m = mechanisms.create("olh", epsilon=1.0, domain_size=64)
    bare = simulate_poisoning(m, [3, 9], 5000, 50, runs=2, seed=3, defences=())
    checked = simulate_poisoning(m, [3, 9], 5000, 50, runs=2, seed=3)
    assert len(checked.defences) == 2 * 2 * 2  # two defences, two attacks, two runs
    assert checked.targets == bare.targets


# -- the command line ------------------------------------------------------------------------


def run(*args: str) -> tuple[int, str]:
    return ldp("attack", "poison", *args)


def test_cli_prints_each_targets_gain_and_its_theory() -> None:
    code, out = run(
        "-m",
        "grr",
        "-e",
        "1",
        "-k",
        "64",
        "--fakes",
        "1000",
        "-t",
        "63,",
        "--seed",
        "1",
        "--trials",
        "2",
    )
    assert code == 0, out
    assert "1,000 crafted" in out and "β = 0.009901" in out
    row = next(line.split() for line in out.splitlines() if line.strip().startswith("63 "))
    gain, theory = float(row[2]), float(row[4])
    assert gain == pytest.approx(37.3, abs=0.1) and theory == pytest.approx(37.3, abs=0.1)
    rows = {
        tuple(line.split()[:2]): line.split()
        for line in out.splitlines()
        if line.split()[:1] in (["plausibility"], ["detection"])
    }
    # GRR has no implausible report: nothing refused, the whole gain left; the shift
    # test sees z ≈ 23 in both trials (tests/aggregator/test_defences.py's margins).
    assert rows[("plausibility", "mga")][2:7] == ["0", "of", "2", "○○", "0.00"]
    assert rows[("detection", "mga")][2:6] == ["2", "of", "2", "●●"]
    assert "shift ×2" in " ".join(rows[("detection", "mga")])
    assert "α = 0.001 per window" in out.replace("\n", " ")


def test_cli_json_carries_every_trials_verdict_and_the_alarm_rate() -> None:
    args = ("-m", "grr", "-e", "1", "-k", "64", "-n", "20000", "-t", "40,", "--seed", "2")
    code, out = run(*args, "--trials", "3", "--alarm-rate", "0.01", "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["alarm_rate"] == 0.01 and data["trailing"] == 6
    assert len(data["defences"]) == 2 * 2 * 3  # two defences, two attacks, three trials
    detection = [d for d in data["defences"] if d["defence"] == "detection"]
    assert [d["run"] for d in detection if d["attack"] == "mga"] == [0, 1, 2]
    mga = next(
        s for s in data["defence_summary"] if (s["defence"], s["attack"]) == ("detection", "mga")
    )
    assert mga["per_trial"] == [True] * 3 and mga["rate"] == 1.0
    code, out = run(*args, "--alarm-rate", "0.7")
    assert code == 2 and "alarm-rate" in out


def test_cli_json_draws_the_targets_from_the_seed() -> None:
    args = ("-m", "oue", "-e", "1", "-k", "64", "-n", "5000", "-t", "3", "--seed", "4", "--json")
    code, out = run(*args)
    assert code == 0, out
    data = json.loads(out)
    assert data["fakes"] == fake_count(5000, 0.01) == 51  # β = 51/5051: m is rounded
    assert data["beta"] == pytest.approx(0.01, abs=1 / 5000)
    assert len(data["targets"]) == 3 and data["mga_support"] == [1.0, 1.0, 1.0]
    assert [t["value"] for t in data["targets"]] == [
        t["value"] for t in json.loads(run(*args)[1])["targets"]
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--fakes", "10", "--fake-fraction", "0.1"), "not both"),
        (("-t", "abc"), "neither a count"),
        (("-t", "64,"), "outside range(0, 64)"),
        (("-t", "65"), "the domain has 64 values"),
        (("-t", "0"), "at least 1"),
        (("-t", "3,3"), "distinct"),
        (("--fake-fraction", "1.5"), "fake-fraction"),
        (("-m", "duchi"), "duchi"),
        (("-e", "50"), "epsilon must be"),
    ],
)
def test_cli_bad_arguments_say_what_is_wrong(args: tuple[str, ...], message: str) -> None:
    base = {"-m": "grr", "-e": "1", "-k": "64"}
    given = dict(zip(args[::2], args[1::2], strict=True))
    merged = [x for key, value in {**base, **given}.items() for x in (key, value)]
    code, out = run(*merged, "-n", "1000")
    assert code == 2, out
    assert message in out and "Traceback" not in out


def test_cli_detection_without_a_baseline_runs_the_floor_test() -> None:
    """--baseline-windows 0: the poisoned window as a fresh metric sees it (issue 29, 6(a)).
    Everyone holds value 0, so 1 % crafted reports for 63 thin 63 values below q*: the
    floor alarm in every trial; the honest-randomizer baseline, none."""
    args = ("-m", "grr", "-e", "1", "-k", "64", "-n", "100000", "-t", "63,", "--seed", "1")
    code, out = run(*args, "-d", "point", "--trials", "3", "--baseline-windows", "0", "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["trailing"] == 0
    summary = {(s["defence"], s["attack"]): s for s in data["defence_summary"]}
    assert summary[("detection", "mga")]["alarms"] == {"floor": 3}
    assert summary[("detection", "input")]["caught"] == 0

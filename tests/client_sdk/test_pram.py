"""PRAM on the device: ε read off the matrix exactly, exact sampling, refusals."""

from __future__ import annotations

import math
import random
from collections import Counter
from fractions import Fraction

import pytest

from client_sdk import mechanisms, wire
from client_sdk.mechanisms.pram import MAX_PRAM_SIZE, PostRandomization, privacy_ratio_of

AGES = [
    ["0.7", "0.2", "0.1"],
    ["0.15", "0.7", "0.15"],
    ["0.1", "0.2", "0.7"],
]


def grr_matrix(m: mechanisms.GeneralizedRR) -> list[list[float]]:
    k = m.domain_size
    return [[m.p if x == y else m.q for y in range(k)] for x in range(k)]


def test_epsilon_is_read_off_the_matrix_exactly() -> None:
    m = mechanisms.create("pram", matrix=AGES)
    assert isinstance(m, PostRandomization) and m.domain_size == 3
    # Largest column ratio: column 0, 0.7/0.1 = 7 (column 1: 0.7/0.2 = 3.5).
    assert m.privacy_ratio() == Fraction(7)
    assert math.exp(m.epsilon) >= 7 and m.epsilon == pytest.approx(math.log(7), rel=1e-15)


def test_numbers_are_taken_as_written_and_fractions_accepted() -> None:
    m = mechanisms.create("pram", matrix=[[0.7, 0.3], [0.3, 0.7]])
    assert m.rows[0] == (Fraction(7, 10), Fraction(3, 10))  # not the binary 0.7
    third = mechanisms.create("pram", matrix=[["2/3", "1/3"], ["1/3", "2/3"]])
    assert third.privacy_ratio() == 2


def test_grr_matrix_realises_grr_epsilon() -> None:
    g = mechanisms.create("grr", epsilon=1.0, domain_size=5)
    m = mechanisms.create("pram", matrix=grr_matrix(g))
    assert m.epsilon <= 1.0 and m.epsilon == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize(
    ("matrix", "message"),
    [
        ([[0.5, 0.5], [0.5, 0.5]], "singular"),
        ([[0.6, 0.2, 0.2], [0.2, 0.6, 0.2], [0.4, 0.4, 0.2]], "singular"),
        ([[0.6, 0.3], [0.3, 0.7]], "not stochastic: row 0 sums to 0.9"),
        ([[0.9, 0.1], [0.0, 1.0]], "ε = ∞"),
        ([[1, 0], [0, 1]], "ε = ∞"),
        ([[1 - 1e-10, 1e-10], [1e-10, 1 - 1e-10]], "outside [0.0001, 20.0]"),
        ([[0.6, 0.4], [0.4, 0.6], [0.5, 0.5]], "not square"),
        ([[1.5, -0.5], [0.5, 0.5]], "not a probability"),
        ([["x", 1], [0.5, 0.5]], "not a finite number"),
        ([[0.5, 0.5]], "k in [2, 64]"),
        ("identity", "list of k rows"),
    ],
)
def test_refusals_say_what_is_wrong(matrix: object, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        mechanisms.create("pram", matrix=matrix)


def test_size_limit() -> None:
    k = MAX_PRAM_SIZE + 1
    with pytest.raises(ValueError, match=f"k in \\[2, {MAX_PRAM_SIZE}\\]"):
        mechanisms.create("pram", matrix=[[1 / k] * k for _ in range(k)])


def test_largest_matrix_is_checked_quickly_enough_to_load() -> None:
    k = MAX_PRAM_SIZE
    rows = [["1/2" if x == y else f"1/{2 * (k - 1)}" for y in range(k)] for x in range(k)]
    m = mechanisms.create("pram", matrix=rows)
    assert m.privacy_ratio() == k - 1


def test_perturb_samples_each_row_exactly() -> None:
    m = mechanisms.create("pram", matrix=AGES)
    rng = random.Random(20260115)
    draws = 30_000
    for x, row in enumerate(AGES):
        seen = Counter(m.perturb(x, rng)["v"] for _ in range(draws))
        for y, p in enumerate(row):
            prob = float(Fraction(p))
            sd = math.sqrt(draws * prob * (1 - prob))
            assert abs(seen[y] - draws * prob) < 4.5 * sd  # 4.5σ: ~1e-5 per check


def test_privacy_ratio_bounds_every_pair_of_rows() -> None:
    m = mechanisms.create("pram", matrix=AGES)
    worst = max(
        Fraction(a[y]) / Fraction(b[y]) for a in AGES for b in AGES for y in range(len(AGES))
    )
    assert privacy_ratio_of(m.rows) == worst


def test_auto_never_picks_pram() -> None:
    for eps in (0.5, 1.0, 4.0):
        for k in (2, 3, 8, 64):
            choice = mechanisms.choose(eps, k)
            assert all(c.name != "pram" for c in choice.candidates)


def test_spec_round_trip_and_epsilon_ceiling() -> None:
    spec = {"domain": ["<18", "18-64", "65+"], "mechanism": "pram", "options": {"matrix": AGES}}
    d = wire.parse_spec("user.age", spec)
    assert d.mechanism.name == "pram" and d.mechanism.epsilon == pytest.approx(math.log(7))
    again = wire.MetricDefinition.from_dict(d.to_dict())
    assert again.mechanism == d.mechanism
    assert wire.parse_spec("user.age", {**spec, "epsilon": 2.0}).mechanism == d.mechanism
    with pytest.raises(wire.DefinitionError, match="realises ε = 1.94591, more than"):
        wire.parse_spec("user.age", {**spec, "epsilon": 1.0})
    with pytest.raises(wire.DefinitionError, match="is 3×3 for 2 values"):
        wire.parse_spec("user.age", {**spec, "domain": ["a", "b"]})
    with pytest.raises(wire.DefinitionError, match="singular"):
        wire.parse_spec("user.age", {**spec, "options": {"matrix": [["1/3"] * 3 for _ in "abc"]}})


def test_definition_says_what_epsilon_the_matrix_realises() -> None:
    """pram is named, not chosen by auto, but its ε is derived: the reason says from what."""
    spec = {"domain": ["<18", "18-64", "65+"], "mechanism": "pram", "options": {"matrix": AGES}}
    d = wire.parse_spec("user.age", spec)
    assert d.mechanism_reason.startswith(
        "pram: the given 3×3 transition matrix realises ε = 1.94591 (e^ε = 7, the largest ratio"
    )
    ceiling = wire.parse_spec("user.age", {**spec, "epsilon": 2.0}).mechanism_reason
    assert "realises ε = 1.94591, within the declared ε = 2 (e^ε = 7" in ceiling
    binary = {**spec, "domain": ["no", "yes"], "options": {"matrix": [[0.7, 0.3], [0.3, 0.7]]}}
    assert "(e^ε = 7/3 ≈ 2.33333," in wire.parse_spec("user.ok", binary).mechanism_reason
    # a definition stored before pram had a reason gets it when read
    stored = {**d.to_dict(), "mechanism_reason": ""}
    assert wire.MetricDefinition.from_dict(stored).mechanism_reason == d.mechanism_reason
    grr = wire.parse_spec("user.age", {"domain": ["a", "b"], "epsilon": 1, "mechanism": "grr"})
    assert grr.mechanism_reason == ""  # named, nothing derived: nothing to explain


def test_build_and_check_report() -> None:
    d = wire.parse_spec(
        "user.age", {"domain": ["a", "b", "c"], "mechanism": "pram", "options": {"matrix": AGES}}
    )
    report = wire.build_report(d, "b")
    got, _, payload = wire.check_report(report, lambda n, v: d)
    assert got is d and payload["v"] in (0, 1, 2)
    with pytest.raises(wire.ReportError):
        wire.check_report({**report, "payload": {"v": 3}}, lambda n, v: d)

"""e^x and e^x − 1 are the correctly rounded doubles (docs/protocol.md §3), checked against
mpmath at 1,000 bits: over 20,000 random ε, at hard cases close to a midpoint between two
doubles, and with the first precision cut so that Ziv's loop has to run again."""

from __future__ import annotations

import json
import math
import random
import shutil
import struct
import subprocess
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import mpmath
import pytest
from mpmath.libmp import round_nearest, to_float

from client_sdk.mechanisms import base, rounding

ROOT = Path(__file__).resolve().parents[2]
CLIENT_JS = ROOT / "client_js"
NODE = shutil.which("node")

HARD_CASES = [
    # (x, minus_one): e^x (− 1) within 2^-k ulp of a midpoint between two doubles.
    (7.541752774995959e-10, False),  # k = 58.6: the hardest binary64 exp (Lefèvre, Muller)
    (2.0**-26, False),  # e^x = 1 + x + 2^-53 + x³/6 …: k = 28.6
    (2.0**-52, True),  # x + 2^-105 + x³/6 …: k = 54.6
    (-(2.0**-53), True),  # rounds to a power of two, from the binade below
    (8.95698855590976, False),  # the hardest of 300,000 random ε in [0.01, 20]: k = 23.3
    (18.755998392024914, False),  # k = 21.8
    (-5.070719606325994, True),  # the hardest −ε/2: k = 24.2
    (8.096289816990824, True),  # k = 21.4
    (-4.416347908345905, True),  # k = 22.0
]


def reference(x: float, minus_one: bool) -> float:
    """The double nearest e^x (− 1), from mpmath at 128 bits, else at 1,000 bits.

    mpmath's value at 128 bits is within a few of its units of the truth; granted 2^10 of
    them either way, when both ends of that interval round to the same double (mpmath's
    round-to-nearest to 53 bits, exact) the truth rounds to it too. The interval's half-width
    is 2^-66 of a double's ulp, the hardest binary64 case (below) 2^-58.6 ulp from a
    midpoint: every case here is decided at 128 bits, 2.5 times as fast as the
    1,000 bits of the first version of this oracle, kept for a value closer still.
    """
    with mpmath.workprec(128):
        value = mpmath.expm1(x) if minus_one else mpmath.exp(x)
    with mpmath.workprec(128 + 64):  # v ± 2^(mag(v) − 118) exactly
        error = mpmath.ldexp(1, int(mpmath.mag(value)) + 10 - 128)
        low = to_float((value - error)._mpf_, rnd=round_nearest)
        high = to_float((value + error)._mpf_, rnd=round_nearest)
    if low == high:
        return float(low)
    with mpmath.workprec(1000):
        value = mpmath.expm1(x) if minus_one else mpmath.exp(x)
    return float(to_float(value._mpf_, rnd=round_nearest))


def random_epsilons(n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [rng.uniform(0.01, 20.0) for _ in range(n)]


@dataclass(frozen=True)
class RandomCases:
    """20,000 random ε, the arguments e^x and e^x − 1 take at ε, ε/2 and −ε/2
    (``(x, minus_one)``), and the Python SDK's value of each."""

    epsilons: list[float]
    cases: list[tuple[float, bool]]
    python: list[float]


@pytest.fixture(scope="module")
def random_cases() -> RandomCases:
    """Computed once: mpmath checks the Python values, the JS SDK must match them bit for
    bit (the Python SDK's pure-Python rounding takes seconds for the 80,000)."""
    epsilons = random_epsilons(20_000, seed=23)
    at = ((1, False), (0.5, False), (0.5, True), (-0.5, True))
    cases = [(e * scale, minus_one) for e in epsilons for scale, minus_one in at]
    python = [rounding.expm1(x) if m else rounding.exp(x) for x, m in cases]
    return RandomCases(epsilons, cases, python)


def test_exp_and_expm1_are_correctly_rounded_for_20000_random_epsilons(
    random_cases: RandomCases,
) -> None:
    pairs = zip(random_cases.cases, random_cases.python, strict=True)
    wrong = [(x, minus_one) for (x, minus_one), got in pairs if got != reference(x, minus_one)]
    assert wrong == []


@pytest.mark.parametrize(("x", "minus_one"), HARD_CASES)
def test_hard_cases_close_to_a_midpoint(x: float, minus_one: bool) -> None:
    got = rounding.expm1(x) if minus_one else rounding.exp(x)
    assert got == reference(x, minus_one)


@pytest.mark.parametrize("digits", [2, 8, 17])
def test_ziv_loop_that_starts_too_coarse_still_lands_on_the_right_double(
    digits: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rounding, "_FIRST_DIGITS", digits)
    cases = HARD_CASES + [(eps, False) for eps in random_epsilons(300, seed=5)]
    cases += [(-eps / 2, True) for eps in random_epsilons(300, seed=6)]
    for x, minus_one in cases:
        assert rounding._rounded(x, minus_one) == reference(x, minus_one), (x, minus_one)


def test_exact_arguments() -> None:
    assert rounding.exp(0.0) == 1.0 and rounding.expm1(0.0) == 0.0
    for bad in (math.inf, -math.inf, math.nan, 710.0, -710.0):
        with pytest.raises(ValueError, match="finite and in"):
            rounding.exp(bad)


def test_glibc_is_not_the_protocol_at_awkward_epsilon() -> None:
    """The awkward ε of the vectors: wherever this machine's libm disagrees, the protocol's
    function is the one mpmath rounds to (so it is libm that is off, not the protocol)."""
    vectors = json.loads((ROOT / "conformance" / "vectors" / "exp.json").read_text("utf-8"))
    assert len(vectors["awkward"]) >= 5
    for eps in (row["epsilon"] for row in vectors["awkward"]):
        for x, minus_one in ((eps, False), (eps / 2, False), (eps / 2, True), (-eps / 2, True)):
            got = rounding.expm1(x) if minus_one else rounding.exp(x)
            assert got == reference(x, minus_one)


def test_epsilon_for_ratio_is_the_smallest_float_that_covers_the_ratio() -> None:
    rng = random.Random(11)
    for _ in range(2_000):
        ratio = Fraction(rng.randrange(2, 10**6), rng.randrange(1, 10**5)) + 1
        if not 1.0001 <= ratio <= 4e8:
            continue
        eps = base.epsilon_for_ratio(ratio)
        assert ratio <= base._exp_upper_bound_check(eps)
        assert ratio > base._exp_upper_bound_check(math.nextafter(eps, -math.inf))
        assert Fraction(math.exp(eps)) * (1 + Fraction(1, 10**15)) >= ratio


def test_the_bound_is_below_the_true_exp() -> None:
    for eps in random_epsilons(2_000, seed=3):
        bound = float(base._exp_upper_bound_check(eps))  # a float, converted exactly
        with mpmath.workprec(400):
            assert mpmath.mpf(bound) < mpmath.exp(eps)


_ROUNDING_JS = """
import { readFileSync } from "node:fs";
import { roundedExp, exp, expm1 } from "./src/exact.js";
import { expEpsilon, expLowerBound } from "./src/mechanisms.js";
const F = new Float64Array(1), U = new BigUint64Array(F.buffer);
const bits = (x) => { F[0] = x; return U[0].toString(16).padStart(16, "0"); };
const { cases, epsilons, first } = JSON.parse(readFileSync(0, "utf8"));
const out = {
  cases: cases.map(([x, m]) => bits(m ? expm1(x) : exp(x))),
  coarse: cases.map(([x, m]) => bits(roundedExp(x, m, first))),
  derived: epsilons.map((e) => {
    const b = expLowerBound(e);
    return [bits(expEpsilon(e)), `${b.n}/${b.d}`];
  }),
};
console.log(JSON.stringify(out));
"""


def _bits(x: float) -> str:
    return struct.pack(">d", x).hex()


def test_js_and_python_compute_the_same_exp_and_expm1_bits(random_cases: RandomCases) -> None:
    """docs/protocol.md §3 pins e^x and e^x − 1 to the correctly rounded double: the JS SDK
    (exact.js) and the Python SDK (rounding.py) agree bit for bit on 20,000 random ε in
    [0.01, 20] (at ε, ε/2 and −ε/2; the cases mpmath checks the Python values on), on hard
    cases close to a midpoint, and with JS's Ziv loop forced to start at 64 bits."""
    if NODE is None:
        pytest.skip("node is not installed")
    epsilons = random_cases.epsilons
    cases = [(x, int(m)) for x, m in random_cases.cases + HARD_CASES]
    result = subprocess.run(
        [NODE, "--input-type=module", "-e", _ROUNDING_JS],
        cwd=CLIENT_JS,
        input=json.dumps({"cases": cases, "epsilons": epsilons, "first": 64}),
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    )
    js = json.loads(result.stdout)
    hard = [rounding.expm1(x) if m else rounding.exp(x) for x, m in HARD_CASES]
    python = [_bits(value) for value in random_cases.python + hard]
    differ = [(x, m) for (x, m), a, b in zip(cases, python, js["cases"], strict=True) if a != b]
    assert differ == []
    assert js["coarse"] == python
    derived = [[_bits(base.exp_epsilon(e)), base._exp_upper_bound_check(e)] for e in epsilons]
    assert js["derived"] == [[a, f"{b.numerator}/{b.denominator}"] for a, b in derived]

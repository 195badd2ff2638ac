"""Mechanisms: parameters, p*/q* against the formulas (docs/concepts), golden vectors, checks."""

from __future__ import annotations

import json
import math
import random

import pytest
from scripted import ALL, ZERO, ScriptedRandom

from client_sdk import mechanisms
from client_sdk.errors import PayloadError
from client_sdk.mechanisms import MAX_DOMAIN_SIZE, BinaryRR, create

CONCRETE = ["rr", "grr", "sue", "oue", "olh", "blh", "hr", "ss"]


def build(name: str, epsilon: float = 1.0, k: int = 10) -> mechanisms.FrequencyOracle:
    return create(name, epsilon=epsilon, domain_size=2 if name == "rr" else k)


# -- parameters -----------------------------------------------------------------------


@pytest.mark.parametrize("name", CONCRETE)
@pytest.mark.parametrize("eps", [0.0, -1.0, math.nan, math.inf, 20.5, 1e-9])
def test_epsilon_out_of_range_is_rejected_with_the_range(name: str, eps: float) -> None:
    with pytest.raises(ValueError, match=r"epsilon must be finite and in \[0.0001, 20.0\]"):
        create(name, epsilon=eps, domain_size=2 if name == "rr" else 8)


@pytest.mark.parametrize("eps", [True, "1", None])
def test_epsilon_of_wrong_type_is_rejected(eps: object) -> None:
    with pytest.raises(ValueError, match="epsilon"):
        mechanisms.GeneralizedRR(epsilon=eps, domain_size=4)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", [n for n in CONCRETE if n != "rr"])
@pytest.mark.parametrize("k", [1, 0, -3, MAX_DOMAIN_SIZE + 1])
def test_domain_size_out_of_range_is_rejected_with_the_range(name: str, k: int) -> None:
    with pytest.raises(ValueError, match=rf"domain_size must be in \[2, {MAX_DOMAIN_SIZE}\]"):
        create(name, epsilon=1.0, domain_size=k)


def test_domain_size_must_be_an_int() -> None:
    with pytest.raises(ValueError, match="domain_size must be an integer"):
        create("grr", epsilon=1.0, domain_size=4.0)  # type: ignore[arg-type]


def test_rr_is_binary_only() -> None:
    with pytest.raises(ValueError, match="rr is binary"):
        create("rr", epsilon=1.0, domain_size=3)


def test_unknown_mechanism_and_options() -> None:
    with pytest.raises(ValueError, match="unknown mechanism 'xyz'; choose one of rr, grr"):
        create("xyz", epsilon=1.0, domain_size=4)
    with pytest.raises(ValueError, match=r"oue takes no option \['g'\]"):
        create("oue", epsilon=1.0, domain_size=4, g=3)
    with pytest.raises(ValueError, match=r"s must be in \[1, 3\]"):
        create("ss", epsilon=1.0, domain_size=4, s=4)
    with pytest.raises(ValueError, match=r"g must be in \[2, "):
        create("olh", epsilon=1.0, domain_size=4, g=1)
    with pytest.raises(ValueError, match="auto needs epsilon"):
        create("auto", domain_size=4)


@pytest.mark.parametrize("name", CONCRETE)
def test_params_round_trip(name: str) -> None:
    m = build(name, 1.3, 37)
    assert mechanisms.from_params(json.loads(json.dumps(m.params()))) == m


@pytest.mark.parametrize("name", CONCRETE)
def test_mechanisms_are_frozen(name: str) -> None:
    m = build(name)
    with pytest.raises(AttributeError):
        m.epsilon = 2.0  # type: ignore[misc]


# -- p*, q* and variance against docs/concepts/formulas.md (written out independently) -------

GRID = [(eps, k) for eps in (0.1, 0.5, 1.0, 2.0, 4.0, 8.0) for k in (2, 3, 16, 100, 1024)]


def formulas(name: str, eps: float, k: int) -> tuple[float, float]:
    e = math.exp(eps)
    if name in ("rr", "grr"):
        return e / (e + k - 1), 1 / (e + k - 1)
    if name == "sue":
        h = math.exp(eps / 2)
        return h / (h + 1), 1 / (h + 1)
    if name == "oue":
        return 0.5, 1 / (e + 1)
    if name == "hr":
        return e / (e + 1), 0.5
    if name == "ss":
        s = max(1, round(k / (e + 1)))
        return s * e / (s * e + k - s), ((s - 1) * s * e + (k - s) * s) / (
            (k - 1) * (s * e + k - s)
        )
    raise AssertionError(name)


@pytest.mark.parametrize("name", ["grr", "sue", "oue", "hr", "ss"])
@pytest.mark.parametrize(("eps", "k"), GRID)
def test_p_q_match_the_formulas(name: str, eps: float, k: int) -> None:
    m = create(name, epsilon=eps, domain_size=k)
    p, q = formulas(name, eps, k)
    assert m.p == pytest.approx(p, rel=1e-10)
    assert m.q == pytest.approx(q, rel=1e-10)
    e = math.exp(eps)
    var_star = {
        "grr": (e + k - 2) / (e - 1) ** 2,
        "sue": math.exp(eps / 2) / (math.exp(eps / 2) - 1) ** 2,
        "oue": 4 * e / (e - 1) ** 2,
        "hr": (e + 1) ** 2 / (e - 1) ** 2,
        "ss": q * (1 - q) / (p - q) ** 2,
    }[name]
    assert m.variance_star() == pytest.approx(var_star, rel=1e-9)
    assert m.variance(1000) == pytest.approx(var_star / 1000, rel=1e-9)
    f = 0.3
    exact = q * (1 - q) / (1000 * (p - q) ** 2) + f * (1 - p - q) / (1000 * (p - q))
    assert m.variance(1000, f) == pytest.approx(exact, rel=1e-9)


@pytest.mark.parametrize(("eps", "k"), GRID)
def test_local_hashing_matches_the_table_up_to_the_finite_hash_family(eps: float, k: int) -> None:
    m = create("olh", epsilon=eps, domain_size=k)
    e = math.exp(eps)
    g = round(e) + 1
    assert m.g == g
    assert m.p == pytest.approx(e / (e + g - 1), rel=1e-10)
    # q* is 1/g for an ideal hash; the exact value for the ((a·x+b) mod P) mod g family
    # differs by the non-uniformity of Z_P mod g, at most about g/P relative.
    assert abs(m.q - 1 / g) <= (1 / g) * (g / m.prime) + 1e-12
    blh = create("blh", epsilon=eps, domain_size=k)
    assert blh.g == 2 and blh.p == pytest.approx(e / (e + 1), rel=1e-10)
    if m.prime > 1000:  # then the family is close to ideal and so is the variance
        var_star = (e - 1 + g) ** 2 / ((e - 1) ** 2 * (g - 1))
        assert m.variance_star() == pytest.approx(var_star, rel=3 * g / m.prime)


def test_olh_collision_probability_is_exact_by_enumeration() -> None:
    m = mechanisms.LocalHashing(epsilon=1.0, domain_size=10, g=4)  # P = 11
    P = m.prime
    assert P == 11
    for u, v in [(0, 1), (2, 9), (3, 7)]:
        same = sum(m.hash(a, b, u) == m.hash(a, b, v) for a in range(1, P) for b in range(P))
        assert same / (P * (P - 1)) == pytest.approx(float(m.collision), abs=0)


@pytest.mark.parametrize("name", CONCRETE)
@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0, 10.0, 20.0])
def test_realised_epsilon_never_exceeds_the_declared_one(name: str, eps: float) -> None:
    m = build(name, eps, 33)
    assert m.realized_epsilon <= eps
    # Built from e^ε·(1 − 10⁻¹²), then shaded by whole ulps of a probability near 1 whose
    # complement is resolved to 2⁻⁵³: relative error ≤ 2⁻⁵³·e^ε per ulp.
    assert m.realized_epsilon == pytest.approx(eps, rel=1e-9 + 4 * 2**-53 * math.exp(eps))


def test_hadamard_order() -> None:
    assert [create("hr", epsilon=1, domain_size=k).order for k in (2, 3, 4, 7, 8, 1023, 1024)] == [
        4,
        4,
        8,
        8,
        16,
        1024,
        2048,
    ]


def test_subset_size_default() -> None:
    assert create("ss", epsilon=1.0, domain_size=1024).s == round(1024 / (math.e + 1))
    assert create("ss", epsilon=8.0, domain_size=16).s == 1


# -- the seeds' binary RR ----------------------------------------------------------------


def test_seed_forms_of_binary_rr() -> None:
    coin = BinaryRR.coin_flip()
    assert coin.keep == 0.75 and coin.flip_probability == 0.25
    assert coin.epsilon == pytest.approx(math.log(3), rel=1e-15)
    assert coin.epsilon >= math.log(3)
    assert coin.realized_epsilon <= coin.epsilon
    flip = BinaryRR.from_flip_probability(0.25)
    assert flip.keep == 0.75 and flip.epsilon == coin.epsilon
    bias = BinaryRR.from_truth_bias(0.5)
    assert bias.keep == 0.75 and bias.epsilon == coin.epsilon
    assert BinaryRR.from_truth_bias(0.2).epsilon == pytest.approx(math.log(1.2 / 0.8), rel=1e-14)
    assert BinaryRR.from_flip_probability(0.1).epsilon == pytest.approx(math.log(9), rel=1e-14)
    assert create("rr", flip_probability=0.25) == flip
    assert create("rr", truth_bias=0.5).p == 0.75


def test_seed_forms_validate() -> None:
    for bad in (0.0, 0.5, 0.7, -0.1):
        with pytest.raises(ValueError, match=r"flip probability must be in \(0, 0.5\)"):
            BinaryRR.from_flip_probability(bad)
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match=r"truth bias must be in \(0, 1\)"):
            BinaryRR.from_truth_bias(bad)
    with pytest.raises(ValueError, match="more than the declared"):
        create("rr", epsilon=0.5, flip_probability=0.25)
    with pytest.raises(ValueError, match="give one of"):
        create("rr", flip_probability=0.25, truth_bias=0.5)


def test_seeds_estimator_is_the_unbiased_estimator() -> None:
    m = BinaryRR.from_flip_probability(0.3)
    for yes, n in [(0, 10), (37, 100), (640, 1000), (1000, 1000)]:
        t = (yes - n * 0.3) / (n * (1 - 2 * 0.3))
        assert m.seeds_estimator(yes, n) == pytest.approx(t, rel=1e-12, abs=1e-12)
        assert m.debias(yes, n) == pytest.approx(t, rel=1e-12, abs=1e-12)


def test_seeds_estimator_is_unbiased_on_real_reports() -> None:
    m = BinaryRR.coin_flip()
    rng = random.Random(7)
    n, truth = 40_000, 0.3
    yes = sum(m.perturb(int(rng.random() < truth), rng)["v"] for _ in range(n))
    t = m.seeds_estimator(yes, n)
    # The population's own share varies too: Var = f(1−f)/n + Var[T | population].
    sd = math.sqrt(truth * (1 - truth) / n + m.variance(n, truth))
    assert abs(t - truth) < 4 * sd


# -- auto ---------------------------------------------------------------------------------


def test_auto_prefers_grr_below_the_threshold_and_olh_hr_above() -> None:
    assert create("auto", epsilon=2.0, domain_size=16).name == "grr"
    assert create("auto", epsilon=4.0, domain_size=100).name == "grr"
    assert create("auto", epsilon=1.0, domain_size=1024).name == "olh"
    assert create("auto", epsilon=4.0, domain_size=1024).name == "olh"
    assert create("auto", epsilon=0.1, domain_size=1024).name == "hr"


@pytest.mark.parametrize(("eps", "k"), GRID)
def test_auto_is_within_the_tie_band_of_the_lowest_variance(eps: float, k: int) -> None:
    choice = mechanisms.choose(eps, k)
    best = min(m.variance_star() for m in choice.candidates)
    assert choice.mechanism.variance_star() <= best * (1 + mechanisms.VARIANCE_TIE)
    tied = [
        m for m in choice.candidates if m.variance_star() <= best * (1 + mechanisms.VARIANCE_TIE)
    ]
    assert choice.mechanism.wire_bytes == min(m.wire_bytes for m in tied)
    assert choice.mechanism.name in choice.reason
    assert sum(row["chosen"] for row in choice.table()) == 1


def test_auto_explains_itself() -> None:
    reason = mechanisms.choose(1.0, 1024).reason
    assert "olh" in reason and "within 5%" in reason and "3e^ε + 2" in reason
    assert "smallest report (25 bytes" in reason


# -- perturb: values, payloads, golden vectors -----------------------------------------------


@pytest.mark.parametrize("name", CONCRETE)
@pytest.mark.parametrize("bad", [-1, 10, 1.5, "3", True, None, 2**70])
def test_perturb_rejects_values_outside_the_domain(name: str, bad: object) -> None:
    m = build(name, 1.0, 10)
    if name == "rr" and bad == 10:
        bad = 2
    with pytest.raises(ValueError, match="value"):
        m.perturb(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", CONCRETE)
@pytest.mark.parametrize("k", [2, 7, 8, 9, 64, 1000])
def test_perturb_payloads_are_json_and_valid(name: str, k: int) -> None:
    m = build(name, 1.0, k)
    rng = random.Random(k)
    for v in range(m.domain_size) if m.domain_size < 10 else (0, 1, m.domain_size - 1):
        for _ in range(20):
            payload = m.perturb(v, rng)
            assert json.loads(json.dumps(payload)) == payload
            assert m.check_payload(payload) == payload
            assert len(json.dumps(payload, separators=(",", ":"))) <= m.wire_bytes
            assert sorted(m.support(payload)) == [
                u for u in range(m.domain_size) if m.supports(payload, u)
            ]


@pytest.mark.parametrize("name", CONCRETE)
def test_default_randomness_is_the_csprng(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import client_sdk.mechanisms.randomness as r

    calls = []
    real = r.SecureRandom.getrandbits

    def spy(self: r.SecureRandom, k: int) -> int:
        calls.append(k)
        return real(self, k)

    monkeypatch.setattr(r.SecureRandom, "getrandbits", spy)
    m = build(name)
    m.check_payload(m.perturb(1))
    assert calls, "perturb without rng must draw from the SecureRandom CSPRNG"


# Golden vectors: every draw scripted (see conftest.ScriptedRandom), outputs derived by hand.


def test_golden_grr() -> None:
    m = create("grr", epsilon=1.0, domain_size=8)
    rng = ScriptedRandom([ZERO])  # U = 0 < p: keep
    assert m.perturb(3, rng) == {"v": 3} and rng.done()
    rng = ScriptedRandom([ALL, 5])  # U ≈ 1 > p: move; other index 5 ≥ 3 → value 6
    assert m.perturb(3, rng) == {"v": 6} and rng.done()
    rng = ScriptedRandom([ALL, 2])  # other index 2 < 3 stays 2
    assert m.perturb(3, rng) == {"v": 2} and rng.done()
    assert rng.calls[0] == "getrandbits(52)"  # p = e/(e+7) = 0.27973… has 52 binary digits


def test_golden_binary_rr_coin_flip() -> None:
    m = BinaryRR.coin_flip()  # keep = 0.75 = 0b0.11: one draw of 2 bits decides
    for u, expected in [(0, 1), (1, 1), (2, 1), (3, 0)]:
        rng = ScriptedRandom([u] + ([0] if expected != 1 else []))
        assert m.perturb(1, rng) == {"v": expected} and rng.done()
        assert rng.calls[0] == "getrandbits(2)"


def test_golden_oue() -> None:
    m = create("oue", epsilon=1.0, domain_size=10)  # q = 0.2689… = 0b0.010001…
    # plane 1 (q bit 0): no lane drops; plane 2 (q bit 1): lanes 4..9 draw 0 → bit 1;
    # plane 3 (q bit 0): lanes 0..3 draw 1 → bit 0. Lane i is value 9 − i.
    # Then the true bit: p = 1/2 = 0b0.1, draw 0 → 1.
    rng = ScriptedRandom([0, 0b0000001111, 0b0000001111, 0])
    payload = m.perturb(3, rng)
    assert rng.done() and rng.calls == ["getrandbits(10)"] * 3 + ["getrandbits(1)"]
    assert payload == {"b": "/AA="}  # bits 1111110000 (+6 padding zeros) = 0xFC 0x00
    assert m.support(payload) == [0, 1, 2, 3, 4, 5]
    rng = ScriptedRandom([0, 0b0000001111, 0b0000001111, 1])  # true bit drawn 0
    assert m.support(m.perturb(3, rng)) == [0, 1, 2, 4, 5]


def test_golden_sue() -> None:
    m = create("sue", epsilon=1.0, domain_size=4)  # q = 0.3775… = 0b0.011…, p = 1 − q
    rng = ScriptedRandom([0b0011, 0b0100, 0b0000, ALL])
    # lanes 0,1 drop at plane 1; lane 3 is 1 at plane 2; lane 2 is 1 at plane 3;
    # lanes 2,3 are values 1,0; the true bit (value 2) draws U ≈ 1 → 0.
    assert m.perturb(2, rng) == {"b": "wA=="} and rng.done()  # 0b1100_0000


def test_golden_olh() -> None:
    m = create("olh", epsilon=1.0, domain_size=10)
    assert (m.g, m.prime) == (4, 11)
    rng = ScriptedRandom([4, 2, ALL, 1])  # a = 1 + 4, b = 2; h(3) = (17 mod 11) mod 4 = 2
    assert m.perturb(3, rng) == {"a": 5, "b": 2, "y": 1} and rng.done()
    rng = ScriptedRandom([4, 2, ALL, 2])  # other bucket index 2 ≥ h → 3
    assert m.perturb(3, rng) == {"a": 5, "b": 2, "y": 3} and rng.done()
    rng = ScriptedRandom([4, 2, ZERO])  # keep: y = h(3) = 2
    payload = m.perturb(3, rng)
    assert payload == {"a": 5, "b": 2, "y": 2} and rng.done()
    assert 3 in m.support(payload)


def test_golden_hr() -> None:
    m = create("hr", epsilon=1.0, domain_size=10)  # K = 16, value 3 owns row 4
    rng = ScriptedRandom([5, ZERO])  # j = 5 is outside C_3 (4 & 5 = 4, odd); want inside → 5 ^ 4
    assert m.perturb(3, rng) == {"j": 1} and rng.done()
    rng = ScriptedRandom([5, ALL])  # want outside: keep 5
    assert m.perturb(3, rng) == {"j": 5} and rng.done()
    rng = ScriptedRandom([0, ZERO])  # 0 is in every C_v
    assert m.perturb(9, rng) == {"j": 0} and rng.done()


def _le(values: list[int], width: int) -> int:
    """The int whose little-endian ``width``-byte words are ``values`` (random_bytes' order)."""
    return sum(x << (8 * width * i) for i, x in enumerate(values))


def test_golden_ss_dense() -> None:
    m = create("ss", epsilon=1.0, domain_size=10)
    assert m.s == 3 and m.dense
    # Include the true value 3: 2 of the 9 others, marked by a byte below t = 57. Bytes 0
    # at 2 and 7 mark exactly 2: no fix-up; others 2, 7 → values 2, 8.
    marks = _le([255, 255, 0, 255, 255, 255, 255, 0, 255], 1)
    rng = ScriptedRandom([ZERO, marks])
    assert m.perturb(3, rng) == {"v": [2, 3, 8]} and rng.done()
    # Exclude: 3 of the 9 (t = 85). Four marked (0, 3, 5, 8): one uniform removal, from
    # 16-bit words masked to 4 bits: 9 (≥ 9) and 1 (unmarked) are rejected, 5 is removed.
    # 18 bytes: (1 removal · 16/4 candidates) · 5/4 + 4 = 9 words. Others 0, 3, 8 → 0, 4, 9.
    marks = _le([0, 255, 255, 84, 255, 0, 255, 255, 0], 1)
    rng = ScriptedRandom([ALL, marks, _le([9, 1, 5], 2)])
    assert m.perturb(3, rng) == {"v": [0, 4, 9]} and rng.done()
    assert rng.calls[1:] == ["getrandbits(72)", "getrandbits(144)"]  # after the Bernoulli
    # Include, one marked (4): one uniform addition; 4 (marked already) is rejected, 0 added.
    marks = _le([255, 255, 255, 255, 56, 255, 255, 255, 255], 1)
    rng = ScriptedRandom([ZERO, marks, _le([4, 0], 2)])
    assert m.perturb(3, rng) == {"v": [0, 3, 5]} and rng.done()


def test_golden_ss_sparse() -> None:
    m = create("ss", epsilon=1.0, domain_size=12, s=1)
    assert not m.dense
    # Exclude the true value 5: draw uniform values of range(12) (4-bit words, 5 words a
    # batch) until one is new: 13 is rejected (≥ 12), 5 is the true value, 7 is taken.
    rng = ScriptedRandom([ALL, _le([13, 5, 7], 2)])
    assert m.perturb(5, rng) == {"v": [7]} and rng.done()
    assert rng.calls[1:] == ["getrandbits(80)"]
    rng = ScriptedRandom([ZERO])  # include: s − 1 = 0 others, no draw
    assert m.perturb(5, rng) == {"v": [5]} and rng.done()


# Regression vectors: a seeded random.Random, outputs recorded once, so any change to the
# wire format or the sampling order shows up.

REGRESSION = {
    "rr": [{"v": 0}, {"v": 1}, {"v": 1}],
    "grr": [{"v": 5}, {"v": 8}, {"v": 3}],
    "sue": [{"b": "BcA="}, {"b": "QYA="}, {"b": "H0A="}],
    "oue": [{"b": "BYA="}, {"b": "EwA="}, {"b": "CUA="}],
    "olh": [{"a": 5, "b": 5, "y": 3}, {"a": 8, "b": 3, "y": 3}, {"a": 2, "b": 10, "y": 1}],
    "blh": [{"a": 5, "b": 5, "y": 1}, {"a": 8, "b": 3, "y": 0}, {"a": 6, "b": 7, "y": 1}],
    "hr": [{"j": 8}, {"j": 11}, {"j": 3}],
    # ss re-recorded when the sampler changed (marks + a uniform fix-up instead of one
    # rng.sample); its exact distribution is checked in test_privacy.py.
    "ss": [{"v": [1, 5, 8]}, {"v": [0, 1, 3]}, {"v": [0, 4, 8]}],
}


@pytest.mark.parametrize("name", CONCRETE)
def test_regression_vectors(name: str) -> None:
    m = build(name, 1.0, 10)
    rng = random.Random(20171)
    got = [m.perturb(min(3, m.domain_size - 1), rng) for _ in range(3)]
    assert got == REGRESSION[name]


# -- payload validation ------------------------------------------------------------------------

BAD_PAYLOADS = {
    "grr": [
        ([], "must be an object"),
        ({}, "missing ['v']"),
        ({"v": 1, "x": 2}, "unknown ['x']"),
        ({"v": 10}, "'v' = 10 is outside range(0, 10)"),
        ({"v": -1}, "outside range"),
        ({"v": 1.0}, "'v' must be an integer, got float"),
        ({"v": True}, "got bool"),
        ({"v": "1"}, "got str"),
        ({"v": None}, "got NoneType"),
    ],
    "oue": [
        ({"b": 5}, "'b' must be a base64 string"),
        ({"b": "AAAAAAAA"}, "'b' must be 4 base64 characters (10 bits), got 8"),
        ({"b": "AAAA"}, "'b' decodes to 3 bytes, not 2"),
        ({"b": "AA=A"}, "not valid base64"),
        ({"b": "AA!="}, "not valid base64"),
        ({"b": "AAE="}, "bits beyond the 10 values must be 0"),
        ({"bits": "AAA="}, "missing ['b']"),
    ],
    "olh": [
        ({"a": 0, "b": 1, "y": 1}, "'a' must be in range(1, 11)"),
        ({"a": 11, "b": 1, "y": 1}, "'a' = 11 is outside range(0, 11)"),
        ({"a": 1, "b": 11, "y": 1}, "'b' = 11"),
        ({"a": 1, "b": 1, "y": 4}, "'y' = 4 is outside range(0, 4)"),
        ({"a": 1, "b": 1}, "missing ['y']"),
        ({"a": 1, "b": 1, "y": 1.5}, "'y' must be an integer"),
    ],
    "hr": [
        ({"j": 16}, "'j' = 16 is outside range(0, 16)"),
        ({"j": [1]}, "got list"),
    ],
    "ss": [
        ({"v": [1, 2]}, "exactly 3 values, got 2"),
        ({"v": [1, 2, 2]}, "strictly increasing"),
        ({"v": [3, 2, 1]}, "strictly increasing"),
        ({"v": [1, 2, 10]}, "holds 10, outside range(0, 10)"),
        ({"v": [1, 2, 3.0]}, "must hold integers"),
        ({"v": "1,2,3"}, "must be a list"),
    ],
}


@pytest.mark.parametrize(
    ("name", "payload", "message"),
    [(name, payload, msg) for name, cases in BAD_PAYLOADS.items() for payload, msg in cases],
)
def test_check_payload_names_the_problem(name: str, payload: object, message: str) -> None:
    m = build(name, 1.0, 10)
    with pytest.raises(PayloadError) as info:
        m.check_payload(payload)
    assert message in str(info.value)
    assert str(info.value).startswith(f"{name} payload ")

"""Memoized mechanisms: the HMAC generator, stable permanent responses, parameters, wire.

The golden vectors pin the permanent-response derivation: a change to it would give
every device a second, independent permanent response of its value (a privacy loss),
so it must never change silently.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from scipy.stats import chisquare
from scripted import ScriptedRandom

from client_sdk import mechanisms, wire
from client_sdk.errors import DefinitionError
from client_sdk.mechanisms import (
    GeneralizedRR,
    HmacShakeRandom,
    Memoized,
    MemoizedGRR,
    MemoizedOUE,
    MemoizedSUE,
    OptimizedUnaryEncoding,
    SymmetricUnaryEncoding,
    create,
    from_params,
    new_secret,
)
from client_sdk.mechanisms.memoized import MIN_SECRET_BYTES, prr_info

ROOT = Path(__file__).resolve().parents[2]
SECRET = bytes(range(32))
MEMO = ["memo-grr", "memo-sue", "memo-oue"]
BUDGET = {"reports_per_period": 2, "period": "day"}
"""Memoized metrics need one: their intervals rest on the reports per device it bounds."""


def build(name: str, eps: float = 1.0, k: int = 6, permanent: float = 3.0) -> Memoized:
    m = create(name, epsilon=eps, domain_size=k, permanent_epsilon=permanent)
    assert isinstance(m, Memoized)
    return m


# -- the HMAC generator -------------------------------------------------------------------


def test_prr_info_golden() -> None:
    assert prr_info("app.theme", 3, 2) == b"ldp-telemetry/prr/v1\x00app.theme\x003\x002"


def test_stream_rng_golden_vector() -> None:
    """Seed = HMAC-SHA256(secret, info); stream = SHAKE-256(seed); pinned bytes."""
    info = prr_info("app.theme", 3, 2)
    seed = hmac.new(SECRET, info, hashlib.sha256).digest()
    assert seed.hex() == "833d60e0be5d9b7e6789508c0f3b832fa62a5b071c62660fe5d29220c949c1d6"
    stream = hashlib.shake_256(seed).digest(48)
    assert stream.hex() == (
        "77576ebb080517042f8b3822868dff59a0e375e522c57bdb6a7ff7e424e501a2"
        "df22195ce737cfaf019cab9a932ba0bd"
    )
    stream_rng = HmacShakeRandom(SECRET, info)
    assert stream_rng.seed == seed
    # getrandbits(n): the next ⌈n/8⌉ bytes, big-endian, top n bits.
    assert stream_rng.getrandbits(12) == int.from_bytes(stream[0:2], "big") >> 4 == 1909
    assert stream_rng.getrandbits(1) == stream[2] >> 7 == 0
    # randrange(10): 4 bits per try, rejected while ≥ 10.
    tries = [b >> 4 for b in stream[3:]]
    first = next(i for i, x in enumerate(tries) if x < 10)
    assert stream_rng.randrange(10) == tries[first] == 0
    # randrange(3, 20, 4): 5 choices {3, 7, 11, 15, 19}, 3 bits per try.
    tries = [b >> 5 for b in stream[4 + first :]]
    pick = next(x for x in tries if x < 5)
    assert stream_rng.randrange(3, 20, 4) == 3 + 4 * pick == 3


def test_stream_rng_long_draws_are_one_consistent_stream() -> None:
    info = b"x"
    stream = hashlib.shake_256(hmac.digest(SECRET, info, hashlib.sha256)).digest(5000)
    stream_rng = HmacShakeRandom(SECRET, info)
    got = b"".join(
        stream_rng.getrandbits(8 * n).to_bytes(n, "big") for n in (1, 7, 64, 1034, 3, 2000, 1891)
    )
    assert got == stream
    assert stream_rng.getrandbits(0) == 0


def test_stream_rng_rejects_short_or_non_bytes_secrets_and_bad_ranges() -> None:
    with pytest.raises(ValueError, match=f"at least {MIN_SECRET_BYTES} bytes"):
        HmacShakeRandom(b"short", b"")
    with pytest.raises(ValueError, match="must be bytes"):
        HmacShakeRandom("a string secret of many characters", b"")  # type: ignore[arg-type]
    stream_rng = HmacShakeRandom(SECRET, b"")
    with pytest.raises(ValueError):
        stream_rng.getrandbits(-1)
    with pytest.raises(ValueError):
        stream_rng.randrange(0)
    with pytest.raises(ValueError):
        stream_rng.randrange(0, 10, 0)
    with pytest.raises(ValueError):
        stream_rng.sample(range(3), 4)
    picks = stream_rng.sample(range(10), 10)
    assert sorted(picks) == list(range(10))
    assert 0 <= stream_rng.random() < 1


def test_stream_rng_is_uniform() -> None:
    stream_rng = HmacShakeRandom(SECRET, b"uniformity")
    counts = Counter(stream_rng.randrange(7) for _ in range(14_000))
    assert chisquare([counts[i] for i in range(7)]).pvalue > 1e-4


@pytest.mark.parametrize(
    ("metric", "version", "value"), [("x\x00y", 1, 0), (3, 1, 0), ("m", -1, 0), ("m", True, 0)]
)
def test_prr_info_rejects_ambiguous_inputs(metric: object, version: object, value: int) -> None:
    with pytest.raises(ValueError):
        prr_info(metric, version, value)  # type: ignore[arg-type]


# -- permanent responses ----------------------------------------------------------------


def test_permanent_response_golden_vectors() -> None:
    grr = build("memo-grr", 1.0, 5, 3.0)
    assert [grr.permanent_response(v, SECRET, "app.theme", 3)["v"] for v in range(5)] == [
        2,
        1,
        2,
        3,
        1,
    ]
    oue = build("memo-oue", 1.0, 12, 3.0)
    assert [oue.permanent_response(v, SECRET, "app.theme", 3)["b"] for v in range(3)] == [
        "AAA=",
        "ABA=",
        "oAA=",
    ]
    sue = build("memo-sue", 1.0, 100, 3.0)  # k > 64: the unary bits' byte-lanes path
    assert [sue.permanent_response(v, SECRET, "app.theme", 3)["b"] for v in range(2)] == [
        "4CUAgACQYjAQAwBUAA==",
        "ejAAAQFAAgAAAAhIAA==",
    ]


def test_grr_permanent_response_derivation_by_hand() -> None:
    """The GRR PRR is an exact Bernoulli(p₁) on the stream's first word, then randrange."""
    m = build("memo-grr", 1.0, 5, 3.0)
    for value in range(5):
        info = prr_info("app.theme", 3, value)
        stream = hashlib.shake_256(hmac.digest(SECRET, info, hashlib.sha256)).digest(64)
        num, den = m.permanent.p.as_integer_ratio()  # p₁ = num / 2^t
        t = den.bit_length() - 1
        assert t <= 64  # one getrandbits(t) call compares all of p₁'s bits
        nbytes = (t + 7) // 8
        u = int.from_bytes(stream[:nbytes], "big") >> (8 * nbytes - t)
        if u < num:
            expected = value
        else:
            other = next(b >> 6 for b in stream[nbytes:] if b >> 6 < 4)  # randrange(4)
            expected = other + (other >= value)
        assert m.permanent_response(value, SECRET, "app.theme", 3) == {"v": expected}


@pytest.mark.parametrize("name", MEMO)
def test_same_secret_same_permanent_response_fresh_instantaneous_noise(name: str) -> None:
    m = build(name, 1.0, 8, 3.0)
    secret = new_secret()
    prr = m.permanent_response(4, secret, "app.page", 2)
    for _ in range(20):
        assert m.permanent_response(4, secret, "app.page", 2) == prr
    # A "restart": the mechanism rebuilt from its stored parameters.
    rebuilt = from_params(json.loads(json.dumps(m.params())))
    assert rebuilt == m and rebuilt.permanent_response(4, secret, "app.page", 2) == prr  # type: ignore[attr-defined]
    # The reports themselves vary (fresh IRR), and are valid payloads of the base format.
    reports = {json.dumps(m.perturb_memoized(4, secret, "app.page", 2)) for _ in range(50)}
    assert len(reports) > 1
    for r in reports:
        assert m.check_payload(json.loads(r)) == json.loads(r)


def test_permanent_response_survives_a_real_process_restart() -> None:
    code = (
        "import json, sys; from client_sdk import mechanisms;"
        "m = mechanisms.create('memo-oue', epsilon=1.0, domain_size=40, permanent_epsilon=4.0);"
        "s = bytes.fromhex(sys.argv[1]);"
        "print(json.dumps([m.permanent_response(v, s, 'app.page', 7) for v in range(40)]))"
    )
    secret = new_secret()
    m = build("memo-oue", 1.0, 40, 4.0)
    here = [m.permanent_response(v, secret, "app.page", 7) for v in range(40)]
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run(
            [sys.executable, "-c", code, secret.hex()],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
            env=env,
        )
        assert json.loads(out.stdout) == here


def test_permanent_response_depends_on_secret_metric_version_and_value() -> None:
    m = build("memo-oue", 1.0, 64, 2.0)
    base = m.permanent_response(1, SECRET, "a", 1)
    others = [
        m.permanent_response(1, bytes(32), "a", 1),
        m.permanent_response(1, SECRET, "b", 1),
        m.permanent_response(1, SECRET, "a", 2),
        m.permanent_response(2, SECRET, "a", 1),
    ]
    # 64 bits at ε∞ = 2: two independent PRRs coincide with negligible probability.
    assert all(o != base for o in others)


def test_permanent_responses_of_different_secrets_are_independent() -> None:
    """Over many devices the PRR has the law of GRR at ε∞, independently across values."""
    m = build("memo-grr", 0.5, 3, 1.0)
    k, keep = 3, m.permanent.p
    law = [keep if y == 0 else (1 - keep) / 2 for y in range(k)]
    rng = random.Random(3)
    n = 9_000
    pairs: Counter[tuple[int, int]] = Counter()
    for _ in range(n):
        secret = rng.getrandbits(256).to_bytes(32, "big")
        pairs[
            (
                m.permanent_response(0, secret, "m", 1)["v"],
                m.permanent_response(0, secret, "m", 2)["v"],  # another version
            )
        ] += 1
    # The joint law of (PRR of version 1, PRR of version 2) is the product law.
    observed = [pairs[(a, b)] for a in range(k) for b in range(k)]
    expected = [n * law[a] * law[b] for a in range(k) for b in range(k)]
    assert chisquare(observed, expected).pvalue > 1e-4


def test_instantaneous_response_given_a_device_is_the_irr_channel() -> None:
    """With one secret, reports of one value are the IRR applied to one fixed PRR."""
    m = build("memo-grr", 1.0, 4, 3.0)
    prr = m.permanent_response(2, SECRET, "m", 1)["v"]
    rng = random.Random(8)
    n = 20_000
    counts = Counter(m.perturb_memoized(2, SECRET, "m", 1, rng)["v"] for _ in range(n))
    keep = m.irr_keep
    expected = [n * (keep if y == prr else (1 - keep) / 3) for y in range(4)]
    assert chisquare([counts[y] for y in range(4)], expected).pvalue > 1e-4


def test_plain_perturb_is_a_fresh_device_and_follows_the_scripted_draws() -> None:
    """perturb(v, rng): a 256-bit secret from rng, then the IRR's draws from rng."""
    m = build("memo-grr", 1.0, 5, 3.0)
    secret_int = int.from_bytes(SECRET, "big")
    prr = m.permanent_response(2, SECRET)["v"]
    # IRR keeps: a uniform U = 0 is below p₂.
    rng = ScriptedRandom([secret_int, 0])
    assert m.perturb(2, rng) == {"v": prr}
    t = m.irr_keep.as_integer_ratio()[1].bit_length() - 1  # p₂'s binary digits
    assert rng.done() and rng.calls == ["getrandbits(256)", f"getrandbits({t})"]
    # IRR moves: U all ones, then randrange(4) picks the first value other than the PRR.
    rng = ScriptedRandom([secret_int, "all-ones", 0])
    assert m.perturb(2, rng) == {"v": 0 if prr != 0 else 1}
    assert rng.done()
    # Seeded generators reproduce reports exactly.
    assert [m.perturb(1, random.Random(5)) for _ in range(3)] == [
        m.perturb(1, random.Random(5)) for _ in range(3)
    ]


# -- parameters --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "cls", "base"),
    [
        ("memo-grr", MemoizedGRR, GeneralizedRR),
        ("memo-sue", MemoizedSUE, SymmetricUnaryEncoding),
        ("memo-oue", MemoizedOUE, OptimizedUnaryEncoding),
    ],
)
def test_create_params_round_trip_and_permanent_mechanism(
    name: str, cls: type[Memoized], base: type
) -> None:
    m = build(name, 1.5, 9, 4.0)
    assert type(m) is cls and mechanisms.MECHANISMS[name] is cls
    assert m.params() == {
        "mechanism": name,
        "epsilon": 1.5,
        "domain_size": 9,
        "permanent_epsilon": 4.0,
    }
    assert from_params(m.params()) == m
    assert type(m.permanent) is base
    assert m.permanent.epsilon == 4.0 and m.permanent.domain_size == 9
    with pytest.raises(AttributeError):
        m.permanent_epsilon = 5.0  # type: ignore[misc]


@pytest.mark.parametrize("name", MEMO)
@pytest.mark.parametrize(("eps", "k"), [(0.1, 2), (1.0, 16), (3.0, 1000), (19.0, 5)])
def test_one_report_is_the_base_mechanism_at_epsilon_one(name: str, eps: float, k: int) -> None:
    """p₂ is solved so the composed channel is the base mechanism at ε₁: same variance."""
    m = build(name, eps, k, min(eps + 2.0, 20.0))
    base = create(name.removeprefix("memo-"), epsilon=eps, domain_size=k)
    assert m.variance_star() == pytest.approx(base.variance_star(), rel=1e-9)
    assert m.p == pytest.approx(base.p, rel=1e-9) and m.q == pytest.approx(base.q, rel=1e-9)
    p, q = m.composed_probabilities()
    assert (float(p), float(q)) == (m.p, m.q)
    assert m.privacy_ratio() <= math.exp(eps)
    assert m.realized_epsilon == pytest.approx(eps, rel=1e-9)
    # Near ε = 20 a float probability resolves e^ε only to ~5·10⁻⁸ (base.shade_down).
    assert m.realized_permanent_epsilon == pytest.approx(m.permanent_epsilon, rel=1e-7)


def test_memo_oue_reports_have_p_star_one_half_exactly() -> None:
    m = build("memo-oue", 1.0, 32, 4.0)
    assert m.composed_probabilities()[0] == 0.5


@pytest.mark.parametrize("name", MEMO)
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "needs permanent_epsilon"),
        ({"permanent_epsilon": 1.0}, r"permanent_epsilon \(ε∞\) must be finite and in"),
        ({"permanent_epsilon": 0.5}, r"\[1\.0001, 20\.0\]"),
        ({"permanent_epsilon": 1.00005}, "must be finite and in"),
        ({"permanent_epsilon": 20.5}, "must be finite and in"),
        ({"permanent_epsilon": math.inf}, "must be finite and in"),
        ({"permanent_epsilon": math.nan}, "must be finite and in"),
        ({"permanent_epsilon": True}, "must be a number"),
        ({"permanent_epsilon": "3"}, "must be a number"),
        ({"permanent_epsilon": 3.0, "g": 4}, "takes no option"),
    ],
)
def test_bad_parameters_are_rejected_with_the_range(
    name: str, options: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        create(name, epsilon=1.0, domain_size=8, **options)


def test_epsilon_one_below_the_largest_permanent_epsilon() -> None:
    with pytest.raises(ValueError, match="must be finite and in"):
        build("memo-grr", 20.0, 4, 20.0)
    m = build("memo-grr", 19.9999, 4, 20.0)
    assert 0.25 < m.irr_keep < 1.0


@pytest.mark.parametrize("name", MEMO)
def test_secret_and_names_are_validated(name: str) -> None:
    m = build(name)
    with pytest.raises(ValueError, match="at least 16 bytes"):
        m.perturb_memoized(1, b"0123456789", "m", 1)
    with pytest.raises(ValueError, match="must be bytes"):
        m.perturb_memoized(1, None, "m", 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="outside"):
        m.perturb_memoized(6, SECRET, "m", 1)
    with pytest.raises(ValueError, match="version"):
        m.perturb_memoized(1, SECRET, "m", 1.0)  # type: ignore[arg-type]
    assert len(new_secret()) == 32 and new_secret() != new_secret()


def test_auto_with_permanent_epsilon_picks_a_memoized_mechanism() -> None:
    small = create("auto", epsilon=1.0, domain_size=4, permanent_epsilon=3.0)
    large = create("auto", epsilon=1.0, domain_size=200, permanent_epsilon=3.0)
    assert small.name == "memo-grr" and large.name == "memo-oue"
    reason = mechanisms.choose(1.0, 200, 3.0).reason
    assert "memo-oue" in reason and "memo-grr would have" in reason
    with pytest.raises(ValueError, match="auto takes no options but permanent_epsilon"):
        create("auto", epsilon=1.0, domain_size=4, g=3)


def test_rappor_parameters_and_its_formulas() -> None:
    """RAPPOR (CCS 2014) §3: ε∞ = 2h·ln((1−f/2)/(f/2)); ε₁ = h·ln(q*(1−p*)/(p*(1−q*)))."""
    m = build("memo-sue", 1.0, 10, 3.0)
    r = m.rappor_parameters()
    f, p, q, h = r["f"], r["p"], r["q"], r["h"]
    assert h == 1 and p + q == 1
    assert 2 * h * math.log((1 - f / 2) / (f / 2)) == pytest.approx(3.0, rel=1e-9)
    q_star = 0.5 * f * (p + q) + (1 - f) * q  # RAPPOR's q*: Pr[report 1 | true bit 1]
    p_star = 0.5 * f * (p + q) + (1 - f) * p  # RAPPOR's p*: Pr[report 1 | true bit 0]
    assert (q_star, p_star) == pytest.approx((m.p, m.q), rel=1e-12)
    eps1 = h * math.log(q_star * (1 - p_star) / (p_star * (1 - q_star)))
    assert eps1 == pytest.approx(1.0, rel=1e-9)


def test_variance_with_one_report_per_device_is_the_base_formula() -> None:
    m = build("memo-oue", 1.0, 16, 3.0)
    for f in (0.0, 0.2):
        assert m.variance(1000, f) == m.variance(1000, f, reports_per_device=1)
        assert m.variance(1000, f, reports_per_device=3) > m.variance(1000, f)
    for bad in (0, 0.5, math.inf, True):
        with pytest.raises(ValueError, match="reports_per_device"):
            m.variance(1000, 0.1, reports_per_device=bad)


def test_privacy_bounds_state_both_bounds_and_the_trade_off() -> None:
    bounds = build("memo-grr", 1.0, 4, 4.0).privacy_bounds()
    assert bounds["per_report"] == 1.0 and bounds["unlimited_same_value"] == 4.0
    assert bounds["memoized"] is True
    assert "recognise" in bounds["explanation"] and "min(m·1, 4)" in bounds["explanation"]


# -- the wire format -----------------------------------------------------------------------

DOMAIN = [f"v{i}" for i in range(6)]


def budgeted(**fields: object) -> dict[str, object]:
    """A spec over :data:`DOMAIN` at ε = 1 with ``fields`` and :data:`BUDGET`."""
    return {"domain": DOMAIN, "epsilon": 1.0, **fields, "budget": BUDGET}


@pytest.mark.parametrize(
    ("mechanism", "expected"),
    [
        ("auto", "memo-grr"),
        ("grr", "memo-grr"),
        ("sue", "memo-sue"),
        ("oue", "memo-oue"),
        ("memo-oue", "memo-oue"),
    ],
)
def test_spec_longitudinal_resolves_to_the_memoized_mechanism(
    mechanism: str, expected: str
) -> None:
    spec = budgeted(mechanism=mechanism, longitudinal={"permanent_epsilon": 3})
    d = wire.parse_spec("app.mode", spec, version=4)
    assert d.mechanism.name == expected and d.longitudinal
    assert d.mechanism.params()["permanent_epsilon"] == 3.0
    again = wire.MetricDefinition.from_dict(json.loads(json.dumps(d.to_dict())))
    assert again.mechanism == d.mechanism and again.same_parameters(d)
    assert d.privacy_bounds()["unlimited_same_value"] == 3.0


def test_spec_memo_mechanism_with_option_is_the_same_metric() -> None:
    by_option = wire.parse_spec(
        "m", budgeted(mechanism="memo-grr", options={"permanent_epsilon": 3})
    )
    by_flag = wire.parse_spec("m", budgeted(mechanism="grr", longitudinal={"permanent_epsilon": 3}))
    assert by_option.same_parameters(by_flag)
    plain = wire.parse_spec("m", {"domain": DOMAIN, "epsilon": 1.0, "mechanism": "grr"})
    assert not plain.same_parameters(by_flag) and not plain.longitudinal


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"longitudinal": 3}, 'longitudinal must be {"permanent_epsilon": ε∞}'),
        ({"longitudinal": {"permanent_epsilon": 3, "x": 1}}, "longitudinal must be"),
        ({"longitudinal": {"permanent_epsilon": "3"}}, "must be a finite number"),
        ({"longitudinal": {"permanent_epsilon": 0.5}}, r"permanent_epsilon \(ε∞\) must be"),
        ({"longitudinal": {"permanent_epsilon": 3}, "mechanism": "olh"}, "olh has no memoized"),
        (
            {
                "longitudinal": {"permanent_epsilon": 3},
                "mechanism": "memo-grr",
                "options": {"permanent_epsilon": 4},
            },
            "differs",
        ),
        ({"mechanism": "memo-grr"}, "needs permanent_epsilon"),
        ({"longitudinal": {"permanent_epsilon": 3}}, "needs a budget"),
        ({"mechanism": "memo-oue", "options": {"permanent_epsilon": 3}}, "needs a budget"),
    ],
)
def test_spec_longitudinal_errors(extra: dict[str, object], message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        wire.parse_spec("m", {"domain": DOMAIN, "epsilon": 1.0, **extra})


def test_build_report_needs_the_secret_for_a_longitudinal_metric() -> None:
    d = wire.parse_spec("app.mode", budgeted(longitudinal={"permanent_epsilon": 4}))
    with pytest.raises(ValueError, match="longitudinal"):
        wire.build_report(d, "v2")
    with pytest.raises(ValueError, match="at least 16 bytes"):
        wire.build_report(d, "v2", secret=b"short")
    m = d.mechanism
    assert isinstance(m, Memoized)
    rng = random.Random(4)
    report = wire.build_report(d, "v2", rng, secret=SECRET)
    assert set(report) == set(wire.REPORT_FIELDS) and report["version"] == d.version
    # The report's PRR is the one of (secret, metric name, version, value).
    expected = m.perturb_memoized(2, SECRET, "app.mode", d.version, random.Random(4))
    assert report["payload"] == expected
    definition, _, payload = wire.check_report(report, lambda name, v: d)
    assert payload == report["payload"]
    # A plain metric ignores the secret.
    plain = wire.parse_spec("app.plain", {"domain": DOMAIN, "epsilon": 1.0})
    assert (
        wire.build_report(plain, "v1", random.Random(1), secret=SECRET)["payload"]
        == (wire.build_report(plain, "v1", random.Random(1))["payload"])
    )
    bounds = plain.privacy_bounds()
    assert bounds["per_report"] == 1.0 and bounds["unlimited_same_value"] is None


def test_a_memoized_metrics_budget_is_part_of_its_version() -> None:
    """Its intervals rest on the budget, so a budget change makes a new version; a plain
    metric's budget is a device rule only and keeps the version."""
    spec = {"domain": DOMAIN, "epsilon": 1.0, "longitudinal": {"permanent_epsilon": 3}}
    one = wire.parse_spec("m", {**spec, "budget": BUDGET})
    two = wire.parse_spec("m", {**spec, "budget": {"reports_per_period": 3, "period": "day"}})
    assert not one.same_parameters(two)
    plain = {"domain": DOMAIN, "epsilon": 1.0}
    assert wire.parse_spec("m", {**plain, "budget": BUDGET}).same_parameters(
        wire.parse_spec("m", plain)
    )


@pytest.mark.parametrize(
    ("period", "start", "end", "periods"),
    [
        # UTC periods overlapped, plus one for a device clock off by less than a period.
        ("day", "2026-11-25T10:00", "2026-11-25T11:00", 2),
        ("day", "2026-11-20T00:00", "2026-11-25T23:59", 7),
        ("week", "2026-11-25T10:00", "2026-11-25T11:00", 2),  # a Wednesday
        ("week", "2026-11-23T00:30", "2026-11-30T00:10", 3),  # Monday to next Monday
        ("month", "2026-11-15T00:00", "2026-11-16T00:00", 2),
        ("month", "2026-11-01T12:00", "2027-01-31T12:00", 4),
    ],
)
def test_budget_bounds_the_reports_one_device_can_send(
    period: str, start: str, end: str, periods: int
) -> None:
    from datetime import UTC, datetime

    budget = wire.Budget(3, period)
    t0, t1 = (datetime.fromisoformat(x).replace(tzinfo=UTC).timestamp() for x in (start, end))
    assert budget.periods(t0, t1) == periods
    assert budget.max_reports(t0, t1) == 3 * periods

"""Implausible reports: the range of ones of a unary report, checked in exact arithmetic.

``ones_range`` sums the binomial law in 40-digit decimals; here the same tails are summed
in rationals (``Fraction``, from the very floats p* and q* the mechanism samples with),
so the claim "an honest report is refused with probability at most 10⁻⁹" is checked
exactly, as is that the range is the narrowest with that property. The SDK's own
``perturb`` is then run (seeded) and never lands outside the range, and its counts of
ones follow the law the range is computed from.
"""

from __future__ import annotations

import base64
import math
import random
from fractions import Fraction
from typing import Any

import pytest

from client_sdk import mechanisms
from client_sdk.mechanisms import FrequencyOracle
from client_sdk.mechanisms.plausibility import NEGLIGIBLE, ones_range
from client_sdk.mechanisms.unary import UnaryEncoding

HALF = Fraction(NEGLIGIBLE) / 2


def _make(name: str, epsilon: float, k: int) -> UnaryEncoding:
    options: dict[str, Any] = {"permanent_epsilon": epsilon + 2} if name.startswith("memo") else {}
    made = mechanisms.create(name, epsilon=epsilon, domain_size=k, **options)
    assert isinstance(made, UnaryEncoding)
    return made


def exact_law(k: int, p: float, q: float) -> list[Fraction]:
    """Pr[X = c], c = 0..k, X = Bernoulli(p) + Binomial(k − 1, q), in rationals."""
    fp, fq = Fraction(p), Fraction(q)
    n = k - 1
    y = [math.comb(n, j) * fq**j * (1 - fq) ** (n - j) for j in range(n + 1)]
    return [(1 - fp) * (y[c] if c <= n else 0) + fp * (y[c - 1] if c else 0) for c in range(k + 1)]


CASES = [
    (name, epsilon, k)
    for name in ("oue", "sue", "memo-oue", "memo-sue")
    for epsilon in (0.5, 1.0, 4.0)
    for k in (2, 8, 17, 68, 200)
] + [("oue", 20.0, 2), ("oue", 20.0, 64), ("sue", 0.0001, 64), ("oue", 0.5, 400)]


@pytest.mark.parametrize(("name", "epsilon", "k"), CASES)
def test_the_range_holds_all_but_1e9_of_honest_reports_and_no_more(
    name: str, epsilon: float, k: int
) -> None:
    m = _make(name, epsilon, k)
    lo, hi = m.plausible_ones()
    law = exact_law(k, m.p, m.q)
    assert sum(law) == 1
    below, above = sum(law[:lo]), sum(law[hi + 1 :])
    assert below <= HALF and above <= HALF
    assert below + above <= Fraction(NEGLIGIBLE)  # the false refusals of honest reports
    # The narrowest such range: one count more refused on either side breaks the bound.
    assert lo == k + 1 or below + law[lo] > HALF
    assert hi == -1 or above + law[hi] > HALF


def test_all_zero_and_all_one_are_refused_exactly_where_negligible() -> None:
    assert _make("oue", 1.0, 8).plausible_ones() == (0, 8)  # both plausible at k = 8
    for k in (8, 16, 17, 67, 68):
        m = _make("oue", 1.0, k)
        law = exact_law(k, m.p, m.q)
        lo, hi = m.plausible_ones()
        assert (hi < k) == (law[k] <= HALF)  # all ones refused iff negligible
        assert (lo > 0) == (law[0] <= HALF)  # all zeros likewise
    assert _make("oue", 1.0, 16).plausible_ones()[1] == 16  # all ones still plausible
    assert _make("oue", 1.0, 17).plausible_ones()[1] == 16  # not any more
    assert _make("oue", 1.0, 67).plausible_ones()[0] == 0
    assert _make("oue", 1.0, 68).plausible_ones()[0] == 1


def _payload(m: UnaryEncoding, ones: int) -> dict[str, Any]:
    bits = ((1 << ones) - 1) << (8 * m.nbytes - m.domain_size)  # the last ``ones`` values
    return m.check_payload({"b": base64.b64encode(bits.to_bytes(m.nbytes, "big")).decode()})


@pytest.mark.parametrize("name", ["oue", "sue", "memo-oue", "memo-sue"])
def test_implausible_names_the_count_and_the_range(name: str) -> None:
    m = _make(name, 1.0, 128)
    lo, hi = m.plausible_ones()
    assert 0 < lo < hi < 128
    for ones, reason in ((128, "too_many_ones"), (hi + 1, "too_many_ones"), (0, "too_few_ones")):
        found = m.implausible(_payload(m, ones))
        assert found is not None and found.reason == reason
        assert f"implausible under {name}" in found.detail
        assert f"{ones} of 128 bits are set" in found.detail and f"{lo} to {hi}" in found.detail
    for ones in (lo, hi, (lo + hi) // 2):
        assert m.implausible(_payload(m, ones)) is None
    if lo > 1:
        assert m.implausible(_payload(m, lo - 1)) is not None


@pytest.mark.parametrize(
    ("name", "k", "n"), [("oue", 64, 40_000), ("sue", 64, 40_000), ("oue", 1024, 4_000)]
)
def test_the_sdks_own_reports_are_never_refused_and_follow_the_law(
    name: str, k: int, n: int
) -> None:
    m = _make(name, 1.0, k)
    rng = random.Random(13)
    counts = []
    for i in range(n):
        payload = m.perturb(i % k, rng)
        assert m.implausible(payload) is None
        counts.append(int.from_bytes(base64.b64decode(payload["b"]), "big").bit_count())
    # The counts follow B + Bin(k − 1, q*): their mean within 5 standard errors of p + (k−1)q.
    mean = m.p + (k - 1) * m.q
    variance = m.p * (1 - m.p) + (k - 1) * m.q * (1 - m.q)
    assert abs(sum(counts) / n - mean) <= 5 * math.sqrt(variance / n)
    observed = sum((c - mean) ** 2 for c in counts) / n
    # The variance of the sample variance: (μ₄ − σ⁴)/n ≤ 3σ⁴/n for these near-normal sums.
    assert abs(observed - variance) <= 5 * math.sqrt(3 / n) * variance


def test_memoized_reports_of_many_devices_are_never_refused() -> None:
    m = _make("memo-oue", 1.0, 256)
    rng = random.Random(7)
    for device in range(3_000):
        secret = rng.getrandbits(256).to_bytes(32, "big")
        for _ in range(2):  # the same permanent response, two instantaneous ones
            payload = m.perturb_memoized(device % 256, secret, "app.page", 1, rng)
            assert m.implausible(payload) is None


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("rr", {}),
        ("grr", {}),
        ("olh", {}),
        ("blh", {}),
        ("hr", {}),
        ("ss", {}),
        ("memo-grr", {"permanent_epsilon": 3.0}),
    ],
)
def test_mechanisms_without_a_negligible_region_refuse_nothing(
    name: str, options: dict[str, Any]
) -> None:
    k = 2 if name == "rr" else 64
    m: FrequencyOracle = mechanisms.create(name, epsilon=1.0, domain_size=k, **options)
    rng = random.Random(3)
    payloads = [m.max_payload(), *(m.perturb(v % k, rng) for v in range(200))]
    assert all(m.implausible(m.check_payload(p)) is None for p in payloads)


def test_numeric_mechanisms_refuse_nothing() -> None:
    for name in mechanisms.NUMERIC_NAMES:
        if name == "auto":
            continue
        m = mechanisms.create_numeric(name, epsilon=1.0)
        rng = random.Random(5)
        assert all(m.implausible(m.perturb(x / 25 - 1, rng)) is None for x in range(51))


def test_the_range_is_computed_once_per_mechanism() -> None:
    ones_range.cache_clear()
    for _ in range(3):  # new objects each time, as the registry makes after a change
        _make("oue", 2.5, 300).plausible_ones()
        _make("memo-oue", 2.5, 300).plausible_ones()
    info = ones_range.cache_info()
    assert (info.misses, info.hits) == (2, 4)


def test_bad_parameters_are_refused() -> None:
    for k, p, q in ((1, 0.5, 0.2), (8, 0.0, 0.2), (8, 0.5, 1.0)):
        with pytest.raises(ValueError, match="need k >= 2"):
            ones_range(k, p, q)


def test_the_check_s_decoded_bits_serve_only_the_payload_it_checked() -> None:
    """``implausible`` reuses the bits ``check_payload`` just decoded (one base64 decode a
    report in the collector, issue 27), but only for that very payload, in that thread:
    a payload checked elsewhere, or not checked at all, is judged on its own bits."""
    import threading

    m = _make("oue", 1.0, 128)
    lo, hi = m.plausible_ones()
    full, fine = _payload(m, 128), _payload(m, (lo + hi) // 2)  # checked: fine last
    assert m.implausible(fine) is None
    assert m.implausible(full) is not None  # not the last checked: decoded itself
    unchecked = {"b": base64.b64encode(bytes([255]) * m.nbytes).decode()}
    assert m.implausible(unchecked) is not None
    assert m.implausible(_payload(m, 0)) is not None  # the check's own bits, just decoded
    found: list[object] = []
    other = threading.Thread(target=lambda: found.append(m.implausible(_payload(m, lo))))
    m.check_payload(full)  # this thread's last check: all ones
    other.start()
    other.join()
    assert found == [None]  # the other thread's check, not this one's, decided there
    assert m.implausible(full) is not None and m.implausible(fine) is None

"""ε of memoized mechanisms by exact enumeration: one report, repeated reports, the PRR.

The distributions are written from RAPPOR's definitions (Erlingsson et al., CCS 2014, §3):
a permanent response (PRR) drawn once from the base mechanism at ε∞, then for each
report an instantaneous response (IRR) drawn from it. Only the float probabilities the
mechanism samples with (p₁, q₁ of the PRR, p₂ of the IRR) are read from the objects.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from fractions import Fraction

import pytest
from scipy.stats import chisquare
from test_privacy import grr_law, unary_law

from client_sdk.mechanisms import Memoized, create

Output = tuple[int, ...]


def build(name: str, k: int, eps: float, permanent: float) -> Memoized:
    m = create(name, epsilon=eps, domain_size=k, permanent_epsilon=permanent)
    assert isinstance(m, Memoized)
    return m


def prr_law(m: Memoized, v: int) -> dict[Output, Fraction]:
    """Law of the PRR of value v: GRR or a unary encoding at ε∞."""
    k = m.domain_size
    if m.name == "memo-grr":
        return grr_law(Fraction(m.permanent.p), v, k)
    return unary_law(Fraction(m.permanent.p), Fraction(m.permanent.q), v, k)


def irr(m: Memoized, s: Output, y: Output) -> Fraction:
    """Pr[report s | PRR y]: k-RR on the value, or each bit kept w.p. p₂."""
    p2, k = Fraction(m.irr_keep), m.domain_size
    if m.name == "memo-grr":
        return p2 if s == y else (1 - p2) / (k - 1)
    pr = Fraction(1)
    for a, b in zip(s, y, strict=True):
        pr *= p2 if a == b else 1 - p2
    return pr


def reports_law(m: Memoized, v: int, r: int) -> dict[tuple[Output, ...], Fraction]:
    """Joint law of r reports of value v by one device (one PRR, r independent IRRs)."""
    prr = prr_law(m, v)
    outputs = list(prr)
    law: dict[tuple[Output, ...], Fraction] = {}
    for seq in itertools.product(outputs, repeat=r):
        law[seq] = sum(
            (
                py * math.prod((irr(m, s, y) for s in seq), start=Fraction(1))
                for y, py in prr.items()
            ),
            start=Fraction(0),
        )
    return law


def worst_ratio(laws: list[dict[tuple[Output, ...], Fraction]]) -> Fraction:
    return max(
        laws[v][y] / laws[w][y]
        for v in range(len(laws))
        for w in range(len(laws))
        if v != w
        for y in laws[v]
    )


def supports(m: Memoized, s: Output, u: int) -> bool:
    return s[0] == u if m.name == "memo-grr" else s[u] == 1


CASES = [
    ("memo-grr", 3, 1.0, 3.0),
    ("memo-grr", 5, 0.5, 1.0),
    ("memo-grr", 4, 2.0, 8.0),
    ("memo-grr", 2, 1.0, 1.5),
    ("memo-sue", 3, 1.0, 3.0),
    ("memo-sue", 4, 0.5, 4.0),
    ("memo-oue", 3, 1.0, 3.0),
    ("memo-oue", 4, 2.0, 2.5),
]


@pytest.mark.parametrize(("name", "k", "eps", "permanent"), CASES)
def test_single_report_worst_ratio_is_e_to_the_epsilon_one(
    name: str, k: int, eps: float, permanent: float
) -> None:
    m = build(name, k, eps, permanent)
    laws = [reports_law(m, v, 1) for v in range(k)]
    for law in laws:
        assert sum(law.values()) == 1
    # p*, q* are exactly the support probabilities of one report.
    p, q = m.composed_probabilities()
    for v in range(k):
        for u in range(k):
            mass = sum(pr for (s,), pr in laws[v].items() if supports(m, s, u))
            assert mass == (p if u == v else q)
    worst = worst_ratio(laws)  # type: ignore[arg-type]
    assert worst == m.privacy_ratio()
    assert worst <= Fraction(math.exp(eps))
    assert math.log(worst) == pytest.approx(eps, rel=1e-9)
    assert worst > Fraction(math.exp(eps * (1 - 1e-6)))  # tight: a smaller ε fails


@pytest.mark.parametrize(("name", "k", "eps", "permanent"), CASES)
def test_permanent_response_worst_ratio_is_e_to_the_epsilon_infinity(
    name: str, k: int, eps: float, permanent: float
) -> None:
    m = build(name, k, eps, permanent)
    laws = [prr_law(m, v) for v in range(k)]
    worst = worst_ratio(laws)  # type: ignore[arg-type]
    assert worst == m.permanent_privacy_ratio()
    assert worst <= Fraction(math.exp(permanent))
    assert math.log(worst) == pytest.approx(permanent, rel=1e-9)


@pytest.mark.parametrize(
    ("name", "k", "eps", "permanent", "most"),
    [("memo-grr", 3, 1.0, 1.5, 4), ("memo-grr", 2, 1.0, 2.0, 6), ("memo-oue", 2, 1.0, 1.8, 3)],
)
def test_repeated_reports_of_one_value_never_exceed_epsilon_infinity(
    name: str, k: int, eps: float, permanent: float, most: int
) -> None:
    """r reports of an unchanged value: ε_r ≤ min(r·ε₁, ε∞), growing with r towards ε∞."""
    m = build(name, k, eps, permanent)
    previous = Fraction(1)
    for r in range(1, most + 1):
        worst = worst_ratio([reports_law(m, v, r) for v in range(k)])
        assert worst <= m.permanent_privacy_ratio()
        assert worst <= Fraction(math.exp(r * eps))
        assert worst >= previous  # more reports never reveal less
        previous = worst
    # Sequential composition alone would allow most·ε₁ > ε∞; memoization caps it.
    assert most * eps > permanent
    assert math.log(previous) > eps  # and repeated reports do reveal more than one


@pytest.mark.parametrize(
    ("name", "k", "eps", "permanent", "r"),
    [("memo-grr", 3, 1.0, 2.0, 3), ("memo-grr", 2, 0.5, 3.0, 4), ("memo-sue", 2, 1.0, 2.0, 3)],
)
def test_repeated_report_variance_formula_is_exact(
    name: str, k: int, eps: float, permanent: float, r: int
) -> None:
    """Var of the support count of u from one device's r reports, by enumeration, against
    ``variance(n, f, reports_per_device=r)``."""
    m = build(name, k, eps, permanent)
    u = 0
    var: dict[bool, Fraction] = {}
    for v, has in ((0, True), (1, False)):
        law = reports_law(m, v, r)
        mean = sum(
            (pr * sum(supports(m, s, u) for s in seq) for seq, pr in law.items()), Fraction(0)
        )
        second = sum(
            (pr * sum(supports(m, s, u) for s in seq) ** 2 for seq, pr in law.items()), Fraction(0)
        )
        var[has] = second - mean**2
    p, q = m.composed_probabilities()
    devices = 250
    n = devices * r
    for f in (Fraction(0), Fraction(2, 5), Fraction(1)):
        exact = devices * (f * var[True] + (1 - f) * var[False]) / (n**2 * (p - q) ** 2)
        got = m.variance(n, float(f), reports_per_device=r)
        assert got == pytest.approx(float(exact), rel=1e-9)


@pytest.mark.parametrize(
    ("name", "k", "eps", "permanent"),
    [("memo-grr", 4, 1.0, 3.0), ("memo-sue", 3, 1.0, 2.0), ("memo-oue", 3, 2.0, 4.0)],
)
def test_plain_perturb_samples_the_composed_distribution(
    name: str, k: int, eps: float, permanent: float
) -> None:
    """perturb(v, rng) draws a fresh device each time: its reports follow the composed law."""
    m = build(name, k, eps, permanent)
    law = reports_law(m, 1, 1)
    rng = random.Random(k)
    n = 20_000
    counts: Counter[Output] = Counter()
    for _ in range(n):
        payload = m.perturb(1, rng)
        counts[
            tuple(int(m.supports(payload, u)) for u in range(k))
            if m.name != "memo-grr"
            else (payload["v"],)
        ] += 1
    outputs = [seq[0] for seq in law]
    observed = [counts[y] for y in outputs]
    expected = [float(law[(y,)]) * n for y in outputs]
    assert chisquare(observed, expected).pvalue > 1e-4

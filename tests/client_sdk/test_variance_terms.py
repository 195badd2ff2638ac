"""Which way the first variance term alone errs, per mechanism (docs/concepts/formulas.md).

Var[f̂] = q*(1−q*)/(n(p*−q*)²) + f(1−p*−q*)/(n(p*−q*)): the second term has the sign of
1 − p* − q*. ``variance(n)`` is the first term, ``variance(n, f)`` both. The ranges
quoted in docs/concepts/formulas.md (first term / exact variance) are pinned here on its grid.
"""

from __future__ import annotations

import pytest

from client_sdk.mechanisms import create

KS = (4, 16, 64, 256, 1024)
EPSILONS = (0.5, 1.0, 2.0, 4.0)
FREQUENCIES = (0.05, 0.1, 0.25, 0.5)


def ratios(name: str, ks: tuple[int, ...] = KS, **options: float) -> list[float]:
    """First term over the exact variance on the grid."""
    out = []
    for k in ks:
        for eps in EPSILONS:
            m = create(name, epsilon=eps, domain_size=k, **options)
            out += [float(m.variance(1) / m.variance(1, f)) for f in FREQUENCIES]
    return out


@pytest.mark.parametrize(
    ("name", "low", "high"),
    [("grr", 0.037, 0.983), ("oue", 0.131, 0.997), ("olh", 0.076, 0.995)],
)
def test_the_first_term_understates_for_grr_oue_olh(name: str, low: float, high: float) -> None:
    found = ratios(name)
    assert all(r < 1.0 for r in found)
    assert low <= min(found) < low + 0.01 and high - 0.01 < max(found) <= high


def test_the_first_term_understates_for_ss_except_near_s_equal_half_k() -> None:
    found = ratios("ss", ks=(16, 64, 256, 1024))
    assert all(r < 1.0 for r in found)
    assert 0.065 <= min(found) < 0.075
    # s = k/2 = 2 at k = 4, ε = 0.5: p* + q* > 1, the first term overstates a little.
    m = create("ss", epsilon=0.5, domain_size=4)
    assert m.p + m.q > 1.0
    assert 1.0 < m.variance(1) / m.variance(1, 0.5) < 1.03


@pytest.mark.parametrize("name", ["hr", "blh"])
def test_the_first_term_overstates_for_hr_and_blh(name: str) -> None:
    found = ratios(name)
    assert all(r > 1.0 for r in found)
    assert 1.002 < min(found) and 1.86 < max(found) < 1.88


@pytest.mark.parametrize("name", ["sue", "memo-sue"])
def test_the_first_term_is_exact_for_symmetric_mechanisms(name: str) -> None:
    options = {"permanent_epsilon": 8.0} if name.startswith("memo") else {}
    for r in ratios(name, **options):
        assert r == pytest.approx(1.0, rel=1e-9)
    rr = create("rr", epsilon=1.0, domain_size=2)
    assert rr.variance(1) == pytest.approx(rr.variance(1, 0.7), rel=1e-12)
    grr2 = create("grr", epsilon=1.0, domain_size=2)
    assert grr2.variance(1) == pytest.approx(grr2.variance(1, 0.7), rel=1e-12)


@pytest.mark.parametrize("name", ["memo-grr", "memo-oue"])
def test_memoized_single_reports_err_like_their_base(name: str) -> None:
    assert all(r < 1.0 for r in ratios(name, permanent_epsilon=8.0))

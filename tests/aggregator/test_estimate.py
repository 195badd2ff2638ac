"""The estimate object: fields, intervals, post-processing, serialisation, errors."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from aggregator import Counts, estimate, estimate_from_counts, norm_sub
from aggregator.stats.intervals import z_value
from aggregator.stats.postprocess import norm_sub_iterative
from client_sdk.mechanisms import create


def make(k: int = 4):  # type: ignore[no-untyped-def]
    m = create("oue", epsilon=1.0, domain_size=k)
    return m, estimate_from_counts(m, Counts(1000, np.array([400, 300, 250, 280][:k])))


def test_fields_follow_the_formulas() -> None:
    m, est = make()
    support = np.array([400, 300, 250, 280])
    f = (support / 1000 - m.q) / (m.p - m.q)
    np.testing.assert_allclose(est.frequencies, f, rtol=1e-12)
    var = m.q * (1 - m.q) / (1000 * (m.p - m.q) ** 2) + np.clip(f, 0, 1) * (1 - m.p - m.q) / (
        1000 * (m.p - m.q)
    )
    np.testing.assert_allclose(est.std_errors, np.sqrt(var), rtol=1e-12)
    # The score interval: the f whose own exact variance A + B·f explains f̂ at z,
    # (f̂ − f)² = z²(A + B f), solved by hand here.
    z = 1.959963984540054
    a_, b_ = m.q * (1 - m.q) / (1000 * (m.p - m.q) ** 2), (1 - m.p - m.q) / (1000 * (m.p - m.q))
    half = np.sqrt((2 * f + z * z * b_) ** 2 - 4 * (f * f - z * z * a_)) / 2
    centre = f + z * z * b_ / 2
    assert est.interval == "score"
    np.testing.assert_allclose(est.ci_low, centre - half, rtol=1e-12)
    np.testing.assert_allclose(est.ci_high, centre + half, rtol=1e-12)
    for bound in (est.ci_low, est.ci_high):
        np.testing.assert_allclose((f - bound) ** 2, z * z * m.variance(1000, bound), rtol=1e-9)
    assert est.n == 1000 and est.support_counts.tolist() == support.tolist()
    assert est.k == 4 and est.confidence == 0.95 and not est.simultaneous
    with pytest.raises(ValueError):
        est.frequencies[0] = 1.0  # read-only arrays


def test_simultaneous_band_uses_bonferroni() -> None:
    m = create("grr", epsilon=1.0, domain_size=10)
    counts = Counts(5000, np.full(10, 500))
    single = estimate_from_counts(m, counts)
    band = estimate_from_counts(m, counts, simultaneous=True)
    assert z_value(0.95, 10) == pytest.approx(2.8070337683438, rel=1e-9)
    for est, z in ((single, z_value(0.95)), (band, z_value(0.95, 10))):
        for bound in (est.ci_low, est.ci_high):  # score bounds at the Bonferroni z
            np.testing.assert_allclose(
                (est.frequencies - bound) ** 2, z * z * m.variance(5000, bound), rtol=1e-9
            )
    assert np.all(band.ci_high - band.ci_low > single.ci_high - single.ci_low)
    lo, hi = single.conf_int(alpha=0.05, simultaneous=True)
    np.testing.assert_allclose(lo, band.ci_low)


def test_norm_sub_is_the_simplex_projection() -> None:
    gen = np.random.default_rng(0)
    for _ in range(200):
        k = int(gen.integers(2, 60))
        f = gen.normal(1 / k, 0.2, k)
        fast, slow = norm_sub(f), norm_sub_iterative(f)
        np.testing.assert_allclose(fast, slow, atol=1e-10)
        assert fast.min() >= 0 and math.isclose(fast.sum(), 1.0, rel_tol=1e-12)
        # A projection: no point of the simplex is closer (check against random ones).
        for _ in range(5):
            w = gen.dirichlet(np.ones(k))
            assert np.sum((f - fast) ** 2) <= np.sum((f - w) ** 2) + 1e-12
    np.testing.assert_allclose(norm_sub([0.2, 0.3, 0.5]), [0.2, 0.3, 0.5])
    np.testing.assert_allclose(norm_sub([1.5, -0.2, -0.3]), [1.0, 0.0, 0.0])
    with pytest.raises(ValueError):
        norm_sub([np.nan, 1.0])


def test_norm_sub_is_reported_beside_the_unbiased_estimate() -> None:
    _, est = make()
    assert est.norm_sub.sum() == pytest.approx(1.0)
    assert not np.allclose(est.norm_sub, est.frequencies)
    row = est.to_dict()["estimates"][0]
    assert {"frequency", "norm_sub", "std_error", "ci_low", "ci_high", "support_count"} <= set(row)


def test_to_dict_and_summary() -> None:
    m = create("grr", epsilon=2.0, domain_size=3)
    est = estimate_from_counts(
        m, Counts(100, np.array([60, 30, 10])), labels=["light", "dark", "auto"]
    )
    d = json.loads(est.to_json())
    assert d["n"] == 100 and d["confidence"] == 0.95
    assert d["mechanism"] == {"mechanism": "grr", "epsilon": 2.0, "domain_size": 3}
    assert [e["value"] for e in d["estimates"]] == ["light", "dark", "auto"]
    text = est.summary()
    assert "grr ε=2 k=3" in text and "light" in text and "norm-sub" in text
    assert text.index("light") < text.index("dark") < text.index("auto")  # largest first
    assert "~0" in text  # 'auto' is not distinguishable from zero


def test_no_reports_gives_nulls() -> None:
    m = create("hr", epsilon=1.0, domain_size=5)
    est = estimate(m, [])
    assert est.n == 0 and all(e["frequency"] is None for e in est.to_dict()["estimates"])


def test_bad_arguments() -> None:
    m = create("grr", epsilon=1.0, domain_size=3)
    with pytest.raises(ValueError, match="length 3"):
        estimate_from_counts(m, Counts(10, np.array([1, 2])))
    with pytest.raises(ValueError, match=r"\[0, n\]"):
        estimate_from_counts(m, Counts(10, np.array([1, 2, 11])))
    with pytest.raises(ValueError, match="confidence"):
        estimate_from_counts(m, Counts(10, np.array([1, 2, 3])), confidence=1.5)
    with pytest.raises(ValueError, match="need 3 labels"):
        estimate_from_counts(m, Counts(10, np.array([1, 2, 3])), labels=["a"])

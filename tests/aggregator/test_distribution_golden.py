"""The distribution estimates' figures are pinned: the histogram, every standard error,
the CDF band's critical value, the quantiles and range shares equal, to floating-point
noise, what the first (dense, D×D) implementation produced on the same counters
(``data/distribution_golden.json``, written by it on fixed seeds). The tree-structured
variances and band draws (docs/statistics/distributions.md, "Computing it") are a
faster route to the same numbers, not new ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from aggregator.stats.distribution import estimate_distribution
from aggregator.stats.distribution_codec import HistogramCodec
from client_sdk.mechanisms.distribution import HierarchicalHistogram

GOLDEN = json.loads((Path(__file__).parent / "data" / "distribution_golden.json").read_text())

RTOL = 1e-9
"""Floating-point noise: sums taken in another order differ in the last few of 16
digits; a changed formula or draw moves a figure by far more (the band's critical value
by ~1e-3 with another Monte Carlo stream)."""

ZERO_SE = 1e-9
"""A standard error whose variance is 0 in exact arithmetic (the whole range: the root
is known) comes out as √(rounding of a difference of ~1e-6-sized terms), up to ~1e-10."""


def rebuilt(case: dict[str, Any]) -> Any:
    eps, d, b, scale, _shape, _n, _seed = case["case"]
    m = HierarchicalHistogram(eps, d, b, scale)
    edges = np.geomspace(0.01, 1.0, d + 1) if scale == "log" else np.linspace(0, 1, d + 1)
    return estimate_distribution(m, case["counters"], edges)


# the 2,048-bin binary tree (h = 11) draws 45 M normals for its band: its band is left
# to the benchmark; its standard errors are checked here
FAST = [c for c in GOLDEN if c["case"][1] <= 256]


@pytest.mark.parametrize("case", GOLDEN, ids=lambda c: "-".join(map(str, c["case"][:4])))
def test_histogram_and_standard_errors_are_the_dense_implementations(case: dict[str, Any]) -> None:
    est = rebuilt(case)
    for key in ("histogram", "bin_std_errors", "cdf", "cdf_std_errors"):
        np.testing.assert_allclose(getattr(est, key), case[key], rtol=RTOL, atol=1e-15, err_msg=key)


@pytest.mark.parametrize("case", FAST, ids=lambda c: "-".join(map(str, c["case"][:4])))
def test_band_quantiles_and_ranges_are_the_dense_implementations(case: dict[str, Any]) -> None:
    est = rebuilt(case)
    assert est.band_critical == pytest.approx(case["band_critical"], rel=RTOL)
    for p, old in zip((0.01, 0.5, 0.9, 0.95, 0.99), case["quantiles"], strict=True):
        assert est.quantile(p).__dict__ == pytest.approx(old, rel=RTOL)
    for (a, b), old in zip(((0.1, 0.3), (0.0, 1.0), (0.5, 0.51)), case["ranges"], strict=True):
        assert est.range_share(a, b).__dict__ == pytest.approx(old, rel=RTOL, abs=ZERO_SE)


@pytest.mark.parametrize(("bins", "branching"), [(64, 4), (64, 2), (64, 64), (256, 16)])
def test_the_tree_solve_is_the_dense_one(bins: int, branching: int) -> None:
    """The band's draws go through the tree (:meth:`_tree_solve`); the fit's own dense
    operator must give the same vectors, sign included (the band's |·| would hide a
    flipped sign)."""
    m = HierarchicalHistogram(1.0, bins, branching)
    gen = np.random.default_rng(bins + branching)
    est = estimate_distribution(
        m,
        HistogramCodec(m).sample_counters(gen.integers(0, bins, 10_000), gen),
        np.linspace(0, 1, bins + 1),
    )
    noises = [gen.standard_normal((7, branching ** (lv + 1))) for lv in range(m.height)]
    spread = sum(
        est._weights[i] * np.repeat(x, est._sizes[i + 1], axis=1) for i, x in enumerate(noises)
    )
    np.testing.assert_allclose(
        est._tree_solve([x.copy() for x in noises]), est._solve(spread), rtol=0, atol=1e-13
    )

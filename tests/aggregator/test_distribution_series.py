"""A trend's quantiles of many windows at once: each window's own fit and CDF standard
errors (to rounding), intervals read off a Bonferroni band that holds the window's own."""

from __future__ import annotations

import numpy as np
import pytest

from aggregator.stats.distribution import estimate_distribution
from aggregator.stats.distribution_codec import HistogramCodec
from aggregator.stats.distribution_haar import estimate_haar, sample_haar_counters
from aggregator.stats.distribution_series import (
    _haar_cdf,
    _tree_cdf,
    band_points,
    bonferroni_critical,
    quantile_series,
)
from client_sdk.mechanisms.distribution import DistributionMechanism, HierarchicalHistogram
from client_sdk.mechanisms.haar import HaarHRR

MECHANISMS = [
    HierarchicalHistogram(1.0, 1024, 4),
    HierarchicalHistogram(2.0, 256, 2),
    HierarchicalHistogram(4.0, 64, 64),
    HaarHRR(1.0, 256),
    HaarHRR(0.5, 1024, "log"),
]


def windows(m: DistributionMechanism, gen: np.random.Generator) -> np.ndarray:
    rows = []
    for size, centre in ((3000, 0.3), (8000, 0.5), (20000, 0.7)):
        bins = np.clip(gen.normal(centre, 0.15, size) * m.bins, 0, m.bins - 1).astype(np.int64)
        if isinstance(m, HaarHRR):
            rows.append(sample_haar_counters(m, bins, gen))
        else:
            rows.append(HistogramCodec(m).sample_counters(bins, gen))
    return np.array(rows)


@pytest.mark.parametrize("m", MECHANISMS, ids=repr)
def test_each_windows_cdf_and_standard_errors_are_its_own(m: DistributionMechanism) -> None:
    gen = np.random.default_rng(7)
    table = windows(m, gen)
    edges = np.linspace(0.0, 1.0, m.bins + 1)
    of = _haar_cdf if isinstance(m, HaarHRR) else _tree_cdf
    cdf, se = of(m, table, band_points(m.bins))  # type: ignore[operator]
    series = quantile_series(m, edges, table, (0.5, 0.95))
    for w, counters in enumerate(table):
        own = (
            estimate_haar(m, counters, edges)
            if isinstance(m, HaarHRR)
            else estimate_distribution(m, counters, edges)
        )
        assert cdf[w] == pytest.approx(own.cdf, abs=1e-12)
        assert se[w] == pytest.approx(own.cdf_std_errors, rel=1e-9)
        assert series.band_critical >= own.band_critical
        for mine, p in zip(series.quantiles[w], (0.5, 0.95), strict=True):
            theirs = own.quantile(p)
            assert mine.value == pytest.approx(theirs.value, rel=1e-9)
            assert mine.ci_low <= theirs.ci_low and theirs.ci_high <= mine.ci_high


def test_windows_without_reports_at_every_level_have_no_quantiles() -> None:
    m = HierarchicalHistogram(1.0, 256, 4)
    table = windows(m, np.random.default_rng(2))
    table[1, :] = 0
    series = quantile_series(m, np.linspace(0, 1, 257), table, (0.5,))
    assert series.ready.tolist() == [True, False, True]
    assert series.quantiles[1] == [] and len(series.quantiles[0]) == 1
    assert series.band_critical == pytest.approx(bonferroni_critical(255, 0.95))
    with pytest.raises(ValueError, match="expected"):
        quantile_series(m, np.linspace(0, 1, 257), table[:, :10], (0.5,))

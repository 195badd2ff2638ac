"""HaarHRR's estimates: the synthesis inverts the Haar analysis, the histogram is
unbiased with the exact variance of its formula (against the empirical spread, a
tolerance from the sample variance's own law), the SDK's reports follow the law the
simulation draws, and range and quantile intervals cover on a small grid (fixed seeds,
a binomial bound). The full comparison with the hierarchical histogram is
benchmarks/bench_distributions.py's."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from aggregator.stats.distribution_codec import HaarCodec
from aggregator.stats.distribution_haar import (
    analyse,
    estimate_haar,
    haar_counters,
    sample_haar_counters,
    synthesise,
)
from client_sdk.errors import PayloadError
from client_sdk.mechanisms.haar import HaarHRR
from tests.aggregator.test_distribution_stats import lowest_count, population

D = 64
EDGES = np.linspace(0.0, 1.0, D + 1)


def test_synthesis_inverts_the_analysis() -> None:
    f = np.random.default_rng(1).dirichlet(np.ones(D))
    coefficients = [c[None, :] for c in analyse(f, 6)]
    np.testing.assert_allclose(synthesise(np.ones((1, 1)), coefficients)[0], f, atol=1e-15)


def test_the_histogram_is_unbiased_and_its_variance_exact() -> None:
    """R windows: the mean error of a range within 4 standard errors of 0, and the
    empirical variance within 4 sd of the formula's (the sample variance of R normal
    errors has relative sd √(2/(R − 1))). The formula treats each level's devices as a
    sample with replacement: for the reporters' share it is a little high, never low."""
    m = HaarHRR(1.0, D)
    gen = np.random.default_rng(5)
    bins = population("bimodal", 20_000, gen)
    truth = np.bincount(bins, minlength=D) / len(bins)
    reps = 300
    errors, variances = [], []
    for _ in range(reps):
        est = estimate_haar(m, sample_haar_counters(m, bins, gen), EDGES)
        assert est.histogram.sum() == pytest.approx(1.0, abs=1e-12)
        errors.append(est.histogram[10:40].sum() - truth[10:40].sum())
        variances.append(float(est.interval_variances([10], [40])[0]))
    e = np.array(errors)
    formula = float(np.mean(variances))
    assert abs(e.mean()) <= 4 * math.sqrt(formula / reps)
    ratio = e.var(ddof=1) / formula
    slack = 4 * math.sqrt(2 / (reps - 1))
    assert 1 - slack - 0.15 <= ratio <= 1 + slack  # 0.15: the with-replacement excess


def test_the_counters_sampled_whole_follow_the_reports_law() -> None:
    """The exact-law sampler (multinomial splits, binomial bits) against a draw per report
    (HaarCodec's encode): every counter's mean agrees within 4 standard errors of the
    difference of two means over R windows each, at a small D and n."""
    m = HaarHRR(1.0, 8)
    gen = np.random.default_rng(9)
    bins = gen.integers(0, 3, 600) * 2 + gen.integers(0, 2, 600)  # bins 0..5, uneven
    reps = 400
    whole = np.array([sample_haar_counters(m, bins, gen) for _ in range(reps)], dtype=float)
    each = np.array([HaarCodec(m).sample_counters(bins, gen) for _ in range(reps)], dtype=float)
    se = np.sqrt((whole.var(axis=0, ddof=1) + each.var(axis=0, ddof=1)) / reps)
    gap = np.abs(whole.mean(axis=0) - each.mean(axis=0))
    assert np.all(gap <= 4 * se + 1e-12)
    ratio = whole.var(axis=0, ddof=1)[se > 0] / each.var(axis=0, ddof=1)[se > 0]
    assert np.all(np.abs(ratio - 1) <= 4 * 2 / math.sqrt(reps - 1))  # two sample variances


def test_the_sdks_reports_follow_the_simulated_law() -> None:
    """Reports made by HaarHRR.perturb (a seeded generator), counted by haar_counters:
    each range's z-score against the truth has mean 0 and sd ≤ 1 within their sampling
    error over 36 answers."""
    m = HaarHRR(1.0, D)
    bins = population("normal", 4000, np.random.default_rng(2))
    truth = np.bincount(bins, minlength=D) / len(bins)
    zs = []
    for seed in range(12):
        rng = random.Random(seed)
        payloads = [m.perturb(int(v), rng) for v in bins]
        est = estimate_haar(m, haar_counters(m, payloads), EDGES)
        for a, b in ((9, 39), (0, 20), (30, 64)):
            r = est.range_share(a / D, b / D)
            zs.append((r.share - truth[a:b].sum()) / r.std_error)
    z = np.array(zs)
    assert abs(z.mean()) <= 4 / math.sqrt(len(z))
    assert z.std() <= 1 + 4 / math.sqrt(2 * len(z))


@pytest.mark.parametrize("shape", ["normal", "lognormal", "point", "bimodal"])
def test_range_and_quantile_intervals_cover(shape: str) -> None:
    m = HaarHRR(2.0, D)
    gen = np.random.default_rng(len(shape))
    bins = population(shape, 20_000, gen)
    truth = np.concatenate(([0.0], np.cumsum(np.bincount(bins, minlength=D) / len(bins))))
    reps = 60
    hits = {"range": 0, "quantile": 0}
    for _ in range(reps):
        est = estimate_haar(m, sample_haar_counters(m, bins, gen), EDGES)
        r = est.range_share(0.25, 0.5)
        hits["range"] += r.ci_low <= truth[32] - truth[16] <= r.ci_high
        q = est.quantile(0.5)
        j = int(np.searchsorted(truth, 0.5, "left"))
        hits["quantile"] += q.ci_low <= EDGES[j - 1] and EDGES[j] <= q.ci_high + 1e-12
    assert hits["range"] >= lowest_count(reps, 0.95)
    assert hits["quantile"] >= lowest_count(reps, 0.95)


def test_the_worker_codec_counts_what_the_reference_counts() -> None:
    """HaarCodec (the worker's, columnar) against :func:`haar_counters` (one payload at a
    time), on SDK payloads; its bulk encoder has the SDK's law (same counters' shape), and
    it refuses a bad payload with the reference checker's message and index."""
    m = HaarHRR(1.0, D)
    codec = HaarCodec(m)
    rng = random.Random(4)
    payloads = [m.perturb(rng.randrange(D), rng) for _ in range(3000)]
    assert np.array_equal(codec.decode(payloads), haar_counters(m, payloads))
    batch = codec.encode(np.random.default_rng(2).integers(0, D, 500), np.random.default_rng(3))
    again = codec.to_payloads(batch)
    assert np.array_equal(codec.decode(again), haar_counters(m, again))
    for bad, says in (
        ({"l": 6, "r": 0, "y": 0}, "'l'"),
        ({"l": 1, "r": 2, "y": 0}, "'r'"),
        ({"l": 1, "r": 1, "y": -1}, "'y'"),
        ({"l": 1, "r": 1.0, "y": 0}, "'r'"),
        ([1, 0, 0], "haar payload"),
    ):
        with pytest.raises(PayloadError, match=f"payload #1: .*{says}"):
            codec.decode([payloads[0], bad])

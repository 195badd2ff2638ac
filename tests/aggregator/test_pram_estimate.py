"""PRAM's estimator: GRR as its special case, unbiasedness and coverage by simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from aggregator.stats.codecs import Counts
from aggregator.stats.frequency import estimate, estimate_from_counts
from aggregator.stats.kinds import codec_for
from client_sdk import mechanisms

AGES = [
    ["0.6", "0.25", "0.1", "0.05"],
    ["0.15", "0.6", "0.15", "0.1"],
    ["0.1", "0.15", "0.6", "0.15"],
    ["0.05", "0.1", "0.25", "0.6"],
]


@pytest.mark.parametrize(("eps", "k", "n"), [(1.0, 4, 1000), (2.0, 8, 20_000), (0.5, 3, 40)])
def test_grr_matrix_gives_grr_estimates_and_variances(eps: float, k: int, n: int) -> None:
    g = mechanisms.create("grr", epsilon=eps, domain_size=k)
    p = mechanisms.create(
        "pram", matrix=[[g.p if x == y else g.q for y in range(k)] for x in range(k)]
    )
    gen = np.random.default_rng(15)
    truth = gen.dirichlet(np.ones(k))
    support = codec_for(g).sample_support_counts(gen.multinomial(n, truth), gen)
    a = estimate_from_counts(g, Counts(n, support))
    b = estimate_from_counts(p, Counts(n, support))
    np.testing.assert_allclose(b.frequencies, a.frequencies, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(b.std_errors, a.std_errors, rtol=1e-12)
    for f in (0.0, 0.3, 1.0):
        assert p.variance(n, f) == pytest.approx(g.variance(n, f), rel=1e-12)
    assert p.variance_star() == pytest.approx(g.variance_star(), rel=1e-12)
    assert a.interval == b.interval
    if a.interval == "score":  # same quadratic; the exact regime's box is wider by design
        # (as built: the intervals shown reach 0 where each one's exact zero test cannot
        # reject, binomial for grr, Bennett's bound for pram)
        for x, y in zip(b.conf_int(), a.conf_int(), strict=True):
            np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-12)


def test_pram_is_unbiased_and_covers() -> None:
    """400 seeded populations: the mean error is within 4 standard errors of the mean,
    and each value's 95 % interval covers as often as a Bin(400, 0.95) allows."""
    m = mechanisms.create("pram", matrix=AGES)
    codec = codec_for(m)
    truth = np.array([0.5, 0.3, 0.15, 0.05])
    n, reps = 5000, 400
    gen = np.random.default_rng(20260115)
    errors, covered = [], np.zeros(4)
    true_counts = np.round(truth * n).astype(np.int64)
    for _ in range(reps):
        est = estimate_from_counts(m, Counts(n, codec.sample_support_counts(true_counts, gen)))
        assert est.interval == "score"
        errors.append(est.frequencies - truth)
        covered += (est.ci_low <= truth) & (truth <= est.ci_high)
    theory = np.sqrt(np.asarray(m.variance(n, truth)))
    mean_error = np.mean(errors, axis=0)
    assert np.all(np.abs(mean_error) < 4 * theory / math.sqrt(reps))
    empirical_sd = np.std(errors, axis=0, ddof=1)
    # The sd of a sample sd of 400 normals is ≈ sd/√800: 4 of those.
    assert np.all(np.abs(empirical_sd / theory - 1) < 4 / math.sqrt(2 * reps))
    low = 0.95 * reps - 3.5 * math.sqrt(reps * 0.95 * 0.05)  # binomial lower bound, 3.5σ
    assert np.all(covered >= low)


def test_small_counts_take_the_exact_box_and_cover() -> None:
    m = mechanisms.create("pram", matrix=AGES)
    codec = codec_for(m)
    truth_counts = np.array([20, 12, 6, 2])
    gen = np.random.default_rng(7)
    reps, covered = 300, np.zeros(4)
    truth = truth_counts / truth_counts.sum()
    for _ in range(reps):
        est = estimate_from_counts(m, Counts(40, codec.sample_support_counts(truth_counts, gen)))
        assert est.interval == "exact"
        covered += (est.ci_low <= truth) & (truth <= est.ci_high)
        # a flag says the box misses 0, and its p-value is the box's dual
        assert np.array_equal(est.distinguishable, (est.ci_low > 0) | (est.ci_high < 0))
        assert np.array_equal(est.distinguishable, est.p_values <= 0.05)
    assert np.all(covered >= reps * 0.95)  # conservative: the box holds jointly at 95 %


def test_payloads_decode_through_the_codec() -> None:
    import random

    m = mechanisms.create("pram", matrix=AGES)
    rng = random.Random(3)
    values = [0] * 600 + [1] * 300 + [3] * 100
    est = estimate(m, [m.perturb(v, rng) for v in values])
    assert est.n == 1000 and est.support_counts.sum() == 1000
    truth = np.array([0.6, 0.3, 0.0, 0.1])
    assert np.all(np.abs(est.frequencies - truth) < 4.5 * est.std_errors)


def test_anytime_is_refused_for_pram() -> None:
    m = mechanisms.create("pram", matrix=AGES)
    with pytest.raises(ValueError, match="anytime intervals are not available for pram"):
        estimate_from_counts(m, Counts(100, np.array([40, 30, 20, 10])), anytime=True)


@pytest.mark.parametrize("n", [120, 1000])
def test_zero_test_p_values_are_valid_in_the_tail(n: int) -> None:
    """A value held by nobody: its p-value may fall below t at most t of the time, where
    Benjamini–Hochberg and Bonferroni read it (t = 10⁻², 10⁻³). The normal tail crossed
    10⁻³ 4.4× too often at n = 120 and 1.6× at n = 1000; the bound allows 3 binomial
    standard errors."""
    from aggregator.stats.pram import pram_zero_p_values

    guide = [  # the age bands of docs/concepts/mechanisms.md
        ["0.5", "0.3", "0.1", "0.1"],
        ["0.2", "0.5", "0.2", "0.1"],
        ["0.1", "0.2", "0.5", "0.2"],
        ["0.1", "0.1", "0.3", "0.5"],
    ]
    m = mechanisms.create("pram", matrix=guide)
    rows = np.array([[float(e) for e in r] for r in m.rows])
    f = np.array([0.0, 0.5, 0.3, 0.2])
    snapshots = 20_000
    counts = np.random.default_rng(11).multinomial(n, rows.T @ f, size=snapshots)
    p = np.array([pram_zero_p_values(m, n, c)[0] for c in counts])
    for t in (1e-2, 1e-3):
        assert (p <= t).mean() <= t + 3 * math.sqrt(t / snapshots), t

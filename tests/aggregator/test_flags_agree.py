"""A value's "distinguishable from zero" flag says what the interval beside it says.

In every multiplicity mode (each, fdr, simultaneous), for the fixed-n interval and the
confidence sequence, for either estimand and every kind of frequency estimate (fresh
noise, memoized, pram, a joint metric's marginals): flag ⇔ 0 ∉ [low, high], and the
p-value is the interval's dual, p ≤ 1 − level ⇔ flag (issue 36: a value was flagged next
to [−0.05 %, 11.23 %], its one-sided p-value 0.029 beside a two-sided interval).
"""

from __future__ import annotations

import numpy as np
import pytest

from aggregator import Counts, estimate_from_counts
from aggregator.stats.joint import estimate_marginal
from aggregator.stats.joint_codec import JointCodec
from aggregator.stats.kinds import codec_for
from aggregator.stats.multiplicity import MULTIPLICITIES, ZeroRead
from client_sdk import mechanisms
from client_sdk.mechanisms.joint import joint_mechanism

AGES = [  # the age bands of docs/concepts/mechanisms.md
    ["0.5", "0.3", "0.1", "0.1"],
    ["0.2", "0.5", "0.2", "0.1"],
    ["0.1", "0.2", "0.5", "0.2"],
    ["0.1", "0.1", "0.3", "0.5"],
]


def agree(
    low: np.ndarray, high: np.ndarray, p: np.ndarray, flags: np.ndarray, level: float
) -> None:
    """flag ⇔ 0 ∉ [low, high] ⇔ p ≤ 1 − level, value by value."""
    outside = (np.asarray(low) > 0) | (np.asarray(high) < 0)
    assert np.array_equal(np.asarray(flags, dtype=bool), outside), (low, high, flags)
    assert np.array_equal(np.asarray(p) <= 1.0 - level, outside), (p, level, outside)


def test_the_issues_example_is_no_longer_flagged_beside_an_interval_holding_zero() -> None:
    """GRR k = 3, n = 1,560 (the issue's setting): value 0 was flagged 'distinguishable'
    (Benjamini–Hochberg on a one-sided p = 0.038) while its 95 % interval was
    [−0.39 %, 10.9 %]; and in 'all values at once' the flags were not the band's."""
    m = mechanisms.create("grr", epsilon=1.0, domain_size=3)
    counts = Counts(1560, np.array([360, 600, 600]))
    for simultaneous in (False, True):
        est = estimate_from_counts(m, counts, simultaneous=simultaneous)
        assert est.ci_low[0] < 0 < est.ci_high[0]
        assert not est.distinguishable[0]
        outside = (est.ci_low > 0) | (est.ci_high < 0)
        assert np.array_equal(est.distinguishable, outside)
        assert np.array_equal(est.p_values <= 1 - est.level, outside)


@pytest.mark.parametrize("name", ["grr", "oue", "olh", "sue", "hr", "ss", "memo-oue", "memo-grr"])
def test_flags_are_the_intervals_in_every_mode(name: str) -> None:
    """25 random populations per mechanism (k, ε, n, a share of absent values, counts
    from small to large), every mode, both estimands, fixed-n and the sequence."""
    gen = np.random.default_rng(sum(map(ord, name)))
    for _ in range(25):
        k = int(gen.choice([2, 3, 5, 16, 64]))
        eps = float(gen.choice([0.5, 1.0, 2.0, 4.0]))
        n = int(gen.choice([30, 300, 1560, 20_000, 500_000]))
        extra = {"permanent_epsilon": 2 * eps + 1} if name.startswith("memo") else {}
        m = mechanisms.create(name, epsilon=eps, domain_size=k, **extra)
        weights = gen.dirichlet(np.ones(k)) * (gen.random(k) > 0.4)
        weights = weights / weights.sum() if weights.sum() else np.full(k, 1.0 / k)
        support = codec_for(m).sample_support_counts(gen.multinomial(n, weights), gen)
        r = float(gen.choice([1, 3])) if name.startswith("memo") else 1.0
        for mode in MULTIPLICITIES:
            for estimand in ("reporters", "population"):
                est = estimate_from_counts(
                    m,
                    Counts(n, support),
                    multiplicity=mode,
                    estimand=estimand,
                    reports_per_device=r,
                )
                agree(est.ci_low, est.ci_high, est.p_values, est.distinguishable, est.level)
                seq: ZeroRead = est.sequence_read()
                agree(seq.low, seq.high, seq.p_values, seq.flags, seq.level)
            anytime = estimate_from_counts(m, Counts(n, support), multiplicity=mode, anytime=True)
            agree(
                anytime.ci_low,
                anytime.ci_high,
                anytime.p_values,
                anytime.distinguishable,
                anytime.level,
            )


def test_pram_flags_are_its_intervals_in_both_regimes() -> None:
    """Score (Bennett's bound beside the interval's dual) and the small-count box."""
    m = mechanisms.create("pram", matrix=AGES)
    codec = codec_for(m)
    gen = np.random.default_rng(36)
    seen = set()
    for _ in range(60):
        n = int(gen.choice([20, 60, 400, 5000]))
        weights = gen.dirichlet(np.ones(4)) * (gen.random(4) > 0.3)
        weights = weights / weights.sum() if weights.sum() else np.full(4, 0.25)
        support = codec.sample_support_counts(gen.multinomial(n, weights), gen)
        for mode in MULTIPLICITIES:
            for estimand in ("reporters", "population"):
                est = estimate_from_counts(
                    m, Counts(n, support), multiplicity=mode, estimand=estimand
                )
                seen.add(est.interval)
                agree(est.ci_low, est.ci_high, est.p_values, est.distinguishable, est.level)
    assert seen == {"score", "exact"}


@pytest.mark.parametrize("layout", ["joint", "marginals"])
def test_joint_marginal_flags_are_their_intervals(layout: str) -> None:
    """Every 1- and 2-way marginal, every mode, both estimands, fixed-n and sequence."""
    sizes = (2, 3, 4)
    m = joint_mechanism(2.0, sizes, layout)
    codec = JointCodec(m)
    gen = np.random.default_rng(7 if layout == "joint" else 8)
    marginals = [(0,), (1,), (2,), (0, 1), (1, 2), (0, 2)]
    for n in (60, 1000, 30_000):
        a = gen.integers(0, 2, n)
        values = np.column_stack([a, (a + gen.integers(0, 2, n)) % 3, gen.integers(0, 2, n) * 2])
        counts = codec.count(codec.encode(values, gen))
        for attrs in marginals:
            for mode in MULTIPLICITIES:
                for estimand in ("reporters", "population"):
                    for anytime in (False, True):
                        est = estimate_marginal(
                            m,
                            counts,
                            attrs,
                            anytime=anytime,
                            estimand=estimand,
                            multiplicity=mode,
                        )
                        agree(est.ci_low, est.ci_high, est.p_values, est.distinguishable, est.level)

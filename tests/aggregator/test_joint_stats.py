"""Joint metrics' statistics: unbiased marginals, honest intervals, consistent margins."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from aggregator.stats.joint import (
    consistent_tables,
    estimate_marginal,
    group_counts,
    marginal_support,
    raw_tables,
)
from aggregator.stats.joint_codec import JointCodec
from client_sdk.errors import PayloadError
from client_sdk.mechanisms.joint import (
    SetOracle,
    choose_joint,
    joint_from_params,
    joint_mechanism,
)
from client_sdk.mechanisms.rr import GeneralizedRR

SIZES = (4, 8, 16)


def population(n: int, seed: int = 7) -> np.ndarray:
    """Three correlated attributes (k = 4, 8, 16)."""
    gen = np.random.default_rng(seed)
    a = gen.integers(0, 4, n)
    b = (2 * a + gen.integers(0, 3, n)) % 8
    c = (b + gen.geometric(0.3, n)) % 16
    return np.column_stack([a, b, c])


def truth(values: np.ndarray, attrs: tuple[int, ...]) -> np.ndarray:
    table = np.zeros([SIZES[a] for a in attrs])
    np.add.at(table, tuple(values[:, a] for a in attrs), 1)
    return table.ravel() / len(values)


def test_grr_set_is_a_pure_oracle_with_exact_variance() -> None:
    base = GeneralizedRR(epsilon=1.5, domain_size=64)
    s = SetOracle(base, 4)
    assert s.exact
    assert s.p == pytest.approx(base.p + 3 * base.q)
    assert s.q == pytest.approx(4 * base.q)
    for f in (0.0, 0.3, 1.0):  # Bernoulli(π), π = q_S + f(p − q): Var = π(1 − π)/(n(p − q)²)
        pi = s.q + f * (base.p - base.q)
        expected = (f * s.p * (1 - s.p) + (1 - f) * s.q * (1 - s.q)) / (
            1000 * (base.p - base.q) ** 2
        )
        assert s.variance(1000, f) == pytest.approx(expected)
        assert 0 < pi < 1


def test_choice_states_its_reason_and_prefers_joint_for_two_attributes() -> None:
    three = choose_joint(2.0, SIZES)
    assert three.mechanism.method == "marginals"
    assert "joint-domain" in three.reason and "pairwise" in three.reason
    two = choose_joint(2.0, (4, 8))
    assert two.mechanism.method == "joint"  # the pair is the joint: tie, joint wins
    huge = choose_joint(1.0, (256, 256, 2))
    assert huge.mechanism.method == "marginals" and "beyond one oracle" in huge.reason


def test_params_round_trip_and_bad_params_refused() -> None:
    m = choose_joint(2.0, SIZES).mechanism
    assert joint_from_params(m.params()) == m
    bad = m.params() | {"groups": [[0, 1]] * 3}
    with pytest.raises(ValueError):
        joint_from_params(bad)
    with pytest.raises(ValueError, match="2 to 8 attributes"):
        joint_mechanism(1.0, (4,), "joint")


@pytest.mark.parametrize("method", ["joint", "marginals"])
def test_codec_counts_equal_the_reference_checker(method: str) -> None:
    m = joint_mechanism(2.0, SIZES, method)
    codec = JointCodec(m)
    gen = np.random.default_rng(3)
    batch = codec.encode(population(3000), gen)
    payloads = codec.to_payloads(batch)
    assert [m.check_payload(p) for p in payloads] == payloads
    counts = codec.decode(payloads)
    assert np.array_equal(counts, codec.count(batch))
    # the counters by the SDK's own per-report decoder
    reference = np.zeros(m.counters, dtype=np.int64)
    for p in payloads:
        g = p["g"]
        reference[g] += 1
        inner = {k: v for k, v in p.items() if k != "g"}
        for v in m.oracles[g].support(inner):
            reference[m.offsets[g] + v] += 1
    assert np.array_equal(counts, reference)
    bad = [*payloads[:5], {"g": len(m.groups), "v": 0}]
    with pytest.raises(PayloadError, match="payload #5"):
        codec.parse(bad)


def test_device_perturb_uses_the_group_oracle_and_is_checked() -> None:
    import random

    m = joint_mechanism(1.0, SIZES, "marginals")
    payload = m.perturb((1, 2, 3), random.Random(5))
    assert m.check_payload(payload) == payload
    with pytest.raises(ValueError, match="value #2"):
        m.perturb((1, 2, 16))
    with pytest.raises(ValueError, match="tuple of 3"):
        m.perturb((1, 2))


@pytest.mark.parametrize("method", ["joint", "marginals"])
def test_marginal_intervals_cover_at_the_nominal_rate(method: str) -> None:
    """Each marginal's interval on a rotating cell covers in 95 % of 300 runs, within the
    binomial bound (probability 10⁻³ each side); the z-scores have unit variance."""
    m = joint_mechanism(2.0, SIZES, method)
    codec = JointCodec(m)
    values = population(20_000)
    gen = np.random.default_rng(11)
    runs = 300
    marginals = [(0, 1), (1, 2), (0, 2), (2,), (0,)]  # (0,) sums 128 of 512 joint cells
    truths = {attrs: truth(values, attrs) for attrs in marginals}  # one population
    covered = dict.fromkeys(marginals, 0)
    z2 = {key: [] for key in marginals}
    for run in range(runs):
        counts = codec.count(codec.encode(values, gen))
        tables = consistent_tables(m, counts)  # one window's, shared as the web views do
        for attrs in marginals:
            true = truths[attrs]
            est = estimate_marginal(m, counts, attrs, tables=tables)
            cell = run % len(true)
            covered[attrs] += bool(est.ci_low[cell] <= true[cell] <= est.ci_high[cell])
            z2[attrs].append(((est.frequencies[cell] - true[cell]) / est.std_errors[cell]) ** 2)
    low, high = binom.ppf(0.001, runs, 0.95), binom.ppf(0.999, runs, 0.95)
    for attrs in marginals:
        assert low <= covered[attrs] <= high, (attrs, covered[attrs])
        # mean of z² over 300 runs: sd ≈ √(2/300) = 0.08 for a normal; ± 0.3 is > 3.5 sd
        assert abs(np.mean(z2[attrs]) - 1.0) < 0.3, (attrs, np.mean(z2[attrs]))


def test_the_joint_layout_answers_the_full_joint_and_pairs_do_not() -> None:
    values = population(5000)
    joint = joint_mechanism(4.0, SIZES, "joint")
    counts = JointCodec(joint).count(JointCodec(joint).encode(values, np.random.default_rng(8)))
    full = estimate_marginal(joint, counts, (0, 1, 2))
    assert full.frequencies.shape == (512,)
    # Σ f̂ over every cell is the set oracle over all 512 cells at f = 1: within 4 σ of 1
    sd = float(np.sqrt(SetOracle(joint.oracles[0], 512).variance(5000, 1.0)))
    assert abs(full.frequencies.sum() - 1.0) < 4 * sd
    pairs = joint_mechanism(4.0, SIZES, "marginals")
    with pytest.raises(ValueError, match="no group holds"):
        estimate_marginal(pairs, np.zeros(pairs.counters, dtype=np.int64), (0, 1, 2))


def test_anytime_and_fdr_flags() -> None:
    m = joint_mechanism(2.0, SIZES, "marginals")
    codec = JointCodec(m)
    values = population(50_000)
    counts = codec.count(codec.encode(values, np.random.default_rng(2)))
    fixed = estimate_marginal(m, counts, (0, 1), multiplicity="fdr")
    seq = estimate_marginal(m, counts, (0, 1), anytime=True, multiplicity="fdr")
    assert seq.interval == "anytime"
    assert fixed.level == seq.level == 1 - fixed.distinguishable.sum() * 0.05 / 32
    assert np.all(seq.ci_high - seq.ci_low > fixed.ci_high - fixed.ci_low)
    true = truth(values, (0, 1))
    # a flagged cell is one the truth has mass in (no false discovery in this population)
    for est in (fixed, seq):
        assert est.distinguishable.any()
        assert np.all(true[est.distinguishable] > 0)
        assert np.array_equal(est.distinguishable, (est.ci_low > 0) | (est.ci_high < 0))


def test_consistency_makes_shared_margins_agree_and_keeps_raw() -> None:
    m = joint_mechanism(1.0, SIZES, "marginals")
    codec = JointCodec(m)
    values = population(20_000)
    counts = codec.count(codec.encode(values, np.random.default_rng(4)))
    raw = raw_tables(m, counts)
    tables = consistent_tables(m, counts)
    # raw differs between groups on the shared margin; consistent agrees to rounding
    from aggregator.stats.joint import _reduce

    for a in range(3):
        holders = [g for g, held in enumerate(m.groups) if a in held]
        raw_margins = [_reduce(m, g, raw[g], (a,)) for g in holders]
        margins = [_reduce(m, g, tables[g], (a,)) for g in holders]
        assert np.abs(raw_margins[0] - raw_margins[1]).max() > 1e-4
        assert np.abs(margins[0] - margins[1]).max() < 1e-9
    for t in tables:
        assert t.sum() == pytest.approx(1.0)
        assert t.min() > -1e-3  # the last agreement step may leave a trace below 0
    est = estimate_marginal(m, counts, (0, 2))
    g = est.group
    n, support = group_counts(m, counts)[0][g], marginal_support(m, counts, (0, 2))[2]
    assert np.allclose(est.frequencies, m.set_oracle(g, (0, 2)).debias(support / 1.0, n))
    assert not np.allclose(est.frequencies, est.consistent)


def test_a_groups_sampling_spread_is_in_the_variance_at_large_epsilon() -> None:
    """At ε = 6 a group's share of a cell differs from everyone's mostly by sampling (the
    group is a random third of the devices): the z-scores against everyone's share have
    unit variance only with f(1 − f)(1/n_g − 1/n) in the variance (without it: 1.6–5)."""
    m = joint_mechanism(6.0, SIZES, "marginals")
    codec = JointCodec(m)
    values = population(20_000)
    true = truth(values, (0,))
    gen = np.random.default_rng(21)
    z = []
    for _ in range(200):
        est = estimate_marginal(m, codec.count(codec.encode(values, gen)), (0,))
        z.append((est.frequencies - true) / est.std_errors)
    variance = np.var(np.array(z), axis=0)
    # 200 runs: the variance of a z-score is within ±0.35 of 1 (> 3.5 sd) if the model holds
    assert np.all(np.abs(variance - 1.0) < 0.35), variance


def test_auto_picks_the_joint_domain_for_small_products_at_large_epsilon() -> None:
    assert choose_joint(4.0, (2, 2, 2)).mechanism.method == "joint"
    assert choose_joint(1.0, (2, 2, 2)).mechanism.method == "marginals"
    assert choose_joint(6.0, (4, 4, 4)).mechanism.method == "marginals"


def test_a_layout_beyond_the_counters_ceiling_is_refused_with_its_size() -> None:
    with pytest.raises(ValueError, match="1,835,036 counters"):
        choose_joint(1.0, (256,) * 8)
    assert choose_joint(1.0, (64,) * 8).mechanism.counters <= 1 << 20

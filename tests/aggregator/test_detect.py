"""The poisoning alarms' statistics: false-alarm rates over many honest windows, and
power against the maximal-gain attack (Cao, Jia & Gong) at 1 % fakes.

Honest windows are sampled exactly (a population drawn from a fixed distribution, each
report perturbed by the mechanism's law) with seeded numpy generators; the fakes skip
the randomizer as the attack does (crafted here minimally: aggregator/analysis has the
full attack simulator). Bounds on false-alarm counts are binomial: at rate α over W
windows, a count beyond the 1e-4 upper quantile of Bin(W, α) fails.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom, hypergeom

from aggregator.stats import detect
from aggregator.stats.batch import Batch
from aggregator.stats.kinds import codec_for
from client_sdk import mechanisms

K, N, W = 64, 100_000, detect.TRAILING["hour"]
FAKES = N // 100
TARGET = 40  # a value with a small honest share


def population(k: int = K) -> np.ndarray:
    f = 1.0 / np.arange(1, k + 1)  # Zipf: a realistic skew
    return f / f.sum()


def honest_windows(m, windows: int, n: int, gen: np.random.Generator) -> np.ndarray:
    """Support counts of ``windows`` honest windows of n reports each, exactly."""
    f = population(m.domain_size)
    if m.name == "grr":
        rate = m.q + f * (m.p - m.q)
        return gen.multinomial(n, rate / rate.sum(), size=windows)
    true = gen.multinomial(n, f, size=windows)  # unary: bits independent given the values
    return gen.binomial(true, m.p) + gen.binomial(n - true, m.q)


def upper_bound(windows: int, alpha: float) -> int:
    """The 1 − 1e-4 quantile of Bin(windows, alpha): a sound test fails beyond it w.p. 1e-4."""
    return int(binom.ppf(1 - 1e-4, windows, alpha))


def test_the_hypergeometric_tail_is_exact() -> None:
    for count, population_, successes, draws in [
        (1700, 700_000, 10_640, 100_000),
        (28_000, 700_000, 190_000, 100_000),
        (5, 50, 20, 10),
        (3, 50, 20, 10),
        (11, 50, 20, 10),
    ]:
        got = detect.hypergeometric_upper_tail(count, population_, successes, draws)
        want = hypergeom.sf(count - 1, population_, successes, draws)
        # log-gammas of numbers near 10⁷ cancel to ~1e-9 in the log: relative 1e-8
        assert got == pytest.approx(want, rel=1e-8, abs=1e-300)


@pytest.mark.parametrize("name", ["grr", "oue"])
@pytest.mark.parametrize("alpha", [1e-3, 0.05])
def test_honest_windows_raise_alarms_at_most_at_the_configured_rate(
    name: str, alpha: float
) -> None:
    """2,000 honest windows (k = 64, n = 10⁵, six trailing windows each) at rate α."""
    m = mechanisms.create(name, epsilon=1.0, domain_size=K)
    gen = np.random.default_rng(2021)
    windows = 2_000
    alarmed = 0
    for _ in range(windows):
        c = honest_windows(m, W + 1, N, gen)
        found = detect.detect(m, "hour:x", (N, c[-1]), (W * N, c[:-1].sum(axis=0)), None, alpha)
        alarmed += bool(found)
    assert alarmed <= upper_bound(windows, alpha)
    if alpha == 0.05:  # not vacuous either: Holm is conservative, but not by 10×
        assert alarmed >= windows * alpha / 10


def test_the_seed_test_is_calibrated_on_honest_seeds() -> None:
    """Honest seeds are uniform over (P − 1)·P: the chi-square test's rate is α."""
    m = mechanisms.create("olh", epsilon=1.0, domain_size=K)
    gen = np.random.default_rng(7)
    alpha, windows = 0.05, 2_000
    seeds = (m.prime - 1) * m.prime
    probs = np.bincount(np.arange(seeds) % detect.SEED_BINS, minlength=detect.SEED_BINS) / seeds
    hist = gen.multinomial(N, probs, size=windows)
    p_values = np.array([detect.seeds_test(m, h, alpha)[2] for h in hist])
    rate = (p_values <= alpha).sum()
    sd = math.sqrt(windows * alpha * (1 - alpha))
    assert abs(rate - windows * alpha) <= 4 * sd  # the chi-square tail at df = 1023


def test_the_support_test_is_calibrated_for_unary_and_local_hashing() -> None:
    """Unary: Σ C(v) is Bin(n, p*) + Bin(n(k−1), q*); OLH: the enumerated moments match
    real reports (mean exactly p* + (k−1)q*, variance within sampling error)."""
    m = mechanisms.create("oue", epsilon=1.0, domain_size=K)
    gen = np.random.default_rng(11)
    windows, alpha = 4_000, 0.05
    totals = gen.binomial(N, m.p, windows) + gen.binomial(N * (K - 1), m.q, windows)
    rejected = sum(detect.support_test(m, N, int(t), alpha)[2] <= alpha for t in totals)
    assert abs(rejected - windows * alpha) <= 4 * math.sqrt(windows * alpha * (1 - alpha))

    olh = mechanisms.create("olh", epsilon=1.0, domain_size=K)
    mean, var = detect._olh_support_moments(olh.prime, olh.g, K, float(olh.keep))
    assert mean == pytest.approx(olh.p + (K - 1) * olh.q, rel=1e-9)
    codec = codec_for(olh)
    values = gen.choice(K, size=200_000, p=population())
    batch = codec.encode(values, gen)
    sizes = np.array(
        [len(olh.support(p)) for p in codec.to_payloads(Batch.take(batch, np.arange(20_000)))]
    )
    assert sizes.mean() == pytest.approx(mean, abs=4 * math.sqrt(var / sizes.size))
    assert sizes.var() <= var * (1 + 4 * math.sqrt(2 / sizes.size))  # var is the max over v


def test_the_maximal_gain_attack_on_grr_alarms_in_its_window() -> None:
    """1 % fakes reporting the target (k = 64, ε = 1, n = 10⁵): an alarm every time."""
    m = mechanisms.create("grr", epsilon=1.0, domain_size=K)
    gen = np.random.default_rng(3)
    # The z the attack produces on average: the target's support rate rises by about
    # FAKES/(N + FAKES) (its honest rate is ~q*); z has unit variance around it.
    rate = m.q + population()[TARGET] * (m.p - m.q)
    n1, n2 = N + FAKES, W * N
    now_rate = (rate * N + FAKES) / n1
    pooled = (now_rate * n1 + rate * n2) / (n1 + n2)
    expected = (now_rate - rate) / math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    for _ in range(200):
        c = honest_windows(m, W + 1, N, gen)
        now = c[-1].copy()
        now[TARGET] += FAKES
        found = detect.detect(
            m, "hour:x", (N + FAKES, now), (W * N, c[:-1].sum(axis=0)), None, 1e-3
        )
        assert [a.kind for a in found] == ["shift"]
        assert found[0].values[0] == TARGET
        assert found[0].statistic == pytest.approx(expected, abs=5)


def test_power_on_oue_against_both_forms_of_the_attack() -> None:
    """Fakes setting only the target's bit fall ~16 ones short each: the support total
    catches them every time. Fakes padded to the honest number of ones (Cao et al.'s
    form) leave the total honest; then only the shift test is left."""
    m = mechanisms.create("oue", epsilon=1.0, domain_size=K)
    gen = np.random.default_rng(5)
    ones = round(m.p + (K - 1) * m.q)
    bare = padded = 0
    trials = 200
    for _ in range(trials):
        c = honest_windows(m, W + 2, N, gen)
        trailing = (W * N, c[:W].sum(axis=0))
        now = c[W].copy()
        now[TARGET] += FAKES
        kinds = {a.kind for a in detect.detect(m, "h", (N + FAKES, now), trailing, None, 1e-3)}
        bare += "support" in kinds
        now = c[W + 1].copy()
        now[TARGET] += FAKES
        others = np.delete(np.arange(K), TARGET)
        picks = np.argsort(gen.random((FAKES, K - 1)), axis=1)[:, : ones - 1]
        now += np.bincount(others[picks].ravel(), minlength=K)
        padded += bool(detect.detect(m, "h", (N + FAKES, now), trailing, None, 1e-3))
    assert bare == trials
    print(f"OUE padded MGA, 1 % fakes: alarmed in {padded}/{trials} windows")
    assert padded >= trials * 0.3  # measured 0.6; z ≈ 4.7 against a threshold of 4.3


def test_power_on_olh_seed_reuse_and_fresh_seeds() -> None:
    """Fakes that reuse one searched seed are caught by the seed test every time; fakes
    with a fresh random seed each (enough for one target) only by the shift test."""
    m = mechanisms.create("olh", epsilon=1.0, domain_size=K)
    codec = codec_for(m)
    gen = np.random.default_rng(13)
    n = 50_000
    fakes = n // 100
    f = population()
    trials = 20
    reused = fresh = 0
    for _ in range(trials):
        batches = [codec.encode(gen.choice(K, size=n, p=f), gen) for _ in range(W + 1)]
        counts = [codec.count(b) for b in batches]
        trailing = (W * n, np.sum(counts[:W], axis=0))
        now = batches[W]
        seeds = np.bincount(
            detect.seed_bins(m, now.columns["a"], now.columns["b"]), minlength=detect.SEED_BINS
        )
        # one seed, reused by every fake
        a, b = 1 + int(gen.integers(m.prime - 1)), int(gen.integers(m.prime))
        y = m.hash(a, b, TARGET)
        fake = Batch(
            fakes, {"a": np.full(fakes, a), "b": np.full(fakes, b), "y": np.full(fakes, y)}
        )
        support = counts[W] + codec.count(fake)
        hist = seeds + np.bincount(
            detect.seed_bins(m, fake.columns["a"], fake.columns["b"]), minlength=detect.SEED_BINS
        )
        found = detect.detect(m, "h", (n + fakes, support), trailing, hist, 1e-3)
        reused += "seeds" in {x.kind for x in found}
        # a fresh seed per fake
        fa = 1 + gen.integers(m.prime - 1, size=fakes)
        fb = gen.integers(m.prime, size=fakes)
        fy = ((fa * TARGET + fb) % m.prime) % m.g
        fake = Batch(fakes, {"a": fa, "b": fb, "y": fy})
        support = counts[W] + codec.count(fake)
        hist = seeds + np.bincount(detect.seed_bins(m, fa, fb), minlength=detect.SEED_BINS)
        found = detect.detect(m, "h", (n + fakes, support), trailing, hist, 1e-3)
        assert "seeds" not in {x.kind for x in found}
        fresh += bool(found)
    assert reused == trials
    print(f"OLH fresh-seed MGA, 1 % fakes, n = {n}: alarmed in {fresh}/{trials} windows")


def test_too_few_reports_raise_nothing() -> None:
    m = mechanisms.create("grr", epsilon=1.0, domain_size=K)
    support = np.zeros(K, dtype=np.int64)
    support[0] = detect.MIN_REPORTS - 1
    assert detect.detect(m, "h", (detect.MIN_REPORTS - 1, support), (10**6, support), None) == []

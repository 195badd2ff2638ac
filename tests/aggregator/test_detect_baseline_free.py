"""Poisoning alarms without a baseline (issue 29, item 6): GRR's floor test on a fresh metric
or the all-time window, and the string sketch's groups and rows tests.

False-alarm rates are measured on honest windows drawn exactly (seeded numpy), and bounded
by the 1 − 1e-4 quantile of Bin(windows, α); the floor test's null is the least favourable
honest population (everyone holds one value), where its rate must also be near α. Power is
measured on the attacks of the issue, crafted as an attacker would.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from aggregator.analysis.simulation import distribution
from aggregator.analysis.string_simulation import simulate_counts
from aggregator.analysis.vocabulary import synthetic_vocabulary, zipf_shares
from aggregator.stats import consistency, detect
from aggregator.stats.codecs import Counts
from aggregator.stats.discovery import discover
from aggregator.stats.kinds import codec_for
from aggregator.stats.strings import SketchEstimator
from client_sdk import mechanisms
from client_sdk.mechanisms.strings import StringSketch, normalise

K = 64


def upper_bound(windows: int, alpha: float) -> int:
    """The 1 − 1e-4 quantile of Bin(windows, alpha)."""
    return int(binom.ppf(1 - 1e-4, windows, alpha))


def lower_bound(windows: int, alpha: float) -> int:
    """The 1e-4 quantile of Bin(windows, alpha)."""
    return int(binom.ppf(1e-4, windows, alpha))


def grr_counts(m, f: np.ndarray, n: int, windows: int, gen: np.random.Generator) -> np.ndarray:
    """Support counts of honest GRR windows: Multinomial(n, q* + f(p* − q*))."""
    rate = m.q + f * (m.p - m.q)
    return gen.multinomial(n, rate / rate.sum(), size=windows)


@pytest.mark.parametrize("n", [10**5, 10**6])
def test_the_floor_test_is_calibrated_at_the_least_favourable_population(n: int) -> None:
    """Everyone holds value 0: k − 1 values sit on the floor q*, the case the null bounds
    (the bound also counts the held value's term, which its users lift to 0: the rate is
    about half of α there, and lower for every other population)."""
    m = mechanisms.create("grr", epsilon=1.0, domain_size=K)
    gen = np.random.default_rng(29)
    f = np.zeros(K)
    f[0] = 1.0
    windows, alpha = 4_000, 0.01
    counts = grr_counts(m, f, n, windows, gen)
    rejected = sum(
        consistency.floor_test(K, m.p, m.q, n, c, alpha).p_value <= alpha for c in counts
    )
    print(f"floor test at its least favourable population, n = {n}: {rejected} of {windows}")
    assert windows * alpha / 4 <= rejected <= upper_bound(windows, alpha), rejected


@pytest.mark.parametrize("dist", ["zipf", "geometric", "uniform"])
def test_honest_fresh_windows_raise_at_most_the_configured_rate(dist: str) -> None:
    """No baseline: GRR runs the floor test alone, at the whole α (k = 64, n = 10⁵)."""
    m = mechanisms.create("grr", epsilon=1.0, domain_size=K)
    gen = np.random.default_rng(6)
    windows, alpha = 2_000, 0.05
    counts = grr_counts(m, distribution(dist, K), 10**5, windows, gen)
    alarmed = sum(bool(detect.detect(m, "all", (10**5, c), None, None, alpha)) for c in counts)
    print(f"fresh honest GRR windows, {dist}: {alarmed} of {windows} alarmed at α = {alpha}")
    assert alarmed <= upper_bound(windows, alpha)


def test_one_percent_crafted_grr_on_a_fresh_metric_raises_the_floor_alarm() -> None:
    """Issue 29 6(a): 1 % of the reports crafted for one value (k = 64, ε = 1: it moves from
    0.8 % to ≈ 38 %), and no earlier window. The shift test cannot run; the crafted reports
    thin every other value below q*, which no honest population does. 10⁶ reports, most of
    the domain rarely used (geometric): caught in ≥ 80 of 100 windows (measured 88). The
    docs/security/poisoning.md's table gives the shares and sizes below which it is not."""
    m = mechanisms.create("grr", epsilon=1.0, domain_size=K)
    gen = np.random.default_rng(61)
    f = distribution("geometric", K)
    target = int(np.argmin(np.abs(f - 0.008)))
    n = 10**6
    fakes = round(0.01 * n / 0.99)
    counts = grr_counts(m, f, n, 100, gen)
    counts[:, target] += fakes
    caught = 0
    for c in counts:
        found = detect.detect(m, "all", (n + fakes, c), None, None, detect.DEFAULT_ALARM_RATE)
        assert {a.kind for a in found} <= {"floor"}
        caught += bool(found)
    shifted = (counts[:, target] / (n + fakes) - m.q) / (m.p - m.q)
    assert shifted.mean() == pytest.approx(0.385, abs=0.01)  # the 0.8 % → 38.5 %
    print(f"floor test, 1 % crafted GRR, fresh metric: caught in {caught} of 100")
    assert caught >= 80, caught


# -- strings -------------------------------------------------------------------------------


def test_the_group_test_is_calibrated() -> None:
    """Honest group sizes are Multinomial(n, 1/G) whatever the values: rate α."""
    m = StringSketch(epsilon=4.0, max_length=16, salt="5eed")
    gen = np.random.default_rng(17)
    windows, alpha = 2_000, 0.05
    sizes = gen.multinomial(66_000, np.full(m.groups, 1 / m.groups), size=windows)
    rejected = 0
    for s in sizes:
        support = np.zeros((m.groups, m.cells), dtype=np.int64)
        support[:, 0] = s
        rejected += consistency.groups_test(m, support.ravel(), alpha)[2] <= alpha
    print(f"group test, honest sizes: {rejected} of {windows} at α = {alpha}")
    assert lower_bound(windows, alpha) <= rejected <= upper_bound(windows, alpha), rejected


TARGET = '=WEBSERVICE("http://x")'


def crafted(m: StringSketch, reports: int, rows: int, gen: np.random.Generator) -> Counts:
    """Crafted (level, row, cell) reports for TARGET: spread evenly over the levels, into
    the first ``rows`` rows of each (0: a uniformly drawn row, as a device picks it)."""
    padded = normalise(TARGET, m.max_length)
    support = np.zeros(m.counters, dtype=np.int64)
    for i in range(reports):
        level = i % m.levels
        row = (i // m.levels) % rows if rows else int(gen.integers(m.rows))
        group = level * m.rows + row
        support[group * m.cells + m.cell(padded, level, row)] += 1
    return Counts(reports, support)


@pytest.fixture(scope="module")
def honest_strings() -> tuple[StringSketch, np.ndarray, np.ndarray]:
    m = StringSketch(epsilon=8.0, max_length=16, salt="5eed")
    vocab = synthetic_vocabulary(5_000, 16, seed=4)
    return m, vocab, zipf_shares(5_000, 1.1)


def test_honest_discovered_values_raise_the_rows_alarm_at_most_at_its_rate(
    honest_strings: tuple[StringSketch, np.ndarray, np.ndarray],
) -> None:
    """Every value discovered in 4 honest windows (≈ 30 each, n = 66,000, ε = 8), tested
    at α = 0.05 each: at most the binomial bound of α over all of them; and no window
    alarms at the default rate (a sum of the dispersion over the levels instead of their
    median alarmed on windows 11 and 13: false discoveries, whose mass is collisions)."""
    m, vocab, shares = honest_strings
    alpha, p_values = 0.05, []
    for seed in range(10, 14):  # 11 and 13 alarmed with a sum over levels (issue 29)
        counts, _ = simulate_counts(m, vocab, shares, 66_000, np.random.default_rng(seed))
        est = SketchEstimator(codec_for(m), counts)
        found = discover(est)
        # The window as the API tests it: no alarm at the default rate (false discoveries,
        # whose mass is collisions in a row or two of a few levels, included).
        assert detect.detect_sketch(est, "all", found.values, found.known) == []
        padded = np.frombuffer(b"".join(found.values), dtype=np.uint8).reshape(-1, m.levels)
        p_values += consistency.sketch_rows_test(est, padded, found.known, alpha).p_values.tolist()
    tested = len(p_values)
    assert tested >= 100
    rejected = sum(p <= alpha for p in p_values)
    print(f"rows test, honest discovered values: {rejected} of {tested} at α = {alpha}")
    assert rejected <= upper_bound(tested, alpha)


def test_four_hundred_crafted_sketch_reports_are_discovered_and_alarmed(
    honest_strings: tuple[StringSketch, np.ndarray, np.ndarray],
) -> None:
    """Issue 29 6(c): 400 crafted reports (0.6 % of n) make TARGET a discovered value. Put
    into 4 of the 8 rows of each level, the rows alarm names it; into one row of each level
    at ε = 4 (2,048 groups), the group sizes give them away though TARGET is not found.
    Spread over every row as devices spread theirs, they are an honest value of ≈ 2 %:
    discovered, and no test can tell (docs/security/poisoning.md)."""
    m, vocab, shares = honest_strings
    gen = np.random.default_rng(400)
    counts, _ = simulate_counts(m, vocab, shares, 66_000, gen)
    target = normalise(TARGET, m.max_length)

    poisoned = counts + crafted(m, 400, 4, gen)
    est = SketchEstimator(codec_for(m), poisoned)
    found = discover(est)
    assert target in found.values
    alarms = detect.detect_sketch(est, "all", found.values, found.known)
    assert [a.kind for a in alarms] == ["rows"]
    assert found.values[alarms[0].values[0]] == target
    assert TARGET[: m.max_length] in alarms[0].evidence

    spread = counts + crafted(m, 400, 0, gen)
    est = SketchEstimator(codec_for(m), spread)
    found = discover(est)
    assert target in found.values
    assert detect.detect_sketch(est, "all", found.values, found.known) == []

    wide = StringSketch(epsilon=4.0, max_length=16, salt="5eed")
    counts, _ = simulate_counts(wide, vocab, shares, 66_000, gen)
    est = SketchEstimator(codec_for(wide), counts + crafted(wide, 400, 1, gen))
    kinds = [a.kind for a in detect.detect_sketch(est, "all", [], [])]
    assert kinds == ["groups"]

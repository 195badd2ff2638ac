"""A trend's windows computed at once (:func:`aggregator.stats.series.estimate_series`)
are each window's own answer (:func:`aggregator.stats.frequency.estimate_from_counts`):
every categorical mechanism a metric can use, both estimands, every multiplicity mode,
memoized pools of several reports per device, windows in both interval regimes and
windows without reports. A numeric trend's confidence sequences, computed at once, are
each window's within the root finder's tolerance; compact numbers are rounded within a
twentieth of their standard error.
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pytest

from aggregator.stats.anytime import mean_cs, mean_cs_many
from aggregator.stats.codecs import Counts
from aggregator.stats.frequency import estimate_from_counts
from aggregator.stats.series import estimate_series, round_to_error
from client_sdk.mechanisms import (
    MECHANISMS,
    FrequencyOracle,
    Memoized,
    PostRandomization,
    create,
    create_numeric,
)

K = 6
N = np.array([0, 12, 40, 90, 300, 1_000, 4_000, 25_000, 7, 150, 2_500, 600], dtype=np.int64)
"""Reports per window: none, the exact regime (a few dozen) and the score regime."""
SHOWN = np.array([4, 0, 2])
"""Values shown, out of domain order: the trend's pick, not the domain's."""


def mechanism(name: str) -> FrequencyOracle:
    if name == "pram":
        keep = 0.7
        matrix = [[keep if i == j else (1 - keep) / (K - 1) for j in range(K)] for i in range(K)]
        return create("pram", domain_size=K, matrix=matrix)
    if name == "rr":
        return create("rr", epsilon=1.0)
    if name.startswith("memo-"):
        return create(name, epsilon=1.0, domain_size=K, permanent_epsilon=3.0)
    return create(name, epsilon=1.0, domain_size=K)


def counts_of(m: FrequencyOracle, seed: int) -> np.ndarray:
    """Support counts per window as reports of shares 0.4, 0.25, … would give them."""
    rng = np.random.default_rng(seed)
    k = m.domain_size
    shares = np.linspace(2.0, 1.0, k) / np.linspace(2.0, 1.0, k).sum()
    if isinstance(m, PostRandomization):  # one reported value per report
        reported = shares @ np.asarray(m.matrix)
        return np.stack([rng.multinomial(int(n), reported) for n in N]).astype(np.int64)
    rate = np.clip(float(m.q) + (float(m.p) - float(m.q)) * shares, 0.0, 1.0)
    return np.stack([rng.binomial(int(n), rate) for n in N]).astype(np.int64)


@pytest.mark.parametrize("multiplicity", ["each", "simultaneous", "fdr"])
@pytest.mark.parametrize("estimand", ["reporters", "population"])
@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_every_window_is_its_own_answer(name: str, estimand: str, multiplicity: str) -> None:
    m = mechanism(name)
    k = m.domain_size
    shown = SHOWN[SHOWN < k]
    support = counts_of(m, seed=len(name))
    r = np.where(np.arange(len(N)) % 3 == 0, 3.0, 1.0) if isinstance(m, Memoized) else None
    series = estimate_series(
        m,
        N,
        support,
        shown,
        0.9,
        reports_per_device=r,
        estimand=estimand,
        multiplicity=multiplicity,
    )
    sequence = name != "pram"
    for w, n in enumerate(N):
        if n == 0:
            assert np.isnan(series.frequency[w]).all() and not series.distinguishable[w].any()
            continue
        est = estimate_from_counts(
            m,
            Counts(int(n), support[w]),
            0.9,
            reports_per_device=1.0 if r is None else float(r[w]),
            estimand=estimand,
            multiplicity=multiplicity,
        )
        for got, want in (
            (series.frequency, est.frequencies),
            (series.std_error, est.std_errors),
            (series.ci_low, est.ci_low),
            (series.ci_high, est.ci_high),
            (series.norm_sub, est.norm_sub),
            (series.p_value, est.p_values),
        ):
            np.testing.assert_array_equal(got[w], np.asarray(want)[shown])  # bit for bit
        np.testing.assert_array_equal(series.distinguishable[w], est.distinguishable[shown])
        assert series.interval[w] == est.interval
        hidden = np.setdiff1d(np.arange(k), shown)
        assert series.rest_frequency[w] == pytest.approx(est.frequencies[hidden].sum(), abs=1e-12)
        if sequence:
            cs = est.sequence_read()
            np.testing.assert_array_equal(series.cs_low[w], cs.low[shown])
            np.testing.assert_array_equal(series.cs_high[w], cs.high[shown])
            np.testing.assert_array_equal(series.cs_distinguishable[w], cs.flags[shown])
    assert {"score", "exact"} <= set(series.interval)  # both regimes were compared


def test_norm_sub_only_where_asked() -> None:
    m = mechanism("oue")
    support = counts_of(m, seed=1)
    every = estimate_series(m, N, support, SHOWN)
    bare = estimate_series(m, N, support, SHOWN, norm_sub=False, sequence=False)
    assert np.isnan(bare.norm_sub).all() and np.isnan(bare.cs_low).all()
    np.testing.assert_array_equal(bare.ci_low, every.ci_low)
    np.testing.assert_array_equal(bare.rest_frequency, every.rest_frequency)


def test_rounding_to_the_error_moves_a_number_by_at_most_a_twentieth_of_it() -> None:
    """u = 10^(⌊log₁₀ SE⌋ − 1) ≤ SE/10, so |round(x) − x| ≤ u/2 ≤ SE/20; the bound is
    reached (SE just below a power of ten, x halfway between two digits), and the
    rounded numbers print as their few digits."""
    rng = np.random.default_rng(43)
    se = 10.0 ** rng.uniform(-8, 1, 100_000)
    x = rng.uniform(-1.5, 1.5, se.size)
    rounded = round_to_error(x, se)
    error = np.abs(rounded - x)
    assert np.all(error <= se / 20 * (1 + 1e-9))
    assert np.max(error / se) > 0.045  # near the bound: the rounding is as coarse as allowed
    u = 10.0 ** (np.floor(np.log10(se)) - 1)
    printed = [Decimal(repr(float(v))).as_tuple().exponent for v in rounded]
    assert np.all(np.array(printed) >= np.log10(u).round())  # no digit printed below u
    two = round_to_error(se, se)
    assert np.all(np.abs(two - se) <= se / 20 * (1 + 1e-9))
    kept = round_to_error(np.array([0.123456789, 0.5, np.nan]), np.array([np.nan, 0.0, 0.1]))
    np.testing.assert_array_equal(kept[:2], [0.123456789, 0.5])  # no error known: as is
    assert np.isnan(kept[2])


@pytest.mark.parametrize("name", ["duchi", "pm", "hybrid"])
def test_a_numeric_trends_sequences_are_each_windows_own(name: str) -> None:
    """:func:`mean_cs_many` over windows is :func:`mean_cs` per window, within the root
    finder's tolerance (its documented worst: 2·10⁻⁵ of the half-width): the mixture's
    terms are summed over an array, in another order."""
    mech = create_numeric(name, epsilon=1.0)
    rng = np.random.default_rng(len(name))
    n = [0, 1, 2, 5, 40, 300, 2_000, 9_000]
    units = int(mech.bound_units)
    totals, squares = [], []
    for count in n:
        ys = rng.integers(-units, units + 1, count) if name != "duchi" else None
        if ys is None:
            ys = rng.choice([-units, units], count)
        totals.append(sum(int(y) for y in ys))
        squares.append(sum(int(y) * int(y) for y in ys))
    lows, highs = mean_cs_many(mech, n, totals, squares, 0.05, value_range=(0.0, 120.0))
    for count, total, square, low, high in zip(n, totals, squares, lows, highs, strict=True):
        want = mean_cs(mech, count, total, square, 0.05, value_range=(0.0, 120.0))
        if count == 0:
            assert np.isnan(want).all() and np.isnan([low, high]).all()
            continue
        half = (want[1] - want[0]) / 2
        assert abs(low - want[0]) <= 2e-5 * half and abs(high - want[1]) <= 2e-5 * half

"""The numeric mean's interval: a t score interval floored at the mechanism's least variance.

The plain ȳ ± z·√(s²/n) answered "mean 122.239 ± 0" for Duchi's mechanism at n = 20 and
covered 41 % (Duchi), 82 % (PM), 79 % (hybrid) at ε = 4 with values at a range end. Every
test here goes through the public API (``estimate_mean`` on a codec's statistics) and
fails on that interval: it had zero width and low coverage in exactly these cases.

Simulations use numpy's PCG64 through ``NumericCodec.encode`` (the SDK's discrete law,
checked against it in ``test_numeric_estimate.py``), seeded. Coverage tolerances are
binomial: with R intervals of true coverage 95 %, the count's sd is √(R·0.95·0.05); at
R = 2000 the required 93 % lies 4.1 sd below 95 %, so a correct interval fails the
check with probability below 10⁻⁴, and one covering ≤ 90 % passes it with probability
below 10⁻⁶.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy.stats import t as student_t

from aggregator.stats.intervals import t_value, z_value
from aggregator.stats.numeric import (
    INTERVAL_METHOD,
    NumericCodec,
    NumericEstimate,
    NumericStats,
    estimate_mean,
    mean_interval,
)
from client_sdk import mechanisms
from client_sdk.mechanisms.numeric import SCALE
from client_sdk.wire import MetricDefinition, parse_spec

NAMES = ["duchi", "pm", "hybrid"]
REPS = 2000
REQUIRED = 0.93


def metric(mechanism: str, epsilon: float) -> MetricDefinition:
    spec = {"kind": "numeric", "range": [0, 120], "epsilon": epsilon, "mechanism": mechanism}
    return parse_spec("session.minutes", spec)


def simulate(
    d: MetricDefinition, values: np.ndarray, reps: int, seed: int
) -> list[NumericEstimate]:
    """``reps`` estimates, each from one report of every value (the same devices each time)."""
    codec = NumericCodec(d.numeric)
    gen = np.random.default_rng(seed)
    x = np.array([d.scaled(float(v)) for v in values])
    units = codec.encode(np.tile(x, reps), gen).columns["y"].reshape(reps, len(values))
    return [estimate_mean(d, NumericStats.of_units(row)) for row in units.tolist()]


def coverage(estimates: list[NumericEstimate], truth: float) -> float:
    return sum(e.ci_low <= truth <= e.ci_high for e in estimates) / len(estimates)


# -- the issue's cases ----------------------------------------------------------------------


def test_the_zero_width_interval_of_the_issue_is_gone() -> None:
    """Duchi at ε = 4, n = 20, every report +C: the old interval was 122.239 ± 0."""
    d = metric("duchi", 4.0)
    k = d.numeric.bound_units
    est = estimate_mean(d, NumericStats.of_units([k] * 20))
    assert est.mean == pytest.approx(122.239, abs=5e-4)
    assert est.ci_high - est.ci_low > 20.0  # was 0
    assert est.ci_low <= 119.0 <= est.ci_high and est.ci_low <= 120.0 <= est.ci_high
    # All 20 reports are +C with probability ((C+x)/2C)²⁰; below ~101 that is < 2.5 %.
    assert 95.0 < est.ci_low < 105.0
    assert est.std_error > 0.0  # √(max(s², V(ȳ))/n), V at the range end: s² = 0 is floored


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0])
@pytest.mark.parametrize("name", NAMES)
def test_intervals_cover_near_a_range_end_at_n_20(name: str, epsilon: float) -> None:
    """20 devices at 119 of [0, 120]: every interval has width, ≥ 93 % cover (was 41–93 %)."""
    d = metric(name, epsilon)
    estimates = simulate(d, np.full(20, 119.0), REPS, seed=11)
    assert min(e.ci_high - e.ci_low for e in estimates) > 0.0
    assert coverage(estimates, 119.0) >= REQUIRED


def test_sdk_reports_decoded_by_the_codec_cover_too() -> None:
    """The same check through the SDK's own perturb and ``NumericCodec.decode``.

    1,000 intervals: 93 % is 3 sd below 95 % there, and this case (PM, ε = 4, at 119)
    covered 82 % before.
    """
    d = metric("pm", 4.0)
    m, codec = d.numeric, NumericCodec(d.numeric)
    rng = random.Random(3)
    x = d.scaled(119.0)
    covered = 0
    for _ in range(1000):
        est = estimate_mean(d, codec.decode([m.perturb(x, rng) for _ in range(20)]))
        assert est.ci_high > est.ci_low
        covered += est.ci_low <= 119.0 <= est.ci_high
    assert covered / 1000 >= REQUIRED


@pytest.mark.parametrize(
    ("name", "epsilon"), [("duchi", 8.0), ("pm", 1.0), ("pm", 8.0), ("hybrid", 8.0)]
)
@pytest.mark.parametrize("n", [2, 3, 5, 10])
def test_intervals_hold_at_every_n_from_two(name: str, epsilon: float, n: int) -> None:
    """Devices near the low end and devices spread over the range, n = 2 to 10.

    The target is the mean of the reporting devices' values. At high ε the old interval
    collapsed whenever the few reports agreed (Duchi at ε = 8, n = 3: 14 % coverage).
    """
    d = metric(name, epsilon)
    for values in (np.full(n, 1.0), np.linspace(0.0, 120.0, n)):
        estimates = simulate(d, values, 1000, seed=n)
        # 1,000 intervals: 93 % is 2.9 sd below 95 %; a collapsing interval is far below.
        assert coverage(estimates, float(values.mean())) >= REQUIRED, values


# -- large n: the price is small ------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0])
@pytest.mark.parametrize("name", NAMES)
def test_at_ten_thousand_reports_the_interval_is_the_plain_one_within_a_few_percent(
    name: str, epsilon: float
) -> None:
    """Width over 2·z·s/√n, averaged over 20 samples: within [1, 1.05] near a range end."""
    d = metric(name, epsilon)
    z = z_value(0.95)
    ratios = []
    for est in simulate(d, np.full(10_000, 119.0), 20, seed=5):
        plain = 2 * z * math.sqrt(est.stats.sample_variance / est.n) * 60.0
        ratios.append((est.ci_high - est.ci_low) / plain)
    assert 1.0 <= float(np.mean(ratios)) <= 1.05


# -- the interval's algebra -----------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_mean_interval_is_the_hull_of_the_means_the_test_keeps(name: str) -> None:
    """Brute force: μ on a fine grid is kept iff |ȳ − μ| ≤ t·√(max(s², V(clip μ))/n)."""
    rng = random.Random(len(name))
    for epsilon in (0.5, 1.0, 4.0):
        m = mechanisms.create_numeric(name, epsilon)
        for _ in range(30):
            n = rng.choice([2, 3, 5, 20, 100])
            mean = rng.uniform(-1.6, 1.6)
            variance = rng.choice([0.0, rng.uniform(0, 2) * m.min_variance()])
            lo, hi = mean_interval(m, mean, variance, n, 0.95)
            t = student_t.ppf(0.975, n - 1)
            grid = np.linspace(lo - 1.0, hi + 1.0, 200_001)
            floor = np.array([m.min_variance(float(v)) for v in np.clip(grid[::100], -1, 1)])
            floor = np.repeat(floor, 100)[: len(grid)]
            kept = np.abs(mean - grid) <= t * np.sqrt(np.maximum(variance, floor) / n)
            step = 100 * (grid[1] - grid[0])  # the floor is evaluated every 100 points
            assert lo <= mean <= hi
            assert grid[kept].min() == pytest.approx(lo, abs=2 * step)
            assert grid[kept].max() == pytest.approx(hi, abs=2 * step)


def test_t_value_matches_scipy() -> None:
    for df in [*range(1, 40), 99, 500, 999, 1000, 5000, 10**6]:
        for level in (0.5, 0.8, 0.9, 0.95, 0.99, 0.999, 0.9999):
            assert t_value(level, df) == pytest.approx(
                student_t.ppf(0.5 + level / 2, df), rel=1e-10
            )
    with pytest.raises(ValueError, match="degrees of freedom"):
        t_value(0.95, 0)
    with pytest.raises(ValueError, match="confidence"):
        t_value(1.0, 5)


# -- the estimate's fields ------------------------------------------------------------------


def test_the_estimate_names_its_interval_and_keeps_the_conventions() -> None:
    d = metric("hybrid", 2.0)
    codec = NumericCodec(d.numeric)
    stats = codec.stats(codec.encode(np.full(50, d.scaled(30.0)), np.random.default_rng(1)))
    est = estimate_mean(d, stats, confidence=0.9)
    assert est.interval == INTERVAL_METHOD and est.to_dict()["interval"] == INTERVAL_METHOD
    assert est.conf_int(0.1) == (est.ci_low, est.ci_high)
    wider = est.conf_int(0.01)
    assert wider[0] < est.ci_low and wider[1] > est.ci_high
    assert est.ci_low < est.mean < est.ci_high
    floor = d.numeric.min_variance(stats.mean)
    assert est.std_error == pytest.approx(60 * math.sqrt(max(stats.sample_variance, floor) / 50))
    assert "95%" not in est.summary() and "90%" in est.summary()
    for n in (0, 1):
        small = estimate_mean(d, NumericStats.of_units([SCALE // 2] * n))
        body = small.to_dict()
        assert body["ci_low"] is None and body["ci_high"] is None and body["std_error"] is None
        assert body["interval"] == INTERVAL_METHOD
        assert (body["mean"] is None) == (n == 0)
        assert all(math.isnan(v) for v in small.conf_int(0.05))
    with pytest.raises(ValueError, match="confidence"):
        estimate_mean(d, NumericStats.of_units([1]), confidence=0.0)

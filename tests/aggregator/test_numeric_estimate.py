"""Numeric estimation: exact sums, the batch codec, unbiased means and nominal coverage."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import chisquare

from aggregator.stats.numeric import (
    NumericCodec,
    NumericEstimate,
    NumericStats,
    estimate_mean,
)
from client_sdk import mechanisms
from client_sdk.errors import PayloadError
from client_sdk.mechanisms.numeric import SCALE
from client_sdk.wire import MetricDefinition, parse_spec
from ldp_store.schema import LIMB_BITS, increment_fields, limbs

NAMES = ["duchi", "pm", "hybrid"]


def metric(
    mechanism: str, epsilon: float = 1.0, low: float = 0, high: float = 120
) -> MetricDefinition:
    spec = {"kind": "numeric", "range": [low, high], "epsilon": epsilon, "mechanism": mechanism}
    return parse_spec("session.minutes", spec)


# -- exact sums -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "total",
    [0, 1, -1, 2**31 - 1, -(2**31), 2**31, -(2**31) - 1, 2**63, -(2**107) + 12345, 3**150],
)
def test_limbs_rebuild_any_integer_with_small_limbs(total: int) -> None:
    parts = limbs(total)
    assert sum(limb << (LIMB_BITS * i) for i, limb in enumerate(parts)) == total
    assert all(0 <= limb < 2**LIMB_BITS for limb in parts[:-1])
    assert -(2 ** (LIMB_BITS - 1)) <= parts[-1] < 2 ** (LIMB_BITS - 1)


def test_stats_add_up_and_survive_the_hash_round_trip() -> None:
    rng = random.Random(1)
    big = mechanisms.PiecewiseMechanism(1e-4).cells - 1  # the largest report of all
    batches = [
        [rng.choice([-big, big, 2 * rng.randrange(big // 2) + 1]) for _ in range(500)]
        for _ in range(5)
    ]
    stored: dict[str, int] = {}
    total = NumericStats.zeros()
    for units in batches:
        stats = NumericStats.of_units(units)
        total += stats
        pairs = increment_fields(stats.increments())
        assert pairs[:2] == ["n", 500]
        for name, value in zip(pairs[::2], pairs[1::2], strict=True):
            assert abs(int(value)) < 2**LIMB_BITS
            stored[str(name)] = stored.get(str(name), 0) + int(value)  # what HINCRBY does
    everything = [u for units in batches for u in units]
    assert total == NumericStats.of_units(everything)
    assert NumericStats.from_fields(stored) == total
    assert (
        NumericStats.from_fields({k.encode(): str(v).encode() for k, v in stored.items()}) == total
    )
    assert total.total_sq == sum(u * u for u in everything) > 2**63  # beyond one Redis field


def test_foreign_fields_are_corrupt_numeric_counts() -> None:
    with pytest.raises(ValueError, match="does not belong"):
        NumericStats.from_fields({"n": 1, "c:3": 1})


def test_sample_variance_is_exact_from_the_integer_sums() -> None:
    units = [3, -5, 7, 7, -1]
    stats = NumericStats.of_units(units)
    ys = [Fraction(u, SCALE) for u in units]
    mean = sum(ys) / len(ys)
    assert stats.mean == float(mean)
    assert stats.sample_variance == float(sum((y - mean) ** 2 for y in ys) / (len(ys) - 1))
    assert math.isnan(NumericStats.zeros().mean)
    assert math.isnan(NumericStats.of_units([1]).sample_variance)


def exact_bins(m: mechanisms.NumericMechanism, x: float, edges: list[int]) -> list[Fraction]:
    """Exact probability that a report (units) falls in [edges[i], edges[i+1]), from the SDK."""
    out = [Fraction(0)] * (len(edges) - 1)
    for s in m.pmf(x):
        for b in range(len(edges) - 1):
            first = max(0, -(-(edges[b] - s.first) // s.step))
            stop = min(s.size, -(-(edges[b + 1] - s.first) // s.step))
            if stop > first:
                out[b] += s.probability * (stop - first)
    return out


# -- the codec ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_codec_parses_exactly_what_check_payload_accepts(name: str) -> None:
    d = metric(name, 2.0)
    m = d.numeric
    codec = NumericCodec(m)
    rng = random.Random(4)
    payloads = [m.perturb(rng.uniform(-1, 1), rng) for _ in range(300)]
    batch = codec.parse(payloads)
    assert batch.columns["y"].tolist() == [m.units(p) for p in payloads]
    assert codec.decode(payloads) == NumericStats.of_units([m.units(p) for p in payloads])
    assert codec.to_payloads(batch) == payloads
    assert codec.parse([]).n == 0
    for bad in (
        {"y": 1},
        {"y": 0.1},
        {"y": math.nan},
        {"y": 4 * m.bound},
        {"y": 2.0, "z": 1},
        {"v": 1.0},
        {"y": True},
        [1.0],
        {"y": 2.0**-31},
    ):
        with pytest.raises(PayloadError, match=r"payload #2: .* payload"):
            codec.parse([payloads[0], payloads[1], bad, payloads[3]])
        with pytest.raises(PayloadError):
            m.check_payload(bad)


@pytest.mark.parametrize(
    ("name", "epsilon", "x"),
    [("duchi", 1.0, 0.4), ("pm", 1.0, 0.3), ("hybrid", 2.0, -0.6), ("pm", 6.0, 0.95)],
)
def test_the_numpy_simulator_draws_the_sdk_law(name: str, epsilon: float, x: float) -> None:
    """Chi-square of 200,000 simulated reports against the SDK's exact law, on 30 bins."""
    m = mechanisms.create_numeric(name, epsilon)
    bound = m.bound_units
    edges = [-bound + (2 * bound + 1) * b // 30 for b in range(31)]
    expected = exact_bins(m, x, edges)
    units = NumericCodec(m).encode(np.full(200_000, x), np.random.default_rng(9)).columns["y"]
    hist = np.histogram(units, bins=np.asarray(edges, dtype=np.float64))[0]
    keep = [b for b in range(30) if expected[b] > 0]
    assert all(hist[b] == 0 for b in range(30) if expected[b] == 0)
    f_exp = np.array([float(expected[b]) for b in keep]) * len(units)
    assert chisquare(hist[keep], f_exp * hist[keep].sum() / f_exp.sum()).pvalue > 1e-4
    assert all(m.is_report(int(u)) for u in units[:2000])


# -- estimates ------------------------------------------------------------------------------


def test_estimate_maps_back_to_the_metrics_units() -> None:
    d = metric("duchi", low=-10, high=30)
    k = d.numeric.bound_units
    stats = NumericStats.of_units([k, k, -k, k])  # ȳ = C/2
    est = estimate_mean(d, stats, confidence=0.9)
    c = d.numeric.bound
    assert est.mean == pytest.approx(10 + 20 * c / 2)
    assert est.std_error == pytest.approx(20 * math.sqrt(stats.sample_variance / 4))
    assert est.std_error_worst_case == pytest.approx(20 * c / 2)  # √(C²/4)·half
    lo, hi = est.conf_int(0.1)
    assert (lo, hi) == pytest.approx((est.ci_low, est.ci_high))
    assert est.mean_clipped == 30.0 and est.mean > 30  # few reports: unbiased leaves the range
    body = est.to_dict()
    assert body["kind"] == "numeric" and body["range"] == [-10.0, 30.0]
    assert body["mean_clipped"] == 30.0 and body["n"] == 4
    assert "duchi" in est.summary()


def test_no_reports_give_nan_estimates_and_one_report_no_interval() -> None:
    d = metric("pm")
    est = estimate_mean(d, NumericStats.zeros())
    assert est.n == 0 and math.isnan(est.mean) and math.isnan(est.ci_low)
    assert est.to_dict()["mean"] is None and est.to_dict()["std_error"] is None
    one = estimate_mean(d, NumericStats.of_units([1]))
    assert not math.isnan(one.mean) and math.isnan(one.std_error)
    assert one.std_error_worst_case > 0


def test_estimate_refuses_categorical_metrics_and_bad_levels() -> None:
    theme = parse_spec("app.theme", {"domain": ["a", "b"], "epsilon": 1.0})
    with pytest.raises(ValueError, match="not numeric"):
        estimate_mean(theme, NumericStats.zeros())
    with pytest.raises(ValueError, match="confidence"):
        estimate_mean(metric("pm"), NumericStats.zeros(), confidence=1.5)
    assert isinstance(estimate_mean(metric("pm"), NumericStats.zeros()), NumericEstimate)


POPULATIONS = {
    # name: (a sampler of n values in [0, 120], the distribution's mean)
    "point mass at the top": (lambda g, n: np.full(n, 120.0), 120.0),
    "skewed": (
        lambda g, n: np.minimum(120.0, g.exponential(15.0, n)),
        15.0 * (1 - math.exp(-8.0)),  # E[min(X, 120)], X ~ Exp(mean 15)
    ),
    "bimodal": (lambda g, n: np.where(g.random(n) < 0.3, 5.0, 100.0), 0.3 * 5 + 0.7 * 100),
    "uniform": (lambda g, n: g.uniform(0, 120, n), 60.0),
}


@pytest.mark.slow
@pytest.mark.parametrize(("name", "epsilon"), [("duchi", 0.5), ("pm", 4.0), ("hybrid", 1.0)])
def test_means_are_unbiased_and_intervals_cover_nominally(name: str, epsilon: float) -> None:
    """3,200 intervals at 95 %: 800 per population, each from n = 500 fresh users.

    Each replicate draws its users from the population, so the target is the population
    mean, which the plug-in interval is for. Coverage: Bin(3200, 0.95) has sd 0.39 %, so
    ±1.5 % is 3.9 sd. Bias: the average error of a population's 800 estimates is within
    4 sd of 0, the sd from theory: Var[ȳ] = (E_x E[y² | x] − E[x]²)/n with the
    mechanism's exact second moment (its mean over the population by a 10⁶-draw Monte
    Carlo). The MSE matches that variance within 20 %: the estimates are nearly normal,
    so an 800-sample MSE has a relative sd of √(2/800) = 5 %, and 20 % is 4 sd.
    """
    d = metric(name, epsilon)
    m = d.numeric
    codec = NumericCodec(m)
    gen = np.random.default_rng(2024)
    reps, n = 800, 500
    covered = total = 0
    for sample, truth in POPULATIONS.values():
        big = (sample(gen, 10**6) - 60.0) / 60.0
        grid = np.unique(big) if len(np.unique(big)) < 10 else None
        if grid is not None:  # few distinct values: exact second moments
            counts = np.array([(big == v).sum() for v in grid])
            moments = [c * m.second_moment(float(v)) for c, v in zip(counts, grid, strict=True)]
            second = sum(moments) / len(big)
        else:
            second = float(np.mean([m.second_moment(float(v)) for v in big[:20_000]]))
        scaled_truth = (truth - 60.0) / 60.0
        sd_one = 60.0 * math.sqrt((second - scaled_truth**2) / n)
        errors = np.empty(reps)
        for r in range(reps):
            x = (sample(gen, n) - 60.0) / 60.0
            est = estimate_mean(d, codec.stats(codec.encode(x, gen)), confidence=0.95)
            errors[r] = est.mean - truth
            covered += est.ci_low <= truth <= est.ci_high
            total += 1
        assert abs(errors.mean()) < 4 * sd_one / math.sqrt(reps), (errors.mean(), sd_one)
        assert 0.8 < float(np.mean(errors**2)) / sd_one**2 < 1.2
    assert abs(covered / total - 0.95) <= 0.015, covered / total


@pytest.mark.parametrize(("name", "epsilon"), [("pm", 4.0), ("duchi", 1.0)])
def test_intervals_for_a_fixed_set_of_devices_are_conservative_not_short(
    name: str, epsilon: float
) -> None:
    """The same 500 devices report 800 times: the interval covers their own mean ≥ 95 %."""
    d = metric(name, epsilon)
    codec = NumericCodec(d.numeric)
    gen = np.random.default_rng(7)
    values = np.where(gen.random(500) < 0.5, 0.0, 120.0)  # the widest spread there is
    x = (values - 60.0) / 60.0
    covered = 0
    for _ in range(800):
        est = estimate_mean(d, codec.stats(codec.encode(x, gen)))
        covered += est.ci_low <= values.mean() <= est.ci_high
    assert covered / 800 >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / 800)


@pytest.mark.parametrize("name", NAMES)
def test_sdk_reports_give_an_unbiased_estimate(name: str) -> None:
    """The estimate from 6,000 reports made by the SDK lands within 4σ of the true mean."""
    d = metric(name, 1.0)
    rng = random.Random(31)
    values = [rng.choice([0.0, 12.5, 40.0, 120.0]) for _ in range(6000)]
    payloads = [d.numeric.perturb(d.scaled(v), rng) for v in values]
    est = estimate_mean(d, NumericCodec(d.numeric).decode(payloads))
    sigma = 60 * math.sqrt(sum(d.numeric.variance(1, d.scaled(v)) for v in values)) / len(values)
    assert abs(est.mean - sum(values) / len(values)) < 4 * sigma
    assert est.std_error == pytest.approx(sigma, rel=0.1)
    assert est.std_error <= est.std_error_worst_case * 1.05

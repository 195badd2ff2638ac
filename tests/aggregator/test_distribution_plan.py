"""``ldp plan --kind distribution``: the users a quantile's half-width needs, and back;
the plan agrees with the intervals a simulated window gets."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from aggregator.stats.distribution import estimate_distribution
from aggregator.stats.distribution_codec import HistogramCodec
from aggregator.stats.distribution_haar import estimate_haar, sample_haar_counters
from aggregator.stats.distribution_plan import plan_quantile
from client_sdk.mechanisms.distribution import HierarchicalHistogram
from client_sdk.mechanisms.haar import HaarHRR
from ldp_server.cli import main


def test_users_and_width_are_each_others_inverse() -> None:
    wide = plan_quantile(2.0, 64, users=50_000)
    back = plan_quantile(2.0, 64, width=wide.half_width)
    assert back.users == pytest.approx(50_000, rel=1e-3)
    assert plan_quantile(2.0, 64, users=200_000).half_width < wide.half_width
    with pytest.raises(ValueError, match="half a bin"):
        plan_quantile(2.0, 64, width=0.005)


def test_the_plan_matches_a_simulated_windows_interval() -> None:
    planned = plan_quantile(2.0, 64, users=40_000)
    gen = np.random.default_rng(8)
    bins = gen.integers(0, 64, 40_000)  # uniform: the plan's reference distribution
    m = HierarchicalHistogram(2.0, 64, planned.branching)
    codec = HistogramCodec(m)
    widths = []
    for _ in range(10):
        est = estimate_distribution(m, codec.sample_counters(bins, gen), np.linspace(0, 1, 65))
        q = est.quantile(0.95)
        widths.append((q.ci_high - q.ci_low) / 2)
    # the interval's ends snap outward to bin edges: within a bin of the plan
    assert np.mean(widths) == pytest.approx(planned.half_width, abs=1.5 / 64)


def test_ldp_plan_distribution() -> None:
    run = CliRunner().invoke(
        main,
        ["plan", "--kind", "distribution", "--epsilon", "1", "--bins", "64", "--width", "0.05"],
    )
    assert run.exit_code == 0, run.output
    assert "p95 within ±5 % of the range" in run.output
    as_json = CliRunner().invoke(
        main,
        ["plan", "--kind", "distribution", "-e", "1", "--bins", "64", "-n", "10000", "--json"],
    )
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.output)[0]["users"] == 10_000
    bad = CliRunner().invoke(main, ["plan", "--kind", "distribution", "-e", "1", "-k", "4"])
    assert bad.exit_code == 2 and "--bins" in bad.output


HAAR_WINDOWS = 400
"""Simulated HaarHRR windows: the sample sd of R normal errors is within
4·σ/√(2(R − 1)) (4 standard errors of a sample sd, ≈ 14 %) of σ."""


def test_the_haar_plan_matches_simulated_windows() -> None:
    n, bins, eps = 100_000, 64, 1.0  # the p95 interval stays inside the range
    planned = plan_quantile(eps, bins, users=n, mechanism="haar")
    assert planned.mechanism == "haar" and planned.branching == 2
    c = planned.band_critical
    se_planned = (planned.half_width - 0.5 / bins) / c  # the CDF's se at the p95 edge
    gen = np.random.default_rng(41)
    values = gen.integers(0, bins, n)  # uniform: the plan's reference distribution
    haar = HaarHRR(eps, bins)
    edges = np.linspace(0, 1, bins + 1)
    edge = round(0.95 * bins)
    truth = float(np.mean(values < edge))
    errors, widths = [], []
    for _ in range(HAAR_WINDOWS):
        est = estimate_haar(haar, sample_haar_counters(haar, values, gen), edges)
        errors.append(float(est.histogram[:edge].sum()) - truth)
        q = est.quantile(0.95)
        widths.append((q.ci_high - q.ci_low) / 2)
    sd = float(np.std(errors, ddof=1))
    assert sd == pytest.approx(se_planned, rel=4 / math.sqrt(2 * (HAAR_WINDOWS - 1)))
    assert abs(float(np.mean(errors))) < 4 * se_planned / math.sqrt(HAAR_WINDOWS)
    # each end of a window's interval lies within one bin outward of c·se (the band meets
    # p between two edges): its mean half-width is the plan's c·se + half a bin, give or
    # take half a bin and the plug-in se's spread
    spread = 4 * float(np.std(widths)) / math.sqrt(HAAR_WINDOWS)
    assert np.mean(widths) == pytest.approx(planned.half_width, abs=0.5 / bins + spread)


def test_haar_needs_more_users_than_the_tree_at_high_epsilon() -> None:
    tree = plan_quantile(4.0, 256, width=0.02)
    haar = plan_quantile(4.0, 256, width=0.02, mechanism="haar")
    assert haar.users > tree.users  # one bit per report saturates (docs §5)
    back = plan_quantile(4.0, 256, users=haar.users, mechanism="haar")
    assert back.half_width == pytest.approx(0.02, rel=1e-3)
    with pytest.raises(ValueError, match="mechanism"):
        plan_quantile(1.0, 64, users=100, mechanism="sw")


def test_ldp_plan_distribution_haar() -> None:
    run = CliRunner().invoke(
        main,
        [
            "plan",
            "--kind",
            "distribution",
            "-e",
            "1",
            "--bins",
            "64",
            "-w",
            "0.05",
            "--mechanism",
            "haar",
        ],
    )
    assert run.exit_code == 0, run.output
    assert "HaarHRR" in run.output and "p95 within ±5 % of the range" in run.output
    bad = CliRunner().invoke(
        main, ["plan", "-e", "1", "-k", "4", "-n", "100", "--mechanism", "haar"]
    )
    assert bad.exit_code == 2 and "--kind distribution" in bad.output

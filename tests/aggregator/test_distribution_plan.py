"""``ldp plan --kind distribution``: the users a quantile's half-width needs, and back;
the plan agrees with the intervals a simulated window gets."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from aggregator.stats.distribution import estimate_distribution, plan_quantile
from aggregator.stats.distribution_codec import HistogramCodec
from client_sdk.mechanisms.distribution import HierarchicalHistogram
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

"""Estimates from memoized reports: unbiased, MSE = exact variance, nominal coverage.

Every device has its own random secret and reports through the SDK's real
``perturb_memoized``. Tolerances as in test_statistics.py (from the theory, for a fixed
seed): |z| < 4.5 per value, MSE / exact variance in [0.9, 1.1] and coverage 95 % ± 1.5 %
over ≥ 3,200 intervals.

With several reports per device the reports share the device's permanent response, so
they are not independent: the estimator stays unbiased, and its variance is
``m.variance(n, f, reports_per_device=r)`` — larger than the independent-reports formula,
which these cases are chosen to show.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from aggregator import estimate
from aggregator.analysis.simulation import distribution
from aggregator.stats.codecs import RRCodec, UnaryCodec
from aggregator.stats.intervals import z_value
from aggregator.stats.kinds import codec_for
from client_sdk.mechanisms import Memoized, create
from tests.aggregator.test_statistics import run_simulation

SECRET_BITS = 256


def check(errors: np.ndarray, variances: np.ndarray, covered: np.ndarray) -> float:
    """The checks of test_statistics.py; returns the MSE / variance ratio."""
    z = errors.sum(axis=0) / np.sqrt(variances.sum(axis=0))
    assert np.max(np.abs(z)) < 4.5, f"biased: z = {np.round(z, 2)}"
    ratio = float(np.sum(errors**2) / np.sum(variances))
    assert 0.9 <= ratio <= 1.1, f"MSE / exact variance = {ratio:.3f}"
    assert covered.size >= 3200
    coverage = covered.mean()
    assert abs(coverage - 0.95) <= 0.015, f"coverage {coverage:.4f} over {covered.size}"
    return ratio


def build(name: str, k: int, eps: float, permanent: float) -> Memoized:
    m = create(name, epsilon=eps, domain_size=k, permanent_epsilon=permanent)
    assert isinstance(m, Memoized)
    return m


def device_reports(
    m: Memoized, values: list[int], reports: int, rng: random.Random
) -> list[dict[str, Any]]:
    """Each value is one device with a fresh secret, reporting it ``reports`` times."""
    out = []
    for v in values:
        secret = rng.getrandbits(SECRET_BITS).to_bytes(SECRET_BITS // 8, "big")
        out.extend(m.perturb_memoized(v, secret, "app.metric", 1, rng) for _ in range(reports))
    return out


@pytest.mark.parametrize(
    ("name", "k", "eps", "permanent", "devices", "runs"),
    [
        ("memo-grr", 16, 1.0, 3.0, 1_000, 200),
        ("memo-sue", 16, 2.0, 5.0, 1_000, 200),
        ("memo-oue", 32, 1.0, 4.0, 1_000, 100),
    ],
)
def test_one_report_per_device(
    name: str, k: int, eps: float, permanent: float, devices: int, runs: int
) -> None:
    m = build(name, k, eps, permanent)
    rng = random.Random(k * 100 + int(eps))
    weights = list(distribution("zipf", k))
    errors, variances, covered = [], [], []
    for _ in range(runs):
        values = rng.choices(range(k), weights, k=devices)
        truth = np.bincount(values, minlength=k) / devices
        est = estimate(m, device_reports(m, values, 1, rng))
        errors.append(est.frequencies - truth)
        variances.append(m.variance(devices, truth))
        covered.append((est.ci_low <= truth) & (truth <= est.ci_high))
    check(np.array(errors), np.array(variances), np.array(covered))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "k", "eps", "permanent", "devices", "reports", "runs"),
    [
        ("memo-grr", 16, 2.0, 4.0, 300, 6, 200),
        ("memo-oue", 32, 1.0, 2.5, 300, 6, 100),
    ],
)
def test_several_reports_per_device_of_the_same_value(
    name: str, k: int, eps: float, permanent: float, devices: int, reports: int, runs: int
) -> None:
    m = build(name, k, eps, permanent)
    rng = random.Random(k * 1000 + reports)
    weights = list(distribution("zipf", k))
    n = devices * reports
    z = z_value(0.95)
    errors, variances, naive, covered = [], [], [], []
    for _ in range(runs):
        values = rng.choices(range(k), weights, k=devices)
        truth = np.bincount(values, minlength=k) / devices
        est = estimate(m, device_reports(m, values, reports, rng))
        assert est.n == n
        errors.append(est.frequencies - truth)
        variances.append(m.variance(n, truth, reports_per_device=reports))
        naive.append(m.variance(n, truth))
        plug_in = m.variance(n, np.clip(est.frequencies, 0, 1), reports_per_device=reports)
        half = z * np.sqrt(plug_in)
        covered.append(np.abs(est.frequencies - truth) <= half)
    errors_a = np.array(errors)
    check(errors_a, np.array(variances), np.array(covered))
    # The independent-reports variance is too small here: the shared PRR is real.
    assert np.sum(errors_a**2) / np.sum(naive) > 1.15


@pytest.mark.parametrize(
    ("name", "k", "eps", "permanent", "users", "runs", "method"),
    [
        ("memo-grr", 8, 1.0, 3.0, 10_000, 400, "counts"),
        ("memo-oue", 64, 2.0, 4.0, 10_000, 50, "counts"),
        ("memo-sue", 16, 1.0, 2.0, 5_000, 200, "reports"),
    ],
)
def test_vectorized_simulation_of_one_report_per_device(
    name: str, k: int, eps: float, permanent: float, users: int, runs: int, method: str
) -> None:
    """The codecs' simulators draw single reports from the composed p*, q*."""
    m = build(name, k, eps, permanent)
    assert m.domain_size == k
    check(*run_simulation(m, users, runs, seed=k, method=method))


@pytest.mark.parametrize(
    ("name", "k", "codec"),
    [
        ("memo-grr", 7, RRCodec),
        ("memo-grr", 2, RRCodec),
        ("memo-sue", 9, UnaryCodec),
        ("memo-oue", 13, UnaryCodec),
        ("memo-oue", 100, UnaryCodec),
    ],
)
def test_codec_decoding_equals_the_per_report_reference(name: str, k: int, codec: type) -> None:
    m = build(name, k, 1.0, 3.0)
    assert type(codec_for(m)) is codec
    rng = random.Random(k)
    values = [rng.randrange(k) for _ in range(300)]
    payloads = device_reports(m, values, 3, rng)
    counts = codec_for(m).decode(payloads)
    reference = np.zeros(k, dtype=np.int64)
    for payload in payloads:
        assert m.check_payload(payload) == payload
        for u in m.support(payload):
            reference[u] += 1
    assert counts.n == len(payloads)
    assert np.array_equal(counts.support, reference)

"""Vectorized decoders equal the per-report reference decoder; bad payloads are named."""

from __future__ import annotations

import random

import numpy as np
import pytest

from aggregator.stats.codecs import Counts, fwht
from aggregator.stats.kinds import codec_for, count_payloads
from client_sdk.errors import PayloadError
from client_sdk.mechanisms import create

CONFIGS = [
    ("rr", 2, 1.0, {}),
    ("grr", 2, 1.0, {}),
    ("grr", 37, 2.0, {}),
    ("sue", 10, 1.0, {}),
    ("oue", 8, 1.0, {}),
    ("oue", 9, 0.5, {}),
    ("oue", 1000, 1.0, {}),
    ("olh", 3, 1.0, {}),
    ("olh", 100, 1.0, {}),
    ("olh", 1024, 4.0, {}),
    ("olh", 50, 1.0, {"g": 97}),  # g > k: P = 97 = g
    ("blh", 30, 1.0, {}),
    ("hr", 2, 1.0, {}),
    ("hr", 15, 1.0, {}),
    ("hr", 16, 2.0, {}),
    ("ss", 10, 1.0, {}),
    ("ss", 200, 0.5, {}),
    ("ss", 12, 1.0, {"s": 1}),
]


def reference_counts(m, payloads):  # type: ignore[no-untyped-def]
    counts = np.zeros(m.domain_size, dtype=np.int64)
    for p in payloads:
        for u in m.support(p):
            counts[u] += 1
    return counts


@pytest.mark.parametrize(("name", "k", "eps", "opts"), CONFIGS)
def test_batch_decoder_equals_per_report_support(name: str, k: int, eps: float, opts: dict) -> None:
    m = create(name, epsilon=eps, domain_size=k, **opts)
    rng = random.Random(k * 31 + len(name))
    payloads = [m.perturb(rng.randrange(k), rng) for _ in range(1500)]
    counts = count_payloads(m, payloads)
    assert counts.n == 1500
    np.testing.assert_array_equal(counts.support, reference_counts(m, payloads))


@pytest.mark.parametrize(("name", "k", "eps", "opts"), CONFIGS)
def test_vectorized_encoder_makes_valid_payloads_that_decode_the_same(
    name: str, k: int, eps: float, opts: dict
) -> None:
    m = create(name, epsilon=eps, domain_size=k, **opts)
    codec = codec_for(m)
    gen = np.random.default_rng(3)
    batch = codec.encode(gen.integers(0, k, 800), gen)
    payloads = codec.to_payloads(batch)
    for p in payloads:
        assert m.check_payload(p) == p
    np.testing.assert_array_equal(codec.count(batch), reference_counts(m, payloads))
    np.testing.assert_array_equal(codec.decode(payloads).support, codec.count(batch))


@pytest.mark.parametrize(("name", "k", "eps", "opts"), CONFIGS[:12])
def test_counts_are_additive(name: str, k: int, eps: float, opts: dict) -> None:
    m = create(name, epsilon=eps, domain_size=k, **opts)
    rng = random.Random(1)
    payloads = [m.perturb(rng.randrange(k), rng) for _ in range(600)]
    whole = count_payloads(m, payloads)
    parts = Counts.zeros(k)
    for i in range(0, 600, 77):
        parts = parts + count_payloads(m, payloads[i : i + 77])
    assert parts.n == whole.n
    np.testing.assert_array_equal(parts.support, whole.support)


def test_empty_batch_counts_zero() -> None:
    for name in ("grr", "oue", "olh", "hr", "ss"):
        m = create(name, epsilon=1.0, domain_size=10)
        c = count_payloads(m, [])
        assert c.n == 0 and c.support.tolist() == [0] * 10


def test_fwht_is_the_sylvester_hadamard_transform() -> None:
    K = 16
    H = np.array([[(-1) ** bin(r & j).count("1") for j in range(K)] for r in range(K)])
    a = np.random.default_rng(0).integers(0, 100, K)
    np.testing.assert_array_equal(fwht(a), H @ a)


BAD = [
    (
        "grr",
        [{"v": 1}, {"v": 1.0}],
        "payload #1: grr payload {'v': 1.0}: 'v' must be an integer, got float",
    ),
    (
        "grr",
        [{"v": 1}, {"v": 3}, {"v": 99}],
        "payload #2: grr payload {'v': 99}: 'v' = 99 is outside range(0, 10)",
    ),
    ("grr", [{"v": 2**80}], "payload #0: grr payload {'v': 1208925819614629174706176}: 'v' = "),
    ("grr", [{"v": 1, "w": 2}], "payload #0: grr payload {'v': 1, 'w': 2}: unknown ['w']"),
    ("grr", ["v"], "payload #0: grr payload 'v': must be an object"),
    (
        "oue",
        [{"b": "AAA="}, {"b": "AA"}],
        "payload #1: oue payload {'b': 'AA'}: 'b' must be 4 base64",
    ),
    ("oue", [{"b": "AAE="}], "payload #0: oue payload {'b': 'AAE='}: bits beyond the 10 values"),
    ("oue", [{"b": "A*A="}], "payload #0: oue payload {'b': 'A*A='}: 'b' is not valid base64"),
    (
        "olh",
        [{"a": 0, "b": 0, "y": 0}],
        "payload #0: olh payload {'a': 0, 'b': 0, 'y': 0}: 'a' must be in range(1, 11)",
    ),
    ("olh", [{"a": 1, "b": -1, "y": 0}], "'b' = -1 is outside range(0, 11)"),
    ("hr", [{"j": True}], "payload #0: hr payload {'j': True}: 'j' must be an integer, got bool"),
    (
        "ss",
        [{"v": [0, 1, 2]}, {"v": [0, 0, 1]}],
        "payload #1: ss payload {'v': [0, 0, 1]}: 'v' must be strictly increasing",
    ),
    ("ss", [{"v": [0, 1, True]}], "'v' must hold integers, got bool"),
]


@pytest.mark.parametrize(("name", "payloads", "message"), BAD)
def test_malformed_payload_is_named_by_index_and_problem(
    name: str, payloads: list, message: str
) -> None:
    m = create(name, epsilon=1.0, domain_size=10)
    with pytest.raises(PayloadError) as info:
        count_payloads(m, payloads)
    assert message in str(info.value)


@pytest.mark.parametrize("name", ["grr", "sue", "hr"])
def test_sufficient_statistics_keep_the_joint_law(name: str) -> None:
    """For joint-exact codecs, Σ_v C(v) has the law of the reports' total support."""
    m = create(name, epsilon=1.0, domain_size=7)
    codec = codec_for(m)
    assert codec.exact_joint
    gen = np.random.default_rng(11)
    true_counts = np.array([500, 300, 100, 50, 30, 15, 5])
    totals = [codec.sample_support_counts(true_counts, gen).sum() for _ in range(400)]
    reports = []
    for _ in range(400):
        values = np.repeat(np.arange(7), true_counts)
        reports.append(codec.count(codec.encode(values, gen)).sum())
    if name == "grr":  # every report supports exactly one value
        assert set(totals) == {1000} and set(reports) == {1000}
    else:  # same mean and spread of the total (a two-sample comparison)
        se = np.sqrt(np.var(totals) / 400 + np.var(reports) / 400)
        assert abs(np.mean(totals) - np.mean(reports)) < 4.5 * se
        # ln of an F(399, 399) ratio has sd √(2/399 + 2/399) = 0.1: allow 4.5 sd.
        assert np.exp(-0.45) < np.var(totals) / np.var(reports) < np.exp(0.45)


@pytest.mark.parametrize(("k", "eps"), [(100, 1.0), (1024, 4.0), (37, 0.5)])
def test_both_olh_counting_methods_equal_the_reference(k: int, eps: float) -> None:
    """The per-multiplier histogram (large batches) and the enumeration grid (small ones)."""
    m = create("olh", epsilon=eps, domain_size=k)
    codec = codec_for(m)
    gen = np.random.default_rng(k)
    batch = codec.encode(gen.integers(0, k, 20_000), gen)
    by_multiplier = codec._count_by_multiplier(batch)  # type: ignore[attr-defined]
    by_grid = codec._count_by_grid(batch)  # type: ignore[attr-defined]
    np.testing.assert_array_equal(by_multiplier, by_grid)
    np.testing.assert_array_equal(codec.count(batch), by_grid)
    sample = codec.to_payloads(batch)[:3000]
    small = codec.parse(sample)
    np.testing.assert_array_equal(codec._count_by_multiplier(small), reference_counts(m, sample))  # type: ignore[attr-defined]


def test_large_unary_batches_count_exactly() -> None:
    m = create("oue", epsilon=1.0, domain_size=1000)
    codec = codec_for(m)
    gen = np.random.default_rng(8)
    batch = codec.encode(gen.integers(0, 1000, 5000), gen)
    bits = np.unpackbits(batch.columns["bits"], axis=1)[:, :1000]
    np.testing.assert_array_equal(codec.count(batch), bits.sum(axis=0))

"""Distribution metrics on the device: the spec, ``auto`` and its reason, bins on both
scales, the hierarchical histogram's report, its exact ε, and what the collector refuses."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest

from client_sdk import wire
from client_sdk.errors import DefinitionError, PayloadError
from client_sdk.mechanisms.distribution import (
    HaarHRR,
    HierarchicalHistogram,
    bin_of,
    choose_distribution,
    distribution_from_params,
)
from client_sdk.wire.report import check_report

LATENCY = {
    "kind": "numeric",
    "range": [1, 60000],
    "epsilon": 1.0,
    "distribution": {"bins": 1024, "scale": "log"},
}


def test_a_numeric_spec_with_distribution_is_a_distribution_metric_with_its_reason() -> None:
    d = wire.parse_spec("page.load_ms", LATENCY)
    assert d.kind == "distribution" and d.value_range == (1.0, 60000.0)
    assert isinstance(d.mechanism, HierarchicalHistogram)
    assert (d.mechanism.bins, d.mechanism.branching, d.mechanism.scale) == (1024, 4, "log")
    assert "B = 4" in d.mechanism_reason and "B=2" in d.mechanism_reason
    assert d.k == 5 + 4 + 16 + 64 + 256 + 1024  # n_l of each level, then every node
    again = wire.MetricDefinition.from_dict(d.to_dict())
    assert again.same_parameters(d) and again.to_dict() == d.to_dict()
    # the same spec written with its own kind
    same = wire.parse_spec("page.load_ms", {**LATENCY, "kind": "distribution"})
    assert same.to_dict() == d.to_dict()


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"range": [0, 100]}, "lo > 0"),
        ({"distribution": {"bins": 1000}}, "power of two"),
        ({"distribution": {"bins": 8192}}, "power of two"),
        ({"distribution": {"bins": 64, "resolution": 1}}, "not both"),
        ({"distribution": {"resolution": 1, "scale": "log"}}, "takes bins"),
        ({"distribution": {"bins": 64, "branching": 8, "scale": "cubic"}}, "scale"),
        ({"distribution": {"bins": 64, "branching": 3}}, "branching"),
        ({"distribution": {"bins": 64, "branching": 16}}, "branching"),
        ({"distribution": {"bins": 64, "colour": 1}}, "at most"),
        ({"mechanism": "duchi"}, "hh"),
        ({"domain": ["a", "b"]}, "unknown fields"),
    ],
)
def test_a_bad_distribution_spec_says_what_is_wrong(change: dict, problem: str) -> None:
    with pytest.raises(DefinitionError) as info:
        wire.parse_spec("page.load_ms", {**LATENCY, **change})
    assert problem in str(info.value)


def test_a_resolution_gives_the_fewest_power_of_two_bins_that_fine() -> None:
    spec = {"kind": "numeric", "range": [0, 100], "epsilon": 2.0}
    d = wire.parse_spec("m", {**spec, "distribution": {"resolution": 0.1}})
    assert d.histogram.bins == 1024  # 1000 bins of 0.1 → 1024 of 0.098
    d = wire.parse_spec("m", {**spec, "distribution": {"resolution": 25}})
    assert d.histogram.bins == 4
    with pytest.raises(DefinitionError, match="more than 4096 bins"):
        wire.parse_spec("m", {**spec, "distribution": {"resolution": 0.01}})


def test_bins_on_both_scales_and_their_edges() -> None:
    assert [bin_of(v, 0.0, 10.0, 4, "linear") for v in (0, 2.4999, 2.5, 9.99, 10)] == [
        0,
        0,
        1,
        3,
        3,
    ]
    # log: equal ratios; 1..10⁴ in 4 bins of one decade each
    assert [bin_of(v, 1.0, 1e4, 4, "log") for v in (1, 9.99, 10.01, 999, 1e4)] == [
        0,
        0,
        1,
        2,
        3,
    ]
    d = wire.parse_spec("page.load_ms", LATENCY)
    edges = d.bin_edges()
    assert len(edges) == 1025 and edges[0] == 1 and edges[-1] == 60000
    assert math.isclose(edges[512], math.sqrt(60000), rel_tol=1e-12)
    for v in (1.0, 37.0, 245.0, 59999.0):
        j = d.bin(v)
        assert edges[j] <= v * (1 + 1e-12) and v <= edges[j + 1] * (1 + 1e-12)


def test_a_report_is_one_levels_node_through_oue_at_full_epsilon() -> None:
    m = HierarchicalHistogram(2.0, 64, 4)  # h = 3: 4, 16, 64 nodes
    assert m.height == 3 and [o.domain_size for o in m.oracles] == [4, 16, 64]
    seen = set()
    rng = random.Random(7)
    for _ in range(300):
        payload = m.perturb(45, rng)  # bin 45: nodes 2, 11, 45
        assert m.check_payload(payload) == payload
        seen.add(payload["l"])
    assert seen == {1, 2, 3}
    # the level draw carries no information: each level's OUE is the whole privacy cost
    assert all(o.privacy_ratio() <= Fraction(math.exp(2.0)) for o in m.oracles)
    assert m.realized_epsilon <= 2.0
    assert distribution_from_params(m.params()) == m


def test_node_of_the_level_is_the_bins_ancestor() -> None:
    m = HierarchicalHistogram(8.0, 64, 4)  # ε = 8: OUE keeps the node's bit often
    rng = random.Random(3)
    hits = {1: 0, 2: 0, 3: 0}
    totals = {1: 0, 2: 0, 3: 0}
    for _ in range(600):
        payload = m.perturb(45, rng)
        level = payload["l"]
        node = 45 // 4 ** (3 - level)
        totals[level] += 1
        hits[level] += m.oracles[level - 1].supports({"b": payload["b"]}, node)
    # Pr[node's bit] = p* = 1/2, every other bit q* = 1/(e⁸+1) ≈ 3·10⁻⁴
    for level in hits:
        assert abs(hits[level] / totals[level] - 0.5) < 4 * math.sqrt(0.25 / totals[level])


def test_a_flat_histogram_draws_no_level() -> None:
    m = HierarchicalHistogram(4.0, 16, 16)
    assert m.height == 1

    class NoDraw(random.Random):
        def randrange(self, *args: object, **kwargs: object) -> int:  # type: ignore[override]
            raise AssertionError("no level is drawn when there is one")

    # OUE draws bits through getrandbits/random, never randrange
    assert m.perturb(3, NoDraw(1))["l"] == 1


@pytest.mark.parametrize(
    "payload",
    [
        {"b": "AAA="},
        {"l": 0, "b": "AA=="},
        {"l": 4, "b": "AA=="},
        {"l": True, "b": "AA=="},
        {"l": 1, "b": "AAAA"},  # level 1 has 4 nodes: one byte
        {"l": 1, "b": "AA==", "x": 1},
    ],
)
def test_the_collector_refuses_a_malformed_payload(payload: dict) -> None:
    m = HierarchicalHistogram(2.0, 64, 4)
    with pytest.raises(PayloadError):
        m.check_payload(payload)


def test_build_report_checks_the_range_and_the_collector_accepts_it() -> None:
    d = wire.parse_spec("page.load_ms", LATENCY)
    report = wire.build_report(d, 1234.5, random.Random(1))
    assert check_report(report, lambda name, version: d)[2] == report["payload"]
    for bad in (0.5, 60001, float("nan"), "fast", True):
        with pytest.raises(ValueError):
            wire.build_report(d, bad)


def test_auto_prefers_a_flat_histogram_for_few_bins_and_a_tree_for_many() -> None:
    assert choose_distribution(1.0, 16).mechanism.branching == 16
    assert choose_distribution(1.0, 1024).mechanism.height > 1
    with pytest.raises(ValueError, match="power of two"):
        choose_distribution(1.0, 100)


def test_a_spec_may_declare_haar_and_it_round_trips_through_the_api_form() -> None:
    d = wire.parse_spec("page.load_ms", {**LATENCY, "mechanism": "haar"})
    assert isinstance(d.mechanism, HaarHRR) and d.kind == "distribution"
    assert (d.mechanism.bins, d.mechanism.scale, d.mechanism.epsilon) == (1024, "log", 1.0)
    assert d.k == 10 + 2 * 1023  # n_l of each level, then by r and by (r, y = 1)
    assert d.to_dict()["mechanism"] == {
        "mechanism": "haar",
        "epsilon": 1.0,
        "bins": 1024,
        "scale": "log",
    }
    again = wire.MetricDefinition.from_dict(d.to_dict())
    assert again.same_parameters(d) and again.to_dict() == d.to_dict()
    report = wire.build_report(d, 250.0, rng=random.Random(3))
    assert set(report["payload"]) == {"l", "r", "y"}
    assert check_report(report, lambda name, v: d)[2] == report["payload"]
    # kind numeric with mechanism haar and no distribution options: the default bins
    plain = {"kind": "numeric", "range": [0, 1], "epsilon": 1, "mechanism": "haar"}
    assert isinstance(wire.parse_spec("m", plain).mechanism, HaarHRR)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"distribution": {"bins": 64, "branching": 4}}, "haar has none"),
        ({"distribution": {"bins": 1000}}, "power of two"),
        ({"epsilon": 0}, "epsilon"),
    ],
)
def test_a_bad_haar_spec_says_what_is_wrong(change: dict, problem: str) -> None:
    with pytest.raises(DefinitionError) as info:
        wire.parse_spec("page.load_ms", {**LATENCY, "mechanism": "haar", **change})
    assert problem in str(info.value)


@pytest.mark.parametrize(
    "params",
    [
        {"mechanism": "haar", "epsilon": 1.0, "bins": 64},
        {"mechanism": "haar", "epsilon": 1.0, "bins": 64, "scale": "log", "branching": 4},
        {"mechanism": "haar", "epsilon": 1.0, "bins": 48, "scale": "log"},
    ],
)
def test_haar_params_are_checked_when_a_definition_is_read(params: dict) -> None:
    with pytest.raises(ValueError):
        distribution_from_params(params)


def test_auto_keeps_the_tree_and_says_when_haar_is_level() -> None:
    small = wire.parse_spec("m", {**LATENCY, "epsilon": 0.5})
    assert isinstance(small.mechanism, HierarchicalHistogram)
    assert "HaarHRR is level" in small.mechanism_reason
    assert '"mechanism": "haar"' in small.mechanism_reason
    large = choose_distribution(2.0, 1024)
    assert isinstance(large.mechanism, HierarchicalHistogram)
    assert "HaarHRR" in large.reason and "kept out" in large.reason
    haar = HaarHRR(0.5, 1024)
    assert f"{haar.wire_bytes}-byte" in small.mechanism_reason

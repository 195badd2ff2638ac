"""The read package: one estimator per kind, and one meaning of reports per device."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from aggregator.query.estimators import (
    Ask,
    FrequencyEstimator,
    JointEstimator,
    MemoizedEstimator,
    NumericEstimator,
    PramEstimator,
    Reader,
    StringEstimator,
    estimate_window,
    estimator_for,
)
from aggregator.stats.accounting import checked_reports_per_device, reports_per_device
from aggregator.stats.anytime import frequency_cs
from aggregator.stats.codecs import Counts
from aggregator.stats.frequency import estimate_from_counts
from aggregator.stats.intervals import frequency_intervals, zero_p_values
from aggregator.stats.shuffling import amplification
from client_sdk import mechanisms
from client_sdk.wire import parse_spec
from ldp_store.registry import Registry
from tests.collector.test_collector_pram_device import AGES  # the age-band matrix

DOMAIN = ["a", "b", "c", "d"]

JOINT = {
    "kind": "joint",
    "attributes": [{"name": "os", "domain": ["ios", "web"]}, {"name": "v", "domain": DOMAIN}],
    "epsilon": 2.0,
}


@pytest.mark.parametrize(
    ("spec", "expected", "sequence"),
    [
        ({"domain": DOMAIN, "epsilon": 1.0, "mechanism": "grr"}, FrequencyEstimator, True),
        ({"domain": DOMAIN, "epsilon": 1.0, "mechanism": "oue"}, FrequencyEstimator, True),
        ({"domain": DOMAIN, "epsilon": 1.0, "mechanism": "olh"}, FrequencyEstimator, True),
        ({"domain": DOMAIN, "epsilon": 1.0, "mechanism": "hr"}, FrequencyEstimator, True),
        (
            {
                "domain": DOMAIN,
                "epsilon": 1.0,
                "longitudinal": {"permanent_epsilon": 3.0},
                "budget": {"reports_per_period": 1, "period": "day"},
            },
            MemoizedEstimator,
            True,
        ),
        (AGES, PramEstimator, False),
        ({"kind": "numeric", "range": [0, 60], "epsilon": 1.0}, NumericEstimator, True),
        ({"kind": "string", "max_length": 8, "epsilon": 4.0}, StringEstimator, False),
        (JOINT, JointEstimator, True),
    ],
)
def test_each_kind_is_read_by_its_estimator(
    spec: dict[str, Any], expected: type, sequence: bool
) -> None:
    estimator = estimator_for(parse_spec("m.x", spec))
    assert type(estimator) is expected
    assert estimator.sequence is sequence
    assert bool(estimator.no_sequence) is not sequence  # a kind without one says why


def test_a_window_without_reports_answers_every_kind_with_nulls(redis_db: Any) -> None:
    """Every kind through the one entry, on an empty Redis (no reports yet)."""
    client = redis_db.client()
    reader = Reader(client, Registry(client))
    for spec in (
        {"domain": DOMAIN, "epsilon": 1.0},
        AGES,
        {"kind": "numeric", "range": [0, 60], "epsilon": 1.0},
        {"kind": "string", "max_length": 8, "epsilon": 4.0},
        JOINT,
    ):
        definition = parse_spec("m.x", spec)
        body = estimate_window(reader, definition, "all", Ask(confidence=0.9)).model_dump()
        assert body["n"] == 0 and body["confidence"] == 0.9, spec
        if definition.kind == "categorical":
            assert all(r["frequency"] is None and r["cs_low"] is None for r in body["estimates"])
            assert body["shuffled_epsilon"] is None
        elif definition.kind == "numeric":
            assert body["mean"] is None and body["cs_low"] is None
        elif definition.kind == "joint":  # every 1-way marginal, no estimate in a cell
            assert [m["attributes"] for m in body["marginals"]] == [["os"], ["v"]]
            cells = [c for m in body["marginals"] for c in m["cells"]]
            assert len(cells) == 2 + 4 and all(c["frequency"] is None for c in cells)
        else:
            assert body["estimates"] == [] and body["candidates"] == []


def test_pram_has_no_sequence_and_the_others_one_from_one_place() -> None:
    """The answer's sequence is FrequencyEstimate.sequence_read's; pram has none."""
    oue = mechanisms.create("oue", epsilon=1.0, domain_size=4)
    est = estimate_from_counts(oue, Counts(1000, np.array([400, 300, 200, 180])))
    read = FrequencyEstimator().sequence_read(est)
    alpha = 1 - est.confidence
    expected = frequency_cs(oue, 1000, est.support_counts, alpha, clip=False)
    np.testing.assert_array_equal(read.low, expected[0])
    np.testing.assert_array_equal(read.high, expected[1])
    pram = parse_spec("m.age", AGES).oracle
    got = estimate_from_counts(pram, Counts(1000, np.array([250, 250, 250, 250])))
    none = PramEstimator().sequence_read(got)
    assert np.isnan(none.low).all() and np.isnan(none.high).all() and not none.flags.any()
    with pytest.raises(ValueError, match="pram"):
        got.confidence_sequence()


@pytest.mark.parametrize("bad", [0, 0.5, -1, math.nan, math.inf, True, "2", None])
def test_reports_per_device_has_one_check_everywhere(bad: Any) -> None:
    """Before, shuffling coerced r = 0 to 1, the intervals took any r, the anytime
    sequences any r ≥ 1 (inf too): now each takes r through the one check."""
    m = mechanisms.create("memo-grr", epsilon=1.0, permanent_epsilon=3.0, domain_size=3)
    support = np.array([40, 30, 30])
    with pytest.raises(ValueError, match="reports_per_device must be a number ≥ 1"):
        checked_reports_per_device(bad)
    with pytest.raises(ValueError, match="reports_per_device"):
        amplification(1.0, 1000, bad)
    with pytest.raises(ValueError, match="reports_per_device"):
        frequency_cs(m, 100, support, 0.05, reports_per_device=bad)
    with pytest.raises(ValueError, match="reports_per_device"):
        frequency_intervals(m, 100, support, 0.95, reports_per_device=bad)
    with pytest.raises(ValueError, match="reports_per_device"):
        zero_p_values(m, 100, support, bad)
    with pytest.raises(ValueError, match="reports_per_device"):
        estimate_from_counts(m, Counts(100, support), reports_per_device=bad)


def test_numpy_integers_are_numbers_of_reports() -> None:
    assert checked_reports_per_device(np.int64(3)) == 3.0
    assert amplification(1.0, 3000, np.int64(3)).reports_per_device == 3  # type: ignore[arg-type]


def test_reports_per_device_gives_the_intervals_r_and_compositions_cap() -> None:
    """One function, two named answers: ``bound`` (the r the intervals assume: 1 unless
    memoized) and ``budgeted`` (the budget's cap on one device's reports: composition)."""
    budget = {"reports_per_period": 2, "period": "day"}
    fresh = parse_spec("m.x", {"domain": DOMAIN, "epsilon": 1.0, "budget": budget})
    memo = parse_spec(
        "m.y",
        {
            "domain": DOMAIN,
            "epsilon": 1.0,
            "longitudinal": {"permanent_epsilon": 3.0},
            "budget": budget,
        },
    )
    created, now = 1_700_000_000.0, 1_700_000_000.0 + 2 * 86_400
    plain = reports_per_device(fresh, created, "all", now)
    assert plain.bound == 1 and plain.budgeted is not None and plain.budgeted > 2
    memoized = reports_per_device(memo, created, "all", now)
    assert memoized.bound == memoized.budgeted == plain.budgeted
    unbudgeted = parse_spec("m.z", {"domain": DOMAIN, "epsilon": 1.0})
    assert reports_per_device(unbudgeted, created, "all", now).budgeted is None

"""The string mechanism on the device: normalisation, exact ε, payloads, the wire spec."""

from __future__ import annotations

import math
import random
import unicodedata
from fractions import Fraction

import pytest

from client_sdk.errors import DefinitionError, PayloadError
from client_sdk.mechanisms.strings import (
    StringSketch,
    auto_cells,
    auto_rows,
    normalise,
    string_from_params,
)
from client_sdk.wire import MetricDefinition, build_report, check_report, parse_spec


def test_normalise_nfc_truncates_at_a_character_boundary_and_pads() -> None:
    composed, decomposed = "caf\u00e9", unicodedata.normalize("NFD", "caf\u00e9")
    assert normalise(composed, 8) == normalise(decomposed, 8) == b"caf\xc3\xa9\x00\x00\x00"
    # "é" is two bytes: at 4 bytes it does not fit whole and is dropped, not cut.
    assert normalise("caf\u00e9", 4) == b"caf\x00"
    assert normalise("pizza-margherita", 5) == b"pizza"
    assert normalise("", 3) == b"\x00\x00\x00"
    assert len({len(normalise(w, 16)) for w in ("a", "ab" * 20, "\U0001f355")}) == 1
    with pytest.raises(ValueError, match="NUL"):
        normalise("a\x00b", 8)
    with pytest.raises(ValueError, match="must be a str"):
        normalise(42, 8)  # type: ignore[arg-type]


def test_auto_shape() -> None:
    assert [auto_cells(e) for e in (0.5, 1, 2, 4, 8)] == [4, 8, 16, 128, 2048]
    assert auto_rows(128) == 128 and auto_rows(2048) == 8
    m = StringSketch(epsilon=4.0, max_length=16)
    assert (m.cells, m.rows, m.counters) == (128, 128, 16 * 128 * 128)


def _distribution(m: StringSketch, value: bytes) -> dict[tuple[int, int, int], Fraction]:
    """The exact output law of perturb(value): group uniform, then GRR over the cells."""
    keep, other = Fraction(m.inner.p), (1 - Fraction(m.inner.p)) / (m.cells - 1)
    law = {}
    for level in range(m.levels):
        for row in range(m.rows):
            cell = m.cell(value, level, row)
            for v in range(m.cells):
                law[(level, row, v)] = (keep if v == cell else other) / m.groups
    return law


@pytest.mark.parametrize("epsilon", [0.5, 2.0, 5.0])
def test_exact_epsilon_worst_case_ratio_is_e_to_epsilon(epsilon: float) -> None:
    m = StringSketch(epsilon=epsilon, max_length=2, rows=2, cells=8, salt="0a")
    a, b = normalise("ab", 2), normalise("ba", 2)
    pa, pb = _distribution(m, a), _distribution(m, b)
    ratio = max(max(pa[o] / pb[o], pb[o] / pa[o]) for o in pa)
    assert ratio <= Fraction(math.exp(epsilon)) * (1 + Fraction(1, 10**12))
    assert float(ratio) > math.exp(epsilon - 1e-9)  # tight: a smaller ε would be violated
    assert m.realized_epsilon <= epsilon


def test_perturb_matches_the_exact_law() -> None:
    """Empirical frequencies of 40,000 seeded reports against the exact law (χ², df ≈ 31)."""
    m = StringSketch(epsilon=1.0, max_length=2, rows=2, cells=8, salt="0a")
    value = normalise("hi", 2)
    law = _distribution(m, value)
    rng = random.Random(7)
    counts: dict[tuple[int, int, int], int] = {}
    n = 40_000
    for _ in range(n):
        p = m.perturb(value, rng)
        key = (p["l"], p["r"], p["v"])
        counts[key] = counts.get(key, 0) + 1
    chi2 = sum((counts.get(o, 0) - n * float(q)) ** 2 / (n * float(q)) for o, q in law.items())
    df = len(law) - 1
    assert chi2 < df + 5 * math.sqrt(2 * df)  # 5 sd of a χ²_df above its mean


def test_payload_check_and_params_round_trip() -> None:
    m = StringSketch(epsilon=4.0, max_length=16, salt="beef")
    payload = m.perturb("pizza")
    assert set(payload) == {"l", "r", "v"} and m.check_payload(payload) == payload
    assert string_from_params(m.params()) == m
    for bad in ({"l": 16, "r": 0, "v": 0}, {"l": 0, "r": 0}, {"l": 0, "r": 0, "v": "1"}, []):
        with pytest.raises(PayloadError):
            m.check_payload(bad)
    assert m.wire_bytes == len('{"l":15,"r":127,"v":127}')
    with pytest.raises(ValueError, match="max_length"):
        StringSketch(epsilon=1.0, max_length=65)


def test_spec_definition_report_round_trip() -> None:
    d = parse_spec("search.term", {"kind": "string", "max_length": 16, "epsilon": 4})
    assert d.kind == "string" and d.k == d.sketch.counters
    again = MetricDefinition.from_dict(d.to_dict())
    assert again == d and again.same_parameters(d) and "domain" not in d.to_dict()
    # the salt derives from the name: a second PUT of the same spec is the same version
    assert parse_spec("search.term", {"kind": "string", "max_length": 16, "epsilon": 4}) == d
    report = build_report(d, "pizza")
    definition, _, payload = check_report(report, lambda name, version: d)
    assert definition is d and payload == report["payload"]
    with pytest.raises(ValueError, match="NUL"):
        build_report(d, "a\x00")


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ({"kind": "string", "epsilon": 1}, "max_length must be"),
        ({"kind": "string", "max_length": 65, "epsilon": 1}, "max_length must be"),
        ({"kind": "string", "max_length": 8, "epsilon": 1, "domain": ["a"]}, "unknown fields"),
        ({"kind": "string", "max_length": 8, "epsilon": 1, "options": {"g": 2}}, "options"),
        ({"kind": "string", "max_length": 8, "epsilon": 1, "options": {"cells": 1}}, "cells"),
        ({"kind": "string", "max_length": 8, "epsilon": 0}, "epsilon"),
    ],
)
def test_bad_specs_say_what_is_wrong(spec: dict[str, object], problem: str) -> None:
    with pytest.raises(DefinitionError) as exc:
        parse_spec("search.term", spec)
    assert any(problem in p for p in exc.value.problems), exc.value.problems

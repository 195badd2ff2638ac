"""HaarHRR on the device: the bit each report carries (a scripted generator), its ε
bound (the likelihood ratio is p/(1 − p) ≤ e^ε, and equals e^ε up to the shading), and
strict payloads. The estimates' statistics are tests/aggregator/test_distribution_haar.py's."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import pytest

from client_sdk.errors import PayloadError
from client_sdk.mechanisms.haar import HaarHRR, hadamard_sign


class Scripted:
    """randrange answers from a list; getrandbits 0 (the bit is kept) or all ones
    (flipped)."""

    def __init__(self, ranges: list[int], keep: bool) -> None:
        self.ranges, self.keep = list(ranges), keep

    def randrange(self, n: int) -> int:
        value = self.ranges.pop(0)
        assert 0 <= value < n
        return value

    def getrandbits(self, k: int) -> int:
        return 0 if self.keep else (1 << k) - 1


@pytest.mark.parametrize(
    ("leaf", "level", "r", "keep", "payload"),
    [
        # leaf 9 = 1001b of 16: level 3 node 4, right half (sign −1); H[5, 4] = −1: +1
        (9, 3, 5, True, {"l": 3, "r": 5, "y": 1}),
        (9, 3, 5, False, {"l": 3, "r": 5, "y": 0}),
        # level 0: the root, r = 0; leaf 9 is in the right half: −1
        (9, 0, 0, True, {"l": 0, "r": 0, "y": 0}),
        # leaf 2 = 0010b: level 2 node 0 (leaves 0–3), right half (−1); H[3, 0] = +1
        (2, 2, 3, True, {"l": 2, "r": 3, "y": 0}),
        # leaf 1: the same node's left half (+1); H[2, 0] = +1
        (1, 2, 2, True, {"l": 2, "r": 2, "y": 1}),
        # leaf 6 = 0110b: level 1 node 0 (first 8 leaves), right half (−1); H[1, 0] = +1
        (6, 1, 1, True, {"l": 1, "r": 1, "y": 0}),
    ],
)
def test_each_report_is_its_coefficients_sign_through_one_hadamard_row(
    leaf: int, level: int, r: int, keep: bool, payload: dict[str, Any]
) -> None:
    m = HaarHRR(1.0, 16)
    ranges = [level, r] if level else [level]
    assert m.perturb(leaf, Scripted(ranges, keep)) == payload


def test_hadamard_signs_are_sylvesters() -> None:
    rows = [[hadamard_sign(r, j) for j in range(4)] for r in range(4)]
    assert rows == [[1, 1, 1, 1], [1, -1, 1, -1], [1, 1, -1, -1], [1, -1, -1, 1]]


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 4.0, 10.0])
def test_the_likelihood_ratio_is_e_to_the_epsilon(epsilon: float) -> None:
    """Level and row are drawn without the value; the bit is kept with p, so any report's
    likelihood ratio between two values is 1 or p/(1 − p): at most e^ε, and a smaller ε
    would not cover it."""
    m = HaarHRR(epsilon, 64)
    ratio = m.privacy_ratio()
    assert ratio <= Fraction(math.exp(epsilon)) * (1 + Fraction(1, 10**15))
    assert float(ratio) == pytest.approx(math.exp(epsilon), rel=1e-9)
    assert float(ratio) > math.exp(epsilon * (1 - 1e-6))


@pytest.mark.parametrize(
    "bad",
    [
        {"l": 0, "r": 0},
        {"l": 6, "r": 0, "y": 1},
        {"l": 2, "r": 4, "y": 1},
        {"l": 2, "r": 1, "y": 2},
        {"l": True, "r": 0, "y": 1},
        {"l": 1, "r": 0, "y": 1, "x": 0},
        [0, 0, 1],
    ],
)
def test_payloads_are_checked_strictly(bad: Any) -> None:
    with pytest.raises(PayloadError):
        HaarHRR(1.0, 64).check_payload(bad)


def test_parameters_are_checked_with_their_range() -> None:
    for bins in (3, 2, 8192, 12):
        with pytest.raises(ValueError, match="power of two"):
            HaarHRR(1.0, bins)
    with pytest.raises(ValueError, match="scale"):
        HaarHRR(1.0, 64, "cubic")
    with pytest.raises(ValueError, match="bin"):
        HaarHRR(1.0, 64).perturb(64)

"""The bins of a distribution metric, shared by its mechanisms (the hierarchical histogram
and HaarHRR): the layout's limits and checks, and a value's bin.

In full: ``docs/statistics/distributions.md``.
"""

from __future__ import annotations

import math

__all__ = [
    "MAX_BINS",
    "MIN_BINS",
    "SCALES",
    "bin_of",
    "check_bin",
    "check_layout",
    "is_power_of_two",
]

MIN_BINS = 4
"""Fewest bins: fewer answers no quantile worth asking."""

MAX_BINS = 4096
"""Most bins: a leaf-level report is 4,096 OUE bits (684 base64 characters), and the
server's simultaneous CDF band draws 2,000 × h leaf-wide Gaussian vectors (seconds of
CPU at D = 4,096: 2.3 s measured on a loaded machine)."""

SCALES = ("linear", "log")
"""``linear``: equal bins over [lo, hi]; ``log``: equal bins of log(v/lo) (lo > 0), for
heavy-tailed values such as latencies."""


def bin_of(value: float, low: float, high: float, bins: int, scale: str) -> int:
    """The bin of ``value`` ∈ [low, high] (checked by the caller), in range(bins).

    Linear: ⌊(v − lo)/(hi − lo)·D⌋; log: ⌊log(v/lo)/log(hi/lo)·D⌋; both capped at D − 1
    (v = hi). Every SDK evaluates exactly these operations in this order: the linear
    ones are correctly rounded everywhere; ``log`` may differ by an ulp between
    platforms, which moves a value only when it lies within an ulp of a bin edge.
    """
    if scale == "log":
        t = math.log(value / low) / math.log(high / low) * bins
    else:
        t = (value - low) / (high - low) * bins
    return min(bins - 1, max(0, math.floor(t)))


def check_bin(value: object, bins: int) -> int:
    """``value`` as a bin index in range(bins), or ``ValueError``."""
    if type(value) is not int or not 0 <= value < bins:
        raise ValueError(f"a bin is an int in range(0, {bins}), got {value!r}")
    return value


def check_layout(bins: object, scale: object) -> None:
    """``ValueError`` unless bins is a power of two in [MIN_BINS, MAX_BINS] and scale one
    of :data:`SCALES` (the message says which)."""
    if not is_power_of_two(bins) or not MIN_BINS <= bins <= MAX_BINS:  # type: ignore[operator]
        raise ValueError(f"bins must be a power of two in [{MIN_BINS}, {MAX_BINS}], got {bins!r}")
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {', '.join(SCALES)}, got {scale!r}")


def is_power_of_two(x: object) -> bool:
    return type(x) is int and x > 0 and x & (x - 1) == 0

"""What every interval shares: the normal quantile, and statistics as JSON has them."""

from __future__ import annotations

import math
from statistics import NormalDist

__all__ = ["json_float", "z_value"]


def json_float(x: float) -> float | None:
    """A statistic as JSON has it: NaN (no reports yet) becomes None (``null``)."""
    return None if math.isnan(x) else float(x)


def z_value(confidence: float, comparisons: int = 1) -> float:
    """Two-sided normal quantile for ``confidence``, Bonferroni-corrected over ``comparisons``."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    alpha = (1.0 - confidence) / comparisons
    return NormalDist().inv_cdf(1.0 - alpha / 2.0)

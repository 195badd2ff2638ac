"""scipy, loaded on first use, and the normal and chi-square tails the alarms share.

Reading an estimate needs scipy's special functions; the stream worker and the web app
start without scipy (``tests/test_architecture.py``), so this is the one place the
statistics import it, at the first call. See ``docs/architecture/rules.md``.
"""

from __future__ import annotations

from statistics import NormalDist
from typing import Any

__all__ = ["chi2_isf", "chi2_sf", "normal_isf", "scipy_special", "scipy_stats"]


def scipy_special() -> Any:
    """``scipy.special``, imported at the first call (then a ``sys.modules`` lookup)."""
    import scipy.special  # noqa: PLC0415  # the worker and the web app load no scipy

    return scipy.special


def scipy_stats() -> Any:
    """``scipy.stats``, imported at the first call."""
    import scipy.stats  # noqa: PLC0415  # as scipy_special

    return scipy.stats


def normal_isf(alpha: float) -> float:
    """z with Pr[Z > z] = α."""
    return -NormalDist().inv_cdf(alpha)


def chi2_sf(x: float, df: int) -> float:
    """Pr[χ²_df > x] (``scipy.special.chdtrc``)."""
    return float(scipy_special().chdtrc(df, x))


def chi2_isf(alpha: float, df: int) -> float:
    """x with Pr[χ²_df > x] = α (``scipy.special.chdtri``)."""
    return float(scipy_special().chdtri(df, alpha))

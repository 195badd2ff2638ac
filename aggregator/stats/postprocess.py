"""Post-processing of frequency estimates (free in privacy, biased: report separately).

References:
    T. Wang, M. Lopuhaä-Zwakenberg, Z. Li, B. Skoric, N. Li. "Locally Differentially
    Private Frequency Estimation with Consistency". NDSS 2020 (Norm-Sub, §IV).
    W. Wang, M. Á. Carreira-Perpiñán. "Projection onto the probability simplex: An
    efficient algorithm with a simple proof". arXiv:1309.1541, 2013 (Algorithm 1).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from aggregator.stats.arrays import FloatArray

__all__ = ["norm_sub", "norm_sub_iterative"]


def norm_sub(estimates: npt.ArrayLike) -> FloatArray:
    """Norm-Sub: the Euclidean projection of the estimates onto the probability simplex.

    The result is non-negative and sums to 1; it equals Wang et al.'s iterative
    Norm-Sub (clip negatives to 0, spread the deficit over the positive entries, repeat)
    and is computed in O(k log k) with one sort.
    """
    f = np.asarray(estimates, dtype=np.float64)
    if f.ndim != 1 or f.size == 0:
        raise ValueError("norm_sub needs a non-empty 1-d array")
    if not np.all(np.isfinite(f)):
        raise ValueError("norm_sub needs finite estimates")
    u = np.sort(f)[::-1]
    cumulative = np.cumsum(u) - 1.0
    ranks = np.arange(1, f.size + 1)
    rho = int(np.nonzero(u - cumulative / ranks > 0)[0][-1])
    theta = cumulative[rho] / (rho + 1)
    return np.maximum(f - theta, 0.0)


def norm_sub_iterative(estimates: npt.ArrayLike, tol: float = 1e-12) -> FloatArray:
    """Norm-Sub as published: repeatedly shift the positive entries and clip at 0.

    O(k²) in the worst case; kept as the reference the fast projection is tested against.
    """
    f = np.asarray(estimates, dtype=np.float64).copy()
    positive = np.ones(f.size, dtype=bool)
    for _ in range(f.size + 1):
        delta = (1.0 - f[positive].sum()) / positive.sum()
        f[positive] += delta
        negative = positive & (f < 0)
        if not negative.any() and abs(f[positive].sum() - 1.0) <= tol:
            break
        f[negative] = 0.0
        positive &= ~negative
    f[~positive] = 0.0
    return f

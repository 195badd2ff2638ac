"""Unbiased frequency estimates with standard errors and confidence intervals.

References:
    Wang, Blocki, Li, Jha. USENIX Security 2017, eq. (2) and Theorem 2 (the estimator
    and its variance); ``client_sdk.mechanisms.base`` holds both formulas.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from aggregator.stats.codecs import Counts, count_payloads
from aggregator.stats.intervals import json_float, z_value
from aggregator.stats.postprocess import norm_sub
from client_sdk.mechanisms import FrequencyOracle

__all__ = ["FrequencyEstimate", "estimate", "estimate_from_counts"]

FloatArray = npt.NDArray[np.float64]


def _frozen(a: npt.ArrayLike, dtype: Any = np.float64) -> np.ndarray:
    out = np.array(a, dtype=dtype)
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False)
class FrequencyEstimate:
    """The estimate of a frequency vector from n reports, with its uncertainty.

    ``frequencies`` are unbiased (they can be negative and need not sum to 1);
    ``norm_sub`` is the separately labelled post-processed estimate (on the simplex,
    biased). Intervals are f̂ ± z·se with the plug-in variance; with
    ``simultaneous=True`` z is Bonferroni-corrected so all k intervals hold together.
    """

    mechanism: FrequencyOracle
    n: int
    support_counts: np.ndarray
    frequencies: FloatArray
    std_errors: FloatArray
    ci_low: FloatArray
    ci_high: FloatArray
    norm_sub: FloatArray
    confidence: float
    simultaneous: bool
    labels: tuple[str, ...]

    @property
    def k(self) -> int:
        """Domain size."""
        return self.mechanism.domain_size

    def conf_int(
        self, alpha: float = 0.05, simultaneous: bool = False
    ) -> tuple[FloatArray, FloatArray]:
        """Intervals at level 1 − alpha (optionally simultaneous over the k values)."""
        z = z_value(1.0 - alpha, self.k if simultaneous else 1)
        return self.frequencies - z * self.std_errors, self.frequencies + z * self.std_errors

    def indistinguishable_from_zero(self) -> np.ndarray:
        """Values whose interval contains 0."""
        return np.asarray((self.ci_low <= 0.0) & (self.ci_high >= 0.0))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (NaN, for n = 0, becomes None)."""
        num = json_float
        return {
            "mechanism": self.mechanism.params(),
            "n": self.n,
            "confidence": self.confidence,
            "simultaneous": self.simultaneous,
            "estimates": [
                {
                    "value": label,
                    "support_count": int(c),
                    "frequency": num(f),
                    "std_error": num(se),
                    "ci_low": num(lo),
                    "ci_high": num(hi),
                    "norm_sub": num(ns),
                }
                for label, c, f, se, lo, hi, ns in zip(
                    self.labels,
                    self.support_counts,
                    self.frequencies,
                    self.std_errors,
                    self.ci_low,
                    self.ci_high,
                    self.norm_sub,
                    strict=True,
                )
            ],
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON."""
        return json.dumps(self.to_dict())

    def summary(self, limit: int = 40) -> str:
        """A readable table: value, unbiased estimate ± half-width, interval, Norm-Sub."""
        m = self.mechanism
        level = f"{self.confidence:.0%}" + (" simultaneous" if self.simultaneous else "")
        lines = [
            f"{m.name} ε={m.epsilon:g} k={m.domain_size}  n={self.n:,}  {level} intervals",
            f"{'value':>16} {'estimate':>10} {'± half':>9} {'low':>9} {'high':>9} "
            f"{'norm-sub*':>10}",
        ]
        order = np.argsort(-np.nan_to_num(self.frequencies, nan=-np.inf), kind="stable")
        for i in order[:limit]:
            mark = "" if not self.indistinguishable_from_zero()[i] else "  ~0"
            lines.append(
                f"{self.labels[i][:16]:>16} {self.frequencies[i]:>10.5f} "
                f"{self.ci_high[i] - self.frequencies[i]:>9.5f} {self.ci_low[i]:>9.5f} "
                f"{self.ci_high[i]:>9.5f} {self.norm_sub[i]:>10.5f}{mark}"
            )
        if self.k > limit:
            lines.append(f"{'':>16} … {self.k - limit} more values")
        lines.append(
            "estimate: unbiased; ~0: interval contains 0; *norm-sub: projected onto the "
            "simplex (post-processed, biased)"
        )
        return "\n".join(lines)


def estimate_from_counts(
    mechanism: FrequencyOracle,
    counts: Counts,
    confidence: float = 0.95,
    simultaneous: bool = False,
    labels: Sequence[str] | None = None,
) -> FrequencyEstimate:
    """Estimate frequencies from additive sufficient statistics (n, support counts).

    Args:
        mechanism: the mechanism object every report was made with.
        counts: n and C(v) as summed over any number of batches.
        confidence: the intervals' level, in (0, 1).
        simultaneous: Bonferroni-correct over the k values.
        labels: names of the k values (default "0".."k-1").

    Raises:
        ValueError: counts of the wrong length, negative, or above n; a bad confidence.
    """
    k = mechanism.domain_size
    support = np.asarray(counts.support, dtype=np.int64)
    if support.shape != (k,):
        raise ValueError(f"support counts must have length {k}, got shape {support.shape}")
    n = int(counts.n)
    if n < 0 or support.min() < 0 or support.max() > n:
        raise ValueError("support counts must lie in [0, n]")
    names = tuple(str(x) for x in labels) if labels is not None else tuple(map(str, range(k)))
    if len(names) != k:
        raise ValueError(f"need {k} labels, got {len(names)}")
    z = z_value(confidence, k if simultaneous else 1)
    if n == 0:
        nan = np.full(k, np.nan)
        f = se = lo = hi = ns = nan
    else:
        f = mechanism.debias(support.astype(np.float64), n)
        plug_in = np.clip(f, 0.0, 1.0)
        se = np.sqrt(mechanism.variance(n, plug_in))
        lo, hi = f - z * se, f + z * se
        ns = norm_sub(f)
    return FrequencyEstimate(
        mechanism=mechanism,
        n=n,
        support_counts=_frozen(support, np.int64),
        frequencies=_frozen(f),
        std_errors=_frozen(se),
        ci_low=_frozen(lo),
        ci_high=_frozen(hi),
        norm_sub=_frozen(ns),
        confidence=confidence,
        simultaneous=simultaneous,
        labels=names,
    )


def estimate(
    mechanism: FrequencyOracle,
    payloads: Sequence[Any],
    confidence: float = 0.95,
    simultaneous: bool = False,
    labels: Sequence[str] | None = None,
) -> FrequencyEstimate:
    """Validate, decode and estimate a batch of payloads (see :func:`estimate_from_counts`).

    Raises:
        PayloadError: a payload that does not fit the mechanism, by index and problem.
    """
    return estimate_from_counts(
        mechanism,
        count_payloads(mechanism, payloads),
        confidence=confidence,
        simultaneous=simultaneous,
        labels=labels,
    )

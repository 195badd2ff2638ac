"""ldp-telemetry's server side: decode, estimate, simulate, audit.

>>> from aggregator import estimate
>>> est = estimate(mechanism, payloads, confidence=0.95)
>>> mean = estimate_mean(definition, stats, confidence=0.95)   # a numeric metric's mean
"""

from __future__ import annotations

from aggregator.stats.codecs import Counts
from aggregator.stats.frequency import FrequencyEstimate, estimate, estimate_from_counts
from aggregator.stats.kinds import codec_for, count_payloads
from aggregator.stats.numeric import NumericEstimate, NumericStats, estimate_mean
from aggregator.stats.postprocess import norm_sub

__all__ = [
    "Counts",
    "FrequencyEstimate",
    "NumericEstimate",
    "NumericStats",
    "codec_for",
    "count_payloads",
    "estimate",
    "estimate_from_counts",
    "estimate_mean",
    "norm_sub",
]

"""ldp-telemetry's server side: decode, estimate, simulate, audit.

>>> from aggregator import estimate
>>> est = estimate(mechanism, payloads, confidence=0.95)
"""

from __future__ import annotations

from aggregator.decoding import Counts, codec_for, count_payloads
from aggregator.estimate import FrequencyEstimate, estimate, estimate_from_counts
from aggregator.postprocess import norm_sub

__all__ = [
    "Counts",
    "FrequencyEstimate",
    "codec_for",
    "count_payloads",
    "estimate",
    "estimate_from_counts",
    "norm_sub",
]

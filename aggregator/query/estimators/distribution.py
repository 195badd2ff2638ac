"""The distribution kind's estimator: a window's histogram, CDF with its simultaneous
band, the ranges and quantiles asked for. See docs/statistics/distributions.md.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from aggregator.query.answers import (
    CdfPoint,
    DistributionBin,
    DistributionEstimates,
    DistributionTrendPoint,
    QuantileAnswer,
    RangeAnswer,
)
from aggregator.query.estimators.base import Ask, CountsRead, Reader, answer_head
from aggregator.query.window import read_counts_many
from aggregator.stats.codecs import Counts
from aggregator.stats.distribution import (
    DEFAULT_QUANTILES,
    DistributionEstimate,
    estimate_distribution,
)
from aggregator.stats.distribution_haar import estimate_haar
from aggregator.stats.distribution_series import quantile_series
from aggregator.stats.intervals import json_float
from client_sdk.mechanisms.haar import HaarHRR
from client_sdk.wire import MetricDefinition

__all__ = ["DistributionEstimator", "distribution_of", "distribution_trend"]


def distribution_of(
    definition: MetricDefinition, stats: Counts, confidence: float
) -> DistributionEstimate:
    """The window's :class:`~aggregator.stats.distribution.DistributionEstimate`, by the
    estimator of the definition's mechanism (the tree's constrained inference, or HaarHRR's
    Walsh–Hadamard transform)."""
    m = definition.histogram
    if isinstance(m, HaarHRR):
        return estimate_haar(m, stats.support, definition.bin_edges(), confidence)
    return estimate_distribution(m, stats.support, definition.bin_edges(), confidence)


def distribution_trend(
    reader: Reader, definition: MetricDefinition, windows: list[str], ask: Ask
) -> list[DistributionTrendPoint]:
    """Each window's quantiles (``ask.quantiles``, default p50, p90, p95, p99), the
    windows read in a few round trips and estimated together
    (:func:`aggregator.stats.distribution_series.quantile_series`): each window's own
    fit and CDF standard errors, the interval read off a Bonferroni band."""
    counts = read_counts_many(reader.client, definition, windows)
    m = definition.histogram
    table = np.array([c.support for c in counts], dtype=np.int64).reshape(len(counts), m.counters)
    asked = DEFAULT_QUANTILES if ask.quantiles is None else tuple(ask.quantiles)
    series = quantile_series(m, definition.bin_edges(), table, asked, ask.confidence)
    critical = json_float(series.band_critical)
    return [
        DistributionTrendPoint(
            window=window,
            n=int(series.n[w]),
            ready=bool(series.ready[w]),
            band_critical=critical if series.ready[w] else None,
            quantiles=[QuantileAnswer(**q.__dict__) for q in series.quantiles[w]],
        )
        for w, window in enumerate(windows)
    ]


def intervals_note(confidence: float) -> str:
    """What the intervals promise, in one paragraph."""
    level = f"{confidence:.0%}"
    return (
        f"each bin's and each range's interval holds its true share with {level} "
        f"confidence on its own; the CDF band holds at every edge at once with {level} "
        "confidence, and the quantiles' intervals are read off it, so they hold together; "
        "shares are among the devices that reported (fixed n: valid for one look)"
    )


class DistributionEstimator(CountsRead):
    """Distribution metrics (hierarchical histograms or HaarHRR): the counters in, the histogram,
    CDF, ranges and quantiles out (:mod:`aggregator.stats.distribution`)."""

    sequence: ClassVar[bool] = False
    no_sequence: ClassVar[str] = "a distribution's band is for one look"

    def estimate(
        self, reader: Reader, definition: MetricDefinition, window: str, stats: Counts, ask: Ask
    ) -> DistributionEstimates:
        """The window's distribution."""
        est = distribution_of(definition, stats, ask.confidence)
        m = definition.histogram
        bins: list[DistributionBin] = []
        cdf: list[CdfPoint] = []
        ranges: list[RangeAnswer] = []
        quantiles: list[QuantileAnswer] = []
        critical = None
        if est.ready:
            edges, z = est.edges, est.z
            for j, (share, se) in enumerate(zip(est.histogram, est.bin_std_errors, strict=True)):
                bins.append(
                    DistributionBin(
                        low=float(edges[j]),
                        high=float(edges[j + 1]),
                        share=float(share),
                        std_error=float(se),
                        ci_low=float(share - z * se),
                        ci_high=float(share + z * se),
                    )
                )
            critical = est.band_critical
            for j, value, se in zip(est._band_points, est.cdf, est.cdf_std_errors, strict=True):
                cdf.append(
                    CdfPoint(
                        value=float(edges[j]),
                        cdf=float(value),
                        std_error=float(se),
                        band_low=float(value - critical * se),
                        band_high=float(value + critical * se),
                    )
                )
            for low, high in ask.ranges:
                r = est.range_share(low, high)
                ranges.append(RangeAnswer(asked=[low, high], **r.__dict__))
            for p in DEFAULT_QUANTILES if ask.quantiles is None else ask.quantiles:
                quantiles.append(QuantileAnswer(**est.quantile(p).__dict__))
        return DistributionEstimates(
            **answer_head(definition, m, est.n, window),
            kind="distribution",
            mechanism_reason=definition.mechanism_reason,
            n_levels=[int(x) for x in est.n_levels],
            confidence=ask.confidence,
            range=list(definition.value_range or (0.0, 1.0)),
            scale=m.scale,
            ready=est.ready,
            bins=bins,
            cdf=cdf,
            band_critical=json_float(critical) if critical is not None else None,
            ranges=ranges,
            quantiles=quantiles,
            intervals_note=intervals_note(ask.confidence),
        )

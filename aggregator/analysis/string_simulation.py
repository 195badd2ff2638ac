"""Simulated populations of a string metric: counts without a server, and their scoring.

:func:`simulate_counts` draws n users' words from a vocabulary and shares, perturbs them
in bulk with the string codec (numpy's seeded generator: a simulation, not a device) and
adds up the sketch's counters exactly as the worker would. :func:`score` compares what
the discovery found with the truth: precision and recall of the top-k.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from aggregator.stats.codecs import Counts
from aggregator.stats.discovery import Discovery
from aggregator.stats.kinds import codec_for
from client_sdk.mechanisms.strings import StringSketch

__all__ = ["CHUNK", "TopK", "score", "simulate_counts"]

CHUNK = 500_000
"""Users perturbed per step: an (n, L) matrix of 8 MB at L = 16 and the codec's columns."""


def simulate_counts(
    sketch: StringSketch,
    vocabulary: npt.NDArray[np.uint8],
    shares: npt.NDArray[np.float64],
    users: int,
    gen: np.random.Generator,
    progress: Callable[[int], None] | None = None,
) -> tuple[Counts, npt.NDArray[np.int64]]:
    """The sketch's counts of ``users`` simulated reports, and the true count of each word.

    Args:
        sketch: the metric's mechanism.
        vocabulary: (V, L) padded words (see :mod:`aggregator.analysis.vocabulary`).
        shares: each word's probability.
        users: how many reports.
        gen: numpy generator (values and noise).
        progress: called with the users of each chunk perturbed (a progress bar).
    """
    codec = codec_for(sketch)
    truth = gen.multinomial(users, shares).astype(np.int64)
    order = np.repeat(np.arange(len(shares)), truth)
    gen.shuffle(order)
    support = np.zeros(sketch.counters, dtype=np.int64)
    for start in range(0, users, CHUNK):
        batch = codec.encode(vocabulary[order[start : start + CHUNK]], gen)
        support += codec.count(batch)
        if progress is not None:
            progress(min(CHUNK, users - start))
    return Counts(users, support), truth


@dataclass(frozen=True)
class TopK:
    """Precision and recall of the top k found against the true top k."""

    k: int
    precision: float
    recall: float


def score(
    found: Discovery,
    vocabulary: npt.NDArray[np.uint8],
    truth: npt.NDArray[np.int64],
    k: int,
) -> TopK:
    """The found top k (by estimate) against the k most frequent words of the truth.

    Precision: the share of the found top k (or fewer, if fewer were found) that are in
    the true top k; recall: the share of the true top k found among them.
    """
    top = np.argsort(-truth, kind="stable")[:k]
    want = {vocabulary[i].tobytes() for i in top}
    got = found.values[:k]
    hits = sum(v in want for v in got)
    return TopK(k, hits / len(got) if got else 1.0, hits / k)

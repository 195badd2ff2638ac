"""Synthetic vocabularies for string metrics: no data is downloaded, ever.

A vocabulary is a set of distinct lowercase words of 3..``max_length`` bytes (lengths
uniform), drawn from a seeded numpy generator, padded with NUL to ``max_length`` exactly
as a device pads its value (:func:`client_sdk.mechanisms.strings.normalise`). Shares
follow a Zipf law, word i (0-based) ∝ 1/(i+1)^s, so the simulations, benchmarks and the
firehose draw populations like "search terms" with a known truth.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from aggregator.analysis.simulation import distribution

__all__ = ["MIN_WORD_LENGTH", "synthetic_vocabulary", "zipf_shares"]

MIN_WORD_LENGTH = 3
"""Shortest word: 26² two-letter words could not make a vocabulary of 10⁵ distinct ones."""

ALPHABET = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)


def synthetic_vocabulary(size: int, max_length: int = 16, seed: int = 0) -> npt.NDArray[np.uint8]:
    """``size`` distinct random words as a (size, max_length) uint8 matrix, NUL-padded.

    Raises:
        ValueError: ``max_length`` below :data:`MIN_WORD_LENGTH`, or ``size`` < 1.
    """
    if max_length < MIN_WORD_LENGTH or size < 1:
        raise ValueError(f"need size ≥ 1 and max_length ≥ {MIN_WORD_LENGTH}")
    gen = np.random.default_rng(seed)
    words = np.zeros((0, max_length), dtype=np.uint8)
    while len(words) < size:
        want = 2 * (size - len(words)) + 16
        lengths = gen.integers(MIN_WORD_LENGTH, max_length + 1, want)
        letters = ALPHABET[gen.integers(0, 26, (want, max_length))]
        letters[np.arange(max_length)[None, :] >= lengths[:, None]] = 0
        both = np.vstack([words, letters])
        _, first = np.unique(both, axis=0, return_index=True)
        words = both[np.sort(first)]
    order = gen.permutation(len(words))[:size]
    return np.ascontiguousarray(words[np.sort(order)])


def zipf_shares(size: int, exponent: float) -> npt.NDArray[np.float64]:
    """Word i's share ∝ 1/(i+1)^exponent."""
    return distribution("zipf", size, exponent)

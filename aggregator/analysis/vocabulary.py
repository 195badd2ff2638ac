"""Vocabularies for string metrics: synthetic ones, and word-frequency lists read from a
file (no data is downloaded, ever).

A vocabulary is a set of distinct lowercase words of 3..``max_length`` bytes (lengths
uniform), drawn from a seeded numpy generator, padded with NUL to ``max_length`` exactly
as a device pads its value (:func:`client_sdk.mechanisms.strings.normalise`). Shares
follow a Zipf law, word i (0-based) ∝ 1/(i+1)^s, so the simulations, benchmarks and the
firehose draw populations like "search terms" with a known truth.
:func:`word_list` reads a real language's words and frequencies (the lists the tests ship
under ``tests/data``) as a device would send them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt

from aggregator.analysis.simulation import distribution
from client_sdk.mechanisms.strings import normalise

__all__ = ["MIN_WORD_LENGTH", "synthetic_vocabulary", "word_list", "zipf_shares"]

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


def word_list(
    path: str | Path, max_length: int = 16
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.float64]]:
    """Padded values and shares of a ``word<TAB>frequency`` file (``#`` lines skipped).

    Each word becomes the bytes a device sends (:func:`normalise`: NFC, UTF-8, truncated
    at a character boundary, NUL-padded); words that become the same bytes are merged and
    the shares renormalised to sum to 1 over the list.
    """
    merged: dict[bytes, float] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        word, freq = line.split("\t")
        value = normalise(word, max_length)
        merged[value] = merged.get(value, 0.0) + float(freq)
    values = np.frombuffer(b"".join(merged), dtype=np.uint8).reshape(len(merged), max_length)
    shares = np.array(list(merged.values()))
    return values.copy(), shares / shares.sum()

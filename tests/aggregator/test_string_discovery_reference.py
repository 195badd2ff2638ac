"""Discovery against its recorded output on fixed counts, and the pieces that make it fast
(the extensions' cells without their fingerprints, the rows' pairwise convolution).

``tests/data/string_discovery_reference.json`` holds what discovery reported on two
seeded windows: rewrite it (``PYTHONPATH=<tree> python
tests/aggregator/test_string_discovery_reference.py --write``) only when the algorithm
changes on purpose, never to make this test pass.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from aggregator.analysis.string_simulation import simulate_counts
from aggregator.analysis.vocabulary import synthetic_vocabulary, zipf_shares
from aggregator.stats import discovery
from aggregator.stats.discovery import discover
from aggregator.stats.kinds import codec_for
from aggregator.stats.strings import SketchEstimator
from client_sdk.mechanisms.strings import HASH_PRIME, StringSketch

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "string_discovery_reference.json"

WINDOWS = {
    "10 bytes, ε = 4": {"length": 10, "epsilon": 4.0, "users": 300_000, "zipf": 1.3},
    "24 bytes, ε = 8": {"length": 24, "epsilon": 8.0, "users": 200_000, "zipf": 1.1},
    "64 bytes, ε = 4": {"length": 64, "epsilon": 4.0, "users": 500_000, "zipf": 1.3},
}
"""Seeded windows: a short value length, one long enough that the salt null's old full
support (L·h rows) was many times Hoeffding's window, and the longest, where values
complete at every level are tested across up to 64 levels."""

EXACT = ("frequency", "variance", "null_variance", "truncation", "adjusted", "candidates")
"""What must come out bit for bit: none of it passes through the salt null's FFT."""


def snapshot(window: dict[str, Any]) -> dict[str, Any]:
    """What discovery reports on a window (floats as hex: exact), and the estimates of
    the 40 most frequent words asked for by name."""
    length = window["length"]
    sketch = StringSketch(epsilon=window["epsilon"], max_length=length, salt="5eed")
    vocab = synthetic_vocabulary(5_000, length, seed=4)
    shares = zipf_shares(5_000, window["zipf"])
    counts, _ = simulate_counts(sketch, vocab, shares, window["users"], np.random.default_rng(8))
    est = SketchEstimator(codec_for(sketch), counts)
    found = discover(est)
    adjusted = found.adjusted(0.95)
    asked = found.estimate(est, vocab[:40])

    def floats(*arrays: Any) -> list[str]:
        return [float(x).hex() for a in arrays for x in np.asarray(a, dtype=float).ravel()]

    return {
        "values": [v.hex() for v in found.values],
        "frequency": floats(found.frequency),
        "variance": floats(found.variance),
        "null_variance": floats(found.null_variance),
        "p_values": floats(found.p_values),
        "truncation": floats(found.truncation),
        "adjusted": floats(adjusted.frequency, adjusted.low, adjusted.high),
        "candidates": floats(asked.frequency, asked.variance, asked.null_variance),
        "null_std": float(found.null_std).hex(),
        "tested": found.tested,
    }


@pytest.mark.parametrize("name", list(WINDOWS))
def test_discovery_reports_what_it_reported_on_the_same_counts(name: str) -> None:
    """The values found, their estimates, variances, selection events, adjusted intervals,
    the candidates' estimates, σ₀ and the number tested are the recorded ones bit for bit.
    The p-values pass through the salt null's FFT, whose rounding is ≈ 2⁻⁵² of the
    distribution's largest entry per point of the transform: they agree within
    ε·(the longest transform, 2¹⁸ points for the full support at 24 bytes) = 6·10⁻¹¹, and
    the trimmed tails add at most 2L·NULL_TAIL (measured: ≤ 7·10⁻¹⁴)."""
    want = json.loads(REFERENCE.read_text())[name]
    got = snapshot(WINDOWS[name])
    assert got["values"] == want["values"]
    assert got["tested"] == want["tested"]
    assert got["null_std"] == want["null_std"]
    for key in EXACT:
        assert got[key] == want[key], key
    p_got = np.array([float.fromhex(x) for x in got["p_values"]])
    p_want = np.array([float.fromhex(x) for x in want["p_values"]])
    tolerance = np.finfo(float).eps * 2**18 + 2 * WINDOWS[name]["length"] * discovery.NULL_TAIL
    assert np.max(np.abs(p_got - p_want), initial=0.0) <= tolerance


def test_an_extensions_cells_are_those_of_its_fingerprint() -> None:
    """:meth:`StringCodec.extension_cells` (residues added per parent and per byte) gives
    exactly the cells of the extended fingerprints, for a power-of-two m and another."""
    gen = np.random.default_rng(5)
    for cells in (128, 100):
        codec = codec_for(StringSketch(epsilon=4.0, max_length=8, rows=16, cells=cells))
        phi = gen.integers(0, HASH_PRIME, (50, 16))
        parent = gen.integers(0, 50, 3000)
        byte = gen.integers(0, 256, 3000).astype(np.uint8)
        for level in (0, 7):
            want = codec.cells(codec.extend(phi[parent], byte), level)
            assert np.array_equal(codec.extension_cells(phi, parent, byte, level), want)


def test_the_rows_pairwise_sum_is_their_convolution() -> None:
    """:func:`discovery._row_sum` of 5 and of 8 probability vectors is their convolution,
    to the FFT's rounding."""
    gen = np.random.default_rng(2)
    for rows in (5, 8):
        hist = gen.random((rows, 7))
        hist /= hist.sum(axis=1, keepdims=True)
        want = hist[0]
        for row in hist[1:]:
            want = np.convolve(want, row)
        got = discovery._row_sum(hist)
        assert got.shape == want.shape
        assert np.max(np.abs(got - want)) <= 1e-15


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    REFERENCE.write_text(
        json.dumps({name: snapshot(w) for name, w in WINDOWS.items()}, indent=1) + "\n"
    )

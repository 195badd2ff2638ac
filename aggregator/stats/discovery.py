"""Finding a string metric's frequent values without a dictionary: prefix extension.

Level by level (one byte each), the frequent prefixes of the previous level are extended
by every byte value; the sketch (:class:`~aggregator.stats.strings.SketchEstimator`)
estimates each extension from that level's reports alone, and the ``beam`` most frequent
of those that clear a loose z-score survive to the next level (Wang, Li & Jha's Prefix
Extending Method with one group of users per level; Bassily et al.'s TreeHist walks the
same tree). A prefix extended by the padding byte NUL is a *complete* value; it is
estimated from every level from there on (:meth:`SketchEstimator.strings`), and all
complete values are then tested together: one-sided z-tests of f = 0 with the variance
at f = 0, Benjamini–Hochberg at level α, so that among the values called present the
expected share of false ones is at most α.

The detection threshold (:func:`detection_threshold`) is the frequency at which a value
is found with probability about one half: z_{1−α/T}·σ₀ with σ₀ the standard deviation at
f = 0 and T the number of complete values tested.

References:
    T. Wang, N. Li, S. Jha, "Locally Differentially Private Heavy Hitter Identification",
    IEEE TDSC 2019.
    R. Bassily, K. Nissim, U. Stemmer, A. Thakurta, "Practical Locally Private Heavy
    Hitters", NeurIPS 2017.
    Y. Benjamini, Y. Hochberg, "Controlling the false discovery rate", JRSS-B 1995.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np

from aggregator.stats.strings import (
    LevelEstimate,
    SketchEstimator,
    as_padded,
    combine,
    value_lengths,
)
from client_sdk.mechanisms.strings import display

__all__ = ["DEFAULT_BEAM", "Discovery", "detection_threshold", "discover"]

DEFAULT_BEAM = 256
"""Prefixes kept per level: 255 extensions each make ≈ 65 k candidates per level, a few
tens of milliseconds of numpy; enough to keep the top 100 values' prefixes with room for
the prefixes they share with noise."""

KEEP_Z = 1.0
"""Loose z-score a prefix must clear to be extended: it only prunes noise, the final test
is Benjamini–Hochberg's on complete values."""


@dataclass(frozen=True)
class Discovery:
    """Values found in one window, best first, with what the test needed."""

    values: list[bytes]
    """Padded values called present, by decreasing estimate."""
    frequency: np.ndarray
    variance: np.ndarray
    p_values: np.ndarray
    tested: int
    """Complete values tested (the multiplicity Benjamini–Hochberg corrects for)."""
    null_std: float
    """σ₀ of a complete value of full length at f = 0 (the worst case)."""
    alpha: float
    records: list[_Level] = field(default_factory=list, repr=False)
    """What the walk accepted at each level (for :meth:`estimate`)."""

    def estimate(self, est: SketchEstimator, values: np.ndarray) -> LevelEstimate:
        """Estimates of any padded values ((N, L) uint8), as the discovered ones were made."""
        return estimate_values(est, values, self.records)

    @property
    def labels(self) -> list[str]:
        """The values as text (padding removed)."""
        return [display(v) for v in self.values]


def benjamini_hochberg(p_values: np.ndarray, alpha: float) -> np.ndarray:
    """Mask of the hypotheses rejected at false discovery rate α."""
    n = len(p_values)
    if not n:
        return np.zeros(0, dtype=bool)
    order = np.argsort(p_values, kind="stable")
    passed = p_values[order] <= alpha * np.arange(1, n + 1) / n
    keep = np.zeros(n, dtype=bool)
    if passed.any():
        keep[order[: np.flatnonzero(passed).max() + 1]] = True
    return keep


@dataclass
class _Level:
    """What the walk knows at one level: the accepted prefixes' cells and mass."""

    occupied: np.ndarray
    mass: float = 0.0
    mass_sq: float = 0.0
    accepted: dict[bytes, float] = field(default_factory=dict)
    """Complete values accepted at this level: padded value → the f̂ it was accepted with."""


def _accept(
    est: SketchEstimator, level: int, cells: np.ndarray, keep_z: float, limit: int
) -> tuple[list[int], np.ndarray, _Level]:
    """Greedy acceptance at one level, heaviest first, in rounds of 1, 2, 4, … prefixes.

    A candidate is estimated from the rows where no accepted prefix holds its cell, so a
    candidate that merely shares cells with a heavy prefix loses that mass once the heavy
    one is accepted (with one hash row per level and 65 k candidates, hundreds would
    otherwise look as frequent as the heavy prefix they collide with).

    Returns:
        (accepted indices in order, their f̂, the level's record).
    """
    m = est.m
    record = _Level(np.zeros((m.rows, m.cells), dtype=np.int64))
    gathered = est.gather(level, cells)
    first = est.reduce(gathered)
    with np.errstate(divide="ignore", invalid="ignore"):
        z0 = np.nan_to_num(first.frequency / np.sqrt(first.null_variance), nan=-np.inf)
    pool = np.flatnonzero(z0 >= keep_z - 1.0)  # taking collisions out rarely adds a σ
    gathered = gathered.take(pool)
    alive = np.ones(len(pool), dtype=bool)
    accepted: list[int] = []
    freqs: list[float] = []
    size = 1
    rows = np.arange(m.rows)[None, :]
    while len(accepted) < limit:
        idx = np.flatnonzero(alive)
        if not len(idx):
            break
        found = est.reduce(gathered.take(idx), record.occupied, None, record.mass, record.mass_sq)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.nan_to_num(found.frequency / np.sqrt(found.null_variance), nan=-np.inf)
        ok = np.flatnonzero(z >= keep_z)
        if not len(ok):
            break
        best = ok[np.argsort(-found.frequency[ok], kind="stable")[: min(size, limit - len(accepted))]]
        f = np.clip(found.frequency[best], 0.0, 1.0)
        chosen = gathered.cells[idx[best]]
        np.add.at(record.occupied, (np.broadcast_to(rows, chosen.shape), chosen), 1)
        record.mass += float(f.sum())
        record.mass_sq += float((f * f).sum())
        accepted.extend(pool[idx[best]].tolist())
        freqs.extend(f.tolist())
        alive[idx[best]] = False
        size *= 2
    return accepted, np.asarray(freqs), record


def discover(
    est: SketchEstimator, alpha: float = 0.05, beam: int = DEFAULT_BEAM, keep_z: float = KEEP_Z
) -> Discovery:
    """The frequent values of a window's sketch (see the module's docstring)."""
    m, codec = est.m, est.codec
    L = m.levels
    byte_values = np.arange(1, 256, dtype=np.uint8)
    prefixes = np.zeros((1, 0), dtype=np.uint8)
    complete = np.zeros((0, L), dtype=np.uint8)
    records: list[_Level] = []
    for level in range(L):
        ended = np.zeros((len(prefixes), L), dtype=np.uint8)
        ended[:, :level] = prefixes
        if level == 0:
            ended = ended[:0]  # the empty string is no value
        ext = np.hstack(
            [np.repeat(prefixes, 255, axis=0), np.tile(byte_values, len(prefixes))[:, None]]
        )
        last = level == L - 1
        if last:  # full-length values are complete too
            full = np.zeros((len(ext), L), dtype=np.uint8)
            full[:] = ext
            ended = np.vstack([ended, full])
            ext = ext[:0]
        complete = np.vstack([complete, ended])
        here = np.vstack([ext, complete[:, : level + 1]])
        cells = codec.cells(codec.fingerprints(here), level)
        accepted, freqs, record = _accept(
            est, level, cells, keep_z, beam + len(complete)
        )
        n_ext = len(ext)
        opened = [i for i in accepted if i < n_ext][:beam]
        record.accepted = {
            complete[i - n_ext].tobytes(): f
            for i, f in zip(accepted, freqs.tolist(), strict=True)
            if i >= n_ext
        }
        records.append(record)
        prefixes = ext[opened]
    return _test(est, complete, records, alpha)


def estimate_values(est: SketchEstimator, values: np.ndarray, records: list[_Level]) -> LevelEstimate:
    """Estimates of padded values ((N, L) uint8) given what the walk found at each level.

    Each level leaves out the rows where a value the walk accepted there (other than the
    value itself) holds the value's cell, and takes their mass out of the correction.
    """
    m, codec = est.m, est.codec
    L = m.levels
    first = np.minimum(value_lengths(values), L - 1)
    parts = []
    for level, record in enumerate(records):
        idx = np.flatnonzero(first <= level)
        if not len(idx):
            continue
        cells = codec.cells(codec.fingerprints(values[idx, : level + 1]), level)
        own_f = np.array([record.accepted.get(values[i].tobytes(), np.nan) for i in idx])
        own = ~np.isnan(own_f)
        f0 = np.where(own, own_f, 0.0)
        found = est.level(
            level, cells, record.occupied, own, record.mass - f0, record.mass_sq - f0 * f0
        )
        parts.append((idx, found))
    return combine(parts, len(values))


def _test(
    est: SketchEstimator, complete: np.ndarray, records: list[_Level], alpha: float
) -> Discovery:
    """Estimate every complete value over its levels, then Benjamini–Hochberg."""
    m = est.m
    got = estimate_values(est, complete, records)
    p = got.p_values()
    keep = benjamini_hochberg(p, alpha)
    idx = np.flatnonzero(keep)
    idx = idx[np.argsort(-got.frequency[idx], kind="stable")]
    null = est.level(m.levels - 1, np.zeros((1, m.rows), dtype=np.int64)).null_variance
    return Discovery(
        values=as_padded(complete[idx]),
        frequency=got.frequency[idx],
        variance=got.variance[idx],
        p_values=p[idx],
        tested=len(complete),
        null_std=float(np.sqrt(null[0])),
        alpha=alpha,
        records=records,
    )


def detection_threshold(null_std: float, tested: int, alpha: float = 0.05) -> float:
    """The frequency found with probability ≈ ½: z_{1−α/T}·σ₀ (T values tested)."""
    return NormalDist().inv_cdf(1 - alpha / max(tested, 1)) * null_std

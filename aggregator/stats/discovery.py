"""Finding a string metric's frequent values without a dictionary: prefix extension.

Level by level (one byte each), the frequent prefixes of the previous level are extended
by every byte value; the sketch (:class:`~aggregator.stats.strings.SketchEstimator`)
estimates each extension from that level's reports alone, and the ``beam`` most frequent
of those that clear a loose z-score survive to the next level (Wang, Li & Jha's Prefix
Extending Method with one group of users per level; Bassily et al.'s TreeHist walks the
same tree). A prefix extended by the padding byte NUL is a *complete* value; it is
estimated from every level from there on (:meth:`SketchEstimator.strings`), and all
complete values are then tested together: one-sided z-tests of f = 0 with the variance
at f = 0, Benjamini–Hochberg at level α. σ₀ is each value's own: the LDP variance of
what its cells hold besides it (at ε = 8 a cell's count is nearly Poisson, so a cell
sharing a row with a heavy word is far noisier than an empty one), plus the collision
noise left in the level's residual table (:meth:`SketchEstimator.collision_moment`).
BH's promise — among the values called present the expected share of false ones is at
most α — holds only where measured so (BENCHMARKS.md, "Compared with the papers", 5
seeds): 0.05 (0.03–0.06) at ε = 8 with 6 bytes, 0.01 at ε = 8 with 16 bytes and
n = 6.5·10⁵, 0 at ε = 4 with n = 10⁷. It does **not** hold at n = 10⁷, ε = 8 (0.33,
one seed; the walk accepts > 10³ values by chance at the last level) nor quite at
ε = 2 with 6 bytes (0.08, 8 seeds of ≈ 11 values called present). Top-k precision is
unaffected (false values rank low).

A value called present was selected *because* its estimate came out high, so the plain
interval f̂ ± z·σ under-covers near the threshold (0.80 at ε = 8, n = 10⁵). Each value's
selection event, {f̂ ≥ a} in the reported estimate's units (:func:`_truncation`), is kept
in :attr:`Discovery.truncation`, and :meth:`Discovery.adjusted` gives the conditional
estimate and interval given it (:mod:`aggregator.stats.selection`).

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

from aggregator.stats.selection import Adjusted, selection_adjusted
from aggregator.stats.strings import (
    Known,
    LevelEstimate,
    SketchEstimator,
    as_padded,
    combine,
    poisson_sf,
    value_lengths,
)
from client_sdk.mechanisms.strings import display

__all__ = ["DEFAULT_BEAM", "Discovery", "detection_threshold", "discover"]

DEFAULT_BEAM = 256
"""Prefixes kept per level: 255 extensions each make ≈ 65 k candidates per level, a few
tens of milliseconds of numpy; enough to keep the top 100 values' prefixes with room for
the prefixes they share with noise."""

STRONG_Z = 8.0
"""z-score from which an accepted prefix's mass is taken out of the *estimates* (not only
out of the walk's ranking). Subtracting every accepted prefix biased the estimates of
real but weaker values downward (−1.5 σ on the top 50 at ε = 4, n = 10⁶; coverage of 95 %
intervals 0.67): prefixes accepted near the threshold are mostly noise that was selected
*because* it shares cells with real mass. At z ≥ 8 an estimate is within 1/8 of itself
and its selection bias negligible: measured −0.0 σ and 0.98 coverage."""

PASSES = 3
"""Passes over a level's candidates (:func:`_accept`): the first finds the heavy prefixes,
whose collisions hide lighter ones until they are subtracted; a third rarely adds any."""

KEEP_Z = 3.0
"""z-score a prefix must clear to be extended: it prunes noise (0.13 % of absent prefixes,
some 85 of a level's 65 k candidates, pass it); the final test is Benjamini–Hochberg's on
complete values."""


ADJUSTED_KEPT = 4
"""Confidence levels whose adjusted intervals a discovery keeps (the page asks for one)."""


@dataclass(frozen=True)
class Discovery:
    """Values found in one window, best first, with what the test needed."""

    values: list[bytes]
    """Padded values called present, by decreasing estimate."""
    frequency: np.ndarray
    variance: np.ndarray
    null_variance: np.ndarray
    """The variance each estimate would have at f = 0 (the selection-adjusted interval's
    σ(μ) runs between it and ``variance``)."""
    p_values: np.ndarray
    tested: int
    """Complete values tested (the multiplicity Benjamini–Hochberg corrects for)."""
    null_std: float
    """σ₀ of a complete value of full length at f = 0 (the worst case), once the values
    found are taken out, widened by the measured null's spread."""
    alpha: float
    truncation: np.ndarray
    """Per value, the a of the selection event {f̂ ≥ a} that called it present: f̂ minus the
    margin by which its test cleared the Benjamini–Hochberg cutoff (see
    :mod:`aggregator.stats.selection`)."""
    known: list[Known] = field(default_factory=list, repr=False)
    """The strong values the walk accepted at each level (for :meth:`estimate`)."""
    _adjusted: dict[float, Adjusted] = field(default_factory=dict, repr=False, compare=False)
    """:meth:`adjusted` per confidence: the API keeps a window's discovery for a while and
    the page asks again every few seconds (≈ 0.1 s of bisection for 500 values)."""

    def estimate(self, est: SketchEstimator, values: np.ndarray) -> LevelEstimate:
        """Estimates of any padded values ((N, L) uint8), as the discovered ones were made."""
        return estimate_values(est, values, self.known)

    def adjusted(self, confidence: float) -> Adjusted:
        """The discovered values' selection-adjusted estimates and intervals: they were
        called present because their estimates came out high (the winner's curse), and
        the plain f̂ ± z·σ under-covers them near the threshold."""
        got = self._adjusted.get(confidence)
        if got is None:
            got = selection_adjusted(
                self.frequency, self.variance, self.null_variance, self.truncation, confidence
            )
            if len(self._adjusted) >= ADJUSTED_KEPT:  # any confidence may be asked for
                self._adjusted.clear()
            self._adjusted[confidence] = got
        return got

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


def _z(found: LevelEstimate) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.nan_to_num(found.frequency / np.sqrt(found.null_variance), nan=-np.inf)


def _accept(
    est: SketchEstimator, level: int, cells: np.ndarray, keep_z: float, limit: int
) -> tuple[list[int], np.ndarray, np.ndarray, Known, Known]:
    """Greedy acceptance at one level, heaviest first, in rounds of 1, 2, 4, … prefixes.

    An accepted prefix's estimate is subtracted from its cell in every row, so a
    candidate that merely shares cells with a heavy prefix loses that mass (with 65 k
    candidates a level, hundreds would otherwise look as frequent as the heavy prefix they
    collide with in a row or two).

    Returns:
        (accepted indices in order, their f̂, whether each is strong, what the walk knows
        at the level, and the same for the strong ones alone: see :data:`STRONG_Z`).
    """
    m = est.m
    known = est.known(level)
    strong = est.known(level)
    flags: list[bool] = []
    rows = np.arange(m.rows)[None, :]
    alive_all = np.ones(len(cells), dtype=bool)
    accepted: list[int] = []
    freqs: list[float] = []
    h, cell_count = m.rows, m.cells
    for _ in range(PASSES):
        # A pass re-reads every candidate against what is known so far (the heavy values'
        # collisions blur every estimate until they are subtracted), keeps those within a
        # σ of the threshold, and accepts from them greedily in rounds of 1, 2, 4, …
        live = np.flatnonzero(alive_all)
        sums = known.residual[rows, cells[live]].sum(axis=1)
        pool = live[est.scores(level, sums, known) >= keep_z - 1.0]
        pool_cells = cells[pool]
        raw_sum = est.cell_freq[level][rows, pool_cells].sum(axis=1)
        alive = np.ones(len(pool), dtype=bool)
        size, before = 1, len(accepted)
        while len(accepted) < limit:
            idx = np.flatnonzero(alive)
            if not len(idx):
                break
            resid_sum = known.residual[rows, pool_cells[idx]].sum(axis=1)
            z = est.scores(level, resid_sum, known, raw_sum=raw_sum[idx])
            ok = np.flatnonzero(z >= keep_z)
            if not len(ok):
                break
            best = ok[np.argsort(-z[ok], kind="stable")][: min(size, limit - len(accepted))]
            rest = 1.0 - min(max(known.mass, 0.0), 1.0)
            f = (resid_sum[best] / h - rest / cell_count) / (1 - 1 / cell_count)
            f = np.clip(f, 0.0, 1.0)
            chosen = pool_cells[idx[best]]
            np.subtract.at(
                known.residual, (np.broadcast_to(rows, chosen.shape), chosen), f[:, None]
            )
            known.mass += float(f.sum())
            known.mass_sq += float((f * f).sum())
            sure = z[best] >= STRONG_Z
            np.subtract.at(
                strong.residual,
                (np.broadcast_to(rows, chosen[sure].shape), chosen[sure]),
                f[sure, None],
            )
            strong.mass += float(f[sure].sum())
            strong.mass_sq += float((f[sure] ** 2).sum())
            flags.extend(sure.tolist())
            accepted.extend(pool[idx[best]].tolist())
            freqs.extend(f.tolist())
            alive[idx[best]] = False
            alive_all[pool[idx[best]]] = False
            size *= 2
        if len(accepted) == before or len(accepted) >= limit:
            break
    return accepted, np.asarray(freqs), np.asarray(flags, dtype=bool), known, strong


def discover(
    est: SketchEstimator, alpha: float = 0.05, beam: int = DEFAULT_BEAM, keep_z: float = KEEP_Z
) -> Discovery:
    """The frequent values of a window's sketch (see the module's docstring)."""
    m, codec = est.m, est.codec
    L, h = m.levels, m.rows
    byte_values = np.arange(1, 256, dtype=np.uint8)
    prefixes = np.zeros((1, 0), dtype=np.uint8)
    prefix_phi = np.zeros((1, h), dtype=np.int64)
    complete = np.zeros((0, L), dtype=np.uint8)
    complete_phi = np.zeros((0, h), dtype=np.int64)
    levels: list[Known] = []
    strong_levels: list[Known] = []
    complete_cells: list[np.ndarray] = []
    for level in range(L):
        ended = np.zeros((len(prefixes), L), dtype=np.uint8)
        ended[:, :level] = prefixes
        ended_phi = codec.extend(prefix_phi, 0)
        if level == 0:  # the empty string is no value
            ended, ended_phi = ended[:0], ended_phi[:0]
        ext = np.hstack(
            [np.repeat(prefixes, 255, axis=0), np.tile(byte_values, len(prefixes))[:, None]]
        )
        ext_phi = codec.extend(np.repeat(prefix_phi, 255, axis=0), ext[:, -1])
        complete_phi = codec.extend(complete_phi, 0)
        if level == L - 1:  # full-length values are complete too
            ended, ended_phi = np.vstack([ended, ext]), np.vstack([ended_phi, ext_phi])
            ext, ext_phi = ext[:0], ext_phi[:0]
        complete = np.vstack([complete, ended])
        complete_phi = np.vstack([complete_phi, ended_phi])
        cells = codec.cells(np.vstack([ext_phi, complete_phi]), level)
        accepted, freqs, sure, known, strong = _accept(
            est, level, cells, keep_z, beam + len(complete)
        )
        n_ext = len(ext)
        complete_cells.append(cells[n_ext:])
        opened = [i for i in accepted if i < n_ext][:beam]
        for kept, only_strong in ((known, False), (strong, True)):
            kept.accepted = {
                complete[i - n_ext].tobytes(): f
                for i, f, ok in zip(accepted, freqs.tolist(), sure.tolist(), strict=True)
                if i >= n_ext and (ok or not only_strong)
            }
        levels.append(known)
        strong_levels.append(strong)
        prefixes, prefix_phi = ext[opened], ext_phi[opened]
    return _test(est, complete, levels, strong_levels, alpha, complete_cells)


def estimate_values(
    est: SketchEstimator,
    values: np.ndarray,
    levels: list[Known],
    level_cells: list[np.ndarray] | None = None,
) -> LevelEstimate:
    """Estimates of padded values ((N, L) uint8) given what the walk knew at each level:
    the mean of the estimates at every level whose prefix holds the value's padding.

    ``level_cells``: per level, the cells of the values present there (the first ones, in
    order), when the caller has them already (the walk does).
    """
    m, codec = est.m, est.codec
    L = m.levels
    first = np.minimum(value_lengths(values), L - 1)
    parts = []
    phi = np.zeros((len(values), m.rows), dtype=np.int64)
    for level in range(L):
        idx = np.flatnonzero(first <= level)
        if level_cells is None:
            phi = codec.extend(phi, values[:, level])
        if not len(idx):
            continue
        known = levels[level] if level < len(levels) else None
        if level_cells is None:
            cells = codec.cells(phi[idx], level)
        else:
            cells = level_cells[level][: len(idx)]
        own = None
        if known is not None and known.accepted:
            own = np.array([known.accepted.get(values[i].tobytes(), np.nan) for i in idx])
        parts.append((idx, est.level(level, cells, known, own)))
    return combine(parts, len(values))


def _test(
    est: SketchEstimator,
    complete: np.ndarray,
    levels: list[Known],
    strong: list[Known],
    alpha: float,
    level_cells: list[np.ndarray],
) -> Discovery:
    """Test every complete value over its levels (Benjamini–Hochberg), with everything the
    walk accepted taken out (what tells noise riding on a found prefix's cells from a
    value); then estimate the ones called present with only the strong ones taken out
    (unbiased: see :data:`STRONG_Z`)."""
    m = est.m
    got = estimate_values(est, complete, levels, level_cells)
    scale = null_scale(est, levels)
    spread = scale[value_lengths(complete)]
    pvals = got.p_values(spread)
    keep = benjamini_hochberg(pvals, alpha)
    idx = np.flatnonzero(keep)
    tested = got
    got = estimate_values(est, complete[idx], strong)
    truncation = _truncation(
        est, complete[idx], tested.take(idx), spread[idx], got, alpha, len(complete)
    )
    order = np.argsort(-got.frequency, kind="stable")
    idx = idx[order]
    last = levels[-1] if len(levels) == m.levels else None  # what is known at full length
    null = np.array([est.typical_null_variance(m.levels - 1, last)]) * scale[m.levels] ** 2
    return Discovery(
        values=as_padded(complete[idx]),
        frequency=got.frequency[order],
        variance=got.variance[order],
        null_variance=got.null_variance[order] * spread[idx] ** 2,
        p_values=pvals[idx],
        tested=len(complete),
        null_std=float(np.sqrt(null[0])),
        alpha=alpha,
        truncation=truncation[order],
        known=strong,
    )


def _truncation(
    est: SketchEstimator,
    values: np.ndarray,
    tested: LevelEstimate,
    spread: np.ndarray,
    got: LevelEstimate,
    alpha: float,
    total: int,
) -> np.ndarray:
    """The truncation point a of each called value's selection event {f̂ ≥ a}, in the
    reported estimate's units (see :mod:`aggregator.stats.selection`).

    Benjamini–Hochberg called value i present iff p_i ≤ α·R/T (the others' p-values fixed),
    and p_i is the larger of the normal test's and the Poisson tail of its support count
    S, so the event is {z ≥ c} ∩ {S ≥ s_min}. The test's estimate, the reported one and S
    are the same counts with different constants: f̂ = κ·S + const, κ = G/(n·(p*−q*)·
    h·(1 − 1/m)·levels), for both estimates (they differ only in what known values they
    take out), so each part is a lower bound on f̂ and the event is f̂ ≥ the larger one:
    f̂ − (S_test − c·s·σ₀) for the normal test, f̂ − κ·(S − s_min + ½) for the count (a
    continuity correction: S is an integer).
    """
    cut_p = alpha * len(values) / max(total, 1)
    if not len(values):
        return np.zeros(0)
    c = NormalDist().inv_cdf(1 - cut_p)
    with np.errstate(invalid="ignore"):
        normal = got.frequency - (tested.frequency - c * np.sqrt(tested.null_variance) * spread)
    m = est.m
    levels = m.levels - np.minimum(value_lengths(values), m.levels - 1)
    per_cell = m.groups / (max(est.n, 1) * (m.inner.p - m.inner.q) * m.rows * (1 - 1 / m.cells))
    kappa = per_cell / levels
    s_min = _least_count(tested.support, np.nan_to_num(tested.null_support, nan=0.0), cut_p)
    count = got.frequency - kappa * (tested.support - s_min + 0.5)
    return np.fmax(normal, count)


def _least_count(support: np.ndarray, mean: np.ndarray, p: float) -> np.ndarray:
    """Per value, the least count k ≤ its support whose Poisson(mean) tail is ≤ p (the
    support itself passed: it was called present)."""
    lo, hi = np.zeros(len(support)), np.asarray(support, dtype=float).copy()
    while np.any(hi - lo > 1):
        mid = np.floor(0.5 * (lo + hi))
        ok = poisson_sf(mid, mean) <= p
        hi = np.where(ok & (hi - lo > 1), mid, hi)
        lo = np.where(~ok & (hi - lo > 1), mid, lo)
    return np.where(poisson_sf(lo, mean) <= p, lo, hi)


DECOYS_PER_LENGTH = 1024
"""Decoy values per length for the empirical null (:func:`null_scale`): the standard
deviation of 1024 z-scores is known to ±2.2 %."""


def decoys(length: int, max_length: int, count: int, seed: int = 0) -> np.ndarray:
    """``count`` padded values of ``length`` bytes that no device can send: the first byte
    is a UTF-8 continuation byte (0x80–0xBF), which never starts a valid string."""
    gen = np.random.default_rng(seed + length)
    out = np.zeros((count, max_length), dtype=np.uint8)
    out[:, 0] = gen.integers(0x80, 0xC0, count)
    if length > 1:
        out[:, 1:length] = gen.integers(1, 256, (count, length - 1))
    return out


def null_scale(est: SketchEstimator, levels: list[Known]) -> np.ndarray:
    """Per value length 0..L: how much wider the z-scores of absent values spread than the
    model's σ₀ says (at least 1), measured on decoys (an empirical null, after Efron).

    The model's σ₀ leaves out two things the decoys see: values heavier than their
    neighbours but not yet known, whose mass lands in a decoy's cell with probability 1/m
    (a heavy-tailed term), and the error of the known values' subtracted estimates. On
    Zipf 1.1 at ε = 4, n = 10⁶ the decoys' z spread 1.03–1.09× wider.
    """
    L = est.m.levels
    scale = np.ones(L + 1)
    for length in range(1, L + 1):
        found = estimate_values(est, decoys(length, L, DECOYS_PER_LENGTH), levels)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = found.frequency / np.sqrt(found.null_variance)
        z = z[np.isfinite(z)]
        if len(z):
            scale[length] = max(1.0, float(np.sqrt(np.mean(z * z))))
    return scale


def detection_threshold(null_std: float, tested: int, alpha: float = 0.05) -> float:
    """The frequency found with probability ≈ ½: z_{1−α/T}·σ₀ (T values tested)."""
    return NormalDist().inv_cdf(1 - alpha / max(tested, 1)) * null_std

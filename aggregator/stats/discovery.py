"""Finding a string metric's frequent values without a dictionary: prefix extension.

Level by level (one byte each), the frequent prefixes of the previous level are extended
by every byte value; the sketch (:class:`~aggregator.stats.strings.SketchEstimator`)
estimates each extension from that level's reports alone, and the ``beam`` most frequent
of those that clear a loose z-score survive to the next level (Wang, Li & Jha's Prefix
Extending Method with one group of users per level; Bassily et al.'s TreeHist walks the
same tree); only values a device can send are tested, all together, by
Benjamini–Hochberg with p-values exact over the hash's salt (:func:`salt_null`).

In full: ``docs/statistics/strings.md``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np

from aggregator.stats.intervals import benjamini_hochberg
from aggregator.stats.selection import Adjusted, selection_adjusted
from aggregator.stats.sendable import BOUNDARY, DEAD, advance, complete_nfc
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
    """Complete values tested (the multiplicity Benjamini–Hochberg corrects for): exactly
    the values whose p-values were computed, all of them values a device can send."""
    null_std: float
    """σ₀ of a complete value of full length at f = 0 in a cell of average content, once
    the strong values are taken out, widened by the decoys' spread (:func:`null_scale`):
    what the detection threshold quotes (the test itself uses the exact null)."""
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

    @classmethod
    def empty(cls, alpha: float = 0.05) -> Discovery:
        """What :func:`discover` finds in a window without reports, without the walk."""
        none = np.zeros(0)
        return cls([], none, none, none, none, 0, float("nan"), alpha, none)

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
    flat = cells + rows * cell_count  # the cells as indices into a flattened (h, m) table
    residual = known.residual.reshape(-1)  # a view: the subtractions below show through
    for _ in range(PASSES):
        # A pass re-reads every candidate against what is known so far (the heavy values'
        # collisions blur every estimate until they are subtracted), keeps those within a
        # σ of the threshold, and accepts from them greedily in rounds of 1, 2, 4, …
        live = np.flatnonzero(alive_all)
        sums = np.take(residual, flat).sum(axis=1)[live]
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
            known.take_out(chosen, f)
            sure = z[best] >= STRONG_Z
            strong.take_out(chosen[sure], f[sure])
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
    prefix_state = np.zeros(1, dtype=np.int8)
    levels: list[Known] = []
    strong_levels: list[Known] = []
    complete_cells: list[np.ndarray] = []
    for level in range(L):
        # Only what a device can send (aggregator.stats.sendable): a value ends (NUL
        # padding) at a character boundary, and a prefix extends to valid UTF-8 whose
        # completed characters are NFC text.
        ends = prefix_state == BOUNDARY
        if level == 0:  # the empty string is no value
            ends[:] = False
        ended = np.zeros((int(ends.sum()), L), dtype=np.uint8)
        ended[:, :level] = prefixes[ends]
        ended_phi = codec.extend(prefix_phi[ends], 0)
        parent = np.repeat(np.arange(len(prefixes)), 255)
        ext = np.hstack([prefixes[parent], np.tile(byte_values, len(prefixes))[:, None]])
        before = prefix_state[parent]
        ext_state = advance(before, ext[:, -1])
        ok = ext_state != DEAD
        if level == L - 1:  # full-length values are complete: they end with a character
            ok &= ext_state == BOUNDARY
        finished = np.flatnonzero(ok & (ext_state == BOUNDARY) & (before != BOUNDARY))
        ok[finished] = complete_nfc(ext[finished])
        ext, ext_state, parent = ext[ok], ext_state[ok], parent[ok]
        ext_cells = codec.extension_cells(prefix_phi, parent, ext[:, -1], level)
        complete_phi = np.vstack([codec.extend(complete_phi, 0), ended_phi])
        complete = np.vstack([complete, ended])
        if level == L - 1:  # full-length values are complete too
            complete = np.vstack([complete, ext])
            cells = np.vstack([codec.cells(complete_phi, level), ext_cells])
            ext, ext_cells = ext[:0], ext_cells[:0]
        else:
            cells = np.vstack([ext_cells, codec.cells(complete_phi, level)])
        accepted, freqs, sure, known, strong = _accept(
            est, level, cells, keep_z, beam + len(complete)
        )
        n_ext = len(ext)
        complete_cells.append(cells[n_ext:].astype(np.uint16))  # m ≤ 2¹⁶: a quarter
        opened = [i for i in accepted if i < n_ext][:beam]
        for kept, only_strong in ((known, False), (strong, True)):
            kept.accepted = {
                complete[i - n_ext].tobytes(): f
                for i, f, ok in zip(accepted, freqs.tolist(), sure.tolist(), strict=True)
                if i >= n_ext and (ok or not only_strong)
            }
        levels.append(known)
        strong_levels.append(strong)
        prefixes, prefix_state = ext[opened], ext_state[opened]
        prefix_phi = codec.extend(prefix_phi[parent[opened]], prefixes[:, -1])
    return _test(est, complete, strong_levels, alpha, complete_cells)


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
    parts = [
        (idx, est.level(level, cells, known, own))
        for level, idx, cells, known, own in _at_levels(est, values, levels, level_cells)
    ]
    return combine(parts, len(values))


def _at_levels(
    est: SketchEstimator,
    values: np.ndarray,
    levels: list[Known],
    level_cells: list[np.ndarray] | None = None,
) -> Iterator[tuple[int, np.ndarray, np.ndarray, Known | None, np.ndarray | None]]:
    """Per level: (level, indices of the values present there, their (N, h) cells, what
    is known there, each one's own estimate if it is itself known else NaN (or None))."""
    m, codec = est.m, est.codec
    L = m.levels
    first = np.minimum(value_lengths(values), L - 1)
    phi = np.zeros((len(values), m.rows), dtype=np.int64)
    where: dict[bytes, list[int]] | None = None  # each value's positions, when first needed
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
            if where is None:
                where = {}
                for i, value in enumerate(values):
                    where.setdefault(value.tobytes(), []).append(i)
            own_all = np.full(len(values), np.nan)
            for value, f in known.accepted.items():
                own_all[where.get(value, [])] = f
            own = own_all[idx]
        yield level, idx, cells, known, own


def _test(
    est: SketchEstimator,
    complete: np.ndarray,
    strong: list[Known],
    alpha: float,
    level_cells: list[np.ndarray],
) -> Discovery:
    """Test every complete value over its levels (Benjamini–Hochberg) and estimate the ones
    called present, with only the strong values taken out (see :data:`STRONG_Z`).

    Not with everything the walk accepted taken out: at the last level it accepts hundreds
    of absent values by chance (z ≥ :data:`KEEP_Z` among 65 k), and a value tested on the
    table it was selected on keeps its cells clean of its competitors' subtraction while
    every cell's expected background falls by the mass of those chance acceptances —
    measured at n = 10⁷, ε = 8: 336 absent values accepted at the last level, their
    final z 3.2 on average, and 34 tested absent values beyond z = 4 where 2 are expected.
    The strong values are real (an absent value reaches z = 8 with probability 10⁻¹⁵), so
    the table a value is tested on no longer depends on whether the walk picked it; what
    it leaves in the table (the weaker values, a few heavy cells) makes the null
    heavy-tailed, which :func:`salt_null` takes exactly."""
    m = est.m
    got = estimate_values(est, complete, strong, level_cells)
    null_test = salt_null(est, strong, complete, level_cells)
    pvals = np.maximum(null_test.p_values, got.count_tail())
    keep = benjamini_hochberg(pvals, alpha)
    idx = np.flatnonzero(keep)
    tested = got
    # complete holds its values by first level, so the called ones present at a level are
    # the first of idx there, and their cells rows of that level's cells
    called_cells = [cells[idx[idx < len(cells)]] for cells in level_cells]
    got = estimate_values(est, complete[idx], strong, called_cells)
    cut_p = alpha * len(idx) / max(len(complete), 1)
    margin = null_test.margin(cut_p)[idx] if len(idx) else np.zeros(0)
    truncation = _truncation(est, complete[idx], tested.take(idx), margin, got, cut_p)
    order = np.argsort(-got.frequency, kind="stable")
    idx = idx[order]
    last = strong[-1] if len(strong) == m.levels else None  # what is known at full length
    null = est.typical_null_variance(m.levels - 1, last) * null_scale(est, strong) ** 2
    return Discovery(
        values=as_padded(complete[idx]),
        frequency=got.frequency[order],
        variance=got.variance[order],
        null_variance=got.null_variance[order],
        p_values=pvals[idx],
        tested=len(complete),
        null_std=float(np.sqrt(null)),
        alpha=alpha,
        truncation=truncation[order],
        known=strong,
    )


def _truncation(
    est: SketchEstimator,
    values: np.ndarray,
    tested: LevelEstimate,
    margin: np.ndarray,
    got: LevelEstimate,
    cut_p: float,
) -> np.ndarray:
    """The truncation point a of each called value's selection event {f̂ ≥ a}, in the
    reported estimate's units (see :mod:`aggregator.stats.selection`).

    Benjamini–Hochberg called value i present iff p_i ≤ α·R/T = ``cut_p`` (the others'
    p-values fixed), and p_i is the larger of the salt null's and the Poisson tail of its
    support count S, so the event is {T ≥ t_cut} ∩ {S ≥ s_min}. The salt null's statistic
    T grows by its slope per unit of f̂, so its part is f̂ − ``margin``
    (:meth:`SaltNull.margin`). The reported estimate and S are the same counts with
    different constants: f̂ = κ·S + const, κ = G/(n·(p*−q*)·h·(1 − 1/m)·levels), so the
    count's part is f̂ − κ·(S − s_min + ½) (a continuity correction: S is an integer).
    """
    if not len(values):
        return np.zeros(0)
    normal = got.frequency - np.nan_to_num(margin, nan=np.inf)
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


@dataclass(frozen=True)
class SaltNull:
    """The test of :func:`salt_null` for N values."""

    statistic: np.ndarray
    """T of each value."""
    slope: np.ndarray
    """dT/df of each value: how much T grows per unit of its frequency, (1 − 1/m)·Σ w over
    its cells (f raises each of them by f; the estimate's (1 − 1/m) debiasing)."""
    p_values: np.ndarray
    """Pr[T ≥ observed] for an absent value (1 where nothing could be computed)."""
    first: np.ndarray
    """The first level of each value (its null sums that level and those after it)."""
    survival: dict[int, tuple[float, float, int, np.ndarray]] = field(repr=False)
    """Per first level: (low, step, start, Pr[Σ ≥ low + (start + k)·step] for k = 0, 1, …)."""

    def margin(self, p: float) -> np.ndarray:
        """Per value, how far its frequency could fall before its p-value rose above p,
        in frequency units ((T − t_p)/slope; NaN where no null was computed): the
        selection event {f̂ ≥ f̂ − margin} of a value Benjamini–Hochberg cut at p."""
        out = np.full(len(self.statistic), np.nan)
        for level, (low, step, start, survival) in self.survival.items():
            here = np.flatnonzero(self.first == level)
            k = start + int(np.argmax(survival <= p))  # the last entry is 0, so one exists
            with np.errstate(divide="ignore", invalid="ignore"):
                out[here] = (self.statistic[here] - (low + k * step)) / self.slope[here]
        return out


def salt_null(
    est: SketchEstimator,
    levels: list[Known],
    values: np.ndarray,
    level_cells: list[np.ndarray] | None = None,
) -> SaltNull:
    """The one-sided test of f = 0 of (N, L) padded values under the null *over the salt*.

    The statistic is T(x) = Σ over x's levels l and rows r of w(c)·(R_{l,r}(c) − (1 − M_l)/m)
    at x's cell c: each row's residual (what is left once ``levels`` are taken out), less
    its expected background, weighted by the inverse of the cell's variance (the LDP
    noise of what is known to be in the cell — the taken-out values' estimates and the
    rest's share, x's own excepted — plus the level's collision noise,
    :meth:`SketchEstimator.collision_moment`) — the most powerful combination of the rows
    for a normal noise, so that a cell sharing a row with a heavy value counts for less.
    Not read off the cell's own counts: x's reports would lower its own weights (w·R is
    about constant for a Poisson count), and a value with few reports would score like a
    cell holding one report by chance.
    T is a sum of one term per row, and an absent value's cell in each row is an
    independent uniform draw from the row's m cells (the hash's salt), so T's null
    distribution is the convolution of the rows' empirical distributions of w·(R − bg):
    the LDP noise, the collisions with every value not taken out (few and heavy, or many
    and light) and the error left by the ones taken out, all as they are in this window,
    without a normal approximation. That matters: at n = 10⁷, ε = 8 (Zipf 1.1) decoys
    tested with a normal σ₀ against the strong-only table have a standard deviation of
    1.00 but 17× a normal's tail beyond z = 4. Computed on a grid of
    1/:data:`NULL_BINS_PER_SD` of the narrowest level's standard deviation of T, by FFT,
    from the last level down (a value of length ℓ < L sums levels ℓ..L−1).

    A value itself known at a level has its own estimate added back to its cells.

    Returns:
        the p-values, and what a selection event needs (:meth:`SaltNull.margin`).
    """
    m, L = est.m, est.m.levels
    first = np.minimum(value_lengths(values), L - 1)
    observed, slope = np.zeros(len(values)), np.zeros(len(values))
    out = SaltNull(observed, slope, np.ones(len(values)), first, {})
    if est.n == 0 or not len(values):
        return out
    atoms = []
    masses = []
    for level in range(L):
        known = levels[level]
        rest = 1.0 - min(max(known.mass, 0.0), 1.0)
        coll = est.collision_moment(level, known) * (1 / m.cells) * (1 - 1 / m.cells)
        # The weight of a cell is its variance under f(x) = 0 from what is *known* to be in
        # it (the taken-out values' estimates and the rest's share), not from its own
        # counts: read off the counts, a cell's weight fell as x's own reports raised its
        # variance (w·R stays about constant for a Poisson count), so with few reports a
        # value of 2 % scored like any cell holding one report by chance (measured at
        # ε = 8, ~750 reports a level: p = 7·10⁻⁶ against a Poisson tail of 2·10⁻¹⁶).
        known_mass = est.cell_freq[level] - known.residual
        ldp = m.cell_variance(est.n, np.clip(known_mass + rest / m.cells, 0.0, 1.0))
        weight = 1.0 / (ldp + coll)
        atoms.append((weight, weight * (known.residual - rest / m.cells)))
        masses.append((known_mass, rest, coll))
    rows = np.arange(m.rows)[None, :]
    for level, idx, cells, _, own in _at_levels(est, values, levels, level_cells):
        weight, atom = atoms[level]
        w = weight[rows, cells]
        if own is not None:
            # x itself taken out: its cells' weights without its own mass (as if absent),
            # and its own estimate added back to the residual and the background.
            o = np.nan_to_num(own, nan=0.0)
            known_mass, rest, coll = masses[level]
            content = known_mass[rows, cells] - o[:, None] + (rest + o[:, None]) / m.cells
            w = 1.0 / (m.cell_variance(est.n, np.clip(content, 0.0, 1.0)) + coll)
            resid = levels[level].residual
            observed[idx] += (
                w * (resid[rows, cells] + o[:, None] - (rest + o[:, None]) / m.cells)
            ).sum(axis=1)
        else:
            observed[idx] += atom[rows, cells].sum(axis=1)
        slope[idx] += w.sum(axis=1) * (1 - 1 / m.cells)
    spread = [float(np.sqrt(a.var(axis=1).sum())) for _, a in atoms]
    if not max(spread) > 0:
        return out
    # The grid follows the narrowest level that matters: one whose spread is rounding noise
    # (at a few dozen reports a level can hold 10⁻³⁰⁰ of it) would ask for a grid of 10³⁰⁰
    # points; on the coarser grid its cells' mass is still split so that its mean is kept.
    step = min(x for x in spread if x >= max(spread) * NEGLIGIBLE_SPREAD) / NULL_BINS_PER_SD
    # Pr[Σ = low + (start + k)·step], the sum over levels level..L−1, kept only where
    # Hoeffding's bound leaves more than NULL_TAIL of its mass outside (:data:`NULL_TAIL`).
    dist, low, start = np.ones(1), 0.0, 0
    centre, square_ranges = 0.0, 0.0  # E[Σ] and Σ of the rows' squared ranges, in steps
    for level in range(L - 1, -1, -1):
        table = atoms[level][1]
        floor = table.min(axis=1, keepdims=True)
        # Each cell's mass is split between the two grid points around it, in the ratio
        # that keeps its mean: rounding to the nearest would shift the whole null when
        # cells hold few distinct values (small counts: every empty cell alike), and a
        # shift does not average out over the rows (measured: a third of a standard
        # deviation at ε = 4, 300 k reports, 128 rows).
        position = (table - floor) / step
        below = np.floor(position).astype(np.int64)
        above = position - below
        width = int(below.max()) + 2
        flat = (below + (np.arange(m.rows) * width)[:, None]).ravel()
        # both shares summed into each bin in one pass, lower ones first (as two np.add.at
        # calls would, several times faster)
        hist = np.bincount(
            np.concatenate([flat, flat + 1]),
            np.concatenate([((1.0 - above) / m.cells).ravel(), (above / m.cells).ravel()]),
            minlength=m.rows * width,
        ).reshape(m.rows, width)
        dist = _convolve([dist, _row_sum(hist)])
        low += float(floor.sum())
        centre += float(position.mean(axis=1).sum())
        square_ranges += float(((below.max(axis=1) + 1.0) ** 2).sum())
        reach = np.sqrt(square_ranges * np.log(1 / NULL_TAIL) / 2)
        first_kept = max(start, int(np.floor(centre - reach)))
        end = min(start + len(dist), int(np.ceil(centre + reach)) + 1)
        dist, start = dist[first_kept - start : end - start], first_kept
        here = np.flatnonzero(first == level)
        if len(here):
            # Pr[Σ ≥ low + (start + k)·step]
            survival = np.append(np.cumsum(dist[::-1])[::-1], 0.0)
            # the grid point at or below T: Pr[Σ ≥ it] ≥ Pr[Σ ≥ T] (conservative by < 1 step)
            k = np.clip(np.floor((observed[here] - low) / step) - start, 0, len(dist))
            out.p_values[here] = np.minimum(survival[k.astype(np.int64)], 1.0)
            out.survival[level] = (low, step, start, survival)
    return out


def _row_sum(hist: np.ndarray) -> np.ndarray:
    """The distribution of the sum of the rows of ``hist`` (independent grid variables,
    each a probability vector from 0), convolved pairwise: each FFT is only as long as
    the partial sum it makes, log₂(rows) rounds in all."""
    parts, total = hist, len(hist) * (hist.shape[1] - 1) + 1
    while len(parts) > 1:
        if len(parts) % 2:  # the point mass at 0 leaves a sum unchanged
            parts = np.vstack([parts, np.eye(1, parts.shape[1])])
        size = 2 * parts.shape[1] - 1
        fft = 1 << (size - 1).bit_length()
        spectra = np.fft.rfft(parts, fft, axis=1)
        parts = np.fft.irfft(spectra[0::2] * spectra[1::2], fft, axis=1)[:, :size]
        parts = np.clip(parts, 0.0, None)
    return np.asarray(parts[0][:total])


def _convolve(parts: list[np.ndarray]) -> np.ndarray:
    """The distribution of a sum of independent grid variables (each a probability vector
    from 0): one FFT of all of them at the sum's length, their product, one inverse."""
    size = sum(len(p) for p in parts) - len(parts) + 1
    fft = 1 << (size - 1).bit_length()
    spectrum = np.ones(fft // 2 + 1, dtype=complex)
    for p in parts:
        spectrum *= np.fft.rfft(p, fft)
    return np.clip(np.fft.irfft(spectrum, fft)[:size], 0.0, None)


NEGLIGIBLE_SPREAD = 1e-3
"""A level whose T spreads less than this share of the widest level's does not set the
salt null's grid: its variance is below 10⁻⁶ of that level's, and the grid's rounding adds
at most step²/4 a row, as for any level."""

NULL_TAIL = 1e-16
"""Mass of the salt null left out on each side, per level: the sum over levels ℓ..L−1 is
a sum of independent rows, each within its range r (in grid steps), so by Hoeffding's
inequality no more than this lies beyond √(Σr²·ln(1/NULL_TAIL)/2) of its mean, and the
distribution is kept only within. Every p-value moves by at most 2L·NULL_TAIL (10⁻¹⁴ at
L = 64), below the FFT's own rounding; the full support, L·h rows wide, made each level's
convolution longer than the last, and the null's cost grow as L²."""

NULL_BINS_PER_SD = 64
"""Grid steps per standard deviation of one level's T in :func:`salt_null`: splitting a
cell's mass between two grid points keeps its mean and adds at most step²/4 to its
variance, so h = 128 rows widen the null's variance by at most 128/(4·64²) = 0.8 %."""


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


def null_scale(est: SketchEstimator, levels: list[Known]) -> float:
    """How much wider the z-scores of absent full-length values spread than the model's σ₀
    says (at least 1), measured on decoys (an empirical null, after Efron). Only the
    detection threshold uses it, and it quotes full-length values: the RMS of the
    z-scores says nothing of the tail the test needs (at n = 10⁷, ε = 8: RMS 1.00, 17× a
    normal's tail beyond 4), which :func:`salt_null` takes exactly.

    The model's σ₀ leaves out two things the decoys see: values heavier than their
    neighbours but not yet known, whose mass lands in a decoy's cell with probability 1/m
    (a heavy-tailed term), and the error of the known values' subtracted estimates. On
    Zipf 1.1 at ε = 4, n = 10⁶ the decoys' z spread 1.03–1.09× wider.
    """
    L = est.m.levels
    found = estimate_values(est, decoys(L, L, DECOYS_PER_LENGTH), levels)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = found.frequency / np.sqrt(found.null_variance)
    z = z[np.isfinite(z)]
    return max(1.0, float(np.sqrt(np.mean(z * z)))) if len(z) else 1.0


def detection_threshold(null_std: float, tested: int, alpha: float = 0.05) -> float:
    """The frequency found with probability ≈ ½: z_{1−α/T}·σ₀ (T values tested)."""
    return NormalDist().inv_cdf(1 - alpha / max(tested, 1)) * null_std

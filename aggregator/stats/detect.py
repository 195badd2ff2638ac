"""Poisoning alarms: what fake clients who skip the randomizer leave in a window's counts.

Fake users who send crafted reports (Cao, Jia & Gong's maximal-gain attack) promote chosen
values far beyond their number. Three tests look for that in the aggregate, each where an
honest population cannot produce what it sees (pure functions over counts; the web layer
reads the windows, :mod:`aggregator.query.alarms`):

In full: ``docs/statistics/poisoning-alarms.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from aggregator.stats.arrays import FloatArray, IntArray
from aggregator.stats.batch import SEED_BINS, seed_bins
from aggregator.stats.consistency import floor_test, groups_test, sketch_rows_test
from aggregator.stats.lazy import chi2_isf, chi2_sf, normal_isf
from client_sdk.mechanisms import FrequencyOracle, GeneralizedRR, LocalHashing, PostRandomization
from client_sdk.mechanisms.base import fields_of
from client_sdk.mechanisms.strings import display
from client_sdk.mechanisms.unary import UnaryEncoding

if TYPE_CHECKING:  # codecs imports detect: only the annotations need them
    from aggregator.stats.strings import Known, SketchEstimator

__all__ = [
    "ALARM_KINDS",
    "DEFAULT_ALARM_RATE",
    "MIN_REPORTS",
    "SEED_BINS",
    "TRAILING",
    "Alarm",
    "detect",
    "detect_sketch",
    "seed_bins",
    "seeds_test",
    "shift_test",
    "support_test",
    "tests_for",
]

AlarmKind = Literal["shift", "floor", "seeds", "support", "groups", "rows"]
ALARM_KINDS: tuple[AlarmKind, ...] = ("shift", "floor", "seeds", "support", "groups", "rows")
"""The tests, in the order they run: ``floor`` (GRR without a baseline) and ``groups``,
``rows`` (string metrics) are :mod:`aggregator.stats.consistency`'s."""

DEFAULT_ALARM_RATE = 1e-3
"""α: the probability that an honest window raises any alarm. One false alarm per
thousand windows is about one every six weeks of hourly windows per metric: rare enough
that an operator looks at each one; the maximal-gain attack at 1 % fakes on GRR still
gives z ≈ 60 against a threshold of 4.2 (k = 64, n = 10⁵)."""

TRAILING = {"hour": 6, "day": 7}
"""How many previous windows of the same kind make the baseline. The difference's
variance is the window's own times 1 + 1/W: six hours cost 8 % of standard deviation
against an infinite baseline, and reach back only a quarter of a day, so daily cycles
move the baseline little; seven days cover each weekday once."""

MIN_REPORTS = 1_000
"""Reports a window (and its pooled baseline) needs before it is tested: below it the
seed bins and support totals are too sparse for their normal and chi-square tails."""

MIN_BIN_EXPECTED = 5.0
"""Expected honest reports per bin for the chi-square approximation (Cochran's rule):
with fewer reports the bins are folded (index modulo a smaller power of two)."""

MIN_SEED_BINS = 16
"""Below 16 bins (n < 80) the seed test is not run: its tail is no longer chi-square."""

OLH_ENUMERATION_CELLS = 1 << 25
"""Seeds × values enumerated to bound local hashing's support variance (32 M cells, about
a second, once per mechanism): k up to about 300. Beyond it the support test is skipped
for local hashing (against the maximal-gain attack it is nearly vacuous there anyway:
a fake supports about k/g values, like an honest report)."""


@dataclass(frozen=True)
class Alarm:
    """One alarm of one window: what was tested, what was seen, and why it is unlikely."""

    kind: AlarmKind
    window: str
    statistic: float
    """z (shift, support) or chi-square (seeds)."""
    threshold: float
    """The statistic's alarm threshold at this test's share of α."""
    p_value: float
    alpha: float
    """This test's share of the window's false-alarm rate (for shift: the smallest Holm level)."""
    evidence: str
    values: tuple[int, ...] = ()
    """Indices of the values flagged (shift), most significant first."""
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict, for JSON."""
        names = ("kind", "window", "statistic", "threshold", "p_value", "alpha", "evidence")
        return {**fields_of(self, *names), "values": list(self.values)}


def _normal_tail(z: float) -> float:
    """Pr[Z > z]."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


HYPERGEOMETRIC_CHUNK = 512
"""Tail terms summed per numpy step: a tail beyond 4σ is done after a few hundred terms
(each term falls by a factor of about e^{-z/σ})."""


def hypergeometric_upper_tail(count: int, population: int, successes: int, draws: int) -> float:
    """Pr[X ≥ count] for X ~ Hypergeometric(population, successes, draws), exactly.

    The first term from log-gammas, the rest by the ratio of successive terms, summed
    until they no longer change the sum (numpy only: the web app does not load scipy).
    """
    low = max(0, draws + successes - population)
    high = min(draws, successes)
    if count <= low:
        return 1.0
    if count > high:
        return 0.0
    if count * population <= draws * successes:  # at or below the mean: the complement
        return 1.0 - hypergeometric_upper_tail(
            draws - count + 1, population, population - successes, draws
        )
    lg = math.lgamma
    log_first = (
        lg(successes + 1) - lg(count + 1) - lg(successes - count + 1)
        + lg(population - successes + 1) - lg(draws - count + 1)
        - lg(population - successes - draws + count + 1)
        - (lg(population + 1) - lg(draws + 1) - lg(population - draws + 1))
    )  # fmt: skip
    total, term, x = 0.0, 1.0, count
    while x <= high:
        xs = np.arange(x, min(high, x + HYPERGEOMETRIC_CHUNK - 1) + 1, dtype=np.float64)
        ratios = (
            (successes - xs) * (draws - xs) / ((xs + 1) * (population - successes - draws + xs + 1))
        )
        terms = term * np.concatenate(([1.0], np.cumprod(ratios[:-1])))
        total += float(terms.sum())
        term = float(terms[-1] * ratios[-1])
        x = int(xs[-1]) + 1
        if term < 1e-17 * total:
            break
    return min(1.0, math.exp(log_first) * total)


def tests_for(m: FrequencyOracle, baseline: bool = True) -> tuple[AlarmKind, ...]:
    """The tests that apply to a mechanism (α is split evenly among them).

    Without a baseline (a fresh metric, the all-time window) ``shift`` cannot run and
    GRR's ``floor`` takes its place: with one, the shift test is far the stronger, and
    the window's α is left to it as before.
    """
    kinds: list[AlarmKind] = ["shift"] if baseline else []
    if not baseline and isinstance(m, GeneralizedRR):
        kinds.append("floor")
    if isinstance(m, LocalHashing):
        kinds.append("seeds")
    if isinstance(m, UnaryEncoding) or (
        isinstance(m, LocalHashing) and _olh_cells(m) <= OLH_ENUMERATION_CELLS
    ):
        kinds.append("support")
    return tuple(kinds)


# -- shift ---------------------------------------------------------------------------


def shift_test(
    m: FrequencyOracle,
    now: tuple[int, npt.ArrayLike],
    trailing: tuple[int, npt.ArrayLike],
    alpha: float,
) -> tuple[FloatArray, FloatArray, np.ndarray]:
    """Per value: z, one-sided p-value and Holm's rejection at family-wise level ``alpha``.

    Args:
        m: the mechanism (its p*, q* scale z into frequency units; they cancel).
        now: (n, C) of the window under test.
        trailing: (n, C) of its baseline, the previous windows pooled.
        alpha: the family-wise false-alarm rate over the k values.
    """
    n1, c1 = now[0], np.asarray(now[1], dtype=np.float64)
    n2, c2 = trailing[0], np.asarray(trailing[1], dtype=np.float64)
    k = c1.size
    pooled = (c1 + c2) / (n1 + n2)
    var = pooled * (1.0 - pooled) * (1.0 / n1 + 1.0 / n2)
    diff = c1 / n1 - c2 / n2
    z = np.divide(diff, np.sqrt(var), out=np.zeros(k), where=var > 0)
    p_values = np.array([_normal_tail(float(x)) for x in z])
    # The exact conditional tail where it can matter: the normal one is off at 4σ for
    # small counts (skewness), and costs a continued fraction per value elsewhere.
    near = np.flatnonzero(z > normal_isf(alpha / k) - 2.0)
    for v in near:
        total = int(c1[v] + c2[v])
        p_values[v] = hypergeometric_upper_tail(int(c1[v]), n1 + n2, total, n1)
    order = np.argsort(p_values, kind="stable")
    reject = np.zeros(k, dtype=bool)
    for rank, v in enumerate(order):  # Holm: step down while p₍ᵢ₎ ≤ α/(k − i)
        if p_values[v] > alpha / (k - rank):
            break
        reject[v] = True
    return z, p_values, reject


# -- seeds ---------------------------------------------------------------------------


def _bin_probabilities(m: LocalHashing, bins: int) -> FloatArray:
    """Honest probability of each of ``bins`` bins (a power of two dividing SEED_BINS)."""
    seeds = (m.prime - 1) * m.prime
    base, extra = divmod(seeds, bins)
    counts = np.full(bins, base, dtype=np.float64)
    counts[:extra] += 1
    return counts / seeds


def seeds_test(
    m: LocalHashing, histogram: npt.ArrayLike, alpha: float
) -> tuple[float, float, float, int] | None:
    """Chi-square of a window's seed histogram against the honest bin probabilities.

    Args:
        m: the local-hashing mechanism.
        histogram: counts of the :data:`SEED_BINS` bins.
        alpha: this test's false-alarm rate.

    Returns:
        (chi-square, threshold, p-value, bins used), or None when too few reports.
    """
    counts = np.asarray(histogram, dtype=np.float64)
    n = float(counts.sum())
    bins = SEED_BINS
    seeds = (m.prime - 1) * m.prime
    while bins >= MIN_SEED_BINS and (
        bins > seeds or n * (seeds // bins) / seeds < MIN_BIN_EXPECTED
    ):
        bins //= 2
    if bins < MIN_SEED_BINS:
        return None
    folded = counts.reshape(-1, bins).sum(axis=0) if bins < SEED_BINS else counts
    expected = n * _bin_probabilities(m, bins)
    chi2 = float(((folded - expected) ** 2 / expected).sum())
    df = bins - 1
    return chi2, chi2_isf(alpha, df), chi2_sf(chi2, df), bins


# -- support total -------------------------------------------------------------------


def _olh_cells(m: LocalHashing) -> int:
    return (m.prime - 1) * m.prime * m.domain_size


@lru_cache(maxsize=16)
def _olh_support_moments(prime: int, g: int, k: int, keep: float) -> tuple[float, float]:
    """(mean, largest variance over true values) of the values one OLH report supports.

    Enumerates every seed: c_j = #{u < k : h(u) = j}; a report of true v supports
    c_{h(v)} values w.p. p' and c_j (j ≠ h(v)) w.p. (1 − p')/(g − 1).
    """
    a = np.repeat(np.arange(1, prime, dtype=np.int64), prime)
    b = np.tile(np.arange(prime, dtype=np.int64), prime - 1)
    u = np.arange(k, dtype=np.int64)
    buckets = ((a[:, None] * u[None, :] + b[:, None]) % prime) % g  # (seeds, k)
    offsets = (np.arange(len(a), dtype=np.int64) * g)[:, None]
    c = np.bincount((buckets + offsets).ravel(), minlength=len(a) * g).reshape(len(a), g)
    own = np.take_along_axis(c, buckets, axis=1).astype(np.float64)  # c_{h(v)} per seed, v
    sq = (c.astype(np.float64) ** 2).sum(axis=1, keepdims=True)
    other = (1.0 - keep) / (g - 1)
    mean = (keep * own + other * (k - own)).mean(axis=0)
    second = (keep * own**2 + other * (sq - own**2)).mean(axis=0)
    return float(mean.mean()), float((second - mean**2).max())


def _support_moments(m: FrequencyOracle) -> tuple[float, float] | None:
    """Per report: (mean, variance bound) of the number of values supported."""
    k = m.domain_size
    if isinstance(m, UnaryEncoding):
        return m.p + (k - 1) * m.q, m.p * (1 - m.p) + (k - 1) * m.q * (1 - m.q)
    if isinstance(m, LocalHashing) and _olh_cells(m) <= OLH_ENUMERATION_CELLS:
        _, var = _olh_support_moments(m.prime, m.g, k, float(m.keep))
        return m.p + (k - 1) * m.q, var
    return None


def support_test(
    m: FrequencyOracle, n: int, total: int, alpha: float
) -> tuple[float, float, float, float] | None:
    """Two-sided z of Σ_v C(v) against its honest mean given n.

    Returns:
        (z, threshold, p-value, expected total), or None where the test does not apply.
    """
    moments = _support_moments(m)
    if moments is None or n <= 0:
        return None
    mean, var = moments
    z = (total - n * mean) / math.sqrt(n * var)
    return z, normal_isf(alpha / 2), 2.0 * _normal_tail(abs(z)), n * mean


# -- one window ----------------------------------------------------------------------


def _frequency(m: FrequencyOracle, support: npt.ArrayLike, n: int, v: int) -> float:
    """f̂(v) of a window; pram's estimate needs all k counts (it inverts its matrix)."""
    counts = np.asarray(support)
    if isinstance(m, PostRandomization):
        return float(m.debias(counts.tolist(), n)[v])
    return float(m.debias(counts[v], n))


def _pct(x: float) -> str:
    return f"{100 * x:.2f} %"


def detect(
    m: FrequencyOracle,
    window: str,
    now: tuple[int, npt.ArrayLike],
    trailing: tuple[int, npt.ArrayLike] | None,
    seeds: npt.ArrayLike | None = None,
    alpha: float = DEFAULT_ALARM_RATE,
    labels: Sequence[str] | None = None,
    baseline: str = "the previous windows",
) -> list[Alarm]:
    """Every alarm of one window.

    Args:
        m: the window's mechanism.
        window: its name (carried into the alarms).
        now: (n, C) of the window.
        trailing: (n, C) of the pooled baseline windows, or None (no baseline yet, or
            the all-time window): then the baseline-free tests run instead of ``shift``.
        seeds: the window's seed histogram (local hashing), if kept.
        alpha: the window's false-alarm rate, split evenly over :func:`tests_for`.
        labels: value labels for the evidence (default: the indices).
        baseline: how the evidence names the baseline.
    """
    baseline_ok = trailing is not None and trailing[0] >= MIN_REPORTS
    kinds = tests_for(m, baseline_ok)
    n, support = now[0], np.asarray(now[1], dtype=np.int64)
    if n < MIN_REPORTS or not kinds:
        return []
    share = alpha / len(kinds)
    names = labels or [str(v) for v in range(m.domain_size)]
    run: dict[AlarmKind, Callable[[], Alarm | None]] = {
        "shift": lambda: _shift_alarm(m, window, (n, support), trailing, share, names, baseline),
        "floor": lambda: _floor_alarm(m, window, n, support, share),
        "seeds": lambda: _seeds_alarm(m, window, n, seeds, share),
        "support": lambda: _support_alarm(m, window, n, support, share),
    }
    found = [run[kind]() for kind in kinds]
    return [alarm for alarm in found if alarm is not None]


def _shift_alarm(
    m: FrequencyOracle,
    window: str,
    now: tuple[int, IntArray],
    trailing: tuple[int, npt.ArrayLike] | None,
    share: float,
    names: Sequence[str],
    baseline: str,
) -> Alarm | None:
    """The ``shift`` alarm against the pooled baseline, if the test rejects (it runs only
    with a baseline: :func:`tests_for`)."""
    assert trailing is not None
    n, support = now
    n2, c2 = trailing[0], np.asarray(trailing[1], dtype=np.int64)
    z, pv, reject = shift_test(m, (n, support), (n2, c2), share)
    if not reject.any():
        return None
    flagged = sorted(np.flatnonzero(reject).tolist(), key=lambda v: pv[v])
    top = flagged[0]
    f1, f2 = _frequency(m, support, n, top), _frequency(m, c2, n2, top)
    return Alarm(
        "shift",
        window,
        float(z[top]),
        normal_isf(share / m.domain_size),
        float(pv[top]),
        share / m.domain_size,
        f"{names[top]!r} rose from {_pct(f2)} ({baseline}, n = {n2:,}) to "
        f"{_pct(f1)} (n = {n:,}): z = {z[top]:.1f}, p = {pv[top]:.1e} "
        f"< {share:g}/{m.domain_size} (Holm over the k values)"
        + (f"; {len(flagged)} values rose" if len(flagged) > 1 else ""),
        tuple(int(v) for v in flagged),
    )


def _floor_alarm(
    m: FrequencyOracle, window: str, n: int, support: IntArray, share: float
) -> Alarm | None:
    """The ``floor`` alarm (GRR), if the test rejects."""
    floor = floor_test(m.domain_size, m.p, m.q, n, support, share)
    if floor is None or not floor.p_value <= share:  # a NaN p-value: no alarm
        return None
    return Alarm(
        "floor",
        window,
        floor.statistic,
        floor.threshold,
        floor.p_value,
        share,
        f"{floor.below} of {m.domain_size} values are reported less often than "
        f"any honest population allows (GRR reports name each value at least "
        f"q* = {_pct(m.q)} of the time): shortfall {floor.statistic:.1f} σ-units "
        f"(threshold {floor.threshold:.1f}), negative estimates summing to "
        f"−{_pct(floor.deficit)} — crafted reports of other values thin them",
    )


def _seeds_alarm(
    m: FrequencyOracle, window: str, n: int, seeds: npt.ArrayLike | None, share: float
) -> Alarm | None:
    """The ``seeds`` alarm (local hashing), if the window's seeds were kept and the test
    rejects."""
    assert isinstance(m, LocalHashing)
    if seeds is None:
        return None
    found = seeds_test(m, seeds, share)
    if found is None or not found[2] <= share:
        return None
    chi2, threshold, p_value, bins = found
    hist = np.asarray(seeds, dtype=np.int64)
    return Alarm(
        "seeds",
        window,
        chi2,
        threshold,
        p_value,
        share,
        f"hash seeds reused far beyond chance: chi-square {chi2:,.0f} over "
        f"{bins} bins (threshold {threshold:,.0f}); the fullest bin holds "
        f"{int(hist.max()):,} reports where {n / SEED_BINS:,.0f} are expected",
    )


def _support_alarm(
    m: FrequencyOracle, window: str, n: int, support: IntArray, share: float
) -> Alarm | None:
    """The ``support`` alarm, if the test rejects."""
    total = int(support.sum())
    found = support_test(m, n, total, share)
    if found is None or not found[2] <= share:
        return None
    zs, threshold, p_value, mean = found
    return Alarm(
        "support",
        window,
        zs,
        threshold,
        p_value,
        share,
        f"the {n:,} reports support {total:,} values in all where honest ones "
        f"support {mean:,.0f} ± {abs(total - mean) / abs(zs):,.0f}: "
        f"z = {zs:.1f} (two-sided threshold {threshold:.1f})",
    )


def detect_sketch(
    est: SketchEstimator,
    window: str,
    values: Sequence[bytes],
    known: list[Known],
    alpha: float = DEFAULT_ALARM_RATE,
) -> list[Alarm]:
    """Every alarm of a string metric's window: ``groups`` and ``rows``, α/2 each.

    Args:
        est: the window's sketch estimator.
        window: its name.
        values: the padded values the discovery called present.
        known: what the discovery knew at each level (``Discovery.known``).
        alpha: the window's false-alarm rate; ``rows`` divides its half over the values.
    """
    if est.n < MIN_REPORTS:
        return []
    share = alpha / 2
    found = [_groups_alarm(est, window, share), _rows_alarm(est, window, values, known, share)]
    return [alarm for alarm in found if alarm is not None]


def _groups_alarm(est: SketchEstimator, window: str, share: float) -> Alarm | None:
    """The ``groups`` alarm of a sketch, if the test rejects."""
    m = est.m
    found = groups_test(m, est.cell_counts.reshape(-1), share)
    if found is None or not found[2] <= share:
        return None
    chi2, threshold, p_value, bins, fullest = found
    return Alarm(
        "groups",
        window,
        chi2,
        threshold,
        p_value,
        share,
        f"reports are not spread over the sketch's {m.groups:,} (level, row) groups "
        f"as devices spread them (uniformly): chi-square {chi2:,.0f} over {bins:,} "
        f"bins (threshold {threshold:,.0f}); the fullest group holds {fullest:,} "
        f"where {est.n / m.groups:,.0f} are expected — reports crafted into a few rows",
    )


def _rows_alarm(
    est: SketchEstimator, window: str, values: Sequence[bytes], known: list[Known], share: float
) -> Alarm | None:
    """The ``rows`` alarm of the discovered ``values`` (``share`` split over them, by
    Bonferroni), if the test rejects for one."""
    if not values:
        return None
    m = est.m
    padded = np.frombuffer(b"".join(values), dtype=np.uint8).reshape(len(values), m.levels)
    per_value = share / len(values)
    rows = sketch_rows_test(est, padded, known, per_value)
    flagged = [i for i in np.argsort(rows.p_values, kind="stable") if rows.p_values[i] <= per_value]
    if not flagged:
        return None
    top = int(flagged[0])
    return Alarm(
        "rows",
        window,
        float(rows.statistic[top]),
        rows.threshold,
        float(rows.p_values[top]),
        per_value,
        f"{display(values[top])!r} was discovered, but its reports sit in few of the "
        f"sketch's rows: its fullest row of each level holds "
        f"{_pct(float(rows.top_row_share[top]))} of the level's reports where "
        f"devices, picking rows uniformly, put about {_pct(1 / m.rows)}; the "
        f"median over the {rows.levels} levels of the rows' dispersion is "
        f"z = {rows.statistic[top]:.1f} (threshold {rows.threshold:.1f}, "
        f"Bonferroni over the {len(values)} discovered values)"
        + (f"; {len(flagged)} values so" if len(flagged) > 1 else ""),
        tuple(int(i) for i in flagged),
    )

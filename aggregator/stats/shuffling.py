"""Amplification by shuffling: the central (ε, δ) of n shuffled ε₀-LDP reports.

Whoever sees only a function of the *multiset* of reports (the estimates: the dashboard,
the API, a CSV) sees a shuffled view: which device sent which report is gone. Feldman,
McMillan and Talwar ("Hiding Among the Clones", FOCS 2021) show that such a view of n
reports, one per device, each from an ε₀-LDP randomizer, is (ε, δ)-DP for an ε much
smaller than ε₀ when n is large. :func:`shuffled_view` is that view's ε of a window's
reports, :func:`relayed_view` the collector operator's of reports relayed in shuffled
batches.

In full: ``docs/statistics/shuffling.md``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import numpy as np

from aggregator.stats.accounting import checked_reports_per_device, composed_epsilon
from aggregator.stats.lazy import scipy_special, scipy_stats
from client_sdk.mechanisms.base import exp_epsilon

__all__ = [
    "UNBOUNDED_NOTE",
    "Amplification",
    "amplification",
    "closed_form_epsilon",
    "default_delta",
    "hockey_stick",
    "relayed_view",
    "shuffled_epsilon",
    "shuffled_view",
]

TAIL_MASS = 1e-30
"""Mass of Bin(n−1, e^(−ε₀)) left out of the exact sum (and added whole to δ): far below
any δ worth stating (δ = 1/n² is 10⁻¹⁴ at n = 10⁷), so the bound loses nothing visible."""

BLOCKS = 4000
"""c is grouped into at most this many blocks, each bounded by its first c (D_c is
non-increasing in c: P_(c+1) and Q_(c+1) are P_c and Q_c plus the same fair coin, a
post-processing). Blocks of a few hundredths of a standard deviation of C lose less than
the bisection's tolerance and keep one δ(ε) to a few thousand binomial tails at any n."""

TOLERANCE = 1e-4
"""Absolute accuracy of the bisection on ε: the answer is at most this much above the
smallest ε the bound allows (and never below it)."""

MIN_REPORTS = 2
"""Below two reports there is no one to hide among: ε_c = ε₀."""


def _clone_blocks(n: int, epsilon0: float) -> tuple[np.ndarray, np.ndarray, float]:
    """C ~ Bin(n−1, e^(−ε₀)) in blocks: each block's first c, its mass, the mass left out.

    The window grows from the mean by whole standard deviations until the two tails
    outside it (exact, ``bdtr``/``bdtrc``) hold at most :data:`TAIL_MASS`.
    """
    bdtr, bdtrc, binom = scipy_special().bdtr, scipy_special().bdtrc, scipy_stats().binom
    trials, clone = n - 1, 1.0 / exp_epsilon(epsilon0)
    mean, sd = trials * clone, math.sqrt(trials * clone * (1.0 - clone)) + 1.0
    width = 12.0
    while True:
        lo = max(int(mean - width * sd), 0)
        hi = min(int(mean + width * sd) + 1, trials)
        outside = (float(bdtr(lo - 1, trials, clone)) if lo > 0 else 0.0) + (
            float(bdtrc(hi, trials, clone)) if hi < trials else 0.0
        )
        if outside <= TAIL_MASS or (lo == 0 and hi == trials):
            break
        width *= 1.5
    c = np.arange(lo, hi + 1, dtype=np.float64)
    step = max(1, math.ceil(len(c) / BLOCKS))
    starts = np.arange(0, len(c), step)
    mass = np.add.reduceat(binom.pmf(c, trials, clone), starts)
    return c[starts], mass, outside


def _divergence(
    epsilon: float, alpha: float, starts: np.ndarray, mass: np.ndarray, outside: float
) -> float:
    """Σ over blocks of the block's mass × D_c at its first c (D_c falls as c grows)."""
    bdtrc = scipy_special().bdtrc
    odds = exp_epsilon(epsilon)
    tau = (odds * alpha - (1.0 - alpha)) / (alpha - odds * (1.0 - alpha))
    c = starts
    first = np.floor(tau * (c + 1.0) / (1.0 + tau)) + 1.0  # m: first x with ratio > e^ε

    def tail(j: np.ndarray) -> np.ndarray:
        """Pr[Bin(c, ½) ≥ j], exact for every integer j."""
        inner = bdtrc(np.clip(j - 1.0, 0.0, c).astype(np.int64), c.astype(np.int64), 0.5)
        return np.where(j <= 0, 1.0, np.where(j > c, 0.0, inner))

    shifted, plain = tail(first - 1.0), tail(first)
    p_tail = alpha * shifted + (1.0 - alpha) * plain
    q_tail = (1.0 - alpha) * shifted + alpha * plain
    return float(np.dot(mass, np.maximum(p_tail - odds * q_tail, 0.0)) + outside)


def _alpha(epsilon0: float) -> float:
    """α = e^(ε₀)/(e^(ε₀) + 1): how often the differing device's report looks like x₁."""
    odds0 = exp_epsilon(epsilon0)
    return odds0 / (odds0 + 1.0)


def hockey_stick(epsilon: float, epsilon0: float, n: int) -> float:
    """δ(ε): an upper bound on D_(e^ε)(P‖Q) of the clones pair for n reports at ε₀.

    Args:
        epsilon: the central ε asked about, ≥ 0.
        epsilon0: each report's ε₀ (LDP).
        n: reports shuffled together (one per device), ≥ 1.

    Returns:
        δ such that the shuffled release is (ε, δ)-DP; 0 when ε ≥ ε₀.
    """
    if epsilon >= epsilon0:
        return 0.0
    if n < MIN_REPORTS:
        return 1.0  # no clones: nothing below ε₀ is claimed
    return _divergence(epsilon, _alpha(epsilon0), *_clone_blocks(n, epsilon0))


def shuffled_epsilon(epsilon0: float, n: int, delta: float, tolerance: float = TOLERANCE) -> float:
    """The smallest ε (to ``tolerance``, rounded up) with δ(ε) ≤ ``delta``: the numerical
    bound of Feldman, McMillan & Talwar for n shuffled ε₀-LDP reports.

    Args:
        epsilon0: each report's ε₀, > 0.
        n: reports shuffled together, one per device.
        delta: the δ to hold, in (0, 1).
        tolerance: the bisection's accuracy on ε.

    Returns:
        ε_c ≤ ε₀ (ε₀ itself when shuffling buys nothing).

    Raises:
        ValueError: ε₀ ≤ 0, n < 1 or δ outside (0, 1).
    """
    if not epsilon0 > 0 or not 0 < delta < 1 or n < 1:
        raise ValueError(f"need ε₀ > 0, n ≥ 1, 0 < δ < 1; got {epsilon0}, {n}, {delta}")
    if n < MIN_REPORTS:
        return epsilon0
    alpha, blocks = _alpha(epsilon0), _clone_blocks(n, epsilon0)
    low, high = 0.0, min(epsilon0, closed_form_epsilon(epsilon0, n, delta) or epsilon0)
    if _divergence(low, alpha, *blocks) <= delta:
        return 0.0
    while high - low > tolerance:
        mid = (low + high) / 2.0
        if _divergence(mid, alpha, *blocks) <= delta:
            high = mid
        else:
            low = mid
    return high


def closed_form_epsilon(epsilon0: float, n: int, delta: float) -> float | None:
    """Theorem 3.1's closed form, or None outside its regime ε₀ ≤ ln(n/(16 ln(2/δ))).

    ε = ln(1 + (1 − e^(−ε₀))/(1 + e^(−ε₀−ε')) · (a + c)), with a = 8√(e^(ε₀) ln(4/δ)/n),
    c = 8e^(ε₀)/n and ε' = ln(1 + a + c) (as in the reference code: looser than the
    numerical bound, shown beside it).
    """
    if n < MIN_REPORTS or epsilon0 > math.log(n / (16.0 * math.log(4.0 / delta))):
        return None
    odds0 = exp_epsilon(epsilon0)
    a = 8.0 * math.sqrt(odds0 * math.log(4.0 / delta) / n)
    c = 8.0 * odds0 / n
    inner = math.log1p(a + c)
    return math.log1p((1.0 - 1.0 / odds0) / (1.0 + 1.0 / (odds0 * exp_epsilon(inner))) * (a + c))


def default_delta(devices: int) -> float:
    """δ = 1/N² for N devices: smaller than 1/N, so no one device is likely to be exposed."""
    return 1.0 / max(devices, MIN_REPORTS) ** 2


@dataclass(frozen=True)
class Amplification:
    """The central guarantee of a shuffled view, and what it rests on."""

    epsilon: float
    """ε_c: the release is (ε_c, δ)-DP for anyone who sees only the estimates."""
    delta: float
    local_epsilon: float
    """ε of one device's whole contribution (r·ε₀): what shuffling amplifies."""
    devices: int
    """The fewest devices the n reports can come from (⌈n/r⌉)."""
    reports_per_device: int
    condition: str
    """One sentence: when ε_c holds, and for whom it does not."""


def amplification(
    epsilon0: float, n: int, reports_per_device: int = 1, delta: float | None = None
) -> Amplification:
    """ε_c of n reports at ε₀ when each device sent at most ``reports_per_device`` of them.

    Args:
        epsilon0: each report's ε (LDP).
        n: reports in the release.
        reports_per_device: r, the most reports one device can have among them
            (:func:`~aggregator.stats.accounting.checked_reports_per_device`).
        delta: δ; 1/N² by default, N = ⌈n/r⌉.

    Returns:
        The guarantee, with its one-line condition.

    Raises:
        ValueError: ``reports_per_device`` not a number ≥ 1.
    """
    r = math.ceil(checked_reports_per_device(reports_per_device))
    devices = max(math.ceil(n / r), 0)
    local = composed_epsilon(epsilon0, r)
    d = default_delta(devices) if delta is None else delta
    eps = shuffled_epsilon(local, devices, d) if devices >= MIN_REPORTS else local
    per = (
        "each device sent at most one of these reports"
        if r == 1
        else f"each device sent at most {r} of these reports (composed: {r}·ε = {local:.3g} "
        f"per device, amplified over at least {devices:,} devices)"
    )
    condition = (
        f"holds for anyone who sees only the estimates (dashboard, API, CSV) if {per} and "
        "reports carry nothing that links them to a device; the server, and anyone with "
        f"access to Redis, still sees each report at ε = {epsilon0:.3g} (local DP)"
    )
    return Amplification(eps, d, local, devices, r, condition)


UNBOUNDED_NOTE = (
    "; this metric has no budget, so nothing enforces one report per device: a device "
    "that sent r reports here is protected by the bound for r·ε only"
)
"""Said when a metric without a budget is shown ε_c for one report per device."""


def _round_down(n: int) -> int:
    """n to two significant digits, rounded down: a smaller n only weakens the bound, and
    a page refreshing while reports arrive reuses one computation per bucket."""
    if n < 100:
        return n
    scale = 10 ** (len(str(n)) - 2)
    return n // scale * scale


@functools.lru_cache(maxsize=256)
def shuffled_view(epsilon: float, n: int, budgeted: int | None) -> Amplification | None:
    """ε_c towards whoever sees only the estimates of n reports at ε, a device having at
    most ``budgeted`` of them (:attr:`ReportsPerDevice.budgeted`; None: no budget bounds
    it, ε_c is given for one and the condition says so). n is rounded down to two
    significant digits and ε_c up to four decimals: still a bound. None without reports.
    """
    if n < 1:
        return None
    found = amplification(epsilon, _round_down(n), budgeted or 1)
    return replace(
        found,
        epsilon=math.ceil(found.epsilon * 1e4) / 1e4,  # rounded up: still a bound
        condition=found.condition + (UNBOUNDED_NOTE if budgeted is None else ""),
    )


@functools.lru_cache(maxsize=256)
def relayed_view(
    epsilon: float, batch: int, budgeted: int | None, min_batch: int, released: bool
) -> Amplification | None:
    """ε_c towards the collector's operator of reports that came through an Oblivious HTTP
    relay and reached the stream in shuffled batches, the smallest of them ``batch``
    reports, a device having at most ``budgeted`` reports in a batch
    (:func:`reports_per_batch`; None: no budget, given for one, and the condition says
    so). ε_c is rounded up to four decimals: still a bound.

    Args:
        epsilon: ε per report.
        batch: the smallest batch released so far, or B (``min_batch``) if none was.
        budgeted: a device's most reports in one batch.
        min_batch: B (``LDP_SHUFFLE_MIN_BATCH``): a pool is released as soon as it holds
            it, or below it at its release bound (``LDP_SHUFFLE_MAX_DELAY``).
        released: whether any batch was released (else ε_c is the one a full batch
            would have, and a smaller one gets more).

    Returns:
        The guarantee; None when B < 2 (nothing is shuffled). A batch of one report
        released at its bound gets ε itself (nothing to hide among).
    """
    if min_batch < 2:
        return None
    found = amplification(epsilon, batch, budgeted or 1)
    per = "one report" if found.reports_per_device == 1 else f"{found.reports_per_device} reports"
    which = (
        f"the smallest released so far holding {batch:,}"
        if released
        else f"none released yet: a full batch holds {batch:,} (LDP_SHUFFLE_MIN_BATCH), one "
        "released at its bound (LDP_SHUFFLE_MAX_DELAY) fewer, and then a larger ε_c holds"
    )
    condition = (
        f"holds towards whoever runs the collector and reads its Redis, for reports sent "
        f"through an Oblivious HTTP relay it does not control, released in shuffled batches "
        f"({which}), if each device sent at most {per} of a batch; if the relay and the "
        f"collector collude, or without a relay, each report is ε = {epsilon:.3g} (local DP) "
        f"towards them"
    )
    return replace(
        found,
        epsilon=math.ceil(found.epsilon * 1e4) / 1e4,  # rounded up: still a bound
        condition=condition + (UNBOUNDED_NOTE if budgeted is None else ""),
    )

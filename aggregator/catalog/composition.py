"""A device's worst-case privacy loss across all of an app's metrics.

Each metric's reports are ε₁-LDP and its budget allows ``r`` per day, week or month; a
memoized metric's reports of one value are together at most ε∞. Over a calendar window
the worst case is every allowed report made (``r`` × the metric periods the window can
overlap), composed by **basic sequential composition** (Dwork, McSherry, Nissim & Smith
2006; Dwork & Roth 2014, Theorem 3.16): ε-LDP randomizers applied adaptively to one
device's data are together (Σ εᵢ)-LDP. Device-wide caps bound the sum. **Advanced
composition** (Dwork, Rothblum & Vadhan 2010; Dwork & Roth Theorem 3.20, for differing
εᵢ) is offered beside it: an (ε′, δ) guarantee, tighter only for many small reports.
Derivation and worked cases: ``docs/guides/metrics-as-code.md``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date

from client_sdk.device import DeviceCaps
from client_sdk.wire import period_start

__all__ = [
    "BASIC",
    "ADVANCED",
    "WINDOWS",
    "Account",
    "MetricLoad",
    "WindowLoss",
    "account",
    "advanced_epsilon",
    "periods_in",
]

BASIC = (
    "basic sequential composition (Dwork–McSherry–Nissim–Smith 2006; Dwork & Roth 2014, "
    "Thm 3.16): ε₁-, ε₂-, … LDP reports are together (ε₁ + ε₂ + …)-LDP"
)
ADVANCED = (
    "advanced composition (Dwork–Rothblum–Vadhan 2010; Dwork & Roth 2014, Thm 3.20, for "
    "differing εᵢ): √(2 ln(1/δ) Σεᵢ²) + Σ εᵢ(e^εᵢ − 1), an (ε′, δ)-LDP guarantee"
)

WINDOWS = ("day", "week", "month", "year")
"""Calendar windows of the device's clock: a UTC day, an ISO week, a calendar month, a
calendar year."""

WINDOW_DAYS = {"day": 1, "week": 7, "month": 31, "year": 366}
"""The most days a window holds: what a per-day cap allows in it."""

_OVERLAP = {
    "day": {"day": 1, "week": 7, "month": 31, "year": 366},
    "week": {"day": 1, "week": 1, "month": 6, "year": 54},
    "month": {"day": 1, "week": 2, "month": 1, "year": 12},
}
"""The most metric periods (rows) one calendar window (columns) overlaps: a 31-day month
starting on a Sunday touches 6 ISO weeks; a 366-day year starting on a Sunday, 54; a week
can straddle two months."""


def periods_in(period: str, window: str) -> int:
    """The most budget periods (``day``/``week``/``month``) one calendar ``window`` overlaps.

    Raises:
        KeyError: an unknown period or window.
    """
    return _OVERLAP[period][window]


def periods_until(period: str, today: date, last: date) -> int:
    """Budget periods of the device's calendar from ``today`` to ``last`` (both
    included); 0 when ``last`` is before ``today``."""
    if last < today:
        return 0
    first, end = period_start(today, period), period_start(last, period)
    if period == "month":
        return (end.year - first.year) * 12 + end.month - first.month + 1
    return (end - first).days // (7 if period == "week" else 1) + 1


@dataclass(frozen=True)
class MetricLoad:
    """What one metric can cost a device: ε₁ per report, at most ``reports`` per
    ``period`` (None: no budget, no bound), ε∞ when memoized, collected until
    ``expires`` (None: never)."""

    name: str
    epsilon: float
    reports: int | None
    period: str = "day"
    permanent_epsilon: float | None = None
    expires: date | None = None

    def reports_in(self, window: str, today: date) -> float:
        """The most reports one device can make in ``window`` (``lifetime``: from
        ``today`` until expiry); ``inf`` without a budget (or a lifetime without expiry)."""
        if self.reports is None:
            return math.inf
        if window == "lifetime":
            if self.expires is None:
                return math.inf
            return self.reports * periods_until(self.period, today, self.expires)
        return self.reports * periods_in(self.period, window)

    def loss(self, window: str, today: date) -> float:
        """Worst-case ε of this metric's reports in ``window``: m·ε₁, at most ε∞ when
        memoized (reports of an unchanged value)."""
        m = self.reports_in(window, today)
        total = 0.0 if m == 0 else m * self.epsilon
        if self.permanent_epsilon is not None:
            total = min(total, self.permanent_epsilon)
        return total

    def mechanisms(self, window: str, today: date) -> tuple[float, float]:
        """(ε of each mechanism, how many) composed in ``window``: m reports at ε₁, or
        one permanent response at ε∞ when that is the smaller."""
        m = self.reports_in(window, today)
        if self.permanent_epsilon is not None and m * self.epsilon >= self.permanent_epsilon:
            return self.permanent_epsilon, 1.0
        return self.epsilon, m


def advanced_epsilon(terms: Sequence[tuple[float, float]], delta: float) -> float:
    """ε′ of advanced composition of ``count`` ε-LDP randomizers per ``(ε, count)``.

    √(2 ln(1/δ) Σ εᵢ²) + Σ εᵢ(e^{εᵢ} − 1): Dwork & Roth 2014, Thm 3.20, written for
    differing εᵢ; it is at least Kairouz, Oh & Viswanath 2015, Thm 3.5 (whose drift term
    is εᵢ(e^{εᵢ} − 1)/(e^{εᵢ} + 1)), so the composition is (ε′, δ)-LDP. Each εᵢ and count
    is fixed beforehand (the metrics' budgets); a report left unsent (a device cap, an
    app that reports less) only helps. Device caps are *not* used here: a cap decides
    adaptively which reports run, and bounding Σ εᵢ that way needs a privacy filter
    (Rogers, Roth, Ullman & Vadhan 2016), not this theorem.

    Raises:
        ValueError: δ outside (0, 1).
    """
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    live = [(e, n) for e, n in terms if n > 0 and e > 0]
    if not live:
        return 0.0
    squares = sum(n * e * e for e, n in live)
    drift = sum(n * e * math.expm1(e) for e, n in live)
    return math.sqrt(2 * math.log(1 / delta) * squares) + drift


@dataclass(frozen=True)
class WindowLoss:
    """A device's worst-case loss in one window, per metric and in total."""

    window: str
    per_metric: Mapping[str, float]
    uncapped: float
    """Σ of the metrics' losses (basic composition), before any device cap."""
    cap: float
    """The device caps' limit in this window (``inf``: none)."""
    advanced: float | None = None
    """Advanced composition's ε′ at the registry's δ (None: no δ declared), caps not
    applied (see :func:`advanced_epsilon`)."""

    @property
    def total(self) -> float:
        """The worst case with the device caps applied (a report past a cap is refused)."""
        return min(self.uncapped, self.cap)

    @property
    def best(self) -> float:
        """The smaller of the basic total and the advanced ε′ (that one with its δ)."""
        return self.total if self.advanced is None else min(self.total, self.advanced)


@dataclass(frozen=True)
class Account:
    """The worst-case loss of one device in every window (:data:`WINDOWS` and
    ``lifetime``), and how it was composed."""

    windows: Mapping[str, WindowLoss]
    delta: float | None = None
    theorem: str = BASIC
    alternatives: tuple[str, ...] = field(default=())


def window_cap(caps: DeviceCaps | None, window: str) -> float:
    """What device caps let a device spend in ``window``: the daily cap times the days
    the window holds, and the lifetime cap."""
    if caps is None:
        return math.inf
    limit = caps.epsilon_lifetime if caps.epsilon_lifetime is not None else math.inf
    if caps.epsilon_per_day is not None and window != "lifetime":
        limit = min(limit, caps.epsilon_per_day * WINDOW_DAYS[window])
    return limit


def account(
    metrics: Sequence[MetricLoad],
    today: date,
    caps: DeviceCaps | None = None,
    delta: float | None = None,
) -> Account:
    """Every window's worst-case loss of one device across ``metrics``.

    Args:
        metrics: what each metric can cost.
        today: the first day counted towards the lifetime (metrics expire after it).
        caps: device-wide caps the SDK enforces (``ClientOptions(device_budget=…)``).
        delta: δ for the advanced composition alternative (None: not offered).
    """
    windows = {}
    for window in (*WINDOWS, "lifetime"):
        per_metric = {m.name: m.loss(window, today) for m in metrics}
        cap = window_cap(caps, window)
        advanced = None
        if delta is not None:
            advanced = advanced_epsilon([m.mechanisms(window, today) for m in metrics], delta)
        windows[window] = WindowLoss(window, per_metric, sum(per_metric.values()), cap, advanced)
    return Account(windows, delta, BASIC, (ADVANCED,) if delta is not None else ())

"""A metric's device budget and its calendar: UTC days, ISO weeks, calendar months."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from client_sdk.wire.fields import _json_integer

BUDGET_PERIODS = ("day", "week", "month")
"""Budget periods: UTC calendar days, ISO weeks (from Monday), calendar months."""

MAX_REPORTS_PER_PERIOD = 1_000_000
"""Most reports a budget may allow per period: one every 3 s for a month. A larger
number is a typo, or no budget at all (then leave ``budget`` out)."""


def day_of(timestamp: float) -> date:
    """The UTC calendar day of a Unix time."""
    return datetime.fromtimestamp(timestamp, UTC).date()


def period_start(day: date, period: str) -> date:
    """The first day of the budget period (``day``/``week``/``month``) containing ``day``.

    Raises:
        ValueError: an unknown period.
    """
    if period == "day":
        return day
    if period == "week":
        return day - timedelta(days=day.weekday())
    if period == "month":
        return day.replace(day=1)
    raise ValueError(f"unknown budget period {period!r}")


@dataclass(frozen=True)
class Budget:
    """A device-side privacy budget: at most ``reports_per_period`` reports per period.

    Enforced by the SDK's ledger (sequential composition: at most
    ``reports_per_period × ε`` per period per device). It does not change how reports
    are decoded; for a memoized metric it bounds how many reports of one device a pool
    holds (:meth:`max_reports`), which its intervals need, so there a change makes a new
    version.
    """

    reports_per_period: int
    period: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, as in a spec: ``{"reports_per_period": r, "period": "day"}``."""
        return {"reports_per_period": self.reports_per_period, "period": self.period}

    def periods(self, start: float, end: float) -> int:
        """Budget periods (UTC) that [start, end] overlaps, plus one for clock skew.

        A device charges reports to periods of its own clock; a clock off by less than a
        period shifts the span it sees, which then overlaps at most one more period.
        """
        first = period_start(day_of(start), self.period)
        last = period_start(day_of(end), self.period)
        if self.period == "month":
            overlapped = (last.year - first.year) * 12 + last.month - first.month + 1
        else:
            overlapped = (last - first).days // (7 if self.period == "week" else 1) + 1
        return overlapped + 1

    def max_reports(self, start: float, end: float) -> int:
        """The most reports one device can have made between two times under this budget.

        When reports *arrive* is another matter than when they were made (an offline
        device delivers days of them at once): bound a window of arrivals with ``start`` =
        when the metric version was created and ``end`` = the window's end.
        """
        return self.reports_per_period * self.periods(start, end)


def _check_budget(budget: object, problems: list[str]) -> Budget | None:
    """The :class:`Budget` of a spec's or definition's ``budget`` (None when absent)."""
    if budget is None:
        return None
    if not isinstance(budget, dict) or set(budget) != {"reports_per_period", "period"}:
        problems.append('budget must be {"reports_per_period": r, "period": "day"|"week"|"month"}')
        return None
    raw, period = budget["reports_per_period"], budget["period"]
    reports = _json_integer(raw)
    ok = True
    if reports is None or not 1 <= reports <= MAX_REPORTS_PER_PERIOD:
        problems.append(
            f"budget.reports_per_period must be an integer in [1, {MAX_REPORTS_PER_PERIOD}], "
            f"got {raw!r}"
        )
        ok = False
    if period not in BUDGET_PERIODS:
        problems.append(f"budget.period must be one of {', '.join(BUDGET_PERIODS)}, got {period!r}")
        ok = False
    return Budget(reports, period) if ok and reports is not None else None

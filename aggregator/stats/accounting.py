"""Budget and privacy accounting: how many reports one device can have, and what ε it spends.

The one home of these names (docs/architecture/layout.md, "Where is…"): the reports per
device a window's counts can hold (:func:`reports_per_device`) and its check
(:func:`checked_reports_per_device`), sequential composition (:func:`composed_epsilon`),
a device's most per UTC day on one metric and over every metric against the device-wide
caps (:func:`epsilon_per_day_max`, :func:`device_spend`), and a device's reports per
relayed batch (:func:`reports_per_batch`; the shuffled views' ε in
:mod:`aggregator.stats.shuffling`). Pure: no Redis. The derivations:
docs/statistics/memoized.md and docs/statistics/shuffling.md.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

from client_sdk.device import DeviceCaps
from client_sdk.wire import Budget, MetricDefinition
from ldp_store import schema

__all__ = [
    "UNBOUNDED_NAMED",
    "ReportsPerDevice",
    "checked_reports_per_device",
    "composed_epsilon",
    "device_spend",
    "epsilon_per_day_max",
    "reports_per_batch",
    "reports_per_device",
]


def checked_reports_per_device(r: object) -> float:
    """r, the most reports one device contributes to a pool: a number ≥ 1.

    Every estimator, interval and bound that takes ``reports_per_device`` checks it here.

    Raises:
        ValueError: not a number, below 1, or infinite.
    """
    value = float(r) if isinstance(r, numbers.Real) and not isinstance(r, bool) else math.nan
    if not 1 <= value < math.inf:
        raise ValueError(f"reports_per_device must be a number ≥ 1, got {r!r}")
    return value


def composed_epsilon(epsilon: float, reports: float) -> float:
    """What ``reports`` reports at ``epsilon`` each reveal together (sequential composition)."""
    return reports * epsilon


@dataclass(frozen=True)
class ReportsPerDevice:
    """The most reports of one device a window's counts can hold, and why."""

    bound: int
    """r the intervals assume: a memoized metric's reports share the device's permanent
    response, so r of them vary together (1 for other metrics: fresh noise per report)."""
    reason: str
    """One sentence for the page and the API."""
    budgeted: int | None = None
    """The most reports one device can have in the window under the metric's budget,
    memoized or not; None without a budget (or a creation time): nothing bounds it. What
    composition counts (the shuffled view's ε): each report reveals up to ε."""


def reports_per_device(
    definition: MetricDefinition, created: float | None, window: str, now: float
) -> ReportsPerDevice:
    """How many reports one device may have in ``window`` of a metric version.

    The budget caps reports per period on the device's clock, but a window holds reports
    by *arrival*, and an offline device delivers days of them at once: so the cap is the
    budget over every period from the version's creation to the window's end (or now).

    Args:
        definition: the metric version.
        created: its creation time (``Registry.created``), None if not recorded.
        window: ``all``, ``hour:…`` or ``day:…``.
        now: the current time (Unix seconds).
    """
    budget = definition.budget
    budgeted: int | None = None
    if budget is not None and created is not None:
        span = schema.window_span(window)
        end = now if span is None else min(now, span[1])
        budgeted = budget.max_reports(created, max(end, created))
    if not definition.longitudinal:
        return ReportsPerDevice(
            1, "one report is independent of the others (fresh noise)", budgeted
        )
    if budget is None or budgeted is None:
        return ReportsPerDevice(
            1,
            "this version predates budgets for memoized metrics (or its creation time): "
            "the intervals assume one report per device and may be too narrow",
        )
    periods = budgeted // budget.reports_per_period
    return ReportsPerDevice(
        budgeted,
        f"a device sends at most {budget.reports_per_period} per {budget.period}; "
        f"{periods} {budget.period}s (one for clock skew) since this version was created "
        f"allow {budgeted} reports of one device here, and the intervals assume that many",
        budgeted,
    )


def epsilon_per_day_max(per_period: float | None, permanent: float | None) -> float | None:
    """The most a device can spend on one metric in one UTC day: its whole period's
    allowance ``per_period`` (a day lies within one period, and nothing stops a device from
    spending the period's reports on one day), a memoized metric at most ε∞
    (``permanent``); None without a budget (unbounded)."""
    if per_period is not None and permanent is not None:
        return min(per_period, permanent)
    return per_period


UNBOUNDED_NAMED = 20
"""Metrics without a budget that the device-wide spend names: enough to find what to
fix, where ten thousand names (150 kB) would be most of an overview page's bytes."""


def device_spend(rows: list[dict[str, Any]], caps: DeviceCaps | None) -> dict[str, Any]:
    """The most one device can spend per UTC day over every live metric, against the caps.

    Sequential composition across metrics: the per-metric maxima (``epsilon_per_day_max``
    of each overview row) add up. Retired metrics take no reports and are left out; one
    metric without a budget makes the total unbounded (null): the first
    :data:`UNBOUNDED_NAMED` of them by name are named, ``unbounded_total`` counts them all.
    """
    live = [r for r in rows if r.get("retired_at") is None]
    unbounded = [r["name"] for r in live if r.get("epsilon_per_day_max") is None]
    total = sum(float(r["epsilon_per_day_max"]) for r in live if r["epsilon_per_day_max"])
    limits = caps or DeviceCaps()
    return {
        "epsilon_per_day_max": None if unbounded else round(total, 12),
        "unbounded": sorted(unbounded)[:UNBOUNDED_NAMED],
        "unbounded_total": len(unbounded),
        "epsilon_per_day_cap": limits.epsilon_per_day,
        "epsilon_lifetime_cap": limits.epsilon_lifetime,
    }


SHORTEST_PERIOD = {"day": 86_400.0, "week": 7 * 86_400.0, "month": 28 * 86_400.0}
"""Seconds of each budget period at its shortest (February for a month)."""


def reports_per_batch(budget: Budget | None, delay: float) -> int | None:
    """The most reports of one device a shuffled batch of relayed reports can hold.

    A batch holds what arrived while its pool waited, at most ``delay`` seconds
    (``LDP_SHUFFLE_MAX_DELAY``). A span that long touches at most ⌈delay / P⌉ + 1
    budget periods of length P, one more for a report delivered up to a period after it
    was made (the SDK's queue and retries): the budget's reports per period times that.
    A device that delivers an older backlog at once (after a long time offline) can have
    more in one batch, as it can in a window. None without a budget: nothing bounds it.
    """
    if budget is None:
        return None
    periods = math.ceil(delay / SHORTEST_PERIOD[budget.period]) + 2
    return budget.reports_per_period * periods

"""The device's privacy ledger: ε charged per metric and day, budgets enforced per period.

Sequential composition: m reports at ε each are together (m·ε)-LDP. So the ledger adds
up the ε of every report a device makes, per metric and UTC day, and ``Client.report()``
refuses a report that would exceed the metric's budget (``reports_per_period`` reports,
so ``reports_per_period × ε``, per UTC day, ISO week or calendar month).

A charge is made when a report is queued, atomically with queuing it. It stays charged
once the report has been handed to the network (even if the upload failed: the collector
may have received it). A queued report deleted before any upload attempt — wiped by
``Client.disable()``, or evicted by the queue quota — never left the device, and its
charge is refunded: that is the ledger's *pending* state.

With a ``storage_dir`` the ledger lives in the store's SQLite file (``store/``), shared by
every process using that directory, and survives restarts. Without one,
:class:`MemoryLedger` keeps it for this process only.

References:
    C. Dwork, A. Roth. "The Algorithmic Foundations of Differential Privacy" (2014),
    Theorem 3.14 (basic sequential composition).
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from client_sdk import mechanisms, wire
from client_sdk.device import DeviceCaps, device_total
from client_sdk.errors import (
    BudgetExhaustedError,
    BudgetNotSharedError,
    DeviceBudgetExhaustedError,
    ReportingDisabledError,
)
from client_sdk.wire import day_of, period_start

if TYPE_CHECKING:
    from client_sdk.queue import ReportQueue

__all__ = [
    "ACCOUNTING",
    "EPSILON_SLACK",
    "Charge",
    "Charger",
    "LedgerState",
    "MemoryLedger",
    "Tally",
    "day_of",
    "device_summary",
    "period_start",
    "summarize",
    "window_start",
]

EPSILON_SLACK = 1e-9
"""Relative slack of the ε comparison: a budget of 3 reports at ε = 0.1 must allow the
third report although 0.1 + 0.1 + 0.1 > 0.3 in floating point."""

ACCOUNTING = (
    "Sequential composition: m reports at ε each are together (m·ε)-LDP. Each 'epsilon' "
    "below bounds how much the reports it counts reveal together about this device's "
    "values; across metrics the totals add up the same way."
)

DAYS = "UTC calendar days; weeks start on Monday (ISO 8601); months on the 1st."

SECRET_BYTES = 32
"""The device secret of memoized responses: 256 bits, the HMAC-SHA256 key size."""


def window_start(day: date) -> date:
    """The earliest day any budget period containing ``day`` starts on."""
    return min(period_start(day, "week"), period_start(day, "month"))


@dataclass(frozen=True)
class Charge:
    """What one report costs, and what its metric's budget allows.

    Attributes:
        metric: the metric's name.
        epsilon: ε of the report.
        day: the UTC day it is made on (ISO ``YYYY-MM-DD``, so strings sort as days).
        since: the first day of its budget period (``day`` without a budget).
        limit: reports allowed in the period, or None without a budget.
        permanent: ε∞ of a memoized metric (what it counts at most towards the
            device-wide totals), else None.
        device: the device-wide caps in force (``client_sdk.device``), or None.
    """

    metric: str
    epsilon: float
    day: str
    since: str
    limit: int | None = None
    permanent: float | None = None
    device: DeviceCaps | None = None


class Charger:
    """Makes the :class:`Charge` of a report; caches the day computations and the charges
    of the day (hot path: a frozen dataclass costs microseconds to build)."""

    MAX_CACHED = 256
    """Charges kept (one per metric definition in use): a refetched definition is a new
    object, so the cache is emptied when it reaches this size."""

    def __init__(self) -> None:
        self._day_number = -1
        self._day = date(1970, 1, 1)
        self._starts: dict[str, str] = {}
        self._charges: dict[int, tuple[wire.MetricDefinition, int, Charge]] = {}
        self._device: DeviceCaps | None = None

    @property
    def device(self) -> DeviceCaps | None:
        """The device-wide caps every charge carries (the stricter of app and server)."""
        return self._device

    @device.setter
    def device(self, budget: DeviceCaps | None) -> None:
        if budget != self._device:
            self._device = budget
            self._charges = {}

    def charge(self, definition: wire.MetricDefinition, timestamp: float) -> Charge:
        """The charge of one report of ``definition`` made at Unix time ``timestamp``."""
        number = int(timestamp // 86_400)
        cached = self._charges.get(id(definition))
        if cached is not None and cached[0] is definition and cached[1] == number:
            return cached[2]
        if number != self._day_number:
            self._day = day_of(timestamp)
            self._starts = {p: period_start(self._day, p).isoformat() for p in wire.BUDGET_PERIODS}
            self._starts[""] = self._day.isoformat()
            self._day_number = number
        budget = definition.budget
        starts = self._starts
        mech = definition.mechanism
        permanent = mech.permanent_epsilon if isinstance(mech, mechanisms.Memoized) else None
        charge = Charge(
            definition.name,
            mech.epsilon,
            starts[""],
            starts[""] if budget is None else starts[budget.period],
            None if budget is None else budget.reports_per_period,
            permanent,
            self._device,
        )
        if len(self._charges) >= self.MAX_CACHED:
            self._charges = {}
        self._charges[id(definition)] = (definition, number, charge)
        return charge


class Tally:
    """Reports and ε charged, per metric and day (recent days) and over the lifetime."""

    def __init__(self) -> None:
        self._days: dict[str, dict[str, list[float]]] = {}
        self._lifetime: dict[str, list[Any]] = {}
        self._permanent: dict[str, float] = {}

    def spent(self, metric: str, since: str, until: str) -> tuple[int, float]:
        """Reports and ε charged for ``metric`` from day ``since`` to ``until``, inclusive."""
        reports, epsilon = 0, 0.0
        for day, (n, eps) in self._days.get(metric, {}).items():
            if since <= day <= until:
                reports += int(n)
                epsilon += eps
        return reports, epsilon

    def check(self, charge: Charge) -> None:
        """Raise :class:`~client_sdk.errors.BudgetExhaustedError` if ``charge`` would exceed
        its budget.

        The budget allows ``limit`` reports and ``limit × ε`` per period: with one ε for
        the whole period both say the same; after an ε change mid-period the stricter
        one applies.
        """
        if charge.permanent is not None:
            self._permanent[charge.metric] = charge.permanent
        if charge.limit is not None:
            reports, epsilon = self.spent(charge.metric, charge.since, charge.day)
            allowed = charge.limit * charge.epsilon * (1.0 + EPSILON_SLACK)
            if reports + 1 > charge.limit or epsilon + charge.epsilon > allowed:
                raise BudgetExhaustedError(charge.metric)
        if charge.device is not None:
            self._check_device(charge, charge.device)

    def _check_device(self, charge: Charge, caps: DeviceCaps) -> None:
        """Raise :class:`DeviceBudgetExhaustedError` if ``charge`` takes the device's total
        of the day, or of its lifetime, past the cap (``client_sdk.device``)."""
        this = (charge.metric, charge.epsilon)
        windows = (
            (caps.epsilon_per_day, self.device_spent(charge.day)),
            (caps.epsilon_lifetime, self.device_spent(None)),
        )
        for cap, spent in windows:
            if cap is not None:
                before = device_total(spent, self._permanent)
                after = device_total([*spent, this], self._permanent)
                if after > before and after > cap * (1.0 + EPSILON_SLACK):
                    raise DeviceBudgetExhaustedError(charge.metric)

    def device_spent(self, day: str | None) -> list[tuple[str, float]]:
        """(metric, ε) charged on ``day``, or over the lifetime (None)."""
        if day is None:
            return [(m, eps) for m, (_, eps, _) in self._lifetime.items()]
        return [(m, days[day][1]) for m, days in self._days.items() if day in days]

    @property
    def permanent(self) -> dict[str, float]:
        """ε∞ of the memoized metrics charged in this process (metric → ε∞)."""
        return dict(self._permanent)

    def add(self, metric: str, day: str, reports: int, epsilon: float) -> None:
        """Add (or, with negative numbers, refund) a charge."""
        counts = self._days.setdefault(metric, {}).setdefault(day, [0, 0.0])
        counts[0] += reports
        counts[1] += epsilon
        life = self._lifetime.setdefault(metric, [0, 0.0, day])
        life[0] += reports
        life[1] += epsilon
        life[2] = min(life[2], day)

    def add_past(self, metric: str, first: str, reports: int, epsilon: float) -> None:
        """Add days older than those kept to the lifetime sums only."""
        life = self._lifetime.setdefault(metric, [0, 0.0, first])
        life[0] += reports
        life[1] += epsilon
        life[2] = min(life[2], first)

    def remember(self, permanent: Mapping[str, float]) -> None:
        """Take over the ε∞ of memoized metrics another tally learned (a reload)."""
        self._permanent.update(permanent)

    def prune(self, before: str) -> None:
        """Forget the days before ``before`` (the lifetime sums stay)."""
        for days in self._days.values():
            for day in [d for d in days if d < before]:
                del days[day]

    def rows(self) -> list[tuple[str, str, int, float]]:
        """(metric, day, reports, ε) of the days kept."""
        return [
            (metric, day, int(n), eps)
            for metric, days in self._days.items()
            for day, (n, eps) in days.items()
        ]

    def lifetime(self) -> dict[str, tuple[int, float, str]]:
        """metric → (reports, ε, first day) over everything added."""
        return {m: (int(n), eps, first) for m, (n, eps, first) in self._lifetime.items()}


class LedgerState(Protocol):
    """The ledger's state as the client reads and changes it (memory or SQLite)."""

    persistent: bool
    """Whether the ledger survives the process (and is shared by a storage dir's users)."""

    def is_disabled(self) -> bool:
        """Whether the user opted out. Never raises."""
        ...

    def disable(self) -> int:
        """Opt out: persist it, wipe queued reports (refunding those never sent) and the
        device secret. Returns the reports wiped (0 where the client clears the queue)."""
        ...

    def enable(self) -> None:
        """Opt back in."""
        ...

    def device_secret(self) -> bytes:
        """The device secret of memoized responses, made (CSPRNG) on first use."""
        ...

    def ledger(self, since: str) -> tuple[list[tuple[str, str, int, float]], dict[str, Any]]:
        """(metric, day, reports, ε) rows from day ``since``, and per metric the lifetime
        (reports, ε, first day)."""
        ...


class MemoryLedger:
    """The ledger of a client without a storage dir: this process only, lost at exit.

    ``disable()`` cannot refund the charges of wiped reports (the memory queue does not
    keep them): they stay charged, which overstates, never understates, what was spent.

    A forked child inherits a copy of the parent's numbers but cannot share the budget
    behind them: a charge under a budget (the metric's or the device-wide caps) is
    refused there (:class:`~client_sdk.errors.BudgetNotSharedError`), or every worker of a
    pre-fork server would spend the parent's budget once more.
    """

    persistent = False
    KEEP_DAYS = 62
    """Days of detail kept: every day of the longest period (a month, or a week reaching
    back into the previous month) with room to spare; older days live on in the
    lifetime sums."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tally = Tally()
        self._disabled = False
        self._secret: bytes | None = None
        self._pruned = ""
        self._forked = False  # a copy of another process's ledger: see after_fork_in_child

    def enqueue(self, queue: ReportQueue, item: bytes, charge: Charge) -> int:
        """Check ``charge`` against its budget, queue ``item``, then record the charge.

        Raises:
            ReportingDisabledError: the user opted out.
            BudgetNotSharedError: in a forked child, a charge under a budget.
            BudgetExhaustedError: over budget (nothing queued).
            QueueFullError: from the queue (nothing charged).
        """
        with self._lock:
            if self._disabled:
                raise ReportingDisabledError()
            if self._forked and (charge.limit is not None or charge.device is not None):
                raise BudgetNotSharedError(charge.metric)
            self._tally.check(charge)
            queued = queue.put(item)
            self._tally.add(charge.metric, charge.day, 1, charge.epsilon)
            if charge.day != self._pruned:  # once a day
                cutoff = date.fromisoformat(charge.day) - timedelta(days=self.KEEP_DAYS)
                self._tally.prune(cutoff.isoformat())
                self._pruned = charge.day
            return queued

    def is_disabled(self) -> bool:  # noqa: D102
        return self._disabled

    def disable(self) -> int:  # noqa: D102
        with self._lock:
            self._disabled = True
            self._secret = None
        return 0

    def enable(self) -> None:  # noqa: D102
        with self._lock:
            self._disabled = False

    def device_secret(self) -> bytes:  # noqa: D102
        with self._lock:
            if self._disabled:
                raise ReportingDisabledError()
            if self._secret is None:
                self._secret = secrets.token_bytes(SECRET_BYTES)
            return self._secret

    def ledger(self, since: str) -> tuple[list[tuple[str, str, int, float]], dict[str, Any]]:  # noqa: D102
        with self._lock:
            rows = [r for r in self._tally.rows() if r[1] >= since]
            return rows, self._tally.lifetime()

    def after_fork_in_child(self) -> None:
        """A fresh lock; the child keeps the parent's numbers (``privacy()`` shows them) but
        charges nothing under a budget: that budget is the parent's."""
        self._lock = threading.Lock()
        self._forked = True


def _window(metric: str, reports: int, epsilon: float, since: str, what: str) -> dict[str, Any]:
    epsilon = round(epsilon, 12)  # hide float noise such as 0.30000000000000004
    return {
        "reports": reports,
        "epsilon": epsilon,
        "since": since,
        "guarantee": (
            f"The {reports} report(s) of {metric} made {what} are together {epsilon:g}-LDP "
            "about this device's values (sequential composition: m reports at ε each "
            "cost m·ε)."
        ),
    }


def summarize(
    rows: Sequence[tuple[str, str, int, float]],
    lifetime: Mapping[str, tuple[int, float, str]],
    definitions: Mapping[str, wire.MetricDefinition],
    today: date,
    *,
    enabled: bool,
    persistent: bool,
    device: DeviceCaps | None = None,
) -> dict[str, Any]:
    """What ``Client.privacy()`` returns: ε spent per metric today, this period, lifetime.

    Args:
        rows: (metric, day, reports, ε) charged, at least from :func:`window_start`.
        lifetime: per metric, (reports, ε, first day) over the device's lifetime.
        definitions: the metrics' current definitions (for ε per report and budgets).
        today: the current UTC day.
        enabled: whether reporting is on.
        persistent: whether the ledger survives restarts.
        device: the device-wide caps in force (``client_sdk.device``), if any.

    Returns:
        ``enabled``, ``ledger`` (where it lives), ``accounting`` (the composition rule),
        ``days`` (how periods are counted), ``today``, ``metrics`` (per metric:
        ``epsilon_per_report``, ``bounds`` from the definition, ``budget`` with
        ``remaining_reports``, and ``today``/``period``/``lifetime`` windows, each with
        ``reports``, ``epsilon``, ``since`` and the ``guarantee`` in words) and
        ``total`` (all metrics, today and lifetime) and ``device_budget``: the device-wide
        totals against the caps (:func:`device_summary`).
    """
    day = today.isoformat()
    by_metric: dict[str, dict[str, tuple[int, float]]] = {}
    for metric, d, n, eps in rows:
        by_metric.setdefault(metric, {})[d] = (n, eps)

    def spent(metric: str, since: str) -> tuple[int, float]:
        days = by_metric.get(metric, {})
        found = [v for d, v in days.items() if since <= d <= day]
        return sum(n for n, _ in found), sum(e for _, e in found)

    metrics: dict[str, Any] = {}
    n_all_today, e_all_today, n_all, e_all, first_all = 0, 0.0, 0, 0.0, day
    for metric in sorted(set(lifetime) | set(definitions)):
        definition = definitions.get(metric)
        n_today, e_today = spent(metric, day)
        n_life, e_life, first = lifetime.get(metric, (0, 0.0, day))
        entry: dict[str, Any] = {
            "epsilon_per_report": None,
            "bounds": None,
            "budget": None,
            "today": _window(metric, n_today, e_today, day, f"today ({day}, UTC)"),
            "period": None,
            "lifetime": _window(metric, n_life, e_life, first, f"since {first} (lifetime)"),
        }
        if definition is not None:
            entry["epsilon_per_report"] = definition.mechanism.epsilon
            entry["bounds"] = definition.privacy_bounds()
            budget = definition.budget
            if budget is not None:
                since = period_start(today, budget.period).isoformat()
                n_period, e_period = spent(metric, since)
                entry["budget"] = {
                    **budget.to_dict(),
                    "epsilon_per_period": round(
                        budget.reports_per_period * definition.mechanism.epsilon, 12
                    ),
                    "remaining_reports": max(0, budget.reports_per_period - n_period),
                }
                entry["period"] = _window(
                    metric, n_period, e_period, since, f"this {budget.period} (since {since}, UTC)"
                )
        metrics[metric] = entry
        n_all_today, e_all_today = n_all_today + n_today, e_all_today + e_today
        n_all, e_all, first_all = n_all + n_life, e_all + e_life, min(first_all, first)
    permanent = {
        name: d.mechanism.permanent_epsilon
        for name, d in definitions.items()
        if isinstance(d.mechanism, mechanisms.Memoized)
    }
    today_spent = [(m, spent(m, day)[1]) for m in by_metric]
    life_spent = [(m, eps) for m, (_, eps, _) in lifetime.items()]
    return {
        "device_budget": device_summary(device, today_spent, life_spent, permanent),
        "enabled": enabled,
        "ledger": "persistent (the storage dir)" if persistent else "in memory (this process)",
        "accounting": ACCOUNTING,
        "days": DAYS,
        "today": day,
        "metrics": metrics,
        "total": {
            "today": _window("all metrics", n_all_today, e_all_today, day, "today"),
            "lifetime": _window("all metrics", n_all, e_all, first_all, "over its lifetime"),
        },
    }


def device_summary(
    device: DeviceCaps | None,
    today: Sequence[tuple[str, float]],
    lifetime: Sequence[tuple[str, float]],
    permanent: Mapping[str, float],
) -> dict[str, Any]:
    """The device-wide totals of ``privacy()`` against the caps in force.

    Returns:
        ``epsilon_per_day`` and ``epsilon_lifetime`` (the caps, None for none),
        ``spent_today`` and ``spent_lifetime`` (over all metrics, a memoized one at most
        its ε∞), ``remaining_today`` and ``remaining_lifetime`` (None without a cap) and
        the ``rule`` in words.
    """
    caps = device or DeviceCaps()
    spent_today = round(device_total(today, permanent), 12)
    spent_life = round(device_total(lifetime, permanent), 12)

    def left(cap: float | None, spent: float) -> float | None:
        return None if cap is None else round(max(0.0, cap - spent), 12)

    return {
        **caps.to_dict(),
        "spent_today": spent_today,
        "spent_lifetime": spent_life,
        "remaining_today": left(caps.epsilon_per_day, spent_today),
        "remaining_lifetime": left(caps.epsilon_lifetime, spent_life),
        "rule": (
            "The total ε of all metrics' reports, per UTC day and over the device's "
            "lifetime (sequential composition; a memoized metric counts at most its ε∞); "
            "a report that would pass a cap is refused ('device_budget'). The caps are the "
            "stricter of the app's and the collector's."
        ),
    }

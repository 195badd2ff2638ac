"""``ldp lint``'s rules: a registry's findings and its privacy-loss report.

Each finding is one line, ``file:line: rule: message`` (:data:`RULES` lists the rules).
The privacy-loss rules account one device's worst case across all metrics
(:mod:`~aggregator.catalog.composition`) and check it against the app's declared budget.
The rules and the arithmetic: ``docs/guides/metrics-as-code.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date
from typing import Any

from aggregator.catalog.composition import Account, MetricLoad, account
from aggregator.catalog.registry_file import (
    APP_FIELDS,
    MetricEntry,
    RegistryFile,
    allowed_fields,
    read_registry,
)

__all__ = ["RULES", "Finding", "LintResult", "lint", "lint_file"]

RULES = {
    "spec": "the server would refuse the metric's spec (each problem named)",
    "unknown-field": "a key no metric, app table or budget has (a typo, another kind's field)",
    "app": "the [app] table's budget or caps are not valid",
    "missing-owner": "a metric without owners: someone must answer for it",
    "missing-description": "a metric without a description: reviewers and the dictionary need one",
    "missing-review": "a metric without a data_review https link",
    "missing-expiry": 'a metric without expires (a date, or "never")',
    "expired": "a metric whose expiry date has passed: remove it, or renew it after review",
    "expiry-too-far": "an expiry more than two years away: review it sooner",
    "no-budget": "a metric without a reports budget: a device's loss has no bound",
    "no-app-budget": "no [app.budget]: nothing to check the total privacy loss against",
    "over-budget": "a device's worst-case ε in a window exceeds the app's budget",
    "caps-refuse": "warning: the metrics ask more than the device caps allow; reports past "
    "a cap are refused at runtime",
}
"""Every rule: name → what it checks. ``caps-refuse`` is a warning (exit status 0
unless ``--strict``); every other rule is an error."""

WARNINGS = frozenset({"caps-refuse"})

MAX_EXPIRY_YEARS = 2
"""Glean's rule: an expiry further than this is not a review date but a wish."""


@dataclass(frozen=True)
class Finding:
    """One problem, at a line of the file."""

    path: str
    line: int
    rule: str
    message: str

    @property
    def warning(self) -> bool:
        """Whether the finding leaves the exit status 0 (without ``--strict``)."""
        return self.rule in WARNINGS

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.rule}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "path": self.path,
            "line": self.line,
            "rule": self.rule,
            "severity": "warning" if self.warning else "error",
            "message": self.message,
        }


@dataclass(frozen=True)
class LintResult:
    """A registry's findings and its privacy-loss account."""

    registry: RegistryFile
    findings: tuple[Finding, ...]
    account: Account
    today: date

    def failed(self, strict: bool = False) -> bool:
        """Whether any error (with ``strict``, any finding) was found."""
        return any(strict or not f.warning for f in self.findings)

    def windows(self) -> list[str]:
        """The windows reported: day, the app's period, year, lifetime."""
        period = self.registry.budget.period if self.registry.budget else "week"
        return list(dict.fromkeys(["day", period, "year", "lifetime"]))

    def limit(self, window: str) -> float | None:
        """The app's budget in ``window`` (None: no budget there)."""
        return self.registry.budget.limit(window) if self.registry.budget else None

    def share(self, metric: str, window: str) -> float | None:
        """A metric's share of the app's budget in ``window`` (None: no budget there)."""
        budget = self.limit(window)
        if budget is None:
            return None
        return self.account.windows[window].per_metric.get(metric, 0.0) / budget

    def to_dict(self) -> dict[str, Any]:
        """The JSON form ``ldp lint --format json`` prints."""
        budget = self.registry.budget
        windows = {}
        for window in self.windows():
            loss = self.account.windows[window]
            windows[window] = {
                "worst_case_epsilon": _json_number(loss.total),
                "uncapped_epsilon": _json_number(loss.uncapped),
                "device_cap": _json_number(loss.cap),
                "advanced_epsilon": None if loss.advanced is None else _json_number(loss.advanced),
                "budget": self.limit(window),
                "metrics": {
                    name: {
                        "epsilon": _json_number(value),
                        "share": _json_number(self.share(name, window)),
                    }
                    for name, value in loss.per_metric.items()
                },
            }
        return {
            "path": self.registry.path,
            "today": self.today.isoformat(),
            "ok": not self.failed(),
            "findings": [f.to_dict() for f in self.findings],
            "composition": {
                "theorem": self.account.theorem,
                "alternatives": list(self.account.alternatives),
                "delta": self.account.delta,
                "accountant": budget.accountant if budget else "basic",
            },
            "windows": windows,
        }


def _json_number(value: float | None) -> float | str | None:
    """JSON has no infinity: an unbounded loss is the string ``"unbounded"``."""
    if value is None:
        return None
    return "unbounded" if math.isinf(value) else round(value, 6)


def _governance(reg: RegistryFile, entry: MetricEntry, today: date) -> list[Finding]:
    out = []

    def add(key: str, rule: str, message: str) -> None:
        line = reg.line_of(key, entry.name) if key in entry.table else entry.line
        out.append(Finding(reg.path, line, rule, f"{entry.name}: {message}"))

    owners = entry.table.get("owners")
    valid_owners = isinstance(owners, list) and all(isinstance(o, str) and o for o in owners)
    if not owners or not valid_owners:
        add("owners", "missing-owner", 'owners = ["someone@example.org"] is missing or empty')
    if not str(entry.table.get("description", "")).strip():
        add("description", "missing-description", "description is missing")
    review = entry.table.get("data_review")
    if not isinstance(review, str) or not review.startswith("https://"):
        shown = "missing" if review is None else f"{review!r} is not an https:// link"
        add("data_review", "missing-review", f"data_review is {shown}")
    expiry = _expiry_problem(entry.expires, today)
    if expiry is not None:
        add("expires", *expiry)
    return out


def _expiry_problem(expires: object, today: date) -> tuple[str, str] | None:
    """The rule an ``expires`` breaks and the message, if it breaks one."""
    if expires is None:
        return "missing-expiry", 'expires (a date like 2027-06-30, or "never") is missing'
    if expires == "never":
        return None
    if not isinstance(expires, date):
        return "missing-expiry", f'expires must be a date or "never", got {expires!r}'
    if expires < today:
        return "expired", f"expired on {expires.isoformat()}"
    if expires > _years_after(today, MAX_EXPIRY_YEARS):
        return (
            "expiry-too-far",
            f"expires {expires.isoformat()}, more than {MAX_EXPIRY_YEARS} years from "
            f"{today.isoformat()}: set a nearer date and renew it after review",
        )
    return None


def _years_after(day: date, years: int) -> date:
    try:
        return day.replace(year=day.year + years)
    except ValueError:  # 29 February
        return day.replace(year=day.year + years, day=28)


def load_of(entry: MetricEntry) -> MetricLoad | None:
    """What a metric can cost a device (None: its spec is refused)."""
    d = entry.definition
    if d is None:
        return None
    bounds = d.privacy_bounds()
    return MetricLoad(
        entry.name,
        float(bounds["per_report"]),
        d.budget.reports_per_period if d.budget else None,
        d.budget.period if d.budget else "day",
        bounds["unlimited_same_value"],
        entry.expiry_date,
    )


def _fmt(value: float) -> str:
    return "unbounded" if math.isinf(value) else f"{value:.4g}"


def lint(reg: RegistryFile, today: date) -> LintResult:
    """Every finding of a registry, and one device's worst-case loss.

    Args:
        reg: the registry read.
        today: the date expiries are checked against (injected: tests fix it).
    """
    findings = [Finding(reg.path, line, rule, msg) for line, rule, msg in reg.problems]
    findings += _unknown_tables(reg)
    loads = []
    for entry in reg.entries:
        load = load_of(entry)
        findings += _entry_findings(reg, entry, today, load)
        if load is not None:
            loads.append(load)
    acct = account(loads, today, reg.caps, reg.budget.delta if reg.budget else None)
    findings += _budget_findings(reg, acct)
    findings += _caps_findings(reg, acct)
    findings.sort(key=lambda f: (f.line, f.rule))
    return LintResult(reg, tuple(findings), acct, today)


def _unknown_tables(reg: RegistryFile) -> list[Finding]:
    """Top-level tables other than [app] and [metrics], and unknown keys of [app]."""
    found = [
        (reg.line_of(key), f'{key} is not a registry table; allowed: [app], [metrics."<name>"]')
        for key in reg.top_level
        if key not in ("app", "metrics")
    ]
    found += [
        (reg.line_of(key, "app"), f"app.{key} is not a field; allowed: {', '.join(APP_FIELDS)}")
        for key in reg.app
        if key not in APP_FIELDS
    ]
    return [Finding(reg.path, line, "unknown-field", msg) for line, msg in found]


def _entry_findings(
    reg: RegistryFile, entry: MetricEntry, today: date, load: MetricLoad | None
) -> list[Finding]:
    """One metric's findings: unknown fields, spec problems, governance, no budget."""
    allowed = allowed_fields(entry.table)
    findings = [
        Finding(
            reg.path,
            reg.line_of(key, entry.name),
            "unknown-field",
            f"{entry.name}: {key} is not a field of this kind of metric; "
            f"allowed: {', '.join(sorted(allowed))}",
        )
        for key in entry.table
        if key not in allowed
    ]
    findings += [
        Finding(reg.path, entry.line, "spec", f"{entry.name}: {problem}")
        for problem in entry.problems
        if not problem.startswith("unknown fields")
    ]
    findings += _governance(reg, entry, today)
    if load is not None and load.reports is None:
        findings.append(
            Finding(
                reg.path,
                entry.line,
                "no-budget",
                f"{entry.name}: no budget, so a device may report it without end; add "
                'budget = { reports_per_period = 1, period = "day" }',
            )
        )
    return findings


_BUDGET_KEYS = {"day": "epsilon_per_day", "lifetime": "epsilon_lifetime"}
"""The [app.budget] key of each window (any other: the period's)."""


def _budget_findings(reg: RegistryFile, acct: Account) -> list[Finding]:
    """No app budget, or each window whose worst-case loss exceeds it."""
    budget = reg.budget
    if budget is None or all(budget.limit(w) is None for w in ("day", budget.period, "lifetime")):
        return [
            Finding(
                reg.path,
                reg.line_of("budget", "app") if reg.app else 1,
                "no-app-budget",
                "declare [app.budget] with epsilon_per_day, epsilon_per_period and "
                "epsilon_lifetime: the total privacy loss is checked against it",
            )
        ]
    findings = []
    for window in dict.fromkeys(("day", budget.period, "lifetime")):
        limit = budget.limit(window)
        if limit is None:
            continue
        loss = acct.windows[window]
        advanced = budget.accountant == "advanced"
        spent = loss.best if advanced else loss.total
        if spent <= limit * (1 + 1e-12):
            continue
        worst = sorted(loss.per_metric.items(), key=lambda kv: -kv[1])[:3]
        top = ", ".join(f"{n} {_fmt(v)}" for n, v in worst)
        how = (
            f"advanced composition at δ = {budget.delta:g}"
            if advanced
            else "sequential composition"
        )
        findings.append(
            Finding(
                reg.path,
                reg.line_of(_BUDGET_KEYS.get(window, "epsilon_per_period"), "app"),
                "over-budget",
                f"worst-case ε per device per {window} is {_fmt(spent)} ({how}), "
                f"over the budget {limit:g}; largest: {top}",
            )
        )
    return findings


def _caps_findings(reg: RegistryFile, acct: Account) -> list[Finding]:
    """A warning for each window where the metrics can ask more than the device caps allow."""
    return [
        Finding(
            reg.path,
            reg.line_of("device_caps", "app"),
            "caps-refuse",
            f"warning: the metrics can ask ε {_fmt(loss.uncapped)} per device per "
            f"{window}, the device caps allow {_fmt(loss.cap)}: reports past the "
            "cap are refused, first come first served",
        )
        for window, loss in ((w, acct.windows[w]) for w in ("day", "lifetime"))
        if loss.uncapped > loss.cap
    ]


def lint_file(path: str, today: date) -> LintResult:
    """:func:`lint` of the registry at ``path``.

    Raises:
        ValueError: the file cannot be read as a registry.
    """
    return lint(read_registry(path), today)

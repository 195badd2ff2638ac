"""The app's metrics registry: today's metrics file (``ldp serve --metrics``) with an
``[app]`` table and each metric's governance fields, read with the line of every key.

    [app]
    name = "notes"
    [app.budget]                 # what one device may reveal, at most
    epsilon_per_day = 8.0
    epsilon_per_period = 20.0
    period = "week"              # day, week or month
    epsilon_lifetime = 400.0
    delta = 1e-9                 # optional: offers advanced composition at this δ
    [app.device_caps]            # optional: the caps the SDK enforces (device_budget)
    epsilon_per_day = 8.0

    [metrics."app.theme"]
    domain = ["light", "dark"]
    epsilon = 1.0
    budget = { reports_per_period = 1, period = "day" }
    description = "The colour theme the app runs in."
    owners = ["ana@example.org"]
    data_review = "https://example.org/reviews/12"
    expires = 2027-06-30

The format in full: ``docs/guides/metrics-as-code.md``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from client_sdk.bundle import GOVERNANCE_FIELDS, load_text, metrics_of, split_version
from client_sdk.device import DeviceCaps
from client_sdk.errors import DefinitionError
from client_sdk.wire import (
    BUDGET_PERIODS,
    JOINT_SPEC_FIELDS,
    NUMERIC_SPEC_FIELDS,
    SPEC_FIELDS,
    STRING_SPEC_FIELDS,
    MetricDefinition,
    parse_spec,
)
from client_sdk.wire.spec import DISTRIBUTION_SPEC_FIELDS

__all__ = [
    "APP_BUDGET_FIELDS",
    "APP_FIELDS",
    "AppBudget",
    "MetricEntry",
    "RegistryFile",
    "allowed_fields",
    "parse_registry",
    "read_registry",
]

APP_FIELDS = ("name", "description", "owners", "budget", "device_caps")
"""What the ``[app]`` table may hold."""

APP_BUDGET_FIELDS = (
    "epsilon_per_day",
    "epsilon_per_period",
    "period",
    "epsilon_lifetime",
    "delta",
    "accountant",
)
"""What ``[app.budget]`` may hold; ``accountant`` is ``basic`` (default) or ``advanced``
(the budget then holds ε′ at ``delta``)."""

ACCOUNTANTS = ("basic", "advanced")

TOP_LEVEL = ("app", "metrics")


@dataclass(frozen=True)
class AppBudget:
    """The most one device may reveal across every metric (None: not declared)."""

    epsilon_per_day: float | None = None
    epsilon_per_period: float | None = None
    period: str = "week"
    epsilon_lifetime: float | None = None
    delta: float | None = None
    accountant: str = "basic"

    def limit(self, window: str) -> float | None:
        """The declared budget of ``day``, the period's window, or ``lifetime``."""
        if window == "day":
            return self.epsilon_per_day
        if window == "lifetime":
            return self.epsilon_lifetime
        return self.epsilon_per_period if window == self.period else None


@dataclass
class MetricEntry:
    """One metric's table: its spec resolved (None: the spec is refused, ``problems``
    say why), its governance fields, and where it is in the file."""

    name: str
    table: Mapping[str, Any]
    line: int
    definition: MetricDefinition | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def owners(self) -> list[str]:
        """The owners as declared, a single string taken as one."""
        owners = self.table.get("owners", [])
        return [owners] if isinstance(owners, str) else list(owners or [])

    @property
    def expires(self) -> date | str | None:
        """A date, ``"never"``, or whatever else was written (lint says what is wrong)."""
        value = self.table.get("expires")
        if isinstance(value, str) and re.fullmatch(r"\d{4}-\d\d-\d\d", value):
            try:
                return date.fromisoformat(value)
            except ValueError:
                return value
        return value

    @property
    def expiry_date(self) -> date | None:
        """The expiry as a date (None: never, missing or invalid)."""
        value = self.expires
        return value if isinstance(value, date) else None


@dataclass
class RegistryFile:
    """A registry read from ``path``: the app's table, each metric, and line lookups."""

    path: str
    app: Mapping[str, Any]
    entries: list[MetricEntry]
    top_level: Mapping[str, Any]
    lines: list[str]
    budget: AppBudget | None = None
    caps: DeviceCaps | None = None
    problems: list[tuple[int, str, str]] = field(default_factory=list)
    """Problems of the ``[app]`` table: (line, rule, message)."""
    _header_lines: dict[str, int] | None = field(default=None, repr=False)

    def table_line(self, table: str) -> int:
        """The line of a table's header (``app`` or a metric's name), else 1."""
        if self._header_lines is None:
            self._header_lines = _headers(self.lines)
        return self._header_lines.get(table, 0) + 1

    def line_of(self, key: str, table: str | None = None) -> int:
        """The line of ``key`` (in the metric or app ``table`` when given), else the
        table's, else 1."""
        start = 0
        if table is not None:
            if self._header_lines is None:
                self._header_lines = _headers(self.lines)
            start = self._header_lines.get(table, -1)
            if start < 0:
                return 1
        for number in range(start, len(self.lines)):
            line = self.lines[number]
            if number > start and _is_other_table(line, table):
                break
            if re.match(rf'^\s*"?{re.escape(key)}"?\s*[=:]', line):
                return number + 1
        return start + 1 if table is not None else 1


_HEADER = re.compile(
    r'^\s*(?:\[(?:metrics\.(?:"(?P<quoted>[^"]+)"|(?P<bare>[^\].\s"]+))|(?P<app>app))\]'
    r'|"(?P<json>[^"]+)"\s*:)'
)
"""A TOML ``[metrics."name"]``, ``[metrics.name]`` or ``[app]`` header, or a JSON key."""


def _headers(lines: list[str]) -> dict[str, int]:
    """Each table's first header line (0-based), in one pass: ``app`` and metric names
    (a JSON key counts too; the first occurrence wins, as a table's header comes first)."""
    found: dict[str, int] = {}
    for number, line in enumerate(lines):
        match = _HEADER.match(line)
        if match:
            name = match.group("quoted") or match.group("bare") or match.group("app")
            found.setdefault(name or match.group("json"), number)
    return found


def _is_other_table(line: str, table: str | None) -> bool:
    """Whether ``line`` starts a TOML table other than ``table`` and its subtables."""
    header = re.match(r"^\s*\[(?!\[)([^\]]+)\]", line)
    if not header:
        return False
    name = header.group(1).replace('"', "")
    mine = "app" if table == "app" else f"metrics.{table}"
    return not (name == mine or name.startswith(mine + "."))


def _number(value: object) -> float:
    """A positive finite number of the budget, else ValueError."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be a positive number")
    if not 0 < value < math.inf:
        raise ValueError("must be a positive number")
    return float(value)


_BUDGET_CHOICES = {"period": BUDGET_PERIODS, "accountant": ACCOUNTANTS}
"""The ``[app.budget]`` fields that name one of a few words; the others are numbers."""


def _budget_value(key: str, value: object) -> Any:
    """``[app.budget]``'s ``key`` as the budget holds it, else ValueError."""
    choices = _BUDGET_CHOICES.get(key)
    if choices is not None:
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return value
    number = _number(value)
    if key == "delta" and not number < 1:
        raise ValueError("must be in (0, 1)")
    return number


def _app_budget(data: object, where: RegistryFile) -> AppBudget | None:
    if data is None:
        return None
    if not isinstance(data, Mapping):
        where.problems.append((where.line_of("budget", "app"), "app", "app.budget must be a table"))
        return None
    values: dict[str, Any] = {}
    for key, value in data.items():
        line = where.line_of(key, "app")
        if key not in APP_BUDGET_FIELDS:
            where.problems.append(
                (
                    line,
                    "unknown-field",
                    f"app.budget.{key} is not a field; allowed: {', '.join(APP_BUDGET_FIELDS)}",
                )
            )
            continue
        try:
            values[key] = _budget_value(key, value)
        except ValueError as exc:
            where.problems.append((line, "app", f"app.budget.{key} {exc}, got {value!r}"))
    budget = AppBudget(**values)
    if budget.accountant == "advanced" and budget.delta is None:
        where.problems.append(
            (
                where.line_of("accountant", "app"),
                "app",
                'accountant = "advanced" needs a delta (e.g. delta = 1e-9): its ε′ holds with δ',
            )
        )
        budget = AppBudget(**{**values, "accountant": "basic"})
    return budget


def allowed_fields(table: Mapping[str, Any]) -> set[str]:
    """Every key a metric table of its kind may hold."""
    kind = table.get("kind", "categorical")
    if kind == "distribution" or (kind == "numeric" and "distribution" in table):
        fields = DISTRIBUTION_SPEC_FIELDS
    else:
        fields = {
            "categorical": SPEC_FIELDS,
            "numeric": NUMERIC_SPEC_FIELDS,
            "string": STRING_SPEC_FIELDS,
            "joint": JOINT_SPEC_FIELDS,
        }.get(kind, SPEC_FIELDS)
    return {*fields, *GOVERNANCE_FIELDS, "version"}


def read_registry(path: str | Path) -> RegistryFile:
    """Read a registry (TOML when its name ends in ``.toml``, JSON otherwise).

    Raises:
        ValueError: the file cannot be read or is not a registry at all.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read metrics file {path}: {exc}") from None
    return parse_registry(text, str(path))


def parse_registry(text: str, path: str) -> RegistryFile:
    """A registry from its text (``path``: its name; TOML when it ends in ``.toml``).

    Every metric's spec is resolved as the server would; a refused spec is kept with its
    problems, so lint reports every metric at once.

    Raises:
        ValueError: not TOML or JSON, or not a registry at all.
    """
    toml = path.endswith(".toml")
    top = load_text(text, toml, path)
    if isinstance(top, dict) and "app" in top and "metrics" not in top:
        raise ValueError(
            f"{path}: a registry keeps its metrics in a metrics table beside [app] "
            '([metrics."name"] tables; none yet: an empty [metrics] table)'
        )
    metrics = metrics_of(top, toml, path)
    app = top.get("app", {})
    registry = RegistryFile(
        path, app if isinstance(app, Mapping) else {}, [], top, text.splitlines()
    )
    if not isinstance(app, Mapping):
        registry.problems.append((registry.line_of("app"), "app", "app must be a table"))
    registry.budget = _app_budget(registry.app.get("budget"), registry)
    try:
        registry.caps = DeviceCaps.parse(registry.app.get("device_caps"), "app.device_caps")
    except ValueError as exc:
        registry.problems.append((registry.line_of("device_caps", "app"), "app", str(exc)))
    registry.entries += [_entry(name, table, registry) for name, table in metrics.items()]
    return registry


def _entry(name: str, table: Mapping[str, Any], registry: RegistryFile) -> MetricEntry:
    """A metric of the registry, its spec resolved as the server would (or its problems:
    unknown keys are left for lint to name)."""
    entry = MetricEntry(name, table, registry.table_line(name))
    try:
        known = {k: v for k, v in table.items() if k in allowed_fields(table)}
        spec, version = split_version(name, known)
        entry.definition = parse_spec(name, spec, version or 1)
    except DefinitionError as exc:
        entry.problems = list(exc.problems)
    except ValueError as exc:
        entry.problems = [str(exc)]
    return entry

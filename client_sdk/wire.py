"""The wire protocol: metric definitions and reports, validated the same on both ends.

Standard library only and free of I/O. The collector validates with these functions,
the SDK builds reports with them, so the two can never disagree.

A *metric definition* (what ``GET /v1/metrics/<name>`` returns)::

    {"name": "app.theme", "version": 3, "kind": "categorical",
     "domain": ["light", "dark", "auto"], "description": "...",
     "mechanism": {"mechanism": "grr", "epsilon": 1.0, "domain_size": 3},
     "mechanism_reason": "..."}

or, for a numeric metric (a mean is estimated; values are scaled from the range to
[−1, 1] on the device, then perturbed)::

    {"name": "session.minutes", "version": 1, "kind": "numeric", "range": [0.0, 120.0],
     "mechanism": {"mechanism": "hybrid", "epsilon": 1.0}, ...}

A *report* (one item of ``POST /v1/reports``'s ``{"reports": [...]}``)::

    {"metric": "app.theme", "version": 3, "id": "<32 hex digits>", "payload": {...}}

and nothing else: no device id, no timestamp. The id is 16 fresh bytes from the
operating system's CSPRNG, used only to discard replays.
"""

from __future__ import annotations

import math
import numbers
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from client_sdk import mechanisms
from client_sdk.errors import DefinitionError, PayloadError, ReportError
from client_sdk.mechanisms import FrequencyOracle, NumericMechanism
from client_sdk.mechanisms.base import check_epsilon
from client_sdk.mechanisms.numeric import MAX_RANGE_MAGNITUDE, scale
from client_sdk.mechanisms.pram import PostRandomization
from client_sdk.mechanisms.randomness import RandomSource
from client_sdk.mechanisms.strings import (
    MAX_STRING_LENGTH,
    StringSketch,
    derived_salt,
    normalise,
    string_from_params,
)

__all__ = [
    "MAX_DESCRIPTION_LENGTH",
    "MAX_LABEL_LENGTH",
    "MAX_NAME_LENGTH",
    "MAX_RETENTION_SECONDS",
    "MAX_SHARDS",
    "MIN_RETENTION_SECONDS",
    "REPORT_FIELDS",
    "REPORT_ID_PATTERN",
    # Defined in client_sdk.errors; re-exported because the collector and the aggregator
    # import them from here.
    "DefinitionError",
    "ReportError",
    "MetricDefinition",
    "Retention",
    "build_report",
    "check_report",
    "parse_spec",
]

MAX_NAME_LENGTH = 64
"""Metric names are keys in Redis and path segments in URLs; 64 characters name anything."""

MAX_LABEL_LENGTH = 128
"""A domain label is shown on a chart axis; 128 characters is more than fits there."""

MAX_DESCRIPTION_LENGTH = 1000
"""Enough for a paragraph of what the metric measures and why."""

MAX_SHARDS = 64
"""Most stream shards of one metric version. One shard (a stream and its replay sets, one
hash slot) takes tens of thousands of reports per second; 64 spread a hot metric over
every node of any cluster this system would run on, while a read of its counts still sums
only 64 small hashes."""

NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9_.-]*")

REPORT_FIELDS = ("metric", "version", "id", "payload")

REPORT_ID_PATTERN = re.compile(r"[0-9a-f]{32}")
"""A report id: 16 random bytes as lowercase hex (the collector's replay guard keys)."""


def check_name(name: object) -> str:
    """Return ``name`` if it is a valid metric name, else raise ``ValueError``."""
    if not isinstance(name, str) or not name:
        raise ValueError("metric name must be a non-empty string")
    if len(name) > MAX_NAME_LENGTH:
        raise ValueError(f"metric name must be at most {MAX_NAME_LENGTH} characters")
    if not NAME_PATTERN.fullmatch(name):
        raise ValueError(
            f"metric name {name!r} must use only a-z, 0-9, '_', '.', '-' and start "
            "with a letter or digit"
        )
    return name


def _check_domain(domain: object, problems: list[str]) -> tuple[str, ...]:
    if not isinstance(domain, list):
        problems.append("domain must be a list of labels")
        return ()
    labels: list[str] = []
    for i, label in enumerate(domain):
        if not isinstance(label, str) or not label.strip():
            problems.append(f"domain[{i}] must be a non-empty string")
        elif len(label) > MAX_LABEL_LENGTH:
            problems.append(f"domain[{i}] is longer than {MAX_LABEL_LENGTH} characters")
        else:
            labels.append(label)
    seen: set[str] = set()
    duplicates = sorted({x for x in labels if x in seen or seen.add(x)})  # type: ignore[func-returns-value]
    if duplicates:
        problems.append(f"domain has duplicate labels: {duplicates}")
    if not 2 <= len(domain) <= mechanisms.MAX_DOMAIN_SIZE:
        problems.append(
            f"domain must have between 2 and {mechanisms.MAX_DOMAIN_SIZE} labels, got {len(domain)}"
        )
    return tuple(labels)


def _check_epsilon(epsilon: object, problems: list[str]) -> float | None:
    try:
        return check_epsilon(epsilon)
    except ValueError as exc:
        problems.append(str(exc))
        return None


def _check_longitudinal(longitudinal: object, problems: list[str]) -> float | None:
    """ε∞ of a spec's ``"longitudinal": {"permanent_epsilon": ε∞}``, None when absent."""
    if longitudinal is None:
        return None
    if not isinstance(longitudinal, dict) or set(longitudinal) != {"permanent_epsilon"}:
        problems.append('longitudinal must be {"permanent_epsilon": ε∞}')
        return None
    pe = longitudinal["permanent_epsilon"]
    if isinstance(pe, bool) or not isinstance(pe, (int, float)) or not math.isfinite(pe):
        problems.append("longitudinal.permanent_epsilon must be a finite number")
        return None
    return float(pe)


def _memoized(name: str, options: dict[str, Any], permanent: float) -> tuple[str, dict[str, Any]]:
    """The memoized form of an explicitly named mechanism, with ε∞ among its options."""
    memo = mechanisms.MEMOIZED_OF.get(name)
    if memo is None:
        raise ValueError(
            f"{name} has no memoized form; a longitudinal metric uses auto or one of "
            f"{', '.join(mechanisms.MEMOIZED_OF)}"
        )
    if options.get("permanent_epsilon", permanent) != permanent:
        raise ValueError("options.permanent_epsilon differs from longitudinal.permanent_epsilon")
    return memo, {**options, "permanent_epsilon": permanent}


SPEC_FIELDS = {
    "kind",
    "domain",
    "epsilon",
    "mechanism",
    "options",
    "description",
    "longitudinal",
    "budget",
    "shards",
    "retention",
}
"""``longitudinal``: ``{"permanent_epsilon": ε∞}`` makes a metric memoized (RAPPOR's
permanent randomized response): each report is ε-LDP, and a device's reports of an
unchanged value are together ε∞-LDP however many there are."""


BUDGET_PERIODS = ("day", "week", "month")
"""Budget periods: UTC calendar days, ISO weeks (from Monday), calendar months."""

MAX_REPORTS_PER_PERIOD = 1_000_000
"""Most reports a budget may allow per period: one every 3 s for a month. A larger
number is a typo, or no budget at all (then leave ``budget`` out)."""


def _json_integer(value: object) -> int | None:
    """``value`` as an int if JSON (and JSON Schema) takes it for an integer: 3, or 3.0
    as some encoders write it; None for anything else (booleans, fractions, strings)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _check_shards(shards: object, problems: list[str]) -> int:
    """A spec's or definition's ``shards``: an int in [1, MAX_SHARDS]; absent (or null)
    means 1."""
    if shards is None:
        return 1
    count = _json_integer(shards)
    if count is None or not 1 <= count <= MAX_SHARDS:
        problems.append(f"shards must be an integer in [1, {MAX_SHARDS}], got {shards!r}")
        return 1
    return count


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


def _check_common(spec: Mapping[str, Any], problems: list[str]) -> tuple[Any, Any, Any, Any]:
    """The keys every kind of metric shares: budget, shards, retention and description,
    each checked (problems appended); the checked values, in that order."""
    budget = _check_budget(spec.get("budget"), problems)
    shards = _check_shards(spec.get("shards"), problems)
    retention = _check_retention(spec.get("retention"), problems)
    description = spec.get("description", "")
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION_LENGTH:
        problems.append(
            f"description must be a string of at most {MAX_DESCRIPTION_LENGTH} characters"
        )
    return budget, shards, retention, description


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


MIN_RETENTION_SECONDS = 1
"""Shortest retention a metric may ask for: one second past the window's end (tests use a
few seconds; an operator who wants a window gone at once should not count it at all)."""

MAX_RETENTION_SECONDS = 100 * 366 * 86_400
"""Longest retention: a century, which is "keep it" for any deployment; a larger number
is a typo (milliseconds for seconds)."""

RETENTION_KINDS = ("hour", "day")
"""The window kinds a retention names; the all-time window is kept while the version is
live."""


@dataclass(frozen=True)
class Retention:
    """A metric's own retention: seconds its hour and day windows are kept after they end.

    Either may be None: the deployment's default then applies
    (:class:`ldp_store.retention.RetentionPolicy`). Not a decoding parameter: a change
    keeps the version, and applies to windows first written afterwards.
    """

    hour: int | None = None
    day: int | None = None

    @staticmethod
    def problem(seconds: object) -> str:
        """What is wrong with a retention in seconds, or ``""`` if nothing."""
        value = _json_integer(seconds)
        if value is None or not MIN_RETENTION_SECONDS <= value <= MAX_RETENTION_SECONDS:
            return (
                f"must be a whole number of seconds in [{MIN_RETENTION_SECONDS}, "
                f"{MAX_RETENTION_SECONDS}], got {seconds!r}"
            )
        return ""

    def to_dict(self) -> dict[str, int | None]:
        """The JSON form, as in a spec: ``{"hour": 1209600, "day": null}``."""
        return {"hour": self.hour, "day": self.day}


def _check_retention(retention: object, problems: list[str]) -> Retention | None:
    """The :class:`Retention` of a spec's or definition's ``retention`` (None when absent)."""
    if retention is None:
        return None
    if not isinstance(retention, dict) or not set(retention) <= set(RETENTION_KINDS):
        problems.append(
            'retention must be {"hour": seconds, "day": seconds} (either may be left out '
            "or null: the deployment's default)"
        )
        return None
    values: dict[str, int | None] = {}
    for kind in RETENTION_KINDS:
        raw = retention.get(kind)
        if raw is None:
            values[kind] = None
            continue
        problem = Retention.problem(raw)
        if problem:
            problems.append(f"retention.{kind} {problem}")
            return None
        values[kind] = _json_integer(raw)
    if values["hour"] is None and values["day"] is None:
        return None
    return Retention(**values)


@dataclass(frozen=True)
class MetricDefinition:
    """One version of a metric: its values and the mechanism its reports use.

    Versions are immutable: changing ε, the domain or the mechanism makes a new version,
    so a report is always decoded with the parameters it was made with.
    """

    name: str
    version: int
    domain: tuple[str, ...]
    mechanism: FrequencyOracle | NumericMechanism | StringSketch
    description: str = ""
    mechanism_reason: str = ""
    kind: str = "categorical"
    value_range: tuple[float, float] | None = None
    """[lo, hi] of a numeric metric (``kind == "numeric"``, no domain); None otherwise."""
    budget: Budget | None = None
    """The device-side budget: not a decoding parameter (see :meth:`same_parameters`)."""
    shards: int = 1
    """Stream shards of this version (1..MAX_SHARDS): the collector sends a report to
    shard ``int(id) % shards``, so a hot metric spreads over several hash slots of a
    Redis Cluster. Part of the version: a replay must reach the same shard's replay set."""
    retention: Retention | None = None
    """How long this metric's windows are kept, where it differs from the deployment's
    default: not a decoding parameter (see :meth:`same_parameters`)."""
    _index: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._index.update({label: i for i, label in enumerate(self.domain)})

    @property
    def k(self) -> int:
        """Domain size; for a string metric, the sketch's counters (what its counts hold)."""
        if isinstance(self.mechanism, StringSketch):
            return self.mechanism.counters
        return len(self.domain)

    @property
    def sketch(self) -> StringSketch:
        """The mechanism of a string metric.

        Raises:
            TypeError: the metric is not a string metric.
        """
        if not isinstance(self.mechanism, StringSketch):
            raise TypeError(f"metric {self.name!r} is {self.kind}, not string")
        return self.mechanism

    @property
    def oracle(self) -> FrequencyOracle:
        """The frequency oracle of a categorical metric.

        Raises:
            TypeError: the metric is numeric.
        """
        if not isinstance(self.mechanism, FrequencyOracle):
            raise TypeError(f"metric {self.name!r} is numeric: it has no frequency oracle")
        return self.mechanism

    @property
    def numeric(self) -> NumericMechanism:
        """The mechanism of a numeric metric.

        Raises:
            TypeError: the metric is categorical.
        """
        if not isinstance(self.mechanism, NumericMechanism):
            raise TypeError(f"metric {self.name!r} is categorical, not numeric")
        return self.mechanism

    def scaled(self, value: object) -> float:
        """A numeric metric's value, checked against its range and scaled to [−1, 1].

        Raises:
            ValueError: not a finite number within the range, or a categorical metric.
        """
        if self.value_range is None:
            raise ValueError(f"metric {self.name!r} is categorical: values are labels")
        low, high = self.value_range
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ValueError(
                f"a value of numeric metric {self.name!r} must be a number, "
                f"got {type(value).__name__}"
            )
        try:
            x = float(value)
        except OverflowError:  # an int beyond any float: outside every range
            x = math.inf
        if not low <= x <= high:  # NaN fails too
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
            bounds = f"[{_format_range_end(low)}, {_format_range_end(high)}]"
            raise ValueError(f"value {shown} is outside the range {bounds} of metric {self.name!r}")
        return scale(x, low, high)

    @property
    def longitudinal(self) -> bool:
        """Whether reports are memoized (then :func:`build_report` needs the device secret)."""
        return isinstance(self.mechanism, mechanisms.Memoized)

    def privacy_bounds(self) -> dict[str, Any]:
        """The privacy guarantees of this metric's reports, for the ledger and for people.

        Returns:
            ``per_report``: ε of one report; ``unlimited_same_value``: ε of any number of
            reports of one unchanged value (ε∞ for a longitudinal metric, else None: m
            reports cost m·ε); ``memoized``; ``explanation`` in words, with the trade-off.
        """
        if isinstance(self.mechanism, mechanisms.Memoized):
            return self.mechanism.privacy_bounds()
        eps = self.mechanism.epsilon
        return {
            "per_report": eps,
            "unlimited_same_value": None,
            "memoized": False,
            "explanation": (
                f"One report is {eps:g}-LDP; m reports cost m·{eps:g} (sequential "
                "composition), whether or not the value changes: there is no cap."
            ),
        }

    def index(self, value: str | float) -> int:
        """The index of a value given as a label or an index.

        Raises:
            ValueError: an unknown label or an index outside the domain.
        """
        if isinstance(value, str):
            try:
                return self._index[value]
            except KeyError:
                raise ValueError(f"{value!r} is not a value of metric {self.name!r}") from None
        return self.oracle.check_value(value)

    def same_parameters(self, other: MetricDefinition) -> bool:
        """Whether two definitions decode reports identically (so share a version).

        The budget is left out: it is a rule for devices, not a decoding parameter, so a
        budget change updates the current version like a description change does —
        except for a memoized metric, whose intervals rest on its budget (the most reports
        one device adds to a pool: :meth:`Budget.max_reports`).
        """
        return (
            (not self.longitudinal or self.budget == other.budget)
            and self.domain == other.domain
            and self.mechanism.params() == other.mechanism.params()
            and self.kind == other.kind
            and self.value_range == other.value_range
            and self.shards == other.shards
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form served to apps and stored in the registry."""
        data = {
            "name": self.name,
            "version": self.version,
            "kind": self.kind,
            "domain": list(self.domain),
            "description": self.description,
            "mechanism": self.mechanism.params(),
            "mechanism_reason": self.mechanism_reason,
            "budget": None if self.budget is None else self.budget.to_dict(),
            "shards": self.shards,
            "retention": None if self.retention is None else self.retention.to_dict(),
        }
        if self.value_range is not None:  # numeric: a range instead of a domain
            del data["domain"]
            data["range"] = list(self.value_range)
        if isinstance(self.mechanism, StringSketch):  # string: a length instead of a domain
            del data["domain"]
            data["max_length"] = self.mechanism.max_length
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MetricDefinition:
        """Rebuild a definition from :meth:`to_dict` (as fetched by the SDK).

        Raises:
            DefinitionError: listing every problem.
        """
        problems: list[str] = []
        try:
            name = check_name(data.get("name"))
        except ValueError as exc:
            problems.append(str(exc))
            name = ""
        version = data.get("version")
        if type(version) is not int or version < 1:
            problems.append("version must be a positive integer")
        kind = data.get("kind", "categorical")
        numeric = kind == "numeric"
        value_range = _check_range(data.get("range"), problems) if numeric else None
        if numeric and "domain" in data:
            problems.append("a numeric metric has a range, not a domain")
        if kind == "string":
            return _string_from_dict(data, problems)
        domain = () if numeric else _check_domain(data.get("domain"), problems)
        budget = _check_budget(data.get("budget"), problems)
        shards = _check_shards(data.get("shards"), problems)  # absent (older versions): 1
        retention = _check_retention(data.get("retention"), problems)
        if kind not in KINDS:
            problems.append(f"unknown metric kind {kind!r}; one of {', '.join(KINDS)}")
        params = data.get("mechanism")
        mech: FrequencyOracle | NumericMechanism | None = None
        if not isinstance(params, dict):
            problems.append("mechanism must be an object of mechanism parameters")
        else:
            try:
                mech = (mechanisms.numeric_from_params if numeric else mechanisms.from_params)(
                    params
                )
            except (ValueError, TypeError) as exc:
                problems.append(f"mechanism: {exc}")
        if isinstance(mech, FrequencyOracle) and domain and mech.domain_size != len(domain):
            problems.append(
                f"mechanism domain_size {mech.domain_size} does not match {len(domain)} labels"
            )
        if problems or mech is None:
            raise DefinitionError(problems or ["invalid definition"])
        assert isinstance(version, int)
        return cls(
            name=name,
            version=version,
            domain=domain,
            mechanism=mech,
            description=str(data.get("description", "")),
            # a pram metric stored before pram had a reason gets it here
            mechanism_reason=str(data.get("mechanism_reason", ""))
            or (mech.reason() if isinstance(mech, PostRandomization) else ""),
            budget=budget,
            kind=str(kind),
            value_range=value_range,
            shards=shards,
            retention=retention,
        )


KINDS = ("categorical", "numeric", "string")
"""Metric kinds: frequencies of labels, the mean of a number within a range, or the
frequent values of a string from an unknown domain."""

NUMERIC_SPEC_FIELDS = {
    "kind",
    "range",
    "epsilon",
    "mechanism",
    "description",
    "budget",
    "shards",
    "retention",
}
"""What a numeric metric's spec holds: ``{"kind": "numeric", "range": [lo, hi],
"epsilon": 1.0, "mechanism": "auto"|"duchi"|"pm"|"hybrid"}`` (no domain, no options)."""


def _format_range_end(x: float) -> str:
    """A range end as people write it: 100.0 → '100', 0.25 → '0.25'."""
    return str(int(x)) if x.is_integer() and abs(x) < 1e16 else repr(x)


def _check_range(value_range: object, problems: list[str]) -> tuple[float, float] | None:
    """A numeric metric's [lo, hi]: two finite numbers, lo < hi, within ±MAX_RANGE_MAGNITUDE."""
    if not isinstance(value_range, list | tuple) or len(value_range) != 2:
        problems.append("range must be a list [lo, hi] of two numbers")
        return None
    low, high = value_range
    if any(isinstance(x, bool) or not isinstance(x, int | float) for x in (low, high)):
        problems.append(f"range must be a list [lo, hi] of two numbers, got {value_range!r}")
        return None
    limit = MAX_RANGE_MAGNITUDE
    if not all(-limit <= x <= limit for x in (low, high)):  # refuses NaN and infinities
        problems.append(f"range ends must be finite numbers within ±{limit:g}, got {value_range!r}")
        return None
    if not low < high:
        problems.append(f"range must have lo < hi, got [{low!r}, {high!r}]")
        return None
    return float(low), float(high)


def _parse_numeric_spec(
    name: str, spec: dict[str, Any], version: int, problems: list[str]
) -> MetricDefinition:
    """:func:`parse_spec` for ``"kind": "numeric"`` (``problems`` so far: the name's)."""
    kind = spec.get("kind")
    if kind not in KINDS:
        raise DefinitionError([*problems, f"kind must be one of {', '.join(KINDS)}, got {kind!r}"])
    unknown = sorted(set(spec) - NUMERIC_SPEC_FIELDS)
    if unknown:
        problems.append(
            f"unknown fields {unknown} for a numeric metric; allowed: {sorted(NUMERIC_SPEC_FIELDS)}"
        )
    value_range = _check_range(spec.get("range"), problems)
    epsilon = _check_epsilon(spec.get("epsilon"), problems)
    mech_name = spec.get("mechanism", "auto")
    if not isinstance(mech_name, str) or mech_name not in mechanisms.NUMERIC_NAMES:
        problems.append(
            f"mechanism of a numeric metric must be one of {', '.join(mechanisms.NUMERIC_NAMES)}, "
            f"got {mech_name!r}"
        )
    budget, shards, retention, description = _check_common(spec, problems)
    if problems or epsilon is None or value_range is None:
        raise DefinitionError(problems)
    reason = ""
    if mech_name == "auto":
        choice = mechanisms.choose_numeric(epsilon)
        mech, reason = choice.mechanism, choice.reason
    else:
        mech = mechanisms.create_numeric(mech_name, epsilon)
    return MetricDefinition(
        name=name,
        version=version,
        domain=(),
        mechanism=mech,
        description=description,
        mechanism_reason=reason,
        budget=budget,
        kind="numeric",
        value_range=value_range,
        shards=shards,
        retention=retention,
    )


_PRAM_EPSILON_UNSET = math.inf
"""A pram spec without ``epsilon``: ε is then the one its matrix realises."""


def parse_spec(name: str, spec: object, version: int = 1) -> MetricDefinition:
    """Validate what an operator sends to create or change a metric.

    ``spec`` is ``{"domain": [...], "epsilon": 1.0, "mechanism": "auto",
    "options": {...}, "description": "..."}``; ``mechanism`` defaults to ``auto``,
    which is resolved here and stored resolved, with the reason. ``"longitudinal":
    {"permanent_epsilon": ε∞}`` resolves to the memoized form (``grr`` → ``memo-grr``,
    ``auto`` → the best of the memo-* mechanisms); naming a memo-* mechanism with the
    option ``permanent_epsilon`` does the same. A numeric metric's spec is
    ``{"kind": "numeric", "range": [lo, hi], "epsilon": 1.0, "mechanism": "auto"}``
    (``auto``, ``duchi``, ``pm`` or ``hybrid``; see :data:`NUMERIC_SPEC_FIELDS`).
    Either kind takes ``"shards": N`` (1..:data:`MAX_SHARDS`, default 1): how many
    streams the version's reports spread over (a hot metric on a Redis Cluster), and
    ``"retention": {"hour": s, "day": s}``: seconds its hour and day windows are kept
    after they end, where they differ from the deployment's defaults. ``"mechanism":
    "pram"`` takes ``"options": {"matrix": [[...], ...]}`` (k×k, rows the true value) and
    reads ε off the matrix; ``epsilon`` may then be left out (given, it is a ceiling).

    Raises:
        DefinitionError: listing every problem found.
    """
    problems: list[str] = []
    try:
        check_name(name)
    except ValueError as exc:
        problems.append(str(exc))
    if not isinstance(spec, dict):
        raise DefinitionError([*problems, "the body must be a JSON object"])
    if spec.get("kind") == "string":
        return _parse_string_spec(name, spec, version, problems)
    if spec.get("kind", "categorical") != "categorical":
        return _parse_numeric_spec(name, spec, version, problems)
    unknown = sorted(set(spec) - SPEC_FIELDS)
    if unknown:
        problems.append(f"unknown fields {unknown}; allowed: {sorted(SPEC_FIELDS)}")
    domain = _check_domain(spec.get("domain"), problems)
    mech_name = spec.get("mechanism", "auto")
    # pram reads ε off its matrix: a given epsilon is only a ceiling (_pram_epsilon).
    if mech_name == "pram" and spec.get("epsilon") is None:
        epsilon: float | None = _PRAM_EPSILON_UNSET
    else:
        epsilon = _check_epsilon(spec.get("epsilon"), problems)
    permanent = _check_longitudinal(spec.get("longitudinal"), problems)
    if not isinstance(mech_name, str) or mech_name not in mechanisms.NAMES:
        problems.append(
            f"mechanism must be one of {', '.join(mechanisms.NAMES)}, got {mech_name!r}"
        )
    options = spec.get("options", {})
    if not isinstance(options, dict):
        problems.append("options must be an object")
    budget, shards, retention, description = _check_common(spec, problems)
    if problems or epsilon is None:
        raise DefinitionError(problems)
    reason = ""
    try:
        if mech_name == "auto":
            if options:
                raise ValueError("auto takes no options")
            choice = mechanisms.choose(epsilon, len(domain), permanent)
            mech, reason = choice.mechanism, choice.reason
        else:
            if permanent is not None:
                mech_name, options = _memoized(mech_name, options, permanent)
            declared = None if epsilon is _PRAM_EPSILON_UNSET else epsilon
            mech = mechanisms.create(
                mech_name, epsilon=declared, domain_size=len(domain), **options
            )
            if isinstance(mech, PostRandomization):  # ε comes from the matrix: say how
                reason = mech.reason(declared)
    except (ValueError, TypeError) as exc:
        raise DefinitionError([f"mechanism: {exc}"]) from None
    if isinstance(mech, mechanisms.Memoized) and budget is None:
        raise DefinitionError(
            [
                "a memoized (longitudinal) metric needs a budget, e.g. "
                '"budget": {"reports_per_period": 1, "period": "day"}: a device\'s repeated '
                "reports share one permanent response, and the intervals need to know how "
                "many of them one device can send"
            ]
        )
    return MetricDefinition(
        name=name,
        version=version,
        domain=domain,
        mechanism=mech,
        description=description,
        mechanism_reason=reason,
        budget=budget,
        shards=shards,
        retention=retention,
    )


def new_report_id() -> str:
    """16 fresh bytes from the OS CSPRNG, as 32 hex digits; never derived from a device."""
    return secrets.token_hex(16)


def build_report(
    definition: MetricDefinition,
    value: str | float,
    rng: RandomSource | None = None,
    secret: bytes | None = None,
) -> dict[str, Any]:
    """Perturb ``value`` and wrap it as the exact JSON object sent in ``{"reports": [...]}``.

    Args:
        definition: the metric version.
        value: a label of its domain, or its index; for a numeric metric, a number
            within its range (scaled to [−1, 1] here, then perturbed).
        rng: the perturbation's randomness; default: the CSPRNG.
        secret: the device's secret (``mechanisms.new_secret()``, kept on the device).
            Required for a longitudinal metric: its permanent response is derived from
            it and (metric, version, value); ignored otherwise.

    Raises:
        ValueError: ``value`` is not in the metric's domain (numeric: "outside the
            range [lo, hi]"), or a longitudinal metric
            without (or with an invalid) ``secret``.
    """
    if isinstance(definition.mechanism, StringSketch):
        return {
            "metric": definition.name,
            "version": definition.version,
            "id": new_report_id(),
            "payload": definition.mechanism.perturb(normalise_value(definition, value), rng),
        }
    if isinstance(definition.mechanism, NumericMechanism):
        return {
            "metric": definition.name,
            "version": definition.version,
            "id": new_report_id(),
            "payload": definition.mechanism.perturb(definition.scaled(value), rng),
        }
    mech, index = definition.mechanism, definition.index(value)
    if isinstance(mech, mechanisms.Memoized):
        if secret is None:
            raise ValueError(f"metric {definition.name!r} is longitudinal: it needs the secret")
        payload = mech.perturb_memoized(index, secret, definition.name, definition.version, rng)
    else:
        payload = mech.perturb(index, rng)
    return {
        "metric": definition.name,
        "version": definition.version,
        "id": new_report_id(),
        "payload": payload,
    }


def check_report(
    report: object, lookup: Callable[[str, int], MetricDefinition | None]
) -> tuple[MetricDefinition, str, dict[str, Any]]:
    """Validate a report strictly against its metric version.

    Args:
        report: one decoded JSON item of ``reports``.
        lookup: returns the definition of (name, version), or None if unknown.

    Returns:
        (definition, report id, canonical payload).

    Raises:
        ReportError: what is wrong, in words an app developer can act on.
    """
    if not isinstance(report, dict):
        raise ReportError(f"a report must be an object with fields {list(REPORT_FIELDS)}")
    keys = set(report)
    if keys != set(REPORT_FIELDS):
        missing = sorted(set(REPORT_FIELDS) - keys)
        extra = sorted(str(k) for k in keys - set(REPORT_FIELDS))
        parts = ([f"missing {missing}"] if missing else []) + (
            [f"unknown fields {extra}"] if extra else []
        )
        raise ReportError("; ".join(parts) + f" (a report has exactly {list(REPORT_FIELDS)})")
    name, version, rid = report["metric"], report["version"], report["id"]
    if not isinstance(name, str) or not name:
        raise ReportError("'metric' must be a metric name")
    if type(version) is not int or version < 1:
        raise ReportError("'version' must be a positive integer")
    if not isinstance(rid, str) or not REPORT_ID_PATTERN.fullmatch(rid):
        raise ReportError("'id' must be 32 lowercase hex digits (16 random bytes)")
    definition = lookup(name, version) if len(name) <= MAX_NAME_LENGTH else None
    if definition is None:
        raise ReportError(f"unknown metric {name[:MAX_NAME_LENGTH]!r} version {version}")
    try:
        payload = definition.mechanism.check_payload(report["payload"])
    except PayloadError as exc:
        raise ReportError(str(exc)) from None
    return definition, rid, payload


# -- string metrics (kind "string") -----------------------------------------------------

STRING_SPEC_FIELDS = {
    "kind",
    "max_length",
    "epsilon",
    "options",
    "description",
    "budget",
    "shards",
    "retention",
}
"""What a string metric's spec holds: ``{"kind": "string", "max_length": 16, "epsilon":
4.0}``, optionally ``"options": {"rows": h, "cells": m, "salt": "<hex>"}`` (the sketch's
shape; see :class:`~client_sdk.mechanisms.strings.StringSketch`), and budget, shards,
retention and description as for other kinds. No domain: values are discovered."""

STRING_OPTIONS = ("rows", "cells", "salt")
"""The sketch options a spec may set; the salt defaults to one derived from the name."""


def _string_mechanism(
    name: str, epsilon: object, max_length: object, options: object, problems: list[str]
) -> StringSketch | None:
    eps = _check_epsilon(epsilon, problems)
    length = _json_integer(max_length)
    if length is None or not 1 <= length <= MAX_STRING_LENGTH:
        problems.append(
            f"max_length must be an integer number of bytes in [1, {MAX_STRING_LENGTH}], "
            f"got {max_length!r}"
        )
    if options is None:
        options = {}
    if not isinstance(options, dict) or not set(options) <= set(STRING_OPTIONS):
        problems.append(f"options of a string metric may hold only {list(STRING_OPTIONS)}")
        return None
    options = dict(options)
    for key, low, high in (("rows", 1, 256), ("cells", 2, 1 << 16)):
        if key in options:  # 0 means "from ε" inside the mechanism, never in a spec
            value = _json_integer(options[key])
            if value is None or not low <= value <= high:
                problems.append(f"options.{key} must be an integer in [{low}, {high}]")
            options[key] = value
    if eps is None or length is None or problems:
        return None
    try:
        return StringSketch(
            epsilon=eps, max_length=length, **{"salt": derived_salt(name), **options}
        )
    except (ValueError, TypeError) as exc:
        problems.append(f"mechanism: {exc}")
        return None


def _parse_string_spec(
    name: str, spec: dict[str, Any], version: int, problems: list[str]
) -> MetricDefinition:
    """:func:`parse_spec` for ``"kind": "string"`` (``problems`` so far: the name's)."""
    unknown = sorted(set(spec) - STRING_SPEC_FIELDS)
    if unknown:
        problems.append(
            f"unknown fields {unknown} for a string metric; allowed: {sorted(STRING_SPEC_FIELDS)}"
        )
    budget, shards, retention, description = _check_common(spec, problems)
    if "options" in spec and not isinstance(spec["options"], dict):
        problems.append("options of a string metric must be an object (leave it out for none)")
    mech = _string_mechanism(
        name, spec.get("epsilon"), spec.get("max_length"), spec.get("options", {}), problems
    )
    if problems or mech is None:
        raise DefinitionError(problems or ["invalid string metric"])
    return MetricDefinition(
        name=name,
        version=version,
        domain=(),
        mechanism=mech,
        description=str(description),
        mechanism_reason=(
            f"string values: one of {mech.levels} prefix levels × {mech.rows} hash rows per "
            f"report, its cell through {mech.inner.name} over {mech.cells} cells at ε = "
            f"{mech.epsilon:g}"
        ),
        budget=budget,
        kind="string",
        shards=shards,
        retention=retention,
    )


def _string_from_dict(data: Mapping[str, Any], problems: list[str]) -> MetricDefinition:
    """:meth:`MetricDefinition.from_dict` of a string metric (``problems``: so far)."""
    if "domain" in data or "range" in data:
        problems.append("a string metric has a max_length, not a domain or range")
    budget = _check_budget(data.get("budget"), problems)
    shards = _check_shards(data.get("shards"), problems)
    retention = _check_retention(data.get("retention"), problems)
    params = data.get("mechanism")
    mech: StringSketch | None = None
    try:
        if not isinstance(params, dict):
            raise ValueError("mechanism must be an object of mechanism parameters")
        mech = string_from_params(params)
    except (ValueError, TypeError) as exc:
        problems.append(f"mechanism: {exc}")
    if mech is not None and data.get("max_length") != mech.max_length:
        problems.append("max_length differs from the mechanism's")
    version = data.get("version")
    if problems or mech is None or type(version) is not int:
        raise DefinitionError(problems or ["invalid definition"])
    return MetricDefinition(
        name=str(data.get("name")),
        version=version,
        domain=(),
        mechanism=mech,
        description=str(data.get("description", "")),
        mechanism_reason=str(data.get("mechanism_reason", "")),
        budget=budget,
        kind="string",
        shards=shards,
        retention=retention,
    )


def normalise_value(definition: MetricDefinition, value: object) -> bytes:
    """A string metric's value as the padded bytes its report is about.

    Raises:
        ValueError: not a str, or one holding NUL (see
            :func:`client_sdk.mechanisms.strings.normalise`).
    """
    return normalise(value, definition.sketch.max_length)  # type: ignore[arg-type]

"""The wire protocol: metric definitions and reports, validated the same on both ends.

Standard library only and free of I/O. The collector validates with these functions,
the SDK builds reports with them, so the two can never disagree.

A *metric definition* (what ``GET /v1/metrics/<name>`` returns)::

    {"name": "app.theme", "version": 3, "kind": "categorical",
     "domain": ["light", "dark", "auto"], "description": "...",
     "mechanism": {"mechanism": "grr", "epsilon": 1.0, "domain_size": 3},
     "mechanism_reason": "..."}

A *report* (one item of ``POST /v1/reports``'s ``{"reports": [...]}``)::

    {"metric": "app.theme", "version": 3, "id": "<32 hex digits>", "payload": {...}}

and nothing else: no device id, no timestamp. The id is 16 fresh bytes from the
operating system's CSPRNG, used only to discard replays.
"""

from __future__ import annotations

import math
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from client_sdk import mechanisms
from client_sdk.mechanisms import FrequencyOracle, PayloadError
from client_sdk.mechanisms._random import RandomSource

__all__ = [
    "MAX_DESCRIPTION_LENGTH",
    "MAX_LABEL_LENGTH",
    "MAX_NAME_LENGTH",
    "REPORT_FIELDS",
    "DefinitionError",
    "MetricDefinition",
    "ReportError",
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

NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9_.-]*")

REPORT_FIELDS = ("metric", "version", "id", "payload")

_ID_PATTERN = re.compile(r"[0-9a-f]{32}")


class DefinitionError(ValueError):
    """A metric definition or specification with problems, all of them listed."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)


class ReportError(ValueError):
    """A report that will never be valid (the client should drop it, not retry)."""


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
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)):
        problems.append("epsilon must be a number")
        return None
    if not math.isfinite(epsilon) or not (
        mechanisms.MIN_EPSILON <= epsilon <= mechanisms.MAX_EPSILON
    ):
        problems.append(
            f"epsilon must be finite and in [{mechanisms.MIN_EPSILON}, {mechanisms.MAX_EPSILON}], "
            f"got {epsilon!r}"
        )
        return None
    return float(epsilon)


SPEC_FIELDS = {"domain", "epsilon", "mechanism", "options", "description"}


@dataclass(frozen=True)
class MetricDefinition:
    """One version of a metric: its values and the mechanism its reports use.

    Versions are immutable: changing ε, the domain or the mechanism makes a new version,
    so a report is always decoded with the parameters it was made with.
    """

    name: str
    version: int
    domain: tuple[str, ...]
    mechanism: FrequencyOracle
    description: str = ""
    mechanism_reason: str = ""
    kind: str = "categorical"
    _index: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._index.update({label: i for i, label in enumerate(self.domain)})

    @property
    def k(self) -> int:
        """Domain size."""
        return len(self.domain)

    def index(self, value: str | int) -> int:
        """The index of a value given as a label or an index.

        Raises:
            ValueError: an unknown label or an index outside the domain.
        """
        if isinstance(value, str):
            try:
                return self._index[value]
            except KeyError:
                raise ValueError(f"{value!r} is not a value of metric {self.name!r}") from None
        return self.mechanism.check_value(value)

    def same_parameters(self, other: MetricDefinition) -> bool:
        """Whether two definitions decode reports identically (so share a version)."""
        return (
            self.domain == other.domain
            and self.mechanism.params() == other.mechanism.params()
            and self.kind == other.kind
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form served to apps and stored in the registry."""
        return {
            "name": self.name,
            "version": self.version,
            "kind": self.kind,
            "domain": list(self.domain),
            "description": self.description,
            "mechanism": self.mechanism.params(),
            "mechanism_reason": self.mechanism_reason,
        }

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
        domain = _check_domain(data.get("domain"), problems)
        if data.get("kind", "categorical") != "categorical":
            problems.append(f"unknown metric kind {data.get('kind')!r}")
        params = data.get("mechanism")
        mech: FrequencyOracle | None = None
        if not isinstance(params, dict):
            problems.append("mechanism must be an object of mechanism parameters")
        else:
            try:
                mech = mechanisms.from_params(params)
            except (ValueError, TypeError) as exc:
                problems.append(f"mechanism: {exc}")
        if mech is not None and domain and mech.domain_size != len(domain):
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
            mechanism_reason=str(data.get("mechanism_reason", "")),
        )


def parse_spec(name: str, spec: object, version: int = 1) -> MetricDefinition:
    """Validate what an operator sends to create or change a metric.

    ``spec`` is ``{"domain": [...], "epsilon": 1.0, "mechanism": "auto",
    "options": {...}, "description": "..."}``; ``mechanism`` defaults to ``auto``,
    which is resolved here and stored resolved, with the reason.

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
    unknown = sorted(set(spec) - SPEC_FIELDS)
    if unknown:
        problems.append(f"unknown fields {unknown}; allowed: {sorted(SPEC_FIELDS)}")
    domain = _check_domain(spec.get("domain"), problems)
    epsilon = _check_epsilon(spec.get("epsilon"), problems)
    mech_name = spec.get("mechanism", "auto")
    if not isinstance(mech_name, str) or mech_name not in mechanisms.NAMES:
        problems.append(
            f"mechanism must be one of {', '.join(mechanisms.NAMES)}, got {mech_name!r}"
        )
    options = spec.get("options", {})
    if not isinstance(options, dict):
        problems.append("options must be an object")
    description = spec.get("description", "")
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION_LENGTH:
        problems.append(
            f"description must be a string of at most {MAX_DESCRIPTION_LENGTH} characters"
        )
    if problems or epsilon is None:
        raise DefinitionError(problems)
    reason = ""
    try:
        if mech_name == "auto":
            if options:
                raise ValueError("auto takes no options")
            choice = mechanisms.choose(epsilon, len(domain))
            mech, reason = choice.mechanism, choice.reason
        else:
            mech = mechanisms.create(mech_name, epsilon=epsilon, domain_size=len(domain), **options)
    except (ValueError, TypeError) as exc:
        raise DefinitionError([f"mechanism: {exc}"]) from None
    return MetricDefinition(
        name=name,
        version=version,
        domain=domain,
        mechanism=mech,
        description=description,
        mechanism_reason=reason,
    )


def new_report_id() -> str:
    """16 fresh bytes from the OS CSPRNG, as 32 hex digits; never derived from a device."""
    return secrets.token_hex(16)


def build_report(
    definition: MetricDefinition, value: str | int, rng: RandomSource | None = None
) -> dict[str, Any]:
    """Perturb ``value`` and wrap it as the exact JSON object sent in ``{"reports": [...]}``.

    Raises:
        ValueError: ``value`` is not in the metric's domain.
    """
    return {
        "metric": definition.name,
        "version": definition.version,
        "id": new_report_id(),
        "payload": definition.mechanism.perturb(definition.index(value), rng),
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
    if not isinstance(rid, str) or not _ID_PATTERN.fullmatch(rid):
        raise ReportError("'id' must be 32 lowercase hex digits (16 random bytes)")
    definition = lookup(name, version) if len(name) <= MAX_NAME_LENGTH else None
    if definition is None:
        raise ReportError(f"unknown metric {name[:MAX_NAME_LENGTH]!r} version {version}")
    try:
        payload = definition.mechanism.check_payload(report["payload"])
    except PayloadError as exc:
        raise ReportError(str(exc)) from None
    return definition, rid, payload

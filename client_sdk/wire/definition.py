"""One version of a metric: :class:`MetricDefinition`, as the API carries it."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, TypeVar

from client_sdk import mechanisms
from client_sdk.errors import DefinitionError
from client_sdk.mechanisms import FrequencyOracle, NumericMechanism
from client_sdk.mechanisms.distribution import (
    DistributionMechanism,
    HaarHRR,
    HierarchicalHistogram,
    bin_of,
    distribution_from_params,
)
from client_sdk.mechanisms.joint import (
    MAX_ATTRIBUTE_SIZE,
    MAX_ATTRIBUTES,
    JointMechanism,
    joint_from_params,
)
from client_sdk.mechanisms.numeric import scale
from client_sdk.mechanisms.pram import PostRandomization
from client_sdk.mechanisms.strings import (
    MAX_STRING_LENGTH,
    StringSketch,
    derived_salt,
    string_from_params,
)
from client_sdk.wire.budget import Budget, _check_budget
from client_sdk.wire.dimensions import (
    MAX_SEGMENTED_COUNTERS,
    Dimensions,
    check_dimensions,
    check_distinct,
    name_mismatch,
    named_lists,
    segment_count,
    segment_of,
)
from client_sdk.wire.fields import (
    KINDS,
    _check_domain,
    _check_epsilon,
    _check_range,
    _format_range_end,
    _json_integer,
    check_name,
)
from client_sdk.wire.server import Retention, _check_retention, _check_shards

_M = TypeVar("_M")

AnyMechanism = (
    FrequencyOracle | NumericMechanism | StringSketch | JointMechanism | DistributionMechanism
)
"""What a definition's reports use: every kind's mechanism."""


@dataclass(frozen=True)
class MetricDefinition:
    """One version of a metric: its values and the mechanism its reports use.

    Versions are immutable: changing ε, the domain or the mechanism makes a new version,
    so a report is always decoded with the parameters it was made with.
    """

    name: str
    version: int
    domain: tuple[str, ...]
    mechanism: AnyMechanism
    description: str = ""
    mechanism_reason: str = ""
    kind: str = "categorical"
    value_range: tuple[float, float] | None = None
    """[lo, hi] of a numeric or distribution metric (no domain); None otherwise."""
    budget: Budget | None = None
    """The device-side budget: not a decoding parameter (see :meth:`same_parameters`)."""
    shards: int = 1
    """Stream shards of this version (1..MAX_SHARDS): the collector sends a report to
    shard ``int(id) % shards``, so a hot metric spreads over several hash slots of a
    Redis Cluster. Part of the version: a replay must reach the same shard's replay set."""
    retention: Retention | None = None
    """How long this metric's windows are kept, where it differs from the deployment's
    default: not a decoding parameter (see :meth:`same_parameters`)."""
    attributes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """A joint metric's attributes (``kind == "joint"``, no domain): (name, labels) each."""
    dimensions: Dimensions = ()
    """Public dimensions (:mod:`client_sdk.wire.dimensions`): (name, allowed values) each.
    Sent in the clear beside each report, NOT protected by ε. Part of the version."""
    _index: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._index.update({label: i for i, label in enumerate(self.domain)})

    @property
    def k(self) -> int:
        """Domain size; for a string or joint metric, its counters (what its counts hold)."""
        if isinstance(
            self.mechanism, StringSketch | JointMechanism | HierarchicalHistogram | HaarHRR
        ):
            return self.mechanism.counters
        return len(self.domain)

    @property
    def segments(self) -> int:
        """How many segments the public dimensions make (1: no dimensions)."""
        return segment_count(self.dimensions)

    def segment(self, given: object) -> int | None:
        """The segment index of a report's ``dimensions`` (None for a metric without).

        Raises:
            ValueError: dimensions given to a metric that declares none, or not exactly
                the declared ones with allowed values.
        """
        if not self.dimensions:
            if given is None:
                return None
            raise ValueError(f"metric {self.name!r} declares no dimensions")
        return segment_of(self.dimensions, given, self.name)

    @property
    def joint(self) -> JointMechanism:
        """The mechanism of a joint metric.

        Raises:
            TypeError: the metric is not a joint metric.
        """
        if not isinstance(self.mechanism, JointMechanism):
            raise TypeError(f"metric {self.name!r} is {self.kind}, not joint")
        return self.mechanism

    def joint_value(self, value: object) -> tuple[int, ...]:
        """A joint metric's value as attribute indices: a mapping {attribute: label}
        naming every attribute, or a sequence of labels (or indices) in attribute order.

        Raises:
            ValueError: a missing or unknown attribute, or a label not among its values.
        """
        names = [name for name, _ in self.attributes]
        if isinstance(value, Mapping):
            mismatch = name_mismatch(value, names)
            if mismatch:
                raise ValueError(
                    f"a value of joint metric {self.name!r} names the attributes {names}{mismatch}"
                )
            items = [value[name] for name in names]
        elif isinstance(value, list | tuple) and len(value) == len(names):
            items = list(value)
        else:
            raise ValueError(
                f"a value of joint metric {self.name!r} is a mapping of {names} to labels, "
                f"or {len(names)} labels in that order"
            )
        out = []
        for (name, labels), item in zip(self.attributes, items, strict=True):
            index = _label_index(labels, item)
            if index is None:
                raise ValueError(f"attribute {name!r} of metric {self.name!r} has no such value")
            out.append(index)
        return tuple(out)

    @property
    def histogram(self) -> DistributionMechanism:
        """The mechanism of a distribution metric.

        Raises:
            TypeError: the metric is not a distribution metric.
        """
        if not isinstance(self.mechanism, HierarchicalHistogram | HaarHRR):
            raise TypeError(f"metric {self.name!r} is {self.kind}, not distribution")
        return self.mechanism

    def bin(self, value: object) -> int:
        """A distribution metric's value, checked against its range, as its bin.

        Raises:
            ValueError: not a finite number within the range, or not a distribution metric.
        """
        hist = self.histogram if self.kind == "distribution" else None
        if hist is None or self.value_range is None:
            raise ValueError(f"metric {self.name!r} is {self.kind}, not distribution")
        self.scaled(value)  # the range check, with its message
        low, high = self.value_range
        return bin_of(float(value), low, high, hist.bins, hist.scale)  # type: ignore[arg-type]

    def bin_edges(self) -> list[float]:
        """The D + 1 edges of a distribution metric's bins, in the metric's units."""
        hist = self.histogram
        low, high = self.value_range or (0.0, 1.0)
        d = hist.bins
        if hist.scale == "log":
            return [low * (high / low) ** (j / d) for j in range(d)] + [high]
        return [low + (high - low) * j / d for j in range(d)] + [high]

    @property
    def sketch(self) -> StringSketch:
        """The mechanism of a string metric.

        Raises:
            TypeError: the metric is not a string metric.
        """
        return self._mechanism_as(StringSketch, f"{self.kind}, not string")

    @property
    def oracle(self) -> FrequencyOracle:
        """The frequency oracle of a categorical metric.

        Raises:
            TypeError: the metric is numeric.
        """
        return self._mechanism_as(FrequencyOracle, "numeric: it has no frequency oracle")

    @property
    def numeric(self) -> NumericMechanism:
        """The mechanism of a numeric metric.

        Raises:
            TypeError: the metric is categorical.
        """
        return self._mechanism_as(NumericMechanism, "categorical, not numeric")

    def _mechanism_as(self, kind: type[_M], otherwise: str) -> _M:
        """The mechanism if it is a ``kind``; else a TypeError: the metric is ``otherwise``."""
        if not isinstance(self.mechanism, kind):
            raise TypeError(f"metric {self.name!r} is {otherwise}")
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
            and self.attributes == other.attributes
            and self.dimensions == other.dimensions
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
        if isinstance(self.mechanism, JointMechanism):  # joint: attributes instead
            del data["domain"]
            data["attributes"] = [
                {"name": name, "domain": list(labels)} for name, labels in self.attributes
            ]
        if self.dimensions:  # absent when none: older definitions read the same
            data["dimensions"] = [
                {"name": name, "values": list(values)} for name, values in self.dimensions
            ]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MetricDefinition:
        """Rebuild a definition from :meth:`to_dict` (as fetched by the SDK).

        Raises:
            DefinitionError: listing every problem.
        """
        problems: list[str] = []
        dimensions = check_dimensions(data.get("dimensions"), problems)
        if problems:
            raise DefinitionError(problems)
        return with_dimensions(cls._from_dict(data), dimensions)

    @classmethod
    def _from_dict(cls, data: Mapping[str, Any]) -> MetricDefinition:
        problems: list[str] = []
        name, version = _identity(data, problems)
        kind = data.get("kind", "categorical")
        other = _OTHER_KINDS.get(str(kind))  # str: a kind as stored may be any JSON value
        if other is not None:
            return other(data, problems)
        numeric = kind == "numeric"
        domain, value_range = _domain_or_range(data, numeric, problems)
        common = _check_common(data, problems)  # shards absent (older versions): 1
        if kind not in KINDS:
            problems.append(f"unknown metric kind {kind!r}; one of {', '.join(KINDS)}")
        mech = _mechanism(data.get("mechanism"), numeric, domain, problems)
        if problems or mech is None:
            raise DefinitionError(problems or ["invalid definition"])
        assert isinstance(version, int)
        reason = _stored_reason(data, mech)
        return common.definition(
            name, version, mech, reason, str(kind), domain=domain, value_range=value_range
        )


def _domain_or_range(
    data: Mapping[str, Any], numeric: bool, problems: list[str]
) -> tuple[tuple[str, ...], tuple[float, float] | None]:
    """A categorical metric's domain (and no range), or a numeric one's range (and no
    domain), checked."""
    if not numeric:
        return _check_domain(data.get("domain"), problems), None
    value_range = _check_range(data.get("range"), problems)
    if "domain" in data:
        problems.append("a numeric metric has a range, not a domain")
    return (), value_range


def _stored_reason(data: Mapping[str, Any], mech: FrequencyOracle | NumericMechanism) -> str:
    """Why the mechanism was chosen, as stored; a pram metric stored before pram had a
    reason gets its own."""
    stored = str(data.get("mechanism_reason", ""))
    if stored or not isinstance(mech, PostRandomization):
        return stored
    return mech.reason()


def _label_index(labels: tuple[str, ...], item: object) -> int | None:
    """The index of ``item`` among an attribute's ``labels`` (given as a label or as an
    index), None when it is neither."""
    if isinstance(item, str) and item in labels:
        return labels.index(item)
    if type(item) is int and 0 <= item < len(labels):
        return item
    return None


def _identity(data: Mapping[str, Any], problems: list[str]) -> tuple[str, Any]:
    """The name and version of a definition as stored ("" and the value as given when
    wrong, said in ``problems``)."""
    try:
        name = check_name(data.get("name"))
    except ValueError as exc:
        problems.append(str(exc))
        name = ""
    version = data.get("version")
    if type(version) is not int or version < 1:
        problems.append("version must be a positive integer")
    return name, version


def _mechanism(
    params: object, numeric: bool, domain: tuple[str, ...], problems: list[str]
) -> FrequencyOracle | NumericMechanism | None:
    """The mechanism of a categorical or numeric metric from its parameters, matching its
    domain (None, said in ``problems``, when it cannot be built)."""
    if not isinstance(params, dict):
        problems.append("mechanism must be an object of mechanism parameters")
        return None
    try:
        mech = (mechanisms.numeric_from_params if numeric else mechanisms.from_params)(params)
    except (ValueError, TypeError) as exc:
        problems.append(f"mechanism: {exc}")
        return None
    if isinstance(mech, FrequencyOracle) and domain and mech.domain_size != len(domain):
        problems.append(
            f"mechanism domain_size {mech.domain_size} does not match {len(domain)} labels"
        )
    return mech


class _Common(NamedTuple):
    """What every kind of metric holds beside its values and mechanism, checked: the
    device budget, the stream shards, the retention and the description."""

    budget: Budget | None
    shards: int
    retention: Retention | None
    description: str

    def definition(
        self,
        name: str,
        version: int,
        mechanism: AnyMechanism,
        reason: str,
        kind: str,
        *,
        domain: tuple[str, ...] = (),
        value_range: tuple[float, float] | None = None,
        attributes: tuple[tuple[str, tuple[str, ...]], ...] = (),
    ) -> MetricDefinition:
        """The definition of a metric of ``kind`` with these settings (``domain`` for a
        categorical metric, ``value_range`` for a numeric one, ``attributes`` for a joint one)."""
        return MetricDefinition(
            name=name,
            version=version,
            domain=domain,
            mechanism=mechanism,
            description=self.description,
            mechanism_reason=reason,
            budget=self.budget,
            kind=kind,
            value_range=value_range,
            shards=self.shards,
            retention=self.retention,
            attributes=attributes,
        )


def _check_common(data: Mapping[str, Any], problems: list[str]) -> _Common:
    """The keys every kind of metric shares, in a stored definition or a spec: budget,
    shards and retention checked in that order (problems appended); the description as
    given (a spec checks it further: :func:`client_sdk.wire.spec._check_spec_common`)."""
    return _Common(
        _check_budget(data.get("budget"), problems),
        _check_shards(data.get("shards"), problems),
        _check_retention(data.get("retention"), problems),
        str(data.get("description", "")),
    )


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
    checked = _string_options({} if options is None else options, problems)
    if checked is None or eps is None or length is None or problems:
        return None
    try:
        return StringSketch(
            epsilon=eps, max_length=length, **{"salt": derived_salt(name), **checked}
        )
    except (ValueError, TypeError) as exc:
        problems.append(f"mechanism: {exc}")
        return None


def _string_options(options: object, problems: list[str]) -> dict[str, Any] | None:
    """A string spec's sketch options, their sizes checked (problems appended); None when
    it is not an object of :data:`STRING_OPTIONS`."""
    if not isinstance(options, dict) or not set(options) <= set(STRING_OPTIONS):
        problems.append(f"options of a string metric may hold only {list(STRING_OPTIONS)}")
        return None
    checked = dict(options)
    for key, low, high in (("rows", 1, 256), ("cells", 2, 1 << 16)):
        if key in checked:  # 0 means "from ε" inside the mechanism, never in a spec
            value = _json_integer(checked[key])
            if value is None or not low <= value <= high:
                problems.append(f"options.{key} must be an integer in [{low}, {high}]")
            checked[key] = value
    return checked


def _string_from_dict(data: Mapping[str, Any], problems: list[str]) -> MetricDefinition:
    """:meth:`MetricDefinition.from_dict` of a string metric (``problems``: so far)."""
    if "domain" in data or "range" in data:
        problems.append("a string metric has a max_length, not a domain or range")
    common = _check_common(data, problems)
    mech = _parse_mechanism(_string_params, data, problems)
    if mech is not None and data.get("max_length") != mech.max_length:
        problems.append("max_length differs from the mechanism's")
    return _definition(data, problems, common, mech, "string")


def _string_params(params: object) -> StringSketch:
    """A string metric's mechanism: only an object of parameters will do."""
    if not isinstance(params, dict):
        raise ValueError("mechanism must be an object of mechanism parameters")
    return string_from_params(params)


def _parse_mechanism(
    parse: Callable[[Any], _M], data: Mapping[str, Any], problems: list[str]
) -> _M | None:
    """``parse`` of ``data["mechanism"]``, or None with the reason in ``problems``."""
    try:
        return parse(data.get("mechanism"))
    except (ValueError, TypeError) as exc:
        problems.append(f"mechanism: {exc}")
        return None


def _definition(
    data: Mapping[str, Any],
    problems: list[str],
    common: _Common,
    mech: Any,
    kind: str,
    **settings: Any,
) -> MetricDefinition:
    """The definition of a string, joint or distribution metric once all its checks have
    run.

    Raises:
        DefinitionError: ``problems``, or no mechanism or integer version.
    """
    version = data.get("version")
    if problems or mech is None or type(version) is not int:
        raise DefinitionError(problems or ["invalid definition"])
    reason = str(data.get("mechanism_reason", ""))
    return common.definition(str(data.get("name")), version, mech, reason, kind, **settings)


def _check_attributes(
    attributes: object, problems: list[str]
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """A joint metric's ``[{"name": ..., "domain": [...]}, ...]``, checked."""
    if not isinstance(attributes, list) or not 2 <= len(attributes) <= MAX_ATTRIBUTES:
        problems.append(
            f'attributes must be a list of 2 to {MAX_ATTRIBUTES} {{"name": ..., "domain": [...]}}'
        )
        return ()
    out: list[tuple[str, tuple[str, ...]]] = []
    for place, name, domain in named_lists(attributes, "domain", "attributes", problems):
        before = len(problems)
        labels = _check_domain(domain, problems)
        problems[before:] = [f"{place}: {p}" for p in problems[before:]]
        if len(labels) > MAX_ATTRIBUTE_SIZE:
            problems.append(f"{place} has more than {MAX_ATTRIBUTE_SIZE} values")
        out.append((name, labels))
    check_distinct(out, "attribute", problems)
    return tuple(out)


def _joint_from_dict(data: Mapping[str, Any], problems: list[str]) -> MetricDefinition:
    """:meth:`MetricDefinition.from_dict` of a joint metric (``problems``: so far)."""
    if "domain" in data or "range" in data:
        problems.append("a joint metric has attributes, not a domain or range")
    attributes = _check_attributes(data.get("attributes"), problems)
    common = _check_common(data, problems)
    mech = _parse_mechanism(joint_from_params, data, problems)
    if mech is not None and attributes and mech.sizes != tuple(len(v) for _, v in attributes):
        problems.append("the mechanism's attribute sizes differ from the attributes'")
    return _definition(data, problems, common, mech, "joint", attributes=attributes)


def check_log_range(value_range: tuple[float, float] | None, problems: list[str]) -> None:
    """A log scale needs lo > 0 (bins of log(v/lo))."""
    if value_range is not None and value_range[0] <= 0:
        problems.append(f"a log scale needs a range with lo > 0, got lo = {value_range[0]!r}")


def _distribution_from_dict(data: Mapping[str, Any], problems: list[str]) -> MetricDefinition:
    """:meth:`MetricDefinition.from_dict` of a distribution metric (``problems``: so far)."""
    if "domain" in data:
        problems.append("a distribution metric has a range, not a domain")
    value_range = _check_range(data.get("range"), problems)
    common = _check_common(data, problems)
    mech = _parse_mechanism(distribution_from_params, data, problems)
    if mech is not None and mech.scale == "log":
        check_log_range(value_range, problems)
    return _definition(data, problems, common, mech, "distribution", value_range=value_range)


_OTHER_KINDS: dict[str, Callable[[Mapping[str, Any], list[str]], MetricDefinition]] = {
    "string": _string_from_dict,
    "joint": _joint_from_dict,
    "distribution": _distribution_from_dict,
}
"""The kinds whose definition :meth:`MetricDefinition.from_dict` hands to a function of
their own (categorical and numeric are read in the method itself)."""


def with_dimensions(definition: MetricDefinition, dimensions: Dimensions) -> MetricDefinition:
    """``definition`` with public ``dimensions`` declared.

    Raises:
        DefinitionError: a string or joint metric, or one with more counters than
            :data:`~client_sdk.wire.dimensions.MAX_SEGMENTED_COUNTERS`.
    """
    if not dimensions:
        return definition
    if definition.kind == "joint":
        raise DefinitionError(
            [
                "a joint metric takes no public dimensions (yet): break it down by its "
                "attributes (?by=<attribute>), or declare the dimensions on a categorical "
                "or numeric metric"
            ]
        )
    if definition.kind == "string" or definition.k > MAX_SEGMENTED_COUNTERS:
        raise DefinitionError(
            [
                f"dimensions need a metric of at most {MAX_SEGMENTED_COUNTERS} counters "
                f"(its counts are kept per segment); this {definition.kind} metric has "
                f"{definition.k}"
            ]
        )
    return replace(definition, dimensions=dimensions, _index={})

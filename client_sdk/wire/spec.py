"""A metric spec (what an operator writes) parsed into a :class:`MetricDefinition`."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from client_sdk import mechanisms
from client_sdk.errors import DefinitionError
from client_sdk.mechanisms.distribution import (
    DISTRIBUTION_NAMES,
    MAX_BINS,
    MIN_BINS,
    SCALES,
    DistributionMechanism,
    HaarHRR,
    HierarchicalHistogram,
    choose_distribution,
)
from client_sdk.mechanisms.joint import JOINT_METHODS, choose_joint, joint_mechanism
from client_sdk.mechanisms.pram import PostRandomization
from client_sdk.wire.definition import (
    MetricDefinition,
    _check_attributes,
    _check_common,
    _Common,
    _string_mechanism,
    check_log_range,
    with_dimensions,
)
from client_sdk.wire.dimensions import check_dimensions
from client_sdk.wire.fields import (
    KINDS,
    MAX_DESCRIPTION_LENGTH,
    _check_domain,
    _check_epsilon,
    _check_longitudinal,
    _check_range,
    _json_integer,
    _memoized,
    check_name,
)

COMMON_SPEC_FIELDS = frozenset(
    {"kind", "epsilon", "dimensions", "description", "budget", "shards", "retention"}
)
"""What the spec of every kind of metric may hold (:func:`_check_spec_common` checks the
last four; ``kind`` and ``epsilon``, each kind's parser)."""

SPEC_FIELDS = {*COMMON_SPEC_FIELDS, "domain", "mechanism", "options", "longitudinal"}
"""``longitudinal``: ``{"permanent_epsilon": ε∞}`` makes a metric memoized (RAPPOR's
permanent randomized response): each report is ε-LDP, and a device's reports of an
unchanged value are together ε∞-LDP however many there are."""


def _check_spec_common(spec: Mapping[str, Any], problems: list[str]) -> _Common:
    """The keys every kind of metric shares: budget, shards, retention and description,
    each checked (problems appended)."""
    common = _check_common(spec, problems)
    description = spec.get("description", "")
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION_LENGTH:
        problems.append(
            f"description must be a string of at most {MAX_DESCRIPTION_LENGTH} characters"
        )
    return common


def _check_fields(
    spec: Mapping[str, Any], allowed: set[str], problems: list[str], kind: str = ""
) -> None:
    """A problem for any key of ``spec`` outside ``allowed`` (the fields of a ``kind``
    metric; none named: the categorical spec's)."""
    unknown = sorted(set(spec) - allowed)
    if unknown:
        of = f" for a {kind} metric" if kind else ""
        problems.append(f"unknown fields {unknown}{of}; allowed: {sorted(allowed)}")


def _check_mechanism(
    spec: Mapping[str, Any], names: tuple[str, ...], kind: str, problems: list[str]
) -> Any:
    """``spec["mechanism"]`` (``auto`` when absent) of a ``kind`` metric: a problem unless
    one of ``names``; returned as given."""
    name = spec.get("mechanism", "auto")
    if not isinstance(name, str) or name not in names:
        problems.append(
            f"mechanism of a {kind} metric must be one of {', '.join(names)}, got {name!r}"
        )
    return name


NUMERIC_SPEC_FIELDS = {*COMMON_SPEC_FIELDS, "range", "mechanism"}
"""What a numeric metric's spec holds: ``{"kind": "numeric", "range": [lo, hi],
"epsilon": 1.0, "mechanism": "auto"|"duchi"|"pm"|"hybrid"}`` (no domain, no options)."""


def _parse_numeric_spec(
    name: str, spec: dict[str, Any], version: int, problems: list[str]
) -> MetricDefinition:
    """:func:`parse_spec` for ``"kind": "numeric"`` (``problems`` so far: the name's)."""
    kind = spec.get("kind")
    if kind not in KINDS:
        raise DefinitionError([*problems, f"kind must be one of {', '.join(KINDS)}, got {kind!r}"])
    _check_fields(spec, NUMERIC_SPEC_FIELDS, problems, "numeric")
    value_range = _check_range(spec.get("range"), problems)
    epsilon = _check_epsilon(spec.get("epsilon"), problems)
    mech_name = _check_mechanism(spec, mechanisms.NUMERIC_NAMES, "numeric", problems)
    common = _check_spec_common(spec, problems)
    if problems or epsilon is None or value_range is None:
        raise DefinitionError(problems)
    reason = ""
    if mech_name == "auto":
        choice = mechanisms.choose_numeric(epsilon)
        mech, reason = choice.mechanism, choice.reason
    else:
        mech = mechanisms.create_numeric(mech_name, epsilon)
    return common.definition(name, version, mech, reason, "numeric", value_range=value_range)


_PRAM_EPSILON_UNSET = math.inf
"""A pram spec without ``epsilon``: ε is then the one its matrix realises."""


def parse_spec(name: str, spec: object, version: int = 1) -> MetricDefinition:
    """Validate what an operator sends to create or change a metric (see
    :func:`_parse_spec`), with its public ``"dimensions": [{"name": "platform",
    "values": ["ios", "android"]}, ...]`` (:mod:`client_sdk.wire.dimensions`; not
    protected by ε).

    Raises:
        DefinitionError: listing every problem found.
    """
    problems: list[str] = []
    dimensions = (
        check_dimensions(spec.get("dimensions"), problems) if isinstance(spec, dict) else ()
    )
    try:
        definition = _parse_spec(name, spec, version)
    except DefinitionError as exc:
        raise DefinitionError([*exc.problems, *problems]) from None
    if problems:
        raise DefinitionError(problems)
    return with_dimensions(definition, dimensions)


def _categorical_mechanism(
    name: str,
    epsilon: float,
    domain_size: int,
    options: dict[str, Any],
    permanent: float | None,
) -> tuple[mechanisms.FrequencyOracle, str]:
    """A categorical metric's mechanism and why it is the one (``auto``: chosen for ε, k
    and ``permanent``; pram: how ε comes from its matrix).

    Raises:
        DefinitionError: the mechanism refuses the parameters.
    """
    reason = ""
    try:
        if name == "auto":
            if options:
                raise ValueError("auto takes no options")
            choice = mechanisms.choose(epsilon, domain_size, permanent)
            return choice.mechanism, choice.reason
        if permanent is not None:
            name, options = _memoized(name, options, permanent)
        declared = None if epsilon is _PRAM_EPSILON_UNSET else epsilon
        mech = mechanisms.create(name, epsilon=declared, domain_size=domain_size, **options)
        if isinstance(mech, PostRandomization):  # ε comes from the matrix: say how
            reason = mech.reason(declared)
    except (ValueError, TypeError) as exc:
        raise DefinitionError([f"mechanism: {exc}"]) from None
    return mech, reason


def _parse_spec(name: str, spec: object, version: int = 1) -> MetricDefinition:
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
    return _PARSERS[_parser_of(spec)](name, spec, version, problems)


def _parser_of(spec: dict[str, Any]) -> str:
    """Which :data:`_PARSERS` entry reads ``spec``: its kind, but a numeric metric asked
    for its distribution is a distribution metric, and any other kind goes to the
    numeric parser (which names it)."""
    kind = spec.get("kind", "categorical")
    if kind == "numeric" and ("distribution" in spec or spec.get("mechanism") in ("hh", "haar")):
        return "distribution"
    return kind if kind in ("categorical", "string", "joint", "distribution") else "numeric"


def _parse_categorical_spec(
    name: str, spec: dict[str, Any], version: int, problems: list[str]
) -> MetricDefinition:
    """:func:`parse_spec` for a categorical metric (``problems`` so far: the name's)."""
    _check_fields(spec, SPEC_FIELDS, problems)
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
    common = _check_spec_common(spec, problems)
    if problems or epsilon is None:
        raise DefinitionError(problems)
    mech, reason = _categorical_mechanism(mech_name, epsilon, len(domain), options, permanent)
    if isinstance(mech, mechanisms.Memoized) and common.budget is None:
        raise DefinitionError(
            [
                "a memoized (longitudinal) metric needs a budget, e.g. "
                '"budget": {"reports_per_period": 1, "period": "day"}: a device\'s repeated '
                "reports share one permanent response, and the intervals need to know how "
                "many of them one device can send"
            ]
        )
    return common.definition(name, version, mech, reason, "categorical", domain=domain)


STRING_SPEC_FIELDS = {*COMMON_SPEC_FIELDS, "max_length", "options"}
"""What a string metric's spec holds: ``{"kind": "string", "max_length": 16, "epsilon":
4.0}``, optionally ``"options": {"rows": h, "cells": m, "salt": "<hex>"}`` (the sketch's
shape; see :class:`~client_sdk.mechanisms.strings.StringSketch`), and budget, shards,
retention and description as for other kinds. No domain: values are discovered."""


def _parse_string_spec(
    name: str, spec: dict[str, Any], version: int, problems: list[str]
) -> MetricDefinition:
    """:func:`parse_spec` for ``"kind": "string"`` (``problems`` so far: the name's)."""
    _check_fields(spec, STRING_SPEC_FIELDS, problems, "string")
    common = _check_spec_common(spec, problems)
    if "options" in spec and not isinstance(spec["options"], dict):
        problems.append("options of a string metric must be an object (leave it out for none)")
    mech = _string_mechanism(
        name, spec.get("epsilon"), spec.get("max_length"), spec.get("options", {}), problems
    )
    if problems or mech is None:
        raise DefinitionError(problems or ["invalid string metric"])
    reason = (
        f"string values: one of {mech.levels} prefix levels × {mech.rows} hash rows per "
        f"report, its cell through {mech.inner.name} over {mech.cells} cells at ε = "
        f"{mech.epsilon:g}"
    )
    return common.definition(name, version, mech, reason, "string")


JOINT_SPEC_FIELDS = {*COMMON_SPEC_FIELDS, "attributes", "mechanism"}
"""What a joint metric's spec holds: ``{"kind": "joint", "attributes": [{"name": "os",
"domain": [...]}, ...], "epsilon": 2.0, "mechanism": "auto"|"joint"|"marginals"}``, and
budget, shards, retention and description as for other kinds. One report carries the
whole tuple at ε (see :mod:`client_sdk.mechanisms.joint`)."""


def _parse_joint_spec(
    name: str, spec: dict[str, Any], version: int, problems: list[str]
) -> MetricDefinition:
    """:func:`parse_spec` for ``"kind": "joint"`` (``problems`` so far: the name's)."""
    _check_fields(spec, JOINT_SPEC_FIELDS, problems, "joint")
    attributes = _check_attributes(spec.get("attributes"), problems)
    epsilon = _check_epsilon(spec.get("epsilon"), problems)
    method = _check_mechanism(spec, ("auto", *JOINT_METHODS), "joint", problems)
    common = _check_spec_common(spec, problems)
    if problems or epsilon is None:
        raise DefinitionError(problems or ["invalid joint metric"])
    sizes = tuple(len(labels) for _, labels in attributes)
    try:
        if method == "auto":
            choice = choose_joint(epsilon, sizes)
            mech, reason = choice.mechanism, choice.reason
        else:
            mech, reason = joint_mechanism(epsilon, sizes, method), ""
    except ValueError as exc:
        raise DefinitionError([f"mechanism: {exc}"]) from None
    return common.definition(name, version, mech, reason, "joint", attributes=attributes)


DISTRIBUTION_SPEC_FIELDS = {*COMMON_SPEC_FIELDS, "range", "distribution", "mechanism"}
"""What a distribution metric's spec holds: ``{"kind": "numeric", "range": [lo, hi],
"epsilon": 1.0, "distribution": {"bins": 1024, "scale": "linear"|"log"}, "mechanism":
"auto"|"hh"|"haar"}`` (``"kind": "distribution"`` the same; ``{"resolution": r}`` instead of
``bins``: the fewest power-of-two bins at most r wide, on a linear scale), and budget,
shards, retention and description as for other kinds. ``branching`` (B) may be set too
(not with ``haar``, HaarHRR, which has none); ``auto`` picks it
(:func:`~client_sdk.mechanisms.distribution.choose_distribution`)."""

DISTRIBUTION_OPTIONS = ("bins", "resolution", "scale", "branching")

DEFAULT_BINS = 1024
"""Bins when a spec names neither bins nor resolution: 0.1 % of the range per bin, a
leaf report of 172 base64 characters."""


def _check_distribution(
    options: object, value_range: tuple[float, float] | None, problems: list[str]
) -> tuple[int, str, int | None] | None:
    """``distribution``'s (bins, scale, branching or None), checked."""
    if options is None:
        options = {}
    if not isinstance(options, dict) or not set(options) <= set(DISTRIBUTION_OPTIONS):
        problems.append(
            f"distribution must be an object of at most {list(DISTRIBUTION_OPTIONS)}, "
            f'e.g. {{"bins": 1024, "scale": "log"}}'
        )
        return None
    scale = options.get("scale", "linear")
    if scale not in SCALES:
        problems.append(f"distribution.scale must be one of {', '.join(SCALES)}, got {scale!r}")
        return None
    if scale == "log":
        check_log_range(value_range, problems)
    bins = _distribution_bins(options, scale, value_range, problems)
    if bins is None:
        return None
    if "branching" not in options:
        return bins, scale, None
    branching = _json_integer(options["branching"])
    if branching is None:
        problems.append("distribution.branching must be an integer")
        return None
    return bins, scale, branching


def _distribution_bins(
    options: dict[str, Any],
    scale: str,
    value_range: tuple[float, float] | None,
    problems: list[str],
) -> int | None:
    """The bins ``distribution`` asks for (``bins``, ``resolution`` or the default), or None
    when they cannot be known."""
    if "bins" in options and "resolution" in options:
        problems.append("distribution takes bins or resolution, not both")
        return None
    if "resolution" in options:
        return _bins_of_resolution(options["resolution"], scale, value_range, problems)
    if "bins" not in options:
        return DEFAULT_BINS
    bins = _json_integer(options["bins"])
    if bins is None or bins < MIN_BINS or bins > MAX_BINS or bins & (bins - 1):
        problems.append(
            f"distribution.bins must be a power of two in [{MIN_BINS}, {MAX_BINS}], "
            f"got {options['bins']!r}"
        )
        return None
    return bins


def _bins_of_resolution(
    width: object, scale: str, value_range: tuple[float, float] | None, problems: list[str]
) -> int | None:
    """The fewest bins (a power of two) no wider than ``width`` over ``value_range``."""
    if scale == "log":
        problems.append("a log scale takes bins, not a resolution (its bins differ in width)")
        return None
    if isinstance(width, bool) or not isinstance(width, int | float) or not width > 0:
        problems.append(f"distribution.resolution must be a number > 0, got {width!r}")
        return None
    if value_range is None:
        return None
    wanted = (value_range[1] - value_range[0]) / width
    bins = MIN_BINS
    while bins < wanted and bins <= MAX_BINS:
        bins *= 2
    if bins > MAX_BINS:
        problems.append(
            f"a resolution of {width!r} needs more than {MAX_BINS} bins over the range: "
            "a coarser resolution or a log scale"
        )
        return None
    return bins


def _parse_distribution_spec(
    name: str, spec: dict[str, Any], version: int, problems: list[str]
) -> MetricDefinition:
    """:func:`parse_spec` for a numeric metric asked for its distribution."""
    _check_fields(spec, DISTRIBUTION_SPEC_FIELDS, problems, "distribution")
    value_range = _check_range(spec.get("range"), problems)
    epsilon = _check_epsilon(spec.get("epsilon"), problems)
    _check_mechanism(spec, DISTRIBUTION_NAMES, "distribution", problems)
    shape = _check_distribution(spec.get("distribution"), value_range, problems)
    common = _check_spec_common(spec, problems)
    if problems or epsilon is None or value_range is None or shape is None:
        raise DefinitionError(problems or ["invalid distribution metric"])
    _, _, branching = shape
    if spec.get("mechanism") == HaarHRR.name and branching is not None:
        raise DefinitionError(
            ["distribution.branching is the hierarchical histogram's; haar has none"]
        )
    try:
        mech, reason = _distribution_mechanism(spec.get("mechanism"), epsilon, shape)
    except ValueError as exc:
        raise DefinitionError([f"mechanism: {exc}"]) from None
    return common.definition(name, version, mech, reason, "distribution", value_range=value_range)


def _distribution_mechanism(
    named: object, epsilon: float, shape: tuple[int, str, int | None]
) -> tuple[DistributionMechanism, str]:
    """The mechanism of a distribution spec (``named``: its ``mechanism``; ``shape``: its
    bins, scale and branching) and why it was chosen ("" when the spec chose it).

    Raises:
        ValueError: the mechanism's parameters are out of range.
    """
    bins, scale, branching = shape
    if named == HaarHRR.name:
        return HaarHRR(epsilon, bins, scale), ""
    if branching is None:
        choice = choose_distribution(epsilon, bins, scale)
        return choice.mechanism, choice.reason
    return HierarchicalHistogram(epsilon, bins, branching, scale), ""


_PARSERS: dict[str, Callable[[str, dict[str, Any], int, list[str]], MetricDefinition]] = {
    "categorical": _parse_categorical_spec,
    "numeric": _parse_numeric_spec,
    "string": _parse_string_spec,
    "joint": _parse_joint_spec,
    "distribution": _parse_distribution_spec,
}
"""The parser of each kind of spec (:func:`_parser_of` says which)."""

"""A metric spec (what an operator writes) parsed into a :class:`MetricDefinition`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from client_sdk import mechanisms
from client_sdk.errors import DefinitionError
from client_sdk.mechanisms.joint import JOINT_METHODS, choose_joint, joint_mechanism
from client_sdk.mechanisms.pram import PostRandomization
from client_sdk.wire.budget import _check_budget
from client_sdk.wire.definition import (
    MetricDefinition,
    _check_attributes,
    _string_mechanism,
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
    _memoized,
    check_name,
)
from client_sdk.wire.server import _check_retention, _check_shards

SPEC_FIELDS = {
    "dimensions",
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


NUMERIC_SPEC_FIELDS = {
    "dimensions",
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
    if spec.get("kind") == "string":
        return _parse_string_spec(name, spec, version, problems)
    if spec.get("kind") == "joint":
        return _parse_joint_spec(name, spec, version, problems)
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


STRING_SPEC_FIELDS = {
    "dimensions",
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


JOINT_SPEC_FIELDS = {
    "dimensions",
    "kind",
    "attributes",
    "epsilon",
    "mechanism",
    "description",
    "budget",
    "shards",
    "retention",
}
"""What a joint metric's spec holds: ``{"kind": "joint", "attributes": [{"name": "os",
"domain": [...]}, ...], "epsilon": 2.0, "mechanism": "auto"|"joint"|"marginals"}``, and
budget, shards, retention and description as for other kinds. One report carries the
whole tuple at ε (see :mod:`client_sdk.mechanisms.joint`)."""


def _parse_joint_spec(
    name: str, spec: dict[str, Any], version: int, problems: list[str]
) -> MetricDefinition:
    """:func:`parse_spec` for ``"kind": "joint"`` (``problems`` so far: the name's)."""
    unknown = sorted(set(spec) - JOINT_SPEC_FIELDS)
    if unknown:
        problems.append(
            f"unknown fields {unknown} for a joint metric; allowed: {sorted(JOINT_SPEC_FIELDS)}"
        )
    attributes = _check_attributes(spec.get("attributes"), problems)
    epsilon = _check_epsilon(spec.get("epsilon"), problems)
    method = spec.get("mechanism", "auto")
    if method not in ("auto", *JOINT_METHODS):
        problems.append(
            f"mechanism of a joint metric must be one of auto, {', '.join(JOINT_METHODS)}, "
            f"got {method!r}"
        )
    budget, shards, retention, description = _check_common(spec, problems)
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
    return MetricDefinition(
        name=name,
        version=version,
        domain=(),
        mechanism=mech,
        description=description,
        mechanism_reason=reason,
        budget=budget,
        kind="joint",
        shards=shards,
        retention=retention,
        attributes=attributes,
    )

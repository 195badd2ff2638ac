"""Reports: built on the device, checked by the collector, with the same code."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Mapping
from typing import Any

from client_sdk import mechanisms
from client_sdk.errors import PayloadError, ReportError
from client_sdk.mechanisms import NumericMechanism
from client_sdk.mechanisms.distribution import HaarHRR, HierarchicalHistogram
from client_sdk.mechanisms.joint import JointMechanism
from client_sdk.mechanisms.randomness import RandomSource
from client_sdk.mechanisms.strings import (
    StringSketch,
    normalise,
)
from client_sdk.wire.definition import MetricDefinition
from client_sdk.wire.fields import MAX_NAME_LENGTH

REPORT_FIELDS = ("metric", "version", "id", "payload")

OPTIONAL_REPORT_FIELDS = ("dimensions",)
"""``dimensions``: a metric's public dimensions, ``{name: value}`` for every declared one
(and only for a metric that declares them): sent in the clear, NOT protected by ε."""

_FIELD_SET = frozenset(REPORT_FIELDS)
_FIELD_SET_DIMENSIONS = frozenset(REPORT_FIELDS + OPTIONAL_REPORT_FIELDS)

REPORT_ID_PATTERN = re.compile(r"[0-9a-f]{32}")
"""A report id: 16 random bytes as lowercase hex (the collector's replay guard keys)."""

_HEX_DIGITS = "0123456789abcdef"
""":data:`REPORT_ID_PATTERN`'s characters: 32 of them, none else, is its full match (a
``str.strip`` of them leaves nothing), at a third of the regex's cost a report."""


def new_report_id() -> str:
    """16 fresh bytes from the OS CSPRNG, as 32 hex digits; never derived from a device."""
    return secrets.token_hex(16)


def build_report(
    definition: MetricDefinition,
    value: object,
    rng: RandomSource | None = None,
    secret: bytes | None = None,
    dimensions: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Perturb ``value`` and wrap it as the exact JSON object sent in ``{"reports": [...]}``.

    A metric that declares public dimensions needs ``dimensions`` (its value of each; they
    go in the clear, beside the perturbed payload, and are NOT protected by ε).

    Args:
        definition: the metric version.
        value: a label of its domain, or its index; for a numeric metric, a number
            within its range (scaled to [−1, 1] here, then perturbed); for a
            distribution metric, a number within its range (its bin is perturbed); for a joint
            metric, ``{attribute: label}`` for every attribute, or the labels in order
            (:meth:`MetricDefinition.joint_value`): the whole tuple, one report at ε.
        rng: the perturbation's randomness; default: the CSPRNG.
        secret: the device's secret (``mechanisms.new_secret()``, kept on the device).
            Required for a longitudinal metric: its permanent response is derived from
            it and (metric, version, value); ignored otherwise.
        dimensions: ``{dimension: value}`` for every declared dimension (none: None).

    Raises:
        ValueError: ``value`` is not in the metric's domain (numeric: "outside the
            range [lo, hi]"), or a longitudinal metric
            without (or with an invalid) ``secret``; missing, unknown or disallowed
            dimensions (checked before anything is perturbed).
    """
    definition.segment(dimensions)  # raises before the value is touched
    report = _build(definition, value, rng, secret)
    if definition.dimensions:
        report["dimensions"] = {name: dimensions[name] for name, _ in definition.dimensions}  # type: ignore[index]
    return report


def _build(
    definition: MetricDefinition,
    value: object,
    rng: RandomSource | None,
    secret: bytes | None,
) -> dict[str, Any]:
    mech = definition.mechanism
    if isinstance(
        mech, StringSketch | JointMechanism | NumericMechanism | HierarchicalHistogram | HaarHRR
    ):
        report_id = new_report_id()  # drawn before the value is perturbed, as always
        payload = mech.perturb(_mechanism_input(definition, value), rng)
    else:
        index = definition.index(value)  # type: ignore[arg-type]
        if isinstance(mech, mechanisms.Memoized):
            if secret is None:
                raise ValueError(f"metric {definition.name!r} is longitudinal: it needs the secret")
            payload = mech.perturb_memoized(index, secret, definition.name, definition.version, rng)
        else:
            payload = mech.perturb(index, rng)
        report_id = new_report_id()
    return {
        "metric": definition.name,
        "version": definition.version,
        "id": report_id,
        "payload": payload,
    }


def _mechanism_input(definition: MetricDefinition, value: object) -> Any:
    """What a string, joint, distribution or numeric metric's mechanism perturbs: the value
    normalised, the tuple's indexes, the number's bin, or the number scaled to [−1, 1]."""
    if isinstance(definition.mechanism, StringSketch):
        return normalise_value(definition, value)
    if isinstance(definition.mechanism, JointMechanism):
        return definition.joint_value(value)
    if isinstance(definition.mechanism, HierarchicalHistogram | HaarHRR):
        return definition.bin(value)
    return definition.scaled(value)


def check_report(
    report: object, lookup: Callable[[str, int], MetricDefinition | None]
) -> tuple[MetricDefinition, str, dict[str, Any]]:
    """Validate a report strictly against its metric version.

    Args:
        report: one decoded JSON item of ``reports``.
        lookup: returns the definition of (name, version), or None if unknown.

    Returns:
        (definition, report id, canonical payload); the report's segment, when its
        metric declares dimensions, is ``definition.segment(report["dimensions"])``
        (checked here).

    Raises:
        ReportError: what is wrong, in words an app developer can act on.
    """
    if not isinstance(report, dict):
        raise ReportError(f"a report must be an object with fields {list(REPORT_FIELDS)}")
    fields = report.keys()  # a view compared with a set: no set built per report
    if fields != _FIELD_SET and fields != _FIELD_SET_DIMENSIONS:
        raise ReportError(_fields_problem(report))
    name, version, rid = _identity(report)
    definition = lookup(name, version) if len(name) <= MAX_NAME_LENGTH else None
    if definition is None:
        raise ReportError(f"unknown metric {name[:MAX_NAME_LENGTH]!r} version {version}")
    if definition.dimensions or len(fields) > len(_FIELD_SET):
        try:
            definition.segment(report.get("dimensions"))
        except ValueError as exc:
            raise ReportError(str(exc)) from None
    try:
        payload = definition.mechanism.check_payload(report["payload"])
    except PayloadError as exc:
        raise ReportError(str(exc)) from None
    return definition, rid, payload


def _identity(report: dict[str, Any]) -> tuple[str, int, str]:
    """A report's metric name, version and id, each checked.

    Raises:
        ReportError: the first that is not valid.
    """
    name, version, rid = report["metric"], report["version"], report["id"]
    if not isinstance(name, str) or not name:
        raise ReportError("'metric' must be a metric name")
    if type(version) is not int or version < 1:
        raise ReportError("'version' must be a positive integer")
    if not isinstance(rid, str) or len(rid) != 32 or rid.strip(_HEX_DIGITS):  # the pattern
        raise ReportError("'id' must be 32 lowercase hex digits (16 random bytes)")
    return name, version, rid


def _fields_problem(report: dict[Any, Any]) -> str:
    """What is missing from a report's fields, and what is not one."""
    keys = set(report) - set(OPTIONAL_REPORT_FIELDS)
    missing = sorted(set(REPORT_FIELDS) - keys)
    extra = sorted(str(k)[:64] for k in keys - set(REPORT_FIELDS))
    parts = ([f"missing {missing}"] if missing else []) + (
        [f"unknown fields {extra}"] if extra else []
    )
    return (
        "; ".join(parts)
        + f" (a report has exactly {list(REPORT_FIELDS)}, and {list(OPTIONAL_REPORT_FIELDS)}"
        " if its metric declares dimensions)"
    )


def normalise_value(definition: MetricDefinition, value: object) -> bytes:
    """A string metric's value as the padded bytes its report is about.

    Raises:
        ValueError: not a str, or one holding NUL (see
            :func:`client_sdk.mechanisms.strings.normalise`).
    """
    return normalise(value, definition.sketch.max_length)  # type: ignore[arg-type]

"""Public dimensions: coarse, non-secret labels that travel in the clear beside a report.

A metric may declare dimensions (``platform``, ``app_version``), each a name and a closed
list of allowed values. They are **not protected by ε**: the collector sees them as sent.
The product of their value counts (the metric's *segments*) is bounded by
:data:`MAX_SEGMENTS`, so a dimension cannot single a device out.

In full: ``docs/concepts/dimensions.md``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

from client_sdk.wire.fields import MAX_LABEL_LENGTH, NAME_PATTERN

MAX_SEGMENTS = 64
"""Most distinct segments (the product of the dimensions' value counts) of one metric.
A segment is seen in the clear with every report, so many segments would let the
dimensions act as a device identifier; 64 holds e.g. 3 platforms × 20 app versions, and
keeps the per-segment counts (segments × counters per window) small."""

MAX_DIMENSIONS = 4
"""Most dimensions of one metric: more would be a fingerprint rather than a breakdown."""

MAX_SEGMENTED_COUNTERS = 1023
"""Most counters (k) of a metric with dimensions: its counts per segment are kept field by
field (segments × k per window), which stays small only below the delta-blob size."""

Dimensions = tuple[tuple[str, tuple[str, ...]], ...]
"""Declared dimensions: (name, allowed values) each, in declaration order."""


def named_lists(
    items: list[object], field: str, what: str, problems: list[str]
) -> Iterator[tuple[str, str, object]]:
    """The well-formed items of ``what``, a list of ``{"name": ..., field: [...]}`` (a
    metric's dimensions, a joint metric's attributes), read lazily: for each, its place
    for messages (``what[i] (name)``), its name and its ``field``, unchecked. A problem
    is appended for any other item: not exactly those two keys, or a bad name."""
    for i, item in enumerate(items):
        if not isinstance(item, dict) or set(item) != {"name", field}:
            problems.append(f'{what}[{i}] must be {{"name": ..., "{field}": [...]}}')
            continue
        name = item["name"]
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name) or len(name) > 64:
            problems.append(
                f"{what}[{i}].name must be a name of a-z, 0-9, '_', '.', '-' (at most 64)"
            )
            continue
        yield f"{what}[{i}] ({name})", name, item[field]


def check_dimensions(dimensions: object, problems: list[str]) -> Dimensions:
    """A spec's ``[{"name": ..., "values": [...]}, ...]``, checked (problems appended)."""
    if dimensions is None:
        return ()
    if not isinstance(dimensions, list) or len(dimensions) > MAX_DIMENSIONS:
        problems.append(
            f"dimensions must be a list of at most {MAX_DIMENSIONS} "
            '{"name": ..., "values": [...]}'
        )
        return ()
    out: list[tuple[str, tuple[str, ...]]] = []
    for place, name, values in named_lists(dimensions, "values", "dimensions", problems):
        checked = _checked_values(values, place, problems)
        if checked is not None:
            out.append((name, checked))
    check_distinct(out, "dimension", problems)
    segments = segment_count(tuple(out))
    if out and segments > MAX_SEGMENTS:
        problems.append(
            f"dimensions make {segments} segments (the product of their value counts); at most "
            f"{MAX_SEGMENTS}, so that a dimension cannot become a device identifier"
        )
    return tuple(out)


def check_distinct(
    named: list[tuple[str, tuple[str, ...]]], what: str, problems: list[str]
) -> None:
    """Append a problem when two of ``named`` (a metric's dimensions, a joint metric's
    attributes: ``what``) share a name."""
    names = [name for name, _ in named]
    if len(set(names)) != len(names):
        problems.append(f"{what} names must be distinct, got {names}")


def _checked_values(values: object, place: str, problems: list[str]) -> tuple[str, ...] | None:
    """One dimension's values, or None with the problem appended."""
    if not isinstance(values, list) or not values:
        problems.append(f"{place}: values must be a non-empty list")
        return None
    if any(not isinstance(v, str) or not v.strip() or len(v) > MAX_LABEL_LENGTH for v in values):
        problems.append(
            f"{place}: values must be non-empty strings of at most {MAX_LABEL_LENGTH} characters"
        )
        return None
    if len(set(values)) != len(values):
        problems.append(f"{place} has duplicate values")
        return None
    return tuple(values)


def segment_count(dimensions: Dimensions) -> int:
    """How many segments the dimensions make (1 for none)."""
    return math.prod(len(values) for _, values in dimensions)


def name_mismatch(given: Mapping[Any, object], names: list[str]) -> str:
    """How the keys of ``given`` differ from ``names`` (a report's dimensions, a joint
    value's attributes): ``"; missing [...]; unknown [...]"``, each part only when not
    empty (unknown keys sorted, each cut to 64 characters); ``""`` when they are the same."""
    unknown = sorted(str(key)[:64] for key in given if key not in names)
    missing = [name for name in names if name not in given]
    return (f"; missing {missing}" if missing else "") + (f"; unknown {unknown}" if unknown else "")


def segment_of(dimensions: Dimensions, given: object, metric: str) -> int:
    """The segment index of a report's ``dimensions`` object (row-major over the declared
    order: the first dimension varies slowest).

    Raises:
        ValueError: not an object naming exactly the declared dimensions, or a value
            not among a dimension's allowed values.
    """
    names = [name for name, _ in dimensions]
    if given is None:
        raise ValueError(
            f"metric {metric!r} declares the dimensions {names}: a report needs "
            "'dimensions' with the value of each"
        )
    if not isinstance(given, Mapping):
        raise ValueError(
            f"'dimensions' of metric {metric!r} must be an object of {names} to their values"
        )
    mismatch = name_mismatch(given, names)
    if mismatch:
        raise ValueError(f"metric {metric!r} declares the dimensions {names}{mismatch}")
    index = 0
    for name, values in dimensions:
        value = given[name]
        if not isinstance(value, str) or value not in values:
            shown = repr(value)[:64]
            raise ValueError(
                f"dimension {name!r} of metric {metric!r} has no value {shown}; "
                f"allowed: {list(values)}"
            )
        index = index * len(values) + values.index(value)
    return index


def segment_labels(dimensions: Dimensions, index: int) -> dict[str, str]:
    """The dimension values of segment ``index`` (the inverse of :func:`segment_of`)."""
    out: dict[str, str] = {}
    for name, values in reversed(dimensions):
        index, i = divmod(index, len(values))
        out[name] = values[i]
    return dict(reversed(list(out.items())))

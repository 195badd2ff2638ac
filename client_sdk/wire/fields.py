"""A definition's fields and their checks: names, labels, ε, ε∞, ranges, kinds."""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

from client_sdk import mechanisms
from client_sdk.mechanisms.base import check_epsilon
from client_sdk.mechanisms.numeric import MAX_RANGE_MAGNITUDE

MAX_NAME_LENGTH = 64
"""Metric names are keys in Redis and path segments in URLs; 64 characters name anything."""

MAX_LABEL_LENGTH = 128
"""A domain label is shown on a chart axis; 128 characters is more than fits there."""

MAX_DESCRIPTION_LENGTH = 1000
"""Enough for a paragraph of what the metric measures and why."""


NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9_.-]*")


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
    duplicates = _repeated(labels)
    if duplicates:
        problems.append(f"domain has duplicate labels: {duplicates}")
    if not 2 <= len(domain) <= mechanisms.MAX_DOMAIN_SIZE:
        problems.append(
            f"domain must have between 2 and {mechanisms.MAX_DOMAIN_SIZE} labels, got {len(domain)}"
        )
    return tuple(labels)


def _repeated(labels: list[str]) -> list[str]:
    """The labels given more than once, sorted."""
    return sorted(label for label, count in Counter(labels).items() if count > 1)


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


KINDS = ("categorical", "numeric", "string", "joint", "distribution")
"""Metric kinds: frequencies of labels, the mean of a number within a range, the
frequent values of a string from an unknown domain, the marginals of a tuple of
categorical attributes, or the distribution of a number within a range (histogram,
ranges, CDF, quantiles)."""


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

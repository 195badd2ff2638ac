"""A check every layer makes of its settings and fields: an integer, not a bool, at
least some bound (a count, a size, a version, degrees of freedom)."""

from __future__ import annotations

from typing import TypeGuard

__all__ = ["is_count"]


def is_count(value: object, least: int = 1) -> TypeGuard[int]:
    """Whether ``value`` is an ``int`` (``True`` and ``False`` are not) of at least ``least``."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= least

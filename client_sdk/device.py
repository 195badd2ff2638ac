"""The device-wide privacy budget: a cap on the total ε a device spends over all metrics.

A metric's budget (``wire.Budget``) caps its own reports; this caps their sum, per UTC
day and over the device's lifetime (sequential composition across metrics: reports of
several metrics at ε₁, ε₂, … are together (ε₁ + ε₂ + …)-LDP). The app sets one
(``ClientOptions(device_budget={"epsilon_per_day": 4, "epsilon_lifetime": 200})``), the
collector may publish one (``GET /v1/metrics``: ``device_budget``, from
``LDP_DEVICE_EPSILON_PER_DAY`` / ``LDP_DEVICE_EPSILON_LIFETIME``); the client applies the
stricter of the two, cap by cap. A report that would take a total past its cap is refused
(``report()`` returns False; ``stats()["dropped"]["device_budget"]``).

A memoized (longitudinal) metric counts at most its ε∞ in any window: the bound it
publishes for any number of reports of an unchanged value (``privacy_bounds()``'s
``unlimited_same_value``). Like that bound, this assumes the value does not change; a
device whose value changes d times spends up to d·ε∞, which the per-report sum (also
charged, up to ε∞) does not see.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["DEVICE_BUDGET_FIELDS", "MAX_DEVICE_EPSILON", "DeviceCaps", "device_total"]

DEVICE_BUDGET_FIELDS = ("epsilon_per_day", "epsilon_lifetime")

MAX_DEVICE_EPSILON = 1e9
"""Largest cap accepted: beyond it a cap caps nothing a device could spend (a million
reports a day at ε = 20 for a century is 7·10¹¹ — no cap at all is said with null)."""


@dataclass(frozen=True)
class DeviceCaps:
    """Caps on a device's total ε: per UTC day and over its lifetime (None: no cap)."""

    epsilon_per_day: float | None = None
    epsilon_lifetime: float | None = None

    @classmethod
    def parse(cls, data: object, where: str = "device_budget") -> DeviceCaps | None:
        """A budget from its JSON form (None or ``{}`` for none).

        Raises:
            ValueError: not an object of the two fields, or a cap not a positive number.
        """
        if data is None:
            return None
        if not isinstance(data, Mapping) or not set(data) <= set(DEVICE_BUDGET_FIELDS):
            raise ValueError(
                f'{where} must be {{"epsilon_per_day": ε, "epsilon_lifetime": ε}} '
                "(either may be left out or null), got " + repr(data)[:120]
            )
        caps = {name: cls.check_cap(data.get(name), f"{where}.{name}") for name in data}
        budget = cls(**caps)
        return None if budget == cls() else budget

    @staticmethod
    def check_cap(value: object, where: str) -> float | None:
        """A cap: None, or a positive finite number up to :data:`MAX_DEVICE_EPSILON`.

        Raises:
            ValueError: anything else.
        """
        if value is None:
            return None
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or not 0 < value <= MAX_DEVICE_EPSILON
        ):
            raise ValueError(
                f"{where} must be a positive number up to {MAX_DEVICE_EPSILON:g}, got {value!r}"
            )
        return float(value)

    def to_dict(self) -> dict[str, float | None]:
        """The JSON form: ``{"epsilon_per_day": …, "epsilon_lifetime": …}``."""
        return {"epsilon_per_day": self.epsilon_per_day, "epsilon_lifetime": self.epsilon_lifetime}

    def stricter(self, other: DeviceCaps | None) -> DeviceCaps:
        """Cap by cap, the smaller of the two (a missing cap is no cap)."""
        if other is None:
            return self

        def least(a: float | None, b: float | None) -> float | None:
            return b if a is None else a if b is None else min(a, b)

        return DeviceCaps(
            least(self.epsilon_per_day, other.epsilon_per_day),
            least(self.epsilon_lifetime, other.epsilon_lifetime),
        )


def device_total(spent: Iterable[tuple[str, float]], permanent: Mapping[str, float]) -> float:
    """The device's total ε over metrics: per metric its ε in the window, a memoized one
    (``permanent``: metric → ε∞) at most ε∞ (see the module)."""
    by_metric: dict[str, float] = {}
    for metric, eps in spent:
        by_metric[metric] = by_metric.get(metric, 0.0) + eps
    return sum(min(eps, permanent.get(metric, math.inf)) for metric, eps in by_metric.items())

"""The shape every frequency oracle shares: parameters, p*/q*, variance, debiasing.

A *pure* frequency oracle (Wang, Blocki, Li, Jha 2017) is summarised by two numbers:
p* = Pr[a report supports v | the true value is v] and q* = Pr[it supports v | the
true value is not v]. Every mechanism here states its p* and q* exactly, for the very
probabilities its ``perturb`` samples with, and the server decodes all of them with the
same two formulas below, written once.

References:
    T. Wang, J. Blocki, N. Li, S. Jha. "Locally Differentially Private Protocols for
    Frequency Estimation". USENIX Security 2017, eqs. (1)-(2) and Theorem 2.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property, lru_cache
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from client_sdk.errors import PayloadError
from client_sdk.mechanisms.plausibility import Implausible
from client_sdk.mechanisms.randomness import RandomSource, default_rng
from client_sdk.mechanisms.rounding import exp

__all__ = [
    "MAX_DOMAIN_SIZE",
    "MAX_EPSILON",
    "MIN_EPSILON",
    "check_epsilon",
    "compact_size",
    "fields_of",
    "sequential_bounds",
    "WireSized",
    "FrequencyOracle",
    "OneValueReport",
    "epsilon_for_ratio",
    "exp_epsilon",
    "shade_down",
]

MIN_EPSILON = 1e-4
"""Below this, p* − q* is within a few thousand ulps of 0 and no population is large
enough to estimate anything (Var* ≈ 4/ε² ≥ 4·10⁸ per report)."""

MAX_EPSILON = 20.0
"""Above this the noise is gone in all but name (q* < 2·10⁻⁹ at k = 2): refuse rather
than pretend."""

MAX_DOMAIN_SIZE = 65_536
"""Unary reports are k bits (8 KiB at this size on the wire) and a subset-selection
report lists up to k/2 values; larger domains belong in a hierarchy or a sketch."""

_SAFETY = 1.0 - 1e-12
"""Sampling probabilities are built from e^ε·(1 − 10⁻¹²) so that float rounding can never
push the realised likelihood ratio above e^ε; the cost in variance is 10⁻¹² relative."""


def compact_size(payload: dict[str, Any]) -> int:
    """Bytes of ``payload`` as compact JSON: its size on the wire (a mechanism's
    ``wire_bytes`` is that of its largest payload)."""
    return len(json.dumps(payload, separators=(",", ":")))


def fields_of(obj: object, *names: str) -> dict[str, Any]:
    """``{name: obj.name}`` for each of ``names``, in that order: the plain-dict form of
    an object's parameters (``params()``, ``to_dict()``)."""
    return {name: getattr(obj, name) for name in names}


def sequential_bounds(epsilon: float, explanation: str = "") -> dict[str, Any]:
    """``privacy_bounds()`` of a mechanism that memoizes nothing: each report costs ε."""
    return {
        "per_report": epsilon,
        "unlimited_same_value": None,
        "memoized": False,
        "explanation": explanation
        or (
            f"One report is {epsilon:g}-LDP; m reports cost m·{epsilon:g} "
            "(sequential composition), whether or not the value changes: there is no cap."
        ),
    }


class WireSized:
    """The size on the wire of a mechanism's reports, from its largest payload."""

    def max_payload(self) -> dict[str, Any]:
        """A largest possible payload, to size the wire format."""
        raise NotImplementedError

    @cached_property
    def wire_bytes(self) -> int:
        """Bytes of the largest payload as compact JSON: the report's size on the wire."""
        return compact_size(self.max_payload())


def check_epsilon(epsilon: object) -> float:
    """Return ε as a float, or raise ``ValueError`` giving the valid range.

    The one ε check of every mechanism, categorical or numeric, and of metric specs.
    """
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)):
        raise ValueError(f"epsilon must be a number, got {epsilon!r}")
    if not math.isfinite(epsilon) or not MIN_EPSILON <= epsilon <= MAX_EPSILON:
        raise ValueError(
            f"epsilon must be finite and in [{MIN_EPSILON}, {MAX_EPSILON}], got {epsilon!r}"
        )
    return float(epsilon)


def exp_epsilon(epsilon: float) -> float:
    """e^ε shaded down by 10⁻¹², the base every mechanism builds its probabilities on.

    e^ε is the correctly rounded double (:func:`client_sdk.mechanisms.rounding.exp`), as
    the protocol pins it, so every SDK derives the very same probabilities.
    """
    return exp(epsilon) * _SAFETY


@lru_cache(maxsize=1024)
def _exp_upper_bound_check(epsilon: float) -> Fraction:
    """A rational number that is certainly ≤ the true e^ε: the correctly rounded e^ε is
    within half an ulp, so two ulps below it is below e^ε."""
    return Fraction(math.nextafter(math.nextafter(exp(epsilon), 0.0), 0.0))


def epsilon_for_ratio(ratio: Fraction) -> float:
    """The smallest float ε whose bound covers ``ratio`` (``ratio ≤`` the rational two ulps
    below the correctly rounded e^ε): a function of ``ratio`` alone, whatever libm's log
    gives as the starting point, since that bound never decreases as ε rises."""
    eps = math.log(ratio)
    while ratio > _exp_upper_bound_check(eps):
        eps = math.nextafter(eps, math.inf)
    while ratio <= _exp_upper_bound_check(math.nextafter(eps, -math.inf)):
        eps = math.nextafter(eps, -math.inf)
    return eps


def shade_down(prob: float, ratio: Callable[[Fraction], Fraction], epsilon: float) -> float:
    """Lower a sampling probability ulp by ulp until its exact likelihood ratio is ≤ e^ε.

    Near 1 a float probability has an absolute resolution of 2⁻⁵³, so 1 − p (and with it
    the ratio) can be off by 2⁻⁵³/(1 − p) relative: 5·10⁻⁸ at ε = 20. ``ratio`` must be
    increasing in ``prob``; the loop ends after a few steps.
    """
    bound = _exp_upper_bound_check(epsilon)
    while ratio(Fraction(prob)) > bound:
        prob = math.nextafter(prob, 0.0)
    return prob


@dataclass(frozen=True)
class FrequencyOracle(WireSized):
    """Base of the pure frequency oracles: validated parameters and the shared decoding.

    Args:
        epsilon: the privacy parameter of one report, ``MIN_EPSILON <= ε <= MAX_EPSILON``.
        domain_size: k, the number of possible values ``0..k-1``,
            ``2 <= k <= MAX_DOMAIN_SIZE``.

    Raises:
        ValueError: a parameter outside its range (the message gives the range).
    """

    epsilon: float
    domain_size: int

    name: ClassVar[str] = ""
    server_cost: ClassVar[str] = ""
    """Server work per report and per batch, for people and for ``auto``'s tie-break."""
    server_cost_rank: ClassVar[int] = 0

    def __post_init__(self) -> None:
        eps = self.epsilon
        object.__setattr__(self, "epsilon", check_epsilon(eps))
        k = self.domain_size
        if isinstance(k, bool) or not isinstance(k, int):
            raise ValueError(f"domain_size must be an integer, got {k!r}")
        if not 2 <= k <= MAX_DOMAIN_SIZE:
            raise ValueError(f"domain_size must be in [2, {MAX_DOMAIN_SIZE}], got {k}")
        self._validate()
        ratio = self.privacy_ratio()
        if ratio > _exp_upper_bound_check(self.epsilon):  # pragma: no cover - a bug guard
            raise AssertionError(f"{self!r} would realise ε = {math.log(ratio)} > {eps}")

    # -- per-mechanism hooks -------------------------------------------------------
    def _validate(self) -> None:
        """Check mechanism-specific parameters (override)."""

    @property
    def p(self) -> float:
        """p* = Pr[report supports v | true value v]."""
        raise NotImplementedError

    @property
    def q(self) -> float:
        """q* = Pr[report supports v | true value ≠ v]."""
        raise NotImplementedError

    def privacy_ratio(self) -> Fraction:
        """The exact worst-case likelihood ratio max Pr[y|x]/Pr[y|x'] of ``perturb``.

        Computed in rational arithmetic from the float probabilities ``perturb``
        actually samples with; construction fails if it exceeded e^ε.
        """
        raise NotImplementedError

    def perturb(self, value: int, rng: RandomSource | None = None) -> dict[str, Any]:
        """Randomize one true value on the device.

        Args:
            value: the true value, an int in ``range(domain_size)``.
            rng: a ``random.Random``-like source; default: the process CSPRNG.

        Returns:
            The JSON-serializable payload of one report.

        Raises:
            ValueError: ``value`` is not an int in ``range(domain_size)``.
        """
        return self._perturb(self.check_value(value), rng or default_rng())

    def _perturb(self, value: int, rng: RandomSource) -> dict[str, Any]:
        raise NotImplementedError

    def check_payload(self, payload: object) -> dict[str, Any]:
        """Validate one payload strictly and return it in canonical form.

        Raises:
            PayloadError: wrong type, missing or extra fields, out-of-range values.
        """
        raise NotImplementedError

    def support(self, payload: dict[str, Any]) -> list[int]:
        """The values a (valid) report supports: the reference per-report decoder."""
        raise NotImplementedError

    def supports(self, payload: dict[str, Any], value: int) -> bool:
        """Whether a (valid) report supports ``value``; override when cheaper than ``support``."""
        return value in self.support(payload)

    def implausible(self, payload: dict[str, Any]) -> Implausible | None:
        """Why a valid payload is one this mechanism produces with negligible probability.

        The collector refuses such a report (:mod:`client_sdk.mechanisms.plausibility`
        says which mechanisms have such reports, and what it stops). An honest report is
        refused with probability at most ``plausibility.NEGLIGIBLE``.

        Args:
            payload: a payload :meth:`check_payload` accepted.

        Returns:
            None for a plausible report (every report of mechanisms without such a
            region, as here), else the reason.
        """
        return None

    def options(self) -> dict[str, Any]:
        """Mechanism-specific parameters beyond ε and k (all that ``create`` accepts)."""
        return {}

    # -- shared ------------------------------------------------------------------------
    @property
    def realized_epsilon(self) -> float:
        """ln of :meth:`privacy_ratio`: the ε ``perturb`` actually realises (≤ ``epsilon``)."""
        return math.log(self.privacy_ratio())

    def params(self) -> dict[str, Any]:
        """Everything needed to rebuild this mechanism with :func:`create`."""
        return {
            "mechanism": self.name,
            **fields_of(self, "epsilon", "domain_size"),
            **self.options(),
        }

    def check_value(self, value: object) -> int:
        """Return ``value`` as an int in ``range(k)`` or raise ``ValueError``."""
        if isinstance(value, bool):
            raise ValueError(f"value must be an int in range(0, {self.domain_size}), got a bool")
        try:
            v = operator.index(value)  # type: ignore[arg-type]
        except TypeError:
            raise ValueError(
                f"value must be an int in range(0, {self.domain_size}), "
                f"got {type(value).__name__} {value!r}"
            ) from None
        if not 0 <= v < self.domain_size:
            raise ValueError(f"value {v} is outside range(0, {self.domain_size})")
        return v

    def debias(self, support_count: Any, n: Any) -> Any:
        """f̂ = (C/n − q*)/(p* − q*): unbiased frequency from support counts.

        Works on floats and on numpy arrays alike.
        """
        return (support_count / n - self.q) / (self.p - self.q)

    def variance(self, n: Any, frequency: Any = 0.0) -> Any:
        """Variance of one frequency estimate from ``n`` reports.

        ``variance(n)`` is the usual theoretical variance (true frequency ≈ 0);
        ``variance(n, f)`` is the exact variance at true frequency ``f``:
        q*(1−q*)/(n(p*−q*)²) + f(1−p*−q*)/(n(p*−q*)). Floats or numpy arrays.
        """
        p, q = self.p, self.q
        return q * (1 - q) / (n * (p - q) ** 2) + frequency * (1 - p - q) / (n * (p - q))

    def variance_star(self) -> float:
        """n·Var[f̂] at f ≈ 0, the per-report variance used to compare mechanisms."""
        return float(self.variance(1))

    def _reject(self, payload: object, problem: str) -> PayloadError:
        shown = repr(payload)
        if len(shown) > 120:
            shown = shown[:117] + "..."
        return PayloadError(f"{self.name} payload {shown}: {problem}")

    def _implausible(self, payload: object, reason: str, problem: str) -> Implausible:
        return Implausible(
            reason, str(self._reject(payload, f"implausible under {self.name}: {problem}"))
        )

    def _fields(self, payload: object, names: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(payload, dict):
            raise self._reject(payload, f"must be an object with fields {list(names)}")
        expected = _NAME_SETS.get(names)
        if expected is None:
            expected = _NAME_SETS[names] = frozenset(names)
        if payload.keys() != expected:  # a view compared with a set: none built per payload
            keys = set(payload)
            missing = sorted(set(names) - keys)
            extra = sorted(str(x) for x in keys - set(names))
            parts = ([f"missing {missing}"] if missing else []) + (
                [f"unknown {extra}"] if extra else []
            )
            raise self._reject(payload, "; ".join(parts) + f" (expected {list(names)})")
        return payload

    def _int_field(self, payload: dict[str, Any], field: str, upper: int) -> int:
        x = payload[field]
        if type(x) is not int:
            raise self._reject(payload, f"{field!r} must be an integer, got {type(x).__name__}")
        if not 0 <= x < upper:
            raise self._reject(payload, f"{field!r} = {x} is outside range(0, {upper})")
        return x


_NAME_SETS: dict[tuple[str, ...], frozenset[str]] = {}
"""The field sets payloads are checked against, by their names' tuple (a handful)."""


class _Rated(Protocol):
    @property
    def name(self) -> str: ...

    def variance_star(self) -> float: ...


_M = TypeVar("_M", bound=_Rated)


@dataclass(frozen=True)
class Choice(Generic[_M]):
    """What ``auto`` picked among candidates, and why (a frequency oracle or a numeric
    mechanism; see ``mechanisms.choose`` and ``numeric.choose_numeric``)."""

    mechanism: _M
    reason: str
    candidates: tuple[_M, ...]
    """Every candidate, lowest variance first."""

    def table(self) -> list[dict[str, Any]]:
        """One row per candidate: name, Var*, variance relative to the best, the kind's own
        columns, chosen."""
        best = self.candidates[0].variance_star()
        return [
            {
                "mechanism": m.name,
                "variance_star": m.variance_star(),
                "relative_variance": m.variance_star() / best,
                **self._columns(m),
                "chosen": m == self.mechanism,
            }
            for m in self.candidates
        ]

    def _columns(self, m: _M) -> dict[str, Any]:
        return {}


class OneValueReport(FrequencyOracle):
    """A frequency oracle whose report is one value, ``{"v": i}``, supporting it alone
    (GRR, pram): the payload's check, support and largest size, once."""

    def check_payload(self, payload: object) -> dict[str, Any]:  # noqa: D102
        fields = self._fields(payload, ("v",))
        return {"v": self._int_field(fields, "v", self.domain_size)}

    def support(self, payload: dict[str, Any]) -> list[int]:  # noqa: D102
        return [payload["v"]]

    def max_payload(self) -> dict[str, Any]:  # noqa: D102
        return {"v": self.domain_size - 1}

"""Numeric mechanisms: one perturbed number per report, for estimating a mean.

The true value is first scaled from its metric's range [lo, hi] to x ∈ [−1, 1]
(:func:`scale`); each mechanism turns x into a report y with E[y] = x, so the mean of the
reports estimates the mean of the scaled values without bias.

In full: ``docs/statistics/numeric.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any, ClassVar, NamedTuple

from client_sdk.errors import PayloadError
from client_sdk.mechanisms.base import Choice, _exp_upper_bound_check, check_epsilon
from client_sdk.mechanisms.plausibility import Implausible
from client_sdk.mechanisms.randomness import RandomSource, bernoulli, default_rng
from client_sdk.mechanisms.rounding import expm1

__all__ = [
    "EPSILON_STAR",
    "MAX_RANGE_MAGNITUDE",
    "NUMERIC_MECHANISMS",
    "NUMERIC_NAMES",
    "RESOLUTION_BITS",
    "SCALE",
    "DuchiMechanism",
    "HybridMechanism",
    "NumericChoice",
    "NumericMechanism",
    "PiecewiseMechanism",
    "Segment",
    "choose_numeric",
    "create_numeric",
    "numeric_from_params",
    "scale",
]

RESOLUTION_BITS = 30
"""Reports are integer multiples of 2⁻³⁰ in the scaled domain [−1, 1]. Fine enough that the
grid is invisible (PM's cells change the variance by (2⁻²⁹)²/12 < 10⁻¹⁸; rounding C to the
grid costs PM < 5·10⁻⁵ of ε at ε = 20, see the module's notes); coarse enough that every
report is an exact float
(|y| ≤ C < 4.1·10⁴ at ε ≥ MIN_EPSILON, so |y|·2³⁰ < 2⁴⁶ < 2⁵³) and that a batch's sums
are small exact integers."""

SCALE = 1 << RESOLUTION_BITS
"""Units per 1 in the scaled domain: report y is the integer y·SCALE."""

EPSILON_STAR = 0.61
"""Wang et al.'s ε*: at or below it the Hybrid Mechanism's best α is 0 (Duchi's alone);
above it α = 1 − e^{−ε/2}, whose worst-case variance is then below Duchi's (they cross at
ε ≈ 0.6094)."""

MAX_RANGE_MAGNITUDE = 1e300
"""Range ends beyond ±10³⁰⁰ would make hi − lo overflow to infinity when scaling."""


class Segment(NamedTuple):
    """``size`` report values ``first, first + step, …`` (in units), each with ``probability``."""

    first: int
    size: int
    step: int
    probability: Fraction


def scale(value: float, low: float, high: float) -> float:
    """Map ``value`` ∈ [low, high] linearly to [−1, 1] (clamped against float rounding).

    The caller checks the range; float rounding here changes x by at most a few ulps,
    which the estimate maps back with the same range (a relative error near 10⁻¹⁶).
    """
    x = (value - low) / (high - low) * 2.0 - 1.0
    return min(1.0, max(-1.0, x))


def _dyadic(x: float) -> tuple[int, int]:
    """x as num/den exactly (den a power of two)."""
    return x.as_integer_ratio()


@dataclass(frozen=True)
class NumericMechanism:
    """Base of the numeric mechanisms: validated ε, the grid, and the shared checks.

    Args:
        epsilon: the privacy parameter of one report, ``MIN_EPSILON <= ε <= MAX_EPSILON``.

    Raises:
        ValueError: ε outside its range (the message gives the range).
    """

    epsilon: float

    name: ClassVar[str] = ""
    simplicity: ClassVar[int] = 0
    """Tie-break of :func:`choose_numeric`: lower is simpler."""

    def __post_init__(self) -> None:
        eps = self.epsilon
        object.__setattr__(self, "epsilon", check_epsilon(eps))
        if self.privacy_ratio() > _exp_upper_bound_check(self.epsilon):  # pragma: no cover
            raise AssertionError(f"{self!r} would realise more than ε = {eps}")

    # -- per-mechanism hooks -------------------------------------------------------
    @property
    def bound_units(self) -> int:
        """The largest |report| in units (C·SCALE)."""
        raise NotImplementedError

    def privacy_ratio(self) -> Fraction:
        """The exact worst-case likelihood ratio max_y Pr[y | x] / Pr[y | x'] over x, x'.

        Computed in rational arithmetic from the integers ``perturb`` samples with;
        construction fails if it exceeded e^ε.
        """
        raise NotImplementedError

    def pmf(self, x: float) -> list[Segment]:
        """The exact law of the report (in units) for input ``x`` ∈ [−1, 1].

        Segments may share a value (the hybrid's); a value's probability is their sum.
        """
        raise NotImplementedError

    def perturb_units(self, x: float, rng: RandomSource) -> int:
        """Draw one report, in units, for a checked ``x`` ∈ [−1, 1]."""
        raise NotImplementedError

    def is_report(self, units: int) -> bool:
        """Whether ``units`` is a report this mechanism can produce."""
        raise NotImplementedError

    def second_moment(self, x: float) -> float:
        """E[y² | x], exactly up to float rounding."""
        raise NotImplementedError

    def worst_case_variance(self) -> float:
        """sup over x ∈ [−1, 1] of Var[y | x]: one report's variance in the worst case."""
        raise NotImplementedError

    def second_moment_coefficients(self) -> tuple[float, float]:
        """(A, B) with E[y² | x] = A·x² + B + ρ(x), A ≥ 0 and 0 ≤ ρ(x) < 10⁻¹⁶.

        ρ is PM's window-rounding term (zero for Duchi's); A ≥ 0 makes E[y² | x] convex
        in x, which :meth:`min_variance` and :meth:`max_second_moment` rest on.
        """
        raise NotImplementedError

    # -- shared ------------------------------------------------------------------------
    @property
    def bound(self) -> float:
        """C: every report lies in [−C, C] (an exact float)."""
        return self.bound_units / SCALE

    @property
    def realized_epsilon(self) -> float:
        """ln of :meth:`privacy_ratio`: the ε ``perturb`` actually realises (≤ ``epsilon``)."""
        return math.log(self.privacy_ratio())

    def params(self) -> dict[str, Any]:
        """Everything needed to rebuild this mechanism (``numeric_from_params``)."""
        return {"mechanism": self.name, "epsilon": self.epsilon}

    def check_value(self, value: object) -> float:
        """Return ``value`` as a float in [−1, 1] or raise ``ValueError``."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"value must be a number in [-1, 1], got {type(value).__name__}")
        x = float(value)
        if not -1.0 <= x <= 1.0:  # also refuses NaN
            raise ValueError(f"value {value!r} is outside [-1, 1]")
        return x

    def perturb(self, value: float, rng: RandomSource | None = None) -> dict[str, Any]:
        """Randomize one scaled value on the device.

        Args:
            value: the true value scaled to [−1, 1] (see :func:`scale`).
            rng: a ``random.Random``-like source; default: the process CSPRNG.

        Returns:
            ``{"y": float}``, y an exact multiple of 2⁻³⁰ with E[y] = value.

        Raises:
            ValueError: ``value`` is not a number in [−1, 1].
        """
        units = self.perturb_units(self.check_value(value), rng or default_rng())
        return {"y": units / SCALE}

    def variance(self, n: float, x: float | None = None) -> float:
        """Variance of the mean of ``n`` reports, all of true value ``x`` (None: worst case).

        For a population of different values the variance of the mean is the average of
        the per-value variances over n: between the best and the worst case.
        """
        if x is None:
            return self.worst_case_variance() / n
        return (self.second_moment(self.check_value(x)) - x * x) / n

    def variance_star(self) -> float:
        """One report's worst-case variance, the number that compares mechanisms."""
        return self.worst_case_variance()

    def min_variance(self, mean: float | None = None) -> float:
        """The least variance one report can have: a floor no data can go below.

        With ``mean`` = μ ∈ [−1, 1]: the least Var[y] over *every* distribution of inputs
        in [−1, 1] whose mean is μ, namely (A − 1)·μ² + B (:meth:`second_moment_coefficients`),
        the variance at the point mass x = μ up to PM's rounding term. For
        E[y] = E[x] = μ and, by Jensen's inequality with A ≥ 0,
        E[y²] = A·E[x²] + B + E[ρ] ≥ A·μ² + B; so Var[y] = E[y²] − μ² ≥ (A − 1)·μ² + B.
        (Duchi's: C² − μ², exactly the variance of any population of mean μ.)

        With ``mean`` None: the floor of the conditional variance, min over x ∈ [−1, 1] of
        Var[y | x] (at x = 0 if A ≥ 1, else at x = ±1). n reports of *fixed* values have
        Var[ȳ] = Σ Var[y | xᵢ]/n² ≥ this / n.

        Raises:
            ValueError: ``mean`` is not a number in [−1, 1].
        """
        a, b = self.second_moment_coefficients()
        if mean is None:
            return b if a >= 1.0 else a - 1.0 + b
        mu = self.check_value(mean)
        return (a - 1.0) * mu * mu + b

    def max_second_moment(self) -> float:
        """sup over x ∈ [−1, 1] of E[y² | x]: a bound on Var[y] for *any* input distribution.

        Var[y] = E[y²] − E[y]² ≤ sup_x E[y² | x], whatever the spread of the true values
        (which :meth:`worst_case_variance`, the variance for a fixed x, leaves out).
        E[y² | x] = a·x² + b with a ≥ 0 for every mechanism here (Duchi's: a = 0), so the
        supremum is at x = ±1, a grid point of PM's window (no rounding term).
        """
        return self.second_moment(1.0)

    def units(self, payload: dict[str, Any]) -> int:
        """The report of a (valid) payload as an integer number of units: the reference decoder."""
        return int(payload["y"] * SCALE)

    def check_payload(self, payload: object) -> dict[str, Any]:
        """Validate one payload strictly and return it in canonical form.

        A payload is exactly ``{"y": float}``: a finite float (not an int, not a bool)
        that is a report this mechanism can produce, on its grid and within [−C, C].

        Raises:
            PayloadError: wrong type, missing or extra fields, a value it cannot produce.
        """
        if not isinstance(payload, dict) or set(payload) != {"y"}:
            raise self._reject(payload, "must be an object with exactly the field 'y'")
        y = payload["y"]
        if type(y) is not float:
            raise self._reject(payload, f"'y' must be a float, got {type(y).__name__}")
        if not math.isfinite(y) or abs(y) > self.bound:
            raise self._reject(payload, f"'y' = {y!r} is outside [-{self.bound!r}, {self.bound!r}]")
        units = y * SCALE  # exact: a power-of-two scaling
        if not units.is_integer() or not self.is_report(int(units)):
            raise self._reject(payload, f"'y' = {y!r} is not a report {self.name} can produce")
        return {"y": y}

    def implausible(self, payload: dict[str, Any]) -> Implausible | None:
        """Always None: no report of a numeric mechanism is negligible as such (Duchi's two
        outputs have probability ≥ 1/(e^ε + 1) each; the piecewise mechanism's density is
        bounded below on [−C, C]); see :mod:`client_sdk.mechanisms.plausibility`."""
        return None

    def _reject(self, payload: object, problem: str) -> PayloadError:
        shown = repr(payload)
        if len(shown) > 120:
            shown = shown[:117] + "..."
        return PayloadError(f"{self.name} payload {shown}: {problem}")


@dataclass(frozen=True)
class DuchiMechanism(NumericMechanism):
    """Duchi et al.'s mechanism: report ±C with Pr[+C | x] = (C + x)/(2C).

    C = K/2³⁰ with K the smallest integer with (C+1)/(C−1) ≤ e^ε, i.e. C is
    (e^ε+1)/(e^ε−1) rounded up to the grid. E[y] = x exactly, Var[y] = C² − x².
    """

    name = "duchi"
    simplicity = 0

    @cached_property
    def bound_units(self) -> int:  # noqa: D102
        bound = _exp_upper_bound_check(self.epsilon)
        top, bottom = bound.numerator + bound.denominator, bound.numerator - bound.denominator
        return -(-SCALE * top // bottom)  # K ≥ M(B+1)/(B−1)  ⟺  (K+M)/(K−M) ≤ B

    def privacy_ratio(self) -> Fraction:  # noqa: D102
        k = self.bound_units
        return Fraction(k + SCALE, k - SCALE)

    def _plus(self, x: float) -> tuple[int, int]:
        """Pr[+C | x] = (C + x)/(2C) = (K·b + a·M)/(2K·b) for x = a/b, as (num, den)."""
        a, b = _dyadic(x)
        k = self.bound_units
        return k * b + a * SCALE, 2 * k * b

    def plus_probability(self, x: Any) -> Any:
        """Pr[+C | x] as a float (or numpy array): for fast simulation only."""
        return 0.5 + x * (SCALE / (2 * self.bound_units))

    def pmf(self, x: float) -> list[Segment]:  # noqa: D102
        num, den = self._plus(self.check_value(x))
        k = self.bound_units
        return [Segment(-k, 1, 1, Fraction(den - num, den)), Segment(k, 1, 1, Fraction(num, den))]

    def perturb_units(self, x: float, rng: RandomSource) -> int:  # noqa: D102
        num, den = self._plus(x)
        return self.bound_units if rng.randrange(den) < num else -self.bound_units

    def is_report(self, units: int) -> bool:  # noqa: D102
        return abs(units) == self.bound_units

    def second_moment(self, x: float) -> float:  # noqa: D102
        return self.bound * self.bound

    def worst_case_variance(self) -> float:  # noqa: D102
        return self.bound * self.bound  # at x = 0

    def second_moment_coefficients(self) -> tuple[float, float]:  # noqa: D102
        return 0.0, self.bound * self.bound  # y² = C² whatever x


@dataclass(frozen=True)
class PiecewiseMechanism(NumericMechanism):
    """Wang et al.'s Piecewise Mechanism, exactly, on cells of width 2⁻²⁹.

    With M = 2³⁰ and L the smallest integer with ((M+L)/L)² ≤ e^ε: C = 1 + 2L/M, the
    range [−C, C] holds N = M + 2L cells, the high-density window L of them. For input x
    the window starts at cell i = (x+1)(M+L)/2, rounded to a neighbouring integer without
    bias; with probability (M+L)/N = (C+1)/(2C) the report is a uniform cell of the
    window, otherwise a uniform one of the other M + L. Cell j is reported as its midpoint
    (2j + 1 − N)/M. Every window cell has probability (M+L)/(N·L), every other one
    L/(N·(M+L)): their ratio ((M+L)/L)² is the worst case, ≤ e^ε.
    """

    name = "pm"
    simplicity = 1

    @cached_property
    def window(self) -> int:
        """L, the cells of the high-density window (C − 1 = L·2⁻²⁹)."""
        bound = _exp_upper_bound_check(self.epsilon)
        num, den = bound.numerator, bound.denominator

        def fits(cells: int) -> bool:  # ((M+L)/L)² ≤ B, in integers
            return (SCALE + cells) ** 2 * den <= num * cells * cells

        cells = max(1, math.ceil(SCALE / expm1(self.epsilon / 2)))
        while not fits(cells):
            cells += 1
        while cells > 1 and fits(cells - 1):
            cells -= 1
        return cells

    @property
    def cells(self) -> int:
        """N = M + 2L, the cells of [−C, C]."""
        return SCALE + 2 * self.window

    @property
    def bound_units(self) -> int:  # noqa: D102
        return self.cells  # C = N/M: the outermost cell's far edge

    @property
    def keep(self) -> Fraction:
        """Pr[the report falls in the window] = (M+L)/N = (C+1)/(2C)."""
        return Fraction(SCALE + self.window, self.cells)

    def privacy_ratio(self) -> Fraction:  # noqa: D102
        low = self.window
        return Fraction(SCALE + low, low) ** 2

    def _start(self, x: float) -> tuple[int, int, int]:
        """The window's first cell (x+1)(M+L)/2 = i + rem/den, as (i, rem, den)."""
        a, b = _dyadic(x)
        i, rem = divmod((a + b) * (SCALE + self.window), 2 * b)
        return i, rem, 2 * b

    def window_start(self, x: Any) -> Any:
        """(x+1)(M+L)/2 as a float (or numpy array): for fast simulation only."""
        return (x + 1.0) * ((SCALE + self.window) / 2)

    def pmf(self, x: float) -> list[Segment]:  # noqa: D102
        i, rem, den = self._start(self.check_value(x))
        n, low = self.cells, self.window
        inside = self.keep / low
        outside = (1 - self.keep) / (SCALE + low)
        t = Fraction(rem, den)

        def seg(first: int, last: int, p: Fraction) -> list[Segment]:  # cells first..last-1
            return [Segment(2 * first + 1 - n, last - first, 2, p)] if last > first else []

        if not rem:
            return seg(0, i, outside) + seg(i, i + low, inside) + seg(i + low, n, outside)
        # Between the windows starting at i (weight 1 − t) and at i + 1 (weight t).
        return (
            seg(0, i, outside)
            + seg(i, i + 1, (1 - t) * inside + t * outside)
            + seg(i + 1, i + low, inside)
            + seg(i + low, i + low + 1, (1 - t) * outside + t * inside)
            + seg(i + low + 1, n, outside)
        )

    def perturb_units(self, x: float, rng: RandomSource) -> int:  # noqa: D102
        i, rem, den = self._start(x)
        if rem and rng.randrange(den) < rem:
            i += 1
        n, low = self.cells, self.window
        if rng.randrange(n) < SCALE + low:
            j = i + rng.randrange(low)
        else:
            j = rng.randrange(SCALE + low)
            j += low if j >= i else 0
        return 2 * j + 1 - n

    def is_report(self, units: int) -> bool:  # noqa: D102
        return units % 2 == 1 and abs(units) < self.cells

    def _rounding_term(self, x: float) -> float:
        """(C+1)/2 · t(1−t)·Δ², the variance the window's randomized rounding adds."""
        _, rem, den = self._start(x)
        t = rem / den
        step = 2 / (SCALE + self.window)
        return (self.bound + 1) / 2 * t * (1 - t) * step * step

    def _variance_parts(self) -> tuple[float, float]:
        """(a, b) with Var[y | x] = a·x² + b + rounding term.

        The paper's PM with half-width C has Var = (C−1)x²/2 + (C−1)(2C−1)/6
        (= x²/(e^{ε/2}−1) + (e^{ε/2}+3)/(3(e^{ε/2}−1)²) at the ideal C); reporting cell
        midpoints takes δ²/12 off it (δ the cell width).
        """
        c_minus_1 = 2 * self.window / SCALE
        delta = 2 / SCALE
        return c_minus_1 / 2, c_minus_1 * (2 * c_minus_1 + 1) / 6 - delta * delta / 12

    def second_moment(self, x: float) -> float:  # noqa: D102
        a, b = self._variance_parts()
        return (a + 1) * x * x + b + self._rounding_term(x)

    def variance(self, n: float, x: float | None = None) -> float:  # noqa: D102
        if x is None:
            return self.worst_case_variance() / n
        a, b = self._variance_parts()
        x = self.check_value(x)
        return (a * x * x + b + self._rounding_term(x)) / n  # without cancellation

    def worst_case_variance(self) -> float:
        """At x = ±1 (a grid point: no rounding term), where a·x² is largest."""
        a, b = self._variance_parts()
        return a + b

    def second_moment_coefficients(self) -> tuple[float, float]:  # noqa: D102
        a, b = self._variance_parts()
        return a + 1.0, b  # E[y² | x] = Var + x²; ρ = the rounding term


@dataclass(frozen=True)
class HybridMechanism(NumericMechanism):
    """Wang et al.'s Hybrid Mechanism: PM with probability α, else Duchi's, both at ε.

    α = 1 − e^{−ε/2} for ε > :data:`EPSILON_STAR`, else 0. Each component is ε-LDP, and
    a mixture with input-independent weights is too (a ratio of two mixtures is at most
    the larger of the components' ratios), so the worst case is the larger of the two.
    Var[y | x] = α·Var_PM[y | x] + (1 − α)·Var_Duchi[y | x], nearly flat in x.
    """

    name = "hybrid"
    simplicity = 2

    @cached_property
    def pm(self) -> PiecewiseMechanism:
        """The PM component."""
        return PiecewiseMechanism(self.epsilon)

    @cached_property
    def duchi(self) -> DuchiMechanism:
        """Duchi's component."""
        return DuchiMechanism(self.epsilon)

    @cached_property
    def alpha(self) -> float:
        """Probability of using PM (0 at ε ≤ ε*); sampled exactly as this float."""
        if self.epsilon <= EPSILON_STAR:
            return 0.0
        return -expm1(-self.epsilon / 2)

    @property
    def bound_units(self) -> int:  # noqa: D102
        return self.pm.bound_units if self.alpha else self.duchi.bound_units

    def privacy_ratio(self) -> Fraction:  # noqa: D102
        if not self.alpha:
            return self.duchi.privacy_ratio()
        return max(self.pm.privacy_ratio(), self.duchi.privacy_ratio())

    def pmf(self, x: float) -> list[Segment]:  # noqa: D102
        alpha = Fraction(self.alpha)
        parts = [s._replace(probability=s.probability * (1 - alpha)) for s in self.duchi.pmf(x)]
        if alpha:
            parts += [s._replace(probability=s.probability * alpha) for s in self.pm.pmf(x)]
        return parts

    def perturb_units(self, x: float, rng: RandomSource) -> int:  # noqa: D102
        if self.alpha and bernoulli(rng, self.alpha):
            return self.pm.perturb_units(x, rng)
        return self.duchi.perturb_units(x, rng)

    def is_report(self, units: int) -> bool:  # noqa: D102
        return self.duchi.is_report(units) or bool(self.alpha) and self.pm.is_report(units)

    def second_moment(self, x: float) -> float:  # noqa: D102
        alpha = self.alpha
        return alpha * self.pm.second_moment(x) + (1 - alpha) * self.duchi.second_moment(x)

    def variance(self, n: float, x: float | None = None) -> float:  # noqa: D102
        if x is None:
            return self.worst_case_variance() / n
        alpha = self.alpha
        return alpha * self.pm.variance(n, x) + (1 - alpha) * self.duchi.variance(n, x)

    def worst_case_variance(self) -> float:
        """The larger of Var at x = 0 and x = ±1, plus PM's largest rounding term.

        Var[y | x] = a·x² + b + α·(rounding term) with a constant a, so without the
        rounding term the supremum is at x = 0 or ±1; the term is at most
        α(C+1)Δ²/8 < 10⁻¹⁶, added as a bound.
        """
        alpha = self.alpha
        a, b = self.pm._variance_parts()
        c2 = self.duchi.bound**2
        at_zero = alpha * b + (1 - alpha) * c2
        at_one = alpha * (a + b) + (1 - alpha) * (c2 - 1)
        step = 2 / (SCALE + self.pm.window)
        return max(at_zero, at_one) + alpha * (self.pm.bound + 1) * step * step / 8

    def second_moment_coefficients(self) -> tuple[float, float]:
        """α·PM's + (1 − α)·Duchi's: A = α(a + 1), B = α·b + (1 − α)·C_Duchi²."""
        alpha = self.alpha
        a_pm, b_pm = self.pm.second_moment_coefficients()
        _, b_duchi = self.duchi.second_moment_coefficients()
        return alpha * a_pm, alpha * b_pm + (1 - alpha) * b_duchi


NUMERIC_MECHANISMS: dict[str, type[NumericMechanism]] = {
    cls.name: cls for cls in (DuchiMechanism, PiecewiseMechanism, HybridMechanism)
}
"""Every numeric mechanism by its wire name (names distinct from the frequency oracles')."""

NUMERIC_NAMES: tuple[str, ...] = (*NUMERIC_MECHANISMS, "auto")

VARIANCE_EQUAL = 1e-12
"""Worst-case variances within 10⁻¹² relative are the same mechanism's (the hybrid at
ε ≤ ε* *is* Duchi's): ``choose_numeric`` then takes the simpler one."""


@dataclass(frozen=True)
class NumericChoice(Choice[NumericMechanism]):
    """What ``auto`` picked for ε among the numeric mechanisms, and why (candidates by
    worst-case variance)."""


def choose_numeric(epsilon: float) -> NumericChoice:
    """Pick the numeric mechanism with the lowest worst-case variance at ε.

    That is the hybrid above ε* ≈ 0.61 and Duchi's at or below it (where the hybrid is
    Duchi's mechanism itself; the simpler name is kept). PM alone beats Duchi's above
    ε ≈ 1.29 but never the hybrid.

    Raises:
        ValueError: ε out of range.
    """
    built = [cls(epsilon) for cls in NUMERIC_MECHANISMS.values()]
    ranked = tuple(sorted(built, key=lambda m: (m.variance_star(), m.simplicity)))
    best = ranked[0].variance_star()
    chosen = min(
        (m for m in ranked if m.variance_star() <= best * (1 + VARIANCE_EQUAL)),
        key=lambda m: m.simplicity,
    )
    others = ", ".join(f"{m.name} {m.variance_star():.4g}" for m in ranked if m is not chosen)
    why = f"{chosen.name} has the lowest worst-case variance per report ({best:.4g}; {others})"
    if chosen.name == "duchi":
        why += f"; at ε ≤ {EPSILON_STAR} the hybrid is Duchi's mechanism alone"
    return NumericChoice(chosen, f"ε = {epsilon:g}: {why}", ranked)


def create_numeric(name: str, epsilon: float) -> NumericMechanism:
    """Build a numeric mechanism by name: duchi, pm, hybrid or auto.

    Raises:
        ValueError: unknown name or ε out of range.
    """
    if name == "auto":
        return choose_numeric(epsilon).mechanism
    if name not in NUMERIC_MECHANISMS:
        raise ValueError(
            f"unknown numeric mechanism {name!r}; choose one of {', '.join(NUMERIC_NAMES)}"
        )
    return NUMERIC_MECHANISMS[name](epsilon)


def numeric_from_params(params: dict[str, Any]) -> NumericMechanism:
    """Rebuild a numeric mechanism from :meth:`NumericMechanism.params`.

    Raises:
        ValueError: missing or unknown parameters, an unknown name, ε out of range.
    """
    rest = dict(params)
    try:
        name = rest.pop("mechanism")
        epsilon = rest.pop("epsilon")
    except KeyError as exc:
        raise ValueError(f"mechanism parameters lack {exc.args[0]!r}") from None
    if rest:
        raise ValueError(f"numeric mechanisms take no parameter {sorted(rest)}")
    if name == "auto" or not isinstance(name, str):
        raise ValueError(f"unknown numeric mechanism {name!r}")
    return create_numeric(name, epsilon)

"""Numeric mechanisms (Duchi, PM, hybrid): exact laws, ε boundaries, unbiasedness, sampler.

The reference laws are written from the papers' definitions, independently of the SDK's
``pmf``: Duchi's Pr[+C] = 1/2 + x/(2C), and PM's continuous density (p on a window of
width C − 1 starting at ℓ(x) = (C+1)x/2 − (C−1)/2, p/e^ε elsewhere, e^{ε/2} =
(C+1)/(C−1)) integrated exactly over the SDK's cells. Only parameters (C, the cell
width, α) are read from the objects.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from fractions import Fraction

import pytest
from scipy.stats import binomtest, chisquare
from scripted import ALL, ZERO, ScriptedRandom

from client_sdk import mechanisms
from client_sdk.errors import PayloadError
from client_sdk.mechanisms import (
    NUMERIC_MECHANISMS,
    DuchiMechanism,
    HybridMechanism,
    NumericMechanism,
    PiecewiseMechanism,
    choose_numeric,
    create_numeric,
    numeric_from_params,
    rounding,
)
from client_sdk.mechanisms.base import _exp_upper_bound_check
from client_sdk.mechanisms.numeric import EPSILON_STAR, SCALE, Segment, scale

EPSILONS = [1e-4, 0.1, 0.5, 0.61, 0.62, 1.0, 1.29, 2.0, 4.0, 8.0, 20.0]
INPUTS = [-1.0, -0.999, -0.3, -1e-300, 0.0, 2.0**-40, 0.1, 0.5, 1 / 3, 0.9999999, 1.0]


def build(name: str, epsilon: float) -> NumericMechanism:
    return NUMERIC_MECHANISMS[name](epsilon)


# -- exact reference laws from the papers -------------------------------------------------


def ref_pm_cell(m: PiecewiseMechanism, x: float, j: int) -> Fraction:
    """Probability of PM's cell j: the paper's density integrated over the cell, exactly."""
    c = Fraction(m.bound_units, SCALE)
    s = (c + 1) / (c - 1)  # e^{ε/2} realised by this C
    high = (s * s - s) / (2 * s + 2)  # Wang et al.: p = (e^ε − e^{ε/2}) / (2e^{ε/2} + 2)
    low = high / (s * s)
    left = (c + 1) / 2 * Fraction(x) - (c - 1) / 2
    right = left + c - 1
    width = Fraction(2, SCALE)
    a = -c + j * width
    b = a + width
    inside = max(Fraction(0), min(b, right) - max(a, left))
    return high * inside + low * (width - inside)


def ref_duchi_plus(m: DuchiMechanism, x: float) -> Fraction:
    """Duchi et al.: Pr[+C] = 1/2 + x/(2C) (= 1/2 + x(e^ε−1)/(2(e^ε+1)) at the ideal C)."""
    return Fraction(1, 2) + Fraction(x) / (2 * Fraction(m.bound_units, SCALE))


def prob_at(segments: list[Segment], v: int) -> Fraction:
    """Probability of report v (units) under a list of segments (overlaps add)."""
    total = Fraction(0)
    for s in segments:
        offset = v - s.first
        if offset >= 0 and offset % s.step == 0 and offset // s.step < s.size:
            total += s.probability
    return total


def moments(segments: list[Segment]) -> tuple[Fraction, Fraction, Fraction]:
    """(Σp, E[Y], E[Y²]) of a law given as segments, exactly (arithmetic progressions)."""
    mass = first = second = Fraction(0)
    for s in segments:
        n, a, d = s.size, s.first, s.step
        s1 = n * (n - 1) // 2
        s2 = (n - 1) * n * (2 * n - 1) // 6
        mass += s.probability * n
        first += s.probability * (n * a + d * s1)
        second += s.probability * (n * a * a + 2 * a * d * s1 + d * d * s2)
    return mass, first, second


def candidates(laws: list[list[Segment]]) -> set[int]:
    """Report values covering every piece on which the laws are jointly constant."""
    out: set[int] = set()
    for segments in laws:
        for s in segments:
            end = s.first + s.size * s.step
            for v in (s.first, s.first + s.step, end - s.step, end):
                out.update(v + d for d in (-2, -1, 0, 1, 2))
    return out


# -- ε boundaries ---------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize("name", ["duchi", "pm", "hybrid"])
def test_the_worst_case_likelihood_ratio_is_at_most_e_to_the_epsilon(
    name: str, epsilon: float
) -> None:
    m = build(name, epsilon)
    laws = [m.pmf(x) for x in INPUTS]
    worst = Fraction(1)
    for v in candidates(laws):
        probs = [prob_at(law, v) for law in laws]
        if not any(probs):
            continue
        assert min(probs) > 0, f"report {v} possible for some inputs only"
        worst = max(worst, max(probs) / min(probs))
    bound = _exp_upper_bound_check(epsilon)  # ≤ the true e^ε
    assert m.privacy_ratio() <= bound
    assert worst <= m.privacy_ratio()
    # Attained (by x = ±1): the SDK's claimed worst case is the realised worst case.
    if name == "hybrid" and m.alpha:
        assert worst >= mechanisms.PiecewiseMechanism(epsilon).privacy_ratio()
    else:
        assert worst == m.privacy_ratio()


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_the_grid_is_as_coarse_as_epsilon_allows_and_no_coarser(epsilon: float) -> None:
    """e^ε is met as closely as the grid allows: one grid step less and the ratio exceeds it."""
    bound = _exp_upper_bound_check(epsilon)
    pm = PiecewiseMechanism(epsilon)
    low = pm.window
    assert Fraction(SCALE + low, low) ** 2 <= bound
    assert low == 1 or Fraction(SCALE + low - 1, low - 1) ** 2 > bound
    # ln of the ratio moves by about 2/L per cell: within that of ε.
    assert pm.realized_epsilon >= epsilon - 2.5 / max(1, low - 1) - 1e-12
    duchi = DuchiMechanism(epsilon)
    k = duchi.bound_units
    assert Fraction(k + SCALE, k - SCALE) <= bound
    assert Fraction(k - 1 + SCALE, k - 1 - SCALE) > bound
    if epsilon <= 10:
        assert duchi.realized_epsilon >= epsilon * (1 - 1e-4)
    hybrid = HybridMechanism(epsilon)
    assert hybrid.realized_epsilon == max(pm.realized_epsilon, duchi.realized_epsilon) or (
        not hybrid.alpha and hybrid.realized_epsilon == duchi.realized_epsilon
    )


# -- the exact laws ------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [1e-4, 0.5, 1.0, 3.0, 20.0])
@pytest.mark.parametrize("x", INPUTS)
def test_pm_law_is_the_papers_density_integrated_over_the_cells(epsilon: float, x: float) -> None:
    m = PiecewiseMechanism(epsilon)
    law = m.pmf(x)
    assert moments(law)[0] == 1
    n = m.cells
    cells = {0, 1, n // 2, n - 2, n - 1}
    for s in law:
        j0 = (s.first + n - 1) // 2
        cells.update(j for j in (j0 - 1, j0, j0 + s.size - 1, j0 + s.size) if 0 <= j < n)
    for j in cells:
        assert prob_at(law, 2 * j + 1 - n) == ref_pm_cell(m, x, j), j


@pytest.mark.parametrize("epsilon", [1e-4, 0.5, 1.0, 20.0])
@pytest.mark.parametrize("x", INPUTS)
def test_duchi_law_is_the_papers(epsilon: float, x: float) -> None:
    m = DuchiMechanism(epsilon)
    k = m.bound_units
    law = m.pmf(x)
    assert prob_at(law, k) == ref_duchi_plus(m, x)
    assert prob_at(law, -k) == 1 - ref_duchi_plus(m, x)


@pytest.mark.parametrize("epsilon", [0.3, 1.0, 5.0])
def test_hybrid_law_mixes_pm_and_duchi_with_alpha(epsilon: float) -> None:
    m = HybridMechanism(epsilon)
    alpha = Fraction(m.alpha)
    assert (alpha == 0) == (epsilon <= EPSILON_STAR)
    if alpha:
        # Wang et al.: α = 1 − e^{−ε/2}, correctly rounded (libm's may be an ulp off: 5.0)
        assert m.alpha == -rounding.expm1(-epsilon / 2)
        assert abs(m.alpha + math.expm1(-epsilon / 2)) <= math.ulp(m.alpha)
    for x in (-1.0, 0.25, 1.0):
        law = m.pmf(x)
        assert moments(law)[0] == 1
        for v in candidates([law]):
            pm = prob_at(m.pm.pmf(x), v)
            duchi = prob_at(m.duchi.pmf(x), v)
            assert prob_at(law, v) == alpha * pm + (1 - alpha) * duchi


@pytest.mark.parametrize("epsilon", [1e-4, 0.5, 1.0, 2.0, 8.0, 20.0])
@pytest.mark.parametrize("name", ["duchi", "pm", "hybrid"])
def test_reports_are_exactly_unbiased_and_the_variance_formula_is_exact(
    name: str, epsilon: float
) -> None:
    m = build(name, epsilon)
    for x in INPUTS:
        mass, first, second = moments(m.pmf(x))
        assert mass == 1
        assert first / SCALE == Fraction(x)  # E[y | x] = x, exactly
        variance = second / SCALE**2 - Fraction(x) ** 2
        assert m.variance(1, x) == pytest.approx(float(variance), rel=1e-12)
        assert m.variance(250, x) == pytest.approx(float(variance) / 250, rel=1e-12)
        assert m.worst_case_variance() >= float(variance) * (1 - 1e-12)


@pytest.mark.parametrize("epsilon", [1e-4, 1.0, 20.0])
@pytest.mark.parametrize("x", [-1.0, -0.3, 0.0, 1 / 3, 1.0])
def test_pm_variance_matches_the_closed_form_exactly(epsilon: float, x: float) -> None:
    """Var = (C−1)x²/2 + (C−1)(2C−1)/6 − δ²/12 + (C+1)t(1−t)Δ²/2, in exact arithmetic.

    The first two terms are Wang et al.'s x²/(e^{ε/2}−1) + (e^{ε/2}+3)/(3(e^{ε/2}−1)²)
    for the realised C; δ²/12 is what reporting cell midpoints takes off; the last term
    is the window's randomized rounding (t its fraction, Δ = 2/(M+L) its step).
    """
    m = PiecewiseMechanism(epsilon)
    c = Fraction(m.cells, SCALE)
    delta = Fraction(2, SCALE)
    step = Fraction(2, SCALE + m.window)
    position = (Fraction(x) + 1) / step
    t = position - math.floor(position)
    x2 = Fraction(x) ** 2
    closed = (c - 1) * x2 / 2 + (c - 1) * (2 * c - 1) / 6 - delta**2 / 12
    closed += (c + 1) * t * (1 - t) * step**2 / 2
    _, first, second = moments(m.pmf(x))
    assert second / SCALE**2 - x2 == closed


# -- the variance floor behind the server's intervals ---------------------------------------


@pytest.mark.parametrize("epsilon", [1e-4, 0.5, 1.0, 2.0, 4.0, 8.0, 20.0])
@pytest.mark.parametrize("name", ["duchi", "pm", "hybrid"])
def test_second_moment_is_a_convex_quadratic_up_to_the_rounding_term(
    name: str, epsilon: float
) -> None:
    """E[y² | x] = A·x² + B + ρ(x) with A ≥ 0 and 0 ≤ ρ < 10⁻¹⁶, against the exact law."""
    m = build(name, epsilon)
    a, b = m.second_moment_coefficients()
    assert a >= 0.0
    for x in INPUTS:
        _, _, second = moments(m.pmf(x))
        rho = float(second / SCALE**2) - (a * x * x + b)
        float_error = 1e-12 * (a + b)
        assert -float_error <= rho <= 1e-16 + float_error, (x, rho)


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0, 8.0])
@pytest.mark.parametrize("name", ["duchi", "pm", "hybrid"])
def test_min_variance_is_the_least_variance_of_any_inputs_with_that_mean(
    name: str, epsilon: float
) -> None:
    """V(μ) is the point mass's variance and below that of every two-point mixture of mean μ.

    A report of an input drawn from a mixture is a mixture of the laws: its exact moments
    come from the SDK's ``pmf``. Without data, ``min_variance()`` is the least Var[y | x].
    """
    m = build(name, epsilon)
    rng = random.Random(5)
    for _ in range(40):
        u, v = sorted((rng.uniform(-1, 1), rng.uniform(-1, 1)))
        w = rng.random()
        mean = w * u + (1 - w) * v
        second = w * moments(m.pmf(u))[2] + (1 - w) * moments(m.pmf(v))[2]
        variance = float(second) / SCALE**2 - mean * mean
        assert m.min_variance(mean) <= variance * (1 + 1e-12)
    for x in INPUTS:
        assert m.min_variance(x) == pytest.approx(m.variance(1, x), rel=1e-12)
        assert m.min_variance() <= m.variance(1, x) * (1 + 1e-12)
    lowest = min(m.variance(1, x) for x in (-1.0, 0.0, 1.0))
    assert m.min_variance() == pytest.approx(lowest, rel=1e-12)
    if name == "duchi":  # the variance of any inputs of mean μ is exactly C² − μ²
        assert m.min_variance(0.3) == pytest.approx(m.bound**2 - 0.09, rel=1e-15)
    with pytest.raises(ValueError, match="outside"):
        m.min_variance(1.5)


# -- worst-case variances: the papers' formulas and the choice ------------------------------


@pytest.mark.parametrize("epsilon", [0.1, 0.5, 1.0, 1.29, 2.0, 4.0, 8.0])
def test_worst_case_variances_match_the_papers(epsilon: float) -> None:
    e, s = math.exp(epsilon), math.exp(epsilon / 2)
    duchi = ((e + 1) / (e - 1)) ** 2
    pm = 4 * s / (3 * (s - 1) ** 2)  # x²/(s−1) + (s+3)/(3(s−1)²) at |x| = 1
    hybrid = (s + 3) / (3 * s * (s - 1)) + duchi / s if epsilon > EPSILON_STAR else duchi
    assert DuchiMechanism(epsilon).worst_case_variance() == pytest.approx(duchi, rel=1e-6)
    assert PiecewiseMechanism(epsilon).worst_case_variance() == pytest.approx(pm, rel=1e-4)
    assert HybridMechanism(epsilon).worst_case_variance() == pytest.approx(hybrid, rel=1e-4)


@pytest.mark.parametrize("epsilon", [0.62, 1.0, 3.0, 10.0])
def test_the_hybrids_variance_is_flat_in_x(epsilon: float) -> None:
    m = HybridMechanism(epsilon)
    values = [m.variance(1, x) for x in INPUTS]
    assert max(values) - min(values) <= 1e-4 * max(values)
    assert m.worst_case_variance() >= max(values) * (1 - 1e-12)


def test_pm_beats_duchi_in_the_worst_case_exactly_above_1_29() -> None:
    for epsilon in (0.5, 1.0, 1.25, 1.28):
        assert PiecewiseMechanism(epsilon).variance_star() > DuchiMechanism(epsilon).variance_star()
    for epsilon in (1.30, 1.5, 3.0, 20.0):
        assert PiecewiseMechanism(epsilon).variance_star() < DuchiMechanism(epsilon).variance_star()


@pytest.mark.parametrize("epsilon", [1e-4, 0.3, 0.61, 0.62, 1.0, 2.0, 5.0, 20.0])
def test_auto_picks_the_lowest_worst_case_variance(epsilon: float) -> None:
    choice = choose_numeric(epsilon)
    best = min(m.variance_star() for m in choice.candidates)
    assert choice.mechanism.variance_star() <= best * (1 + 1e-12)
    assert choice.mechanism.name == ("duchi" if epsilon <= EPSILON_STAR else "hybrid")
    assert choice.reason.startswith(f"ε = {epsilon:g}: {choice.mechanism.name}")
    assert create_numeric("auto", epsilon) == choice.mechanism
    rows = choice.table()
    assert [r["chosen"] for r in rows].count(True) == 1
    assert min(r["relative_variance"] for r in rows) == 1.0
    hybrid = HybridMechanism(epsilon).variance_star()
    assert hybrid <= DuchiMechanism(epsilon).variance_star() * (1 + 1e-12)
    assert hybrid <= PiecewiseMechanism(epsilon).variance_star() * (1 + 1e-12)


def test_numeric_names_leave_the_categorical_registry_and_auto_alone() -> None:
    assert set(NUMERIC_MECHANISMS) == {"duchi", "pm", "hybrid"}
    assert not set(NUMERIC_MECHANISMS) & set(mechanisms.MECHANISMS)
    assert mechanisms.NUMERIC_NAMES == ("duchi", "pm", "hybrid", "auto")
    assert isinstance(mechanisms.choose(1.0, 8).mechanism, mechanisms.FrequencyOracle)
    with pytest.raises(ValueError, match="unknown mechanism 'pm'"):
        mechanisms.create("pm", epsilon=1.0, domain_size=4)


# -- the sampler realises the law -----------------------------------------------------------


def test_duchi_golden_vectors() -> None:
    m = DuchiMechanism(1.0)
    k = m.bound_units
    num, den = k * 2 + SCALE, 4 * k  # x = 1/2: Pr[+C] = (2K + M) / (4K)
    assert Fraction(num, den) == ref_duchi_plus(m, 0.5)
    rng = ScriptedRandom([num - 1, num, 0, den - 1])
    assert [m.perturb(0.5, rng)["y"] for _ in range(4)] == [m.bound, -m.bound, m.bound, -m.bound]
    assert rng.calls == [f"randrange({den})"] * 4 and rng.done()


def test_pm_golden_vectors() -> None:
    m = PiecewiseMechanism(2.0)
    n, low = m.cells, m.window
    span = SCALE + low
    # x = 0: the window starts at cell (M+L)/2; L is odd here, so halfway between two.
    assert low % 2 == 1
    i = span // 2
    # Round up (draw 0 < 1 of 2), inside (draw < M+L), 5th cell of the window.
    rng = ScriptedRandom([0, span - 1, 5])
    assert m.perturb(0.0, rng) == {"y": (2 * (i + 1 + 5) + 1 - n) / SCALE}
    assert rng.calls == ["randrange(2)", f"randrange({n})", f"randrange({low})"]
    # Round down, outside (draw ≥ M+L), the 3rd of the other cells (left of the window).
    rng = ScriptedRandom([1, span, 3])
    assert m.perturb(0.0, rng) == {"y": (2 * 3 + 1 - n) / SCALE}
    assert rng.calls == ["randrange(2)", f"randrange({n})", f"randrange({span})"]
    # Outside, a draw at or past the window start skips the window's L cells.
    rng = ScriptedRandom([1, n - 1, i])
    assert m.perturb(0.0, rng) == {"y": (2 * (i + low) + 1 - n) / SCALE}
    # x = 1: no rounding draw (the start is an integer), the window is the top L cells.
    rng = ScriptedRandom([0, low - 1])
    assert m.perturb(1.0, rng) == {"y": (n - 1) / SCALE} and rng.done()
    # x = −1: the window is the bottom L cells.
    rng = ScriptedRandom([0, 0])
    assert m.perturb(-1.0, rng) == {"y": (1 - n) / SCALE} and rng.done()


def test_hybrid_golden_vectors() -> None:
    m = HybridMechanism(2.0)
    # U = 0 < α: PM; U all ones > α: Duchi's.
    rng = ScriptedRandom([ZERO, m.pm.cells - 1, 0])
    assert m.perturb(1.0, rng) == {"y": (1 - m.pm.cells) / SCALE}
    rng = ScriptedRandom([ALL, 0])
    assert m.perturb(1.0, rng) == {"y": m.duchi.bound}
    low = HybridMechanism(0.5)
    rng = ScriptedRandom([0])
    assert low.perturb(0.2, rng)["y"] == low.duchi.bound and rng.done()  # α = 0: no draw


def _bins(m: NumericMechanism, x: float, edges: list[int]) -> list[Fraction]:
    """Exact probability that a report (units) falls in [edges[i], edges[i+1])."""
    out = [Fraction(0)] * (len(edges) - 1)
    for s in m.pmf(x):
        for b in range(len(edges) - 1):
            lo, hi = edges[b], edges[b + 1]
            # values first + k·step in [lo, hi)
            k0 = max(0, -(-(lo - s.first) // s.step))
            k1 = min(s.size, -(-(hi - s.first) // s.step))
            if k1 > k0:
                out[b] += s.probability * (k1 - k0)
    return out


@pytest.mark.parametrize(
    ("name", "epsilon", "x"),
    [("pm", 1.0, 0.3), ("pm", 4.0, -0.8), ("hybrid", 2.0, 0.6), ("pm", 0.2, 1.0)],
)
def test_perturb_samples_the_exact_law(name: str, epsilon: float, x: float) -> None:
    """Chi-square of 40,000 seeded reports over 24 bins against the exact bin probabilities."""
    m = build(name, epsilon)
    bound = m.bound_units
    edges = [-bound + (2 * bound + 1) * b // 24 for b in range(25)]
    expected = _bins(m, x, edges)
    assert sum(expected) == 1
    rng = random.Random(f"{name}-{epsilon}-{x}")
    draws = 40_000
    hist = Counter()
    for _ in range(draws):
        units = int(m.perturb(x, rng)["y"] * SCALE)
        hist[next(b for b in range(24) if edges[b] <= units < edges[b + 1])] += 1
    f_exp = [float(p) * draws for p in expected]
    keep = [b for b in range(24) if f_exp[b] > 0]
    assert all(hist[b] == 0 for b in range(24) if f_exp[b] == 0)
    result = chisquare([hist[b] for b in keep], [f_exp[b] for b in keep])
    assert result.pvalue > 1e-4, result


@pytest.mark.parametrize("epsilon", [0.5, 3.0])
def test_duchi_samples_plus_with_its_probability(epsilon: float) -> None:
    m = DuchiMechanism(epsilon)
    rng = random.Random(7)
    plus = sum(m.perturb(-0.4, rng)["y"] > 0 for _ in range(20_000))
    assert binomtest(plus, 20_000, float(ref_duchi_plus(m, -0.4))).pvalue > 1e-4


@pytest.mark.parametrize("name", ["duchi", "pm", "hybrid"])
def test_sdk_reports_average_to_the_true_mean(name: str) -> None:
    """20,000 CSPRNG reports of mixed values: the mean lands within 4σ of the truth."""
    m = build(name, 1.0)
    rng = random.Random(11)
    values = [rng.uniform(-1, 1) for _ in range(20_000)]
    ys = [m.perturb(x)["y"] for x in values]  # the default CSPRNG
    truth = sum(values) / len(values)
    sigma = math.sqrt(sum(m.variance(1, x) for x in values)) / len(values)
    assert abs(sum(ys) / len(ys) - truth) < 4 * sigma


# -- validation -----------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [0.0, -1.0, 5e-5, 20.5, math.nan, math.inf, True, "1"])
@pytest.mark.parametrize("name", ["duchi", "pm", "hybrid"])
def test_epsilon_out_of_range_is_refused_with_the_range(name: str, epsilon: object) -> None:
    with pytest.raises(ValueError, match="epsilon must be"):
        build(name, epsilon)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [1.0000001, -2, math.nan, math.inf, True, "0.5", None])
def test_values_outside_minus_one_one_are_refused(value: object) -> None:
    with pytest.raises(ValueError, match=r"outside \[-1, 1\]|must be a number"):
        HybridMechanism(1.0).perturb(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["duchi", "pm", "hybrid"])
def test_check_payload_accepts_exactly_what_perturb_produces(name: str) -> None:
    m = build(name, 1.5)
    rng = random.Random(3)
    for x in (-1.0, -0.2, 0.0, 0.7, 1.0):
        payload = m.perturb(x, rng)
        assert m.check_payload(payload) == payload
        assert m.units(payload) == payload["y"] * SCALE


def _pm_point(m: HybridMechanism | PiecewiseMechanism) -> float:
    pm = m.pm if isinstance(m, HybridMechanism) else m
    return (2 * (pm.cells // 2) + 1 - pm.cells) / SCALE  # a cell midpoint (odd units)


@pytest.mark.parametrize("name", ["duchi", "pm", "hybrid"])
def test_check_payload_refuses_anything_else(name: str) -> None:
    m = build(name, 1.5)
    c = m.bound
    bad: list[object] = [
        None,
        [],
        {},
        {"y": 1},  # an int
        {"y": True},
        {"y": "0.5"},
        {"y": None},
        {"y": math.nan},
        {"y": math.inf},
        {"y": -math.inf},
        {"y": math.nextafter(c, math.inf)},
        {"y": c * 2},
        {"y": 2.0**-31},  # off the grid
        {"y": 0.1},  # off the grid (not a multiple of 2⁻³⁰)
        {"y": 0.0},  # even units: no report
        {"y": c, "z": 1},
        {"Y": c},
    ]
    if name == "duchi":
        bad.append({"y": _pm_point(PiecewiseMechanism(1.5))})  # not ±C
    for payload in bad:
        with pytest.raises(PayloadError, match=f"^{name} payload"):
            m.check_payload(payload)


def test_the_hybrid_below_epsilon_star_is_duchis_and_refuses_pm_reports() -> None:
    m = HybridMechanism(0.5)
    assert m.alpha == 0 and m.bound == DuchiMechanism(0.5).bound
    with pytest.raises(PayloadError):
        m.check_payload({"y": _pm_point(m)})
    assert HybridMechanism(2.0).check_payload({"y": _pm_point(HybridMechanism(2.0))})


@pytest.mark.parametrize("name", ["duchi", "pm", "hybrid"])
def test_params_round_trip(name: str) -> None:
    m = build(name, 0.75)
    assert m.params() == {"mechanism": name, "epsilon": 0.75}
    assert numeric_from_params(m.params()) == m
    assert create_numeric(name, 0.75) == m


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ({"epsilon": 1.0}, "lack 'mechanism'"),
        ({"mechanism": "pm"}, "lack 'epsilon'"),
        ({"mechanism": "pm", "epsilon": 1.0, "domain_size": 2}, "no parameter"),
        ({"mechanism": "grr", "epsilon": 1.0}, "unknown numeric mechanism"),
        ({"mechanism": "auto", "epsilon": 1.0}, "unknown numeric mechanism"),
        ({"mechanism": "pm", "epsilon": 99.0}, "epsilon must be"),
    ],
)
def test_bad_params_are_refused(params: dict[str, object], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        numeric_from_params(params)


def test_scale_maps_the_range_onto_minus_one_one() -> None:
    assert scale(0.0, 0.0, 120.0) == -1.0
    assert scale(120.0, 0.0, 120.0) == 1.0
    assert scale(60.0, 0.0, 120.0) == 0.0
    assert scale(-5.0, -10.0, 10.0) == -0.5
    assert scale(1e300, -1e300, 1e300) == 1.0
    assert -1.0 <= scale(0.1 + 0.2, 0.1, 0.3) <= 1.0

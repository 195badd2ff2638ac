"""Local differential privacy mechanisms: the protocol, defined once.

Standard library only and free of I/O: the device perturbs with these objects, the
collector validates with them and the aggregator decodes with them.

>>> from client_sdk import mechanisms
>>> m = mechanisms.create("oue", epsilon=1.0, domain_size=32)
>>> payload = m.perturb(7)        # JSON-serializable; default randomness: a CSPRNG
>>> round(m.variance(10_000), 6)  # variance of one frequency estimate from 10⁴ reports
0.000368

Memoized mechanisms (``memo-grr``, ``memo-sue``, ``memo-oue``; RAPPOR's permanent
randomized response) take ``permanent_epsilon`` (ε∞) besides ``epsilon`` (ε₁, one report)
and derive each device's permanent response from its secret:

>>> m = mechanisms.create("memo-oue", epsilon=1.0, domain_size=32, permanent_epsilon=4.0)
>>> secret = mechanisms.new_secret()  # kept on the device
>>> payload = m.perturb_memoized(7, secret, metric="app.page", version=1)

Every mechanism draws its randomness through :mod:`client_sdk.mechanisms.randomness`:
the operating system's CSPRNG by default, any ``random.Random``-like object when given
(:class:`~client_sdk.mechanisms.randomness.RandomSource`; tests pass a seeded one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from client_sdk.errors import PayloadError  # re-exported: the aggregator imports it from here
from client_sdk.mechanisms.base import (
    MAX_DOMAIN_SIZE,
    MAX_EPSILON,
    MIN_EPSILON,
    Choice,
    FrequencyOracle,
)
from client_sdk.mechanisms.hadamard import HadamardResponse
from client_sdk.mechanisms.hashing import BinaryLocalHashing, LocalHashing
from client_sdk.mechanisms.memoized import (
    HmacShakeRandom,
    Memoized,
    MemoizedGRR,
    MemoizedOUE,
    MemoizedSUE,
    new_secret,
)
from client_sdk.mechanisms.numeric import (
    NUMERIC_MECHANISMS,
    NUMERIC_NAMES,
    DuchiMechanism,
    HybridMechanism,
    NumericChoice,
    NumericMechanism,
    PiecewiseMechanism,
    choose_numeric,
    create_numeric,
    numeric_from_params,
)
from client_sdk.mechanisms.pram import (
    PostRandomization,
    epsilon_of,
    freeze,
    read_frozen,
    read_matrix,
)
from client_sdk.mechanisms.randomness import SecureRandom, default_rng
from client_sdk.mechanisms.rounding import exp
from client_sdk.mechanisms.rr import BinaryRR, GeneralizedRR
from client_sdk.mechanisms.subset import SubsetSelection
from client_sdk.mechanisms.unary import OptimizedUnaryEncoding, SymmetricUnaryEncoding

__all__ = [
    "MAX_DOMAIN_SIZE",
    "MAX_EPSILON",
    "MECHANISMS",
    "MEMOIZED_OF",
    "MIN_EPSILON",
    "NAMES",
    "AutoChoice",
    "BinaryLocalHashing",
    "BinaryRR",
    "FrequencyOracle",
    "GeneralizedRR",
    "HadamardResponse",
    "HmacShakeRandom",
    "LocalHashing",
    "Memoized",
    "MemoizedGRR",
    "MemoizedOUE",
    "MemoizedSUE",
    "OptimizedUnaryEncoding",
    "PayloadError",
    "PostRandomization",
    "SecureRandom",
    "SubsetSelection",
    "SymmetricUnaryEncoding",
    "choose",
    "create",
    "default_rng",
    "from_params",
    "new_secret",
]

MECHANISMS: dict[str, type[FrequencyOracle]] = {
    cls.name: cls
    for cls in (
        BinaryRR,
        GeneralizedRR,
        SymmetricUnaryEncoding,
        OptimizedUnaryEncoding,
        LocalHashing,
        BinaryLocalHashing,
        HadamardResponse,
        SubsetSelection,
        MemoizedGRR,
        MemoizedSUE,
        MemoizedOUE,
        PostRandomization,
    )
}
"""Every concrete mechanism by its wire name."""

MEMOIZED_OF: dict[str, str] = {
    "rr": "memo-grr",
    "grr": "memo-grr",
    "sue": "memo-sue",
    "oue": "memo-oue",
    **{name: name for name in ("memo-grr", "memo-sue", "memo-oue")},
}
"""The memoized form of each mechanism that has one (for metrics marked longitudinal)."""

NAMES: tuple[str, ...] = (*MECHANISMS, "auto")

AUTO_CANDIDATES = ("grr", "oue", "olh", "hr", "ss", "sue")
"""What ``auto`` chooses among: rr is grr at k = 2, blh is olh with a worse g; pram needs
a matrix someone chose for the metric's meaning, which ``auto`` cannot invent."""

MEMOIZED_AUTO_CANDIDATES = ("memo-grr", "memo-oue", "memo-sue")
"""What ``auto`` chooses among given ``permanent_epsilon``: the mechanisms with a memoized form."""

VARIANCE_TIE = 0.05
"""``auto`` treats variances within 5 % of the lowest as tied: 5 % of variance is 2.5 %
of a confidence interval's width, less than anyone plans on, while the tied mechanisms'
reports differ in size by up to 100×."""


@dataclass(frozen=True)
class AutoChoice(Choice[FrequencyOracle]):
    """What ``auto`` picked for (ε, k), and why; its table adds wire bytes and server cost."""

    def _columns(self, m: FrequencyOracle) -> dict[str, Any]:
        return {"wire_bytes": m.wire_bytes, "server_cost": m.server_cost}


def choose(epsilon: float, domain_size: int, permanent_epsilon: float | None = None) -> AutoChoice:
    """Pick the mechanism with the lowest variance for (ε, k); break ties by size, then cost.

    Variances within :data:`VARIANCE_TIE` of the lowest count as tied; among them the
    smallest report on the wire wins, then the cheapest to decode. Given
    ``permanent_epsilon`` (ε∞), the choice is among the memoized mechanisms.

    Raises:
        ValueError: ε, ε∞ or k out of range.
    """
    built = _candidates(epsilon, domain_size, permanent_epsilon)
    ranked = tuple(sorted(built, key=lambda m: m.variance_star()))
    best = ranked[0].variance_star()
    tied = [m for m in ranked if m.variance_star() <= best * (1 + VARIANCE_TIE)]
    chosen = min(tied, key=lambda m: (m.wire_bytes, m.server_cost_rank, m.variance_star()))
    why = _why_chosen(chosen, ranked, tied)
    grr_name = "grr" if permanent_epsilon is None else "memo-grr"
    if chosen.name != grr_name:
        why += _beside_grr(next(m for m in ranked if m.name == grr_name), epsilon, domain_size)
    reason = f"ε = {epsilon:g}, k = {domain_size}: {why}"
    return AutoChoice(mechanism=chosen, reason=reason, candidates=ranked)


def _candidates(
    epsilon: float, domain_size: int, permanent_epsilon: float | None
) -> list[FrequencyOracle]:
    """The mechanisms ``auto`` weighs for (ε, k): the memoized ones when ε∞ is given."""
    if permanent_epsilon is None:
        return [
            MECHANISMS[name](epsilon=epsilon, domain_size=domain_size) for name in AUTO_CANDIDATES
        ]
    return [
        MECHANISMS[name](  # type: ignore[call-arg]
            epsilon=epsilon, domain_size=domain_size, permanent_epsilon=permanent_epsilon
        )
        for name in MEMOIZED_AUTO_CANDIDATES
    ]


def _why_chosen(
    chosen: FrequencyOracle, ranked: tuple[FrequencyOracle, ...], tied: list[FrequencyOracle]
) -> str:
    """Why ``chosen`` won: the lowest variance, or the smallest report among the tied."""
    lowest = ranked[0]
    best = lowest.variance_star()
    if chosen is lowest:
        why = f"{chosen.name} has the lowest variance (Var* = {best:.4g})"
    else:
        why = (
            f"{chosen.name}: Var* = {chosen.variance_star():.4g}, within {VARIANCE_TIE:.0%} "
            f"of the lowest ({lowest.name} {best:.4g})"
        )
    others = [m for m in tied if m is not chosen]
    if others:
        listed = ", ".join(
            f"{m.name} (Var* = {m.variance_star():.4g}, {m.wire_bytes} bytes)" for m in others
        )
        why += f"; tied with {listed}, it has the smallest report"
    return why + f" ({chosen.wire_bytes} bytes; server: {chosen.server_cost})"


def _beside_grr(grr: FrequencyOracle, epsilon: float, k: int) -> str:
    """What (memoized) GRR would have given, and why it loses when k ≥ 3e^ε + 2."""
    threshold = 3 * exp(epsilon) + 2
    return f"; {grr.name} would have Var* = {grr.variance_star():.4g}" + (
        f" since k = {k} ≥ 3e^ε + 2 = {threshold:.3g}" if k >= threshold else ""
    )


def create(
    name: str,
    epsilon: float | None = None,
    domain_size: int | None = None,
    **options: Any,
) -> FrequencyOracle:
    """Build a mechanism by name: rr, grr, sue, oue, olh, blh, hr, ss, memo-grr, memo-sue,
    memo-oue, pram or auto.

    Args:
        name: the mechanism's wire name; ``auto`` returns what :func:`choose` picks.
        epsilon: ε of one report. For ``rr`` it may be left out when one of
            ``flip_probability``, ``truth_bias`` or ``keep_probability`` is given.
        domain_size: k (``rr``: 2, the default).
        **options: ``g`` (olh), ``s`` (ss), ``keep_probability`` / ``flip_probability`` /
            ``truth_bias`` (rr), ``permanent_epsilon`` (ε∞: required by memo-*; given to
            ``auto``, it chooses a memoized mechanism), ``matrix`` (pram: k×k, rows the
            true value; ε is read off it, and a given ``epsilon`` must not be below it).

    Raises:
        ValueError: unknown name, unknown option, or a parameter out of range.
    """
    if name == "auto":
        return _create_auto(epsilon, domain_size, options)
    if name not in MECHANISMS:
        raise ValueError(f"unknown mechanism {name!r}; choose one of {', '.join(NAMES)}")
    if name == "rr":
        return _create_rr(epsilon, domain_size, options)
    if name == "pram":
        return _create_pram(epsilon, domain_size, options)
    return _create_named(name, epsilon, domain_size, options)


def _create_auto(
    epsilon: float | None, domain_size: int | None, options: dict[str, Any]
) -> FrequencyOracle:
    permanent = options.pop("permanent_epsilon", None)
    if options:
        raise ValueError(f"auto takes no options but permanent_epsilon, got {sorted(options)}")
    if epsilon is None or domain_size is None:
        raise ValueError("auto needs epsilon and domain_size")
    return choose(epsilon, domain_size, permanent).mechanism


def _create_named(
    name: str, epsilon: float | None, domain_size: int | None, options: dict[str, Any]
) -> FrequencyOracle:
    """Any mechanism but rr, pram and auto: ε and k, and the options it takes."""
    memoized = issubclass(MECHANISMS[name], Memoized)
    allowed = {"olh": {"g"}, "ss": {"s"}}.get(name, {"permanent_epsilon"} if memoized else set())
    unknown = set(options) - allowed
    if unknown:
        raise ValueError(
            f"{name} takes no option {sorted(unknown)}"
            + (f" (it takes {sorted(allowed)})" if allowed else "")
        )
    if epsilon is None or domain_size is None:
        raise ValueError(f"{name} needs epsilon and domain_size")
    if memoized and "permanent_epsilon" not in options:
        raise ValueError(f"{name} needs permanent_epsilon (ε∞, the bound for repeated reports)")
    return MECHANISMS[name](epsilon=epsilon, domain_size=domain_size, **options)


def _create_rr(epsilon: float | None, domain_size: int | None, options: dict[str, Any]) -> BinaryRR:
    forms = {"keep_probability", "flip_probability", "truth_bias"}
    unknown = set(options) - forms
    if unknown:
        raise ValueError(f"rr takes no option {sorted(unknown)} (it takes {sorted(forms)})")
    if domain_size not in (None, 2):
        raise ValueError(f"rr is binary: domain_size must be 2, got {domain_size}")
    if len(options) > 1:
        raise ValueError(f"give one of {sorted(forms)}, not {sorted(options)}")
    if not options:
        if epsilon is None:
            raise ValueError("rr needs epsilon, or one of " + ", ".join(sorted(forms)))
        return BinaryRR(epsilon=epsilon)
    ((form, value),) = options.items()
    built = {
        "keep_probability": BinaryRR.from_keep_probability,
        "flip_probability": BinaryRR.from_flip_probability,
        "truth_bias": BinaryRR.from_truth_bias,
    }[form](value)
    if epsilon is not None and epsilon < built.epsilon:
        raise ValueError(
            f"{form} = {value!r} realises ε = {built.epsilon:.6g}, more than the declared {epsilon}"
        )
    return built


def _create_pram(
    epsilon: float | None, domain_size: int | None, options: dict[str, Any]
) -> PostRandomization:
    if set(options) != {"matrix"}:
        raise ValueError(f"pram takes the one option 'matrix' (k×k), got {sorted(options)}")
    try:
        matrix = freeze(options["matrix"])
        rows = read_frozen(matrix)
    except TypeError:  # an unhashable entry: read_matrix refuses it, saying which
        read_matrix(options["matrix"])
        raise
    if domain_size is not None and domain_size != len(rows):
        raise ValueError(f"pram's matrix is {len(rows)}×{len(rows)} for {domain_size} values")
    realised = epsilon_of(rows)
    if epsilon is not None and epsilon < realised:
        raise ValueError(
            f"pram's matrix realises ε = {realised:.6g}, more than the declared {epsilon}"
        )
    return PostRandomization(epsilon=realised, domain_size=len(rows), matrix=matrix)


def from_params(params: dict[str, Any]) -> FrequencyOracle:
    """Rebuild a mechanism from :meth:`FrequencyOracle.params` (e.g. a metric definition)."""
    rest = dict(params)
    try:
        name = rest.pop("mechanism")
        epsilon = rest.pop("epsilon")
        domain_size = rest.pop("domain_size")
    except KeyError as exc:
        raise ValueError(f"mechanism parameters lack {exc.args[0]!r}") from None
    if name == "rr" and "keep_probability" in rest:
        keep = rest.pop("keep_probability")
        if rest:
            raise ValueError(f"rr takes no option {sorted(rest)}")
        return BinaryRR(epsilon=epsilon, domain_size=domain_size, keep_probability=keep)
    return create(name, epsilon=epsilon, domain_size=domain_size, **rest)


# Numeric metrics (kind "numeric"): mean estimation, a registry of their own (see numeric.py).
__all__ += [
    "NUMERIC_MECHANISMS",
    "NUMERIC_NAMES",
    "DuchiMechanism",
    "HybridMechanism",
    "NumericChoice",
    "NumericMechanism",
    "PiecewiseMechanism",
    "choose_numeric",
    "create_numeric",
    "numeric_from_params",
]

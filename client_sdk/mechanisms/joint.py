"""Joint metrics (kind ``joint``): one tuple of categorical attributes, one report, one ε.

A device holds a tuple (x₁, …, x_d), each x_j one of k_j labels. The mechanism has
*groups*, each a set of attributes with a frequency oracle over the product of their
domains. A device picks one group uniformly at random (independently of its tuple),
projects its tuple onto the group's attributes and reports that cell through the group's
oracle at the full ε. The group choice carries no information, so a report is ε-LDP and
the tuple costs ε once. Two layouts:

* ``joint``: one group holding every attribute (joint-domain GRR or OLH);
* ``marginals``: one group per pair of attributes (marginal release as in CALM, Zhang et
  al., CCS 2018, with marginals of size 2: users split into C(d, 2) groups).

Payload: ``{"g": group, **the group oracle's payload}``. :func:`choose_joint` picks the
layout and each group's oracle by the variance of a 2-way marginal cell, and says why.

In full: ``docs/statistics/joint.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from itertools import combinations
from typing import Any

from client_sdk.errors import PayloadError
from client_sdk.mechanisms.base import (
    MAX_DOMAIN_SIZE,
    FrequencyOracle,
    WireSized,
    check_epsilon,
    sequential_bounds,
)
from client_sdk.mechanisms.hashing import LocalHashing
from client_sdk.mechanisms.randomness import RandomSource, default_rng
from client_sdk.mechanisms.rr import GeneralizedRR

__all__ = [
    "JOINT_METHODS",
    "MAX_ATTRIBUTES",
    "MAX_ATTRIBUTE_SIZE",
    "JointChoice",
    "JointMechanism",
    "SetOracle",
    "choose_joint",
    "joint_from_params",
    "joint_mechanism",
]

JOINT_METHODS = ("joint", "marginals")
"""``joint``: one oracle over the product domain; ``marginals``: one group per pair."""

MAX_ATTRIBUTES = 8
"""Most attributes of a joint metric: 28 pairs, so each marginal's group gets 1/28 of the
devices; beyond that every 2-way cell needs tens of millions of devices at ε ≤ 2."""

MAX_ATTRIBUTE_SIZE = 256
"""Most labels of one attribute: a pair's domain (≤ 256² = 65 536) must fit one oracle
(:data:`~client_sdk.mechanisms.base.MAX_DOMAIN_SIZE`)."""

MAX_COUNTERS = 1 << 20
"""Most counters of one joint metric (group sizes plus every group's cells): 8 MiB of
packed counts per window, the string metrics' ceiling; 8 attributes of 256 values in
pairs would need 1.8 M."""

INNER = {"grr": GeneralizedRR, "olh": LocalHashing}
"""Oracles a group may use: GRR and OLH report one small value, and their support of a
set of cells has a variance known in closed form (:class:`SetOracle`)."""


def _product(sizes: tuple[int, ...]) -> int:
    return math.prod(sizes)


def _check_sizes(sizes: tuple[int, ...]) -> None:
    """A joint metric's attribute value counts: 2 to MAX_ATTRIBUTES attributes, each of
    2 to MAX_ATTRIBUTE_SIZE values.

    Raises:
        ValueError: with the limit broken.
    """
    if not 2 <= len(sizes) <= MAX_ATTRIBUTES:
        raise ValueError(f"a joint metric has 2 to {MAX_ATTRIBUTES} attributes, got {len(sizes)}")
    for k in sizes:
        if type(k) is not int or not 2 <= k <= MAX_ATTRIBUTE_SIZE:
            raise ValueError(f"each attribute has 2 to {MAX_ATTRIBUTE_SIZE} values, got {sizes}")


def _best_oracle(epsilon: float, k: int) -> FrequencyOracle:
    """The lower-variance of GRR and OLH over k values (GRR on ties: no hash to decode)."""
    grr = GeneralizedRR(epsilon=epsilon, domain_size=k)
    olh = LocalHashing(epsilon=epsilon, domain_size=k)
    return grr if grr.variance_star() <= olh.variance_star() else olh


@dataclass(frozen=True)
class SetOracle:
    """A group oracle seen through the sum of its support over a set of m cells.

    A marginal cell of attributes A, read from a group holding more, is the set of the
    group's m = K_g/Π_{a∈A} k_a cells that agree with it. Its estimate Σ f̂ over the set is
    (C_S/n − m·q*)/(p* − q*) with C_S the summed support. For GRR a report lies in the set
    or not, so the set is itself a pure oracle with p_S = p* + (m−1)q*, q_S = m·q* (exact).
    For OLH a report supports s ∈ 0..m of the set's cells; s/m ∈ [0, 1] has mean
    q* + f_S(p* − q*)/m, so p_S = q* + (p* − q*)/m, q_S = q* and the support passed to the
    interval code is C_S/m (a binomial interval on a [0, 1] mean is conservative); the
    variance adds the m cells' variances (the hash family's pairs are uniform, so distinct
    cells' support indicators are uncorrelated up to O(1/P)).

    When the group is a random part of ``population`` reports (a device picks its group
    uniformly), its share of the set differs from everyone's by sampling:
    :meth:`variance` adds f(1 − f)(1/n − 1/population), the variance of a uniform
    sample of n of them (without replacement), which dominates at large ε.
    """

    base: FrequencyOracle
    m: int
    population: int = 0
    """Every report of the metric (0: the group is all of them, no sampling term)."""

    @property
    def exact(self) -> bool:
        """Whether the set's support is one Bernoulli per report (GRR, or a single cell)."""
        return self.m == 1 or isinstance(self.base, GeneralizedRR)

    @property
    def epsilon(self) -> float:  # noqa: D102
        return self.base.epsilon

    @property
    def p(self) -> float:
        """p_S (see the class)."""
        p, q = self.base.p, self.base.q
        return p + (self.m - 1) * q if self.exact else q + (p - q) / self.m

    @property
    def q(self) -> float:
        """q_S (see the class)."""
        return self.m * self.base.q if self.exact else self.base.q

    def scaled_support(self, summed: Any) -> Any:
        """The support count the interval code reads: C_S, or C_S/m (see the class)."""
        return summed if self.exact else summed / self.m

    def debias(self, support_count: Any, n: Any) -> Any:
        """f̂_S from :meth:`scaled_support` and n."""
        return (support_count / n - self.q) / (self.p - self.q)

    def variance(self, n: Any, frequency: Any = 0.0) -> Any:
        """Variance of f̂_S from n reports of the group at true set frequency f (the share
        of all ``population`` reports, sampling included)."""
        return self.ldp_variance(n, frequency) + self.sampling_variance(n, frequency)

    def ldp_variance(self, n: Any, frequency: Any = 0.0) -> Any:
        """The mechanism's part: the variance of f̂_S around the group's own share."""
        p, q = self.base.p, self.base.q
        if self.exact:
            ps, qs = self.p, self.q
            return qs * (1 - qs) / (n * (ps - qs) ** 2) + frequency * (1 - ps - qs) / (
                n * (ps - qs)
            )
        return (self.m * q * (1 - q) + frequency * (p - q) * (1 - p - q)) / (n * (p - q) ** 2)

    def sampling_variance(self, n: Any, frequency: Any = 0.0) -> Any:
        """f(1 − f)(1/n − 1/population): the group's share around everyone's (0 when the
        group is everyone)."""
        if self.population <= 0:
            return 0.0 * frequency
        gap = 1.0 / n - 1.0 / self.population
        return frequency * (1 - frequency) * (gap if gap > 0 else 0.0)

    def variance_star(self) -> float:
        """n·Var at f ≈ 0."""
        return float(self.variance(1))


@dataclass(frozen=True)
class JointMechanism(WireSized):
    """Groups of attributes, each with its oracle at ε; a device reports through one.

    Args:
        epsilon: ε of one report (of the whole tuple).
        sizes: k_j of each attribute (2..:data:`MAX_ATTRIBUTE_SIZE`), for 2 to
            :data:`MAX_ATTRIBUTES` attributes.
        groups: each group's attributes, increasing indices.
        oracles: each group's oracle (:data:`INNER`), over the product of its sizes, at ε.

    Raises:
        ValueError: a parameter outside its range, or groups and oracles that disagree.
    """

    epsilon: float
    sizes: tuple[int, ...]
    groups: tuple[tuple[int, ...], ...]
    oracles: tuple[FrequencyOracle, ...]

    name = "joint"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        _check_sizes(self.sizes)
        if not self.groups or len(self.groups) != len(self.oracles):
            raise ValueError("a joint mechanism needs one oracle per group, and a group")
        for attrs, oracle in zip(self.groups, self.oracles, strict=True):
            self._check_group(attrs, oracle)
        covered = {a for attrs in self.groups for a in attrs}
        if covered != set(range(len(self.sizes))):
            raise ValueError("every attribute must be in some group")
        if self.counters > MAX_COUNTERS:
            raise ValueError(
                f"this layout needs {self.counters:,} counters a window, more than "
                f"{MAX_COUNTERS:,}: fewer attributes or values"
            )

    def _check_group(self, attrs: tuple[int, ...], oracle: FrequencyOracle) -> None:
        """One group: increasing attribute indices, an inner oracle at the metric's ε over
        the product of its attributes' values.

        Raises:
            ValueError: saying which rule the group breaks.
        """
        d = len(self.sizes)
        if list(attrs) != sorted(set(attrs)) or not all(0 <= a < d for a in attrs):
            raise ValueError(f"group {list(attrs)} must list attribute indices increasing")
        if oracle.name not in INNER or not isinstance(oracle, INNER[oracle.name]):
            raise ValueError(f"a group's oracle is one of {list(INNER)}, got {oracle.name}")
        if oracle.epsilon != self.epsilon:
            raise ValueError("every group's oracle runs at the metric's ε")
        if oracle.domain_size != _product(tuple(self.sizes[a] for a in attrs)):
            raise ValueError(f"group {list(attrs)}'s oracle is over the wrong domain size")

    # -- layout ------------------------------------------------------------------------
    @property
    def method(self) -> str:
        """``joint`` (one group of every attribute) or ``marginals``."""
        return "joint" if self.groups == (tuple(range(len(self.sizes))),) else "marginals"

    @cached_property
    def group_sizes(self) -> tuple[int, ...]:
        """K_g: cells of each group's domain."""
        return tuple(o.domain_size for o in self.oracles)

    @cached_property
    def offsets(self) -> tuple[int, ...]:
        """Where each group's support counts start in the counters (after the G group sizes)."""
        out, at = [], len(self.groups)
        for size in self.group_sizes:
            out.append(at)
            at += size
        return tuple(out)

    @property
    def counters(self) -> int:
        """Counters of a window: n_g of each group, then each group's K_g support counts."""
        return len(self.groups) + sum(self.group_sizes)

    @property
    def domain_size(self) -> int:
        """Cells of the full product domain."""
        return _product(self.sizes)

    def cell(self, values: tuple[int, ...], attrs: tuple[int, ...]) -> int:
        """The row-major index of ``values`` projected onto ``attrs``."""
        index = 0
        for a in attrs:
            index = index * self.sizes[a] + values[a]
        return index

    # -- device ------------------------------------------------------------------------
    def check_value(self, value: object) -> tuple[int, ...]:
        """``value`` as a tuple of d ints, each in range(k_j), or ``ValueError``."""
        if not isinstance(value, (list, tuple)) or len(value) != len(self.sizes):
            raise ValueError(f"a joint value is a tuple of {len(self.sizes)} values")
        out = []
        for j, (x, k) in enumerate(zip(value, self.sizes, strict=True)):
            if type(x) is not int or not 0 <= x < k:
                raise ValueError(f"value #{j} must be an int in range(0, {k}), got {x!r}")
            out.append(x)
        return tuple(out)

    def perturb(self, value: object, rng: RandomSource | None = None) -> dict[str, Any]:
        """Report one tuple: a uniform group, then its cell through the group's oracle.

        Raises:
            ValueError: ``value`` is not a tuple of valid indices.
        """
        values = self.check_value(value)
        rng = rng or default_rng()
        g = rng.randrange(len(self.groups)) if len(self.groups) > 1 else 0
        inner = self.oracles[g].perturb(self.cell(values, self.groups[g]), rng)
        return {"g": g, **inner}

    # -- collector / server ------------------------------------------------------------
    def check_payload(self, payload: object) -> dict[str, Any]:
        """Validate one payload strictly and return it in canonical form.

        Raises:
            PayloadError: no group, an unknown group, or a bad inner payload.
        """
        if not isinstance(payload, dict) or "g" not in payload:
            raise PayloadError(f"joint payload {str(payload)[:80]}: must be an object with 'g'")
        g = payload["g"]
        if type(g) is not int or not 0 <= g < len(self.groups):
            raise PayloadError(f"joint payload: 'g' must be an int in range(0, {len(self.groups)})")
        inner = {key: x for key, x in payload.items() if key != "g"}
        return {"g": g, **self.oracles[g].check_payload(inner)}

    def implausible(self, payload: dict[str, Any]) -> None:
        """None: GRR and OLH reports have no implausible region."""
        return None

    def max_payload(self) -> dict[str, Any]:
        """A largest payload."""
        g = max(range(len(self.groups)), key=lambda i: self.oracles[i].wire_bytes)
        return {"g": g, **self.oracles[g].max_payload()}

    def params(self) -> dict[str, Any]:
        """Everything :func:`joint_from_params` needs."""
        return {
            "mechanism": self.name,
            "epsilon": self.epsilon,
            "sizes": list(self.sizes),
            "groups": [list(attrs) for attrs in self.groups],
            "oracles": [o.params() for o in self.oracles],
        }

    @property
    def realized_epsilon(self) -> float:
        """The largest ε any group's oracle realises (the group choice is free)."""
        return max(o.realized_epsilon for o in self.oracles)

    def privacy_bounds(self) -> dict[str, Any]:  # noqa: D102
        return sequential_bounds(
            self.epsilon, f"One report of the whole tuple is {self.epsilon:g}-LDP."
        )

    # -- estimation helpers --------------------------------------------------------------
    def sources(self, attrs: tuple[int, ...]) -> list[int]:
        """Groups holding every attribute of ``attrs``."""
        return [g for g, held in enumerate(self.groups) if set(attrs) <= set(held)]

    def set_oracle(self, g: int, attrs: tuple[int, ...], population: int = 0) -> SetOracle:
        """Group g's oracle seen through one cell of the marginal over ``attrs``
        (``population``: every report of the metric, for the sampling term)."""
        held = _product(tuple(self.sizes[a] for a in attrs))
        return SetOracle(self.oracles[g], self.group_sizes[g] // held, population)

    def source(self, attrs: tuple[int, ...]) -> int:
        """The group whose estimate of a cell of ``attrs`` has the lowest variance at f ≈ 0,
        counting that a group gets 1/G of the reports (the first such group on ties).

        Raises:
            ValueError: no group holds ``attrs``.
        """
        candidates = self.sources(attrs)
        if not candidates:
            raise ValueError(f"no group holds attributes {list(attrs)}")
        return min(candidates, key=lambda g: self.set_oracle(g, attrs).variance_star())

    def cell_variance_star(self, attrs: tuple[int, ...]) -> float:
        """n·Var of one cell of the marginal over ``attrs`` at f ≈ 0 (n: all reports)."""
        g = self.source(attrs)
        return len(self.groups) * self.set_oracle(g, attrs).variance_star()

    def __repr__(self) -> str:
        inner = ", ".join(o.name for o in self.oracles)
        return f"JointMechanism(ε={self.epsilon:g}, sizes={self.sizes}, {self.method}: {inner})"


def joint_mechanism(epsilon: float, sizes: tuple[int, ...], method: str) -> JointMechanism:
    """The ``method`` layout for ``sizes``, each group with its lower-variance oracle.

    Raises:
        ValueError: an unknown method, a product domain too large for ``joint``, or sizes
            out of range.
    """
    sizes = tuple(sizes)
    if method == "joint":
        if _product(sizes) > MAX_DOMAIN_SIZE:
            raise ValueError(
                f"the product domain has {_product(sizes)} cells, more than one oracle "
                f"takes ({MAX_DOMAIN_SIZE}): use marginals"
            )
        groups: tuple[tuple[int, ...], ...] = (tuple(range(len(sizes))),)
    elif method == "marginals":
        groups = tuple(combinations(range(len(sizes)), 2))
    else:
        raise ValueError(f"method must be one of {', '.join(JOINT_METHODS)}, got {method!r}")
    eps = check_epsilon(epsilon)
    for k in sizes:
        if type(k) is not int or not 2 <= k <= MAX_ATTRIBUTE_SIZE:
            raise ValueError(f"each attribute has 2 to {MAX_ATTRIBUTE_SIZE} values, got {sizes}")
    oracles = tuple(_best_oracle(eps, _product(tuple(sizes[a] for a in g))) for g in groups)
    return JointMechanism(eps, sizes, groups, oracles)


TIE = 0.05
"""Within 5 % of variance the joint layout wins: it also answers the full joint."""


@dataclass(frozen=True)
class JointChoice:
    """What ``auto`` picked for a joint metric, and why."""

    mechanism: JointMechanism
    reason: str
    candidates: tuple[JointMechanism, ...]


def pair_variance_star(m: JointMechanism) -> float:
    """Mean n·Var of a 2-way marginal cell over every pair of attributes, at f ≈ 0."""
    pairs = list(combinations(range(len(m.sizes)), 2))
    return sum(m.cell_variance_star(pair) for pair in pairs) / len(pairs)


def choose_joint(epsilon: float, sizes: tuple[int, ...]) -> JointChoice:
    """Joint-domain or pairwise marginals, whichever gives 2-way cells the lower variance.

    Both layouts answer every 1- and 2-way marginal; ``joint`` also answers the full joint,
    so it wins ties within 5 %. Each group's oracle is GRR or OLH by variance.

    Raises:
        ValueError: ε or sizes out of range.
    """
    sizes = tuple(sizes)
    cells = f"product of {len(sizes)} attributes = {_product(sizes)} cells"
    if len(sizes) == 2:  # the one pair is the joint
        built = [joint_mechanism(epsilon, sizes, "joint")]
        why = f"{cells}: two attributes, the one pair is the joint domain"
    elif _product(sizes) > MAX_DOMAIN_SIZE:
        built = [joint_mechanism(epsilon, sizes, "marginals")]
        why = f"{cells}, beyond one oracle's {MAX_DOMAIN_SIZE}: marginals"
    else:
        built = [joint_mechanism(epsilon, sizes, method) for method in JOINT_METHODS]
        joint, pairs = (pair_variance_star(m) for m in built)
        why = (
            f"{cells}; a 2-way cell's n·Var at f≈0 is {joint:.4g} joint-domain, "
            f"{pairs:.4g} with {len(built[1].groups)} pairwise marginal groups"
        )
        if pairs < joint * (1 - TIE):  # else joint first: it answers the full joint too
            built.reverse()
    chosen = built[0]
    inner = ", ".join(sorted({o.name for o in chosen.oracles}))
    reason = f"ε = {epsilon:g}, {why}: {chosen.method} with {inner}"
    return JointChoice(chosen, reason, tuple(built))


def joint_from_params(params: dict[str, Any]) -> JointMechanism:
    """Rebuild a :class:`JointMechanism` from :meth:`JointMechanism.params`.

    Raises:
        ValueError: missing or inconsistent parameters.
    """
    keys = {"mechanism", "epsilon", "sizes", "groups", "oracles"}
    if not isinstance(params, dict) or set(params) != keys or params["mechanism"] != "joint":
        raise ValueError(f"joint mechanism parameters are {sorted(keys)}")
    sizes, groups, oracles = params["sizes"], params["groups"], params["oracles"]
    if not all(isinstance(x, list) for x in (sizes, groups, oracles)) or not all(
        isinstance(g, list) for g in groups
    ):
        raise ValueError("sizes, groups and oracles are lists")
    built = tuple(_inner_from_params(p) for p in oracles)
    return JointMechanism(params["epsilon"], tuple(sizes), tuple(tuple(g) for g in groups), built)


def _inner_from_params(params: object) -> FrequencyOracle:
    """One group's oracle from its :meth:`params` (its ``mechanism`` one of :data:`INNER`)."""
    if not isinstance(params, dict) or params.get("mechanism") not in INNER:
        raise ValueError(f"a group's oracle is one of {list(INNER)}")
    options = {k: v for k, v in params.items() if k != "mechanism"}
    return INNER[params["mechanism"]](**options)

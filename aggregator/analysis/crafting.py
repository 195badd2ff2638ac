"""Crafted reports of fake clients: the maximal gain attack and the input-manipulation baseline.

A fake client can skip the randomizer and send any report the wire format admits.
:class:`MaximalGain` (Cao, Jia & Gong's MGA) crafts, for each frequency oracle of the SDK,
the valid report that supports the most target values at once; :class:`InputManipulation`
(their random item attack) reports a target through the SDK's own ``perturb``. Both state
s_t, the probability that one of their reports supports target t, which is all the
theory of :mod:`aggregator.analysis.poisoning` needs, and both are public so that tests
of defences can use them.

SIMULATION ONLY: randomness is numpy's PCG64 (and ``random.Random`` seeded from it for
the SDK's perturb), not a CSPRNG.

References:
    X. Cao, J. Jia, N. Z. Gong. "Data Poisoning Attacks to Local Differential Privacy
    Protocols". USENIX Security 2021, §4 (MGA for kRR, OUE and OLH; RIA).
"""

from __future__ import annotations

import binascii
import random
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from aggregator.stats.arrays import FloatArray, IntArray
from client_sdk.mechanisms import (
    FrequencyOracle,
    GeneralizedRR,
    HadamardResponse,
    LocalHashing,
    SubsetSelection,
)
from client_sdk.mechanisms.unary import UnaryEncoding

__all__ = [
    "ATTACKS",
    "MAX_TARGETS",
    "SEARCH_PAIRS",
    "Attack",
    "InputManipulation",
    "MaximalGain",
]

ATTACKS = ("mga", "input")
"""The maximal gain attack, and the input-manipulation baseline."""

MAX_TARGETS = 256
"""Most targets of one attack: the GRR gain per target falls as 1/r, so more targets than
this is a flood of the whole domain rather than a promotion, and the OLH seed search costs
O(pairs · r log r)."""

SEARCH_PAIRS = 1 << 21
"""Hash seeds (a, b) the OLH attacker tries offline: every pair when P(P − 1) is at most
this (all k ≤ 1447), else this many drawn at random: 2 M pairs × r hashes take well under
a second of numpy work (0.3 s at k = 1024, r = 8)."""

SEARCH_CHUNK = 1 << 16
"""Seed pairs hashed per numpy step in the OLH search (r int64 columns each)."""


class Attack(Protocol):
    """A way of crafting fake reports against one mechanism and target set."""

    name: str
    mechanism: FrequencyOracle
    targets: tuple[int, ...]

    def support(self) -> FloatArray:
        """s_t: the probability that one crafted report supports each target."""
        ...

    def payloads(self, count: int, gen: np.random.Generator) -> list[dict[str, Any]]:
        """``count`` fake payloads, each valid for the mechanism's ``check_payload``."""
        ...


def _check_targets(mechanism: FrequencyOracle, targets: Sequence[int]) -> tuple[int, ...]:
    k = mechanism.domain_size
    values = tuple(int(t) for t in targets)
    if not values:
        raise ValueError("give at least one target value")
    if len(values) > min(MAX_TARGETS, k):
        raise ValueError(f"at most {min(MAX_TARGETS, k)} targets for k = {k}, got {len(values)}")
    if len(set(values)) != len(values):
        raise ValueError(f"targets must be distinct, got {list(values)}")
    bad = [t for t in values if not 0 <= t < k]
    if bad:
        raise ValueError(f"targets {bad} are outside range(0, {k})")
    return values


class MaximalGain:
    """Cao et al.'s maximal gain attack: the report that supports the most targets.

    * GRR: a target drawn uniformly (a report names one value).
    * SUE/OUE: every target's bit set, plus random non-target bits up to the number of
      ones a genuine report has on average, round(p* + (k − 1)q*), so the count of ones
      looks normal (17 at k = 64, ε = 1 for OUE).
    * OLH/BLH: a seed (a, b) and bucket y with as many targets as possible hashing to y,
      drawn uniformly from all such triples found by an offline search (:data:`SEARCH_PAIRS`).
    * HR: an index j uniform on the codewords of every target (a subspace: never empty).
    * SS: the targets plus random others, or s random targets when r > s.

    Args:
        mechanism: the mechanism the genuine devices use (and the server decodes with).
        targets: the values to promote, distinct, in ``range(k)``.
        gen: the attacker's randomness for the offline seed search.

    Raises:
        ValueError: bad targets.
        TypeError: a mechanism this attack has no crafting rule for.
    """

    name = "mga"

    def __init__(
        self,
        mechanism: FrequencyOracle,
        targets: Sequence[int],
        gen: np.random.Generator | None = None,
    ) -> None:
        self.mechanism = mechanism
        self.targets = _check_targets(mechanism, targets)
        self._t = np.array(self.targets, dtype=np.int64)
        self._pool: IntArray | None = None
        if isinstance(mechanism, LocalHashing):
            self._pool = _best_seeds(mechanism, self._t, gen or np.random.default_rng())
        elif isinstance(mechanism, HadamardResponse):
            j = np.arange(mechanism.order, dtype=np.int64)
            rows = self._t[:, None] + 1
            self._pool = j[np.all(np.bitwise_count(rows & j) % 2 == 0, axis=0)]
        elif not isinstance(mechanism, (GeneralizedRR, UnaryEncoding, SubsetSelection)):
            raise TypeError(f"no maximal gain attack for {type(mechanism).__name__}")

    @property
    def ones(self) -> int:
        """Ones in a crafted unary report: the genuine mean, at least r (unary only)."""
        m, k = self.mechanism, self.mechanism.domain_size
        return min(k, max(len(self.targets), round(m.p + (k - 1) * m.q)))

    def support(self) -> FloatArray:  # noqa: D102
        m, r = self.mechanism, len(self.targets)
        if isinstance(m, GeneralizedRR):
            return np.full(r, 1.0 / r)
        if isinstance(m, SubsetSelection):
            return np.full(r, min(1.0, m.s / r))
        if isinstance(m, LocalHashing):
            assert self._pool is not None
            a, b, y = self._pool.T
            hashed = ((a[:, None] * self._t + b[:, None]) % m.prime) % m.g
            return np.asarray(np.mean(hashed == y[:, None], axis=0), dtype=np.float64)
        return np.ones(r)  # unary and Hadamard: every crafted report supports every target

    def payloads(self, count: int, gen: np.random.Generator) -> list[dict[str, Any]]:  # noqa: D102
        m, t = self.mechanism, self._t
        if isinstance(m, GeneralizedRR):
            return [{"v": int(v)} for v in gen.choice(t, count)]
        if isinstance(m, UnaryEncoding):
            return _unary_payloads(m, t, self.ones, count, gen)
        if isinstance(m, SubsetSelection):
            return _subset_payloads(m, t, count, gen)
        assert self._pool is not None
        picks = self._pool[gen.integers(0, len(self._pool), count)]
        if isinstance(m, HadamardResponse):
            return [{"j": int(j)} for j in picks]
        return [{"a": int(a), "b": int(b), "y": int(y)} for a, b, y in picks]


class InputManipulation:
    """The baseline: each fake device reports a uniformly drawn target through the SDK's
    own ``perturb`` (Cao et al.'s random item attack). s_t = p*/r + q*(1 − 1/r)."""

    name = "input"

    def __init__(self, mechanism: FrequencyOracle, targets: Sequence[int]) -> None:
        self.mechanism = mechanism
        self.targets = _check_targets(mechanism, targets)

    def support(self) -> FloatArray:  # noqa: D102
        m, r = self.mechanism, len(self.targets)
        return np.full(r, m.p / r + m.q * (1 - 1 / r))

    def payloads(self, count: int, gen: np.random.Generator) -> list[dict[str, Any]]:  # noqa: D102
        rng = random.Random(int(gen.integers(0, 2**63)))
        values = gen.choice(np.array(self.targets), count)
        return [self.mechanism.perturb(int(v), rng) for v in values]


def _unary_payloads(
    m: UnaryEncoding, targets: IntArray, ones: int, count: int, gen: np.random.Generator
) -> list[dict[str, Any]]:
    k = m.domain_size
    others = np.setdiff1d(np.arange(k), targets)
    bits = np.zeros((count, k), dtype=bool)
    bits[:, targets] = True
    pad = ones - len(targets)
    if pad > 0:
        picks = np.argpartition(gen.random((count, len(others))), pad - 1, axis=1)[:, :pad]
        rows = np.repeat(np.arange(count), pad)
        bits[rows, others[picks].ravel()] = True
    packed = np.packbits(bits, axis=1)  # the SDK's layout: value v is bit 7 − v%8 of byte v//8
    b2a = binascii.b2a_base64
    return [{"b": b2a(row.tobytes(), newline=False).decode("ascii")} for row in packed]


def _subset_payloads(
    m: SubsetSelection, targets: IntArray, count: int, gen: np.random.Generator
) -> list[dict[str, Any]]:
    k, s, r = m.domain_size, m.s, len(targets)
    if r >= s:
        keys = gen.random((count, r))
        chosen = targets[np.argpartition(keys, s - 1, axis=1)[:, :s]]
    else:
        others = np.setdiff1d(np.arange(k), targets)
        keys = gen.random((count, len(others)))
        extra = others[np.argpartition(keys, s - r - 1, axis=1)[:, : s - r]]
        chosen = np.concatenate([np.broadcast_to(targets, (count, r)), extra], axis=1)
    return [{"v": row} for row in np.sort(chosen, axis=1).tolist()]


def _best_seeds(m: LocalHashing, targets: IntArray, gen: np.random.Generator) -> IntArray:
    """Every (a, b, y) found that hashes the most targets into bucket y, as rows."""
    P, g, r = m.prime, m.g, len(targets)
    total = P * (P - 1)
    exhaustive = total <= SEARCH_PAIRS
    best = 0
    found: list[IntArray] = []
    for start in range(0, total if exhaustive else SEARCH_PAIRS, SEARCH_CHUNK):
        size = min(SEARCH_CHUNK, (total if exhaustive else SEARCH_PAIRS) - start)
        if exhaustive:
            index = np.arange(start, start + size, dtype=np.int64)
            a, b = 1 + index // P, index % P
        else:
            a = gen.integers(1, P, size, dtype=np.int64)
            b = gen.integers(0, P, size, dtype=np.int64)
        hashed = np.sort(((a[:, None] * targets + b[:, None]) % P) % g, axis=1)
        runs = np.ones((size, r), dtype=np.int64)  # length of the run of equal buckets so far
        for col in range(1, r):
            same = hashed[:, col] == hashed[:, col - 1]
            runs[:, col] = np.where(same, runs[:, col - 1] + 1, 1)
        top = int(runs.max())
        if top < best:
            continue
        if top > best:
            best, found = top, []
        i, j = np.nonzero(runs == top)  # a run of the longest length ends here: one bucket
        found.append(np.stack([a[i], b[i], hashed[i, j]], axis=1))
    pool = np.concatenate(found)
    return np.unique(pool, axis=0) if not exhaustive else pool

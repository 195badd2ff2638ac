"""Randomness for perturbation: a buffered CSPRNG and exact Bernoulli sampling.

Every mechanism draws its randomness through the few primitives here, so that

* the default generator is cryptographically secure (``os.urandom``): a predictable
  generator would let anyone who can predict it undo the noise (RAPPOR's
  ``doc/randomness.md``);
* a Bernoulli(p) draw is *exact* for the float ``p`` the mechanism declares, not
  ``random() < p`` with 53 bits of resolution: the realised output distribution is
  the one the privacy proof is about, to the last bit;
* tests can inject any ``random.Random``-like object (seeded or scripted). Only
  ``getrandbits``, ``randrange`` and ``sample`` are used.

References:
    Knuth & Yao (1976), "The complexity of nonuniform random number generation":
    comparing a uniform variate with the binary expansion of p bit by bit.
"""

from __future__ import annotations

import os
import random
import threading
import weakref
from collections.abc import Sequence
from typing import Protocol

__all__ = ["RandomSource", "SecureRandom", "bernoulli", "bernoulli_lanes", "default_rng"]

_BLOCK = 4096
"""Bytes read from ``os.urandom`` at a time: one syscall serves ~30 OUE reports at k = 1024."""

_WORD = 64
"""Bits compared per ``getrandbits`` call in :func:`bernoulli`; one call decides almost always."""


class RandomSource(Protocol):
    """The part of ``random.Random`` the mechanisms use."""

    def getrandbits(self, k: int, /) -> int: ...  # noqa: D102

    def randrange(self, start: int, stop: int | None = ..., step: int = ..., /) -> int: ...  # noqa: D102

    def sample(self, population: Sequence[int], k: int) -> list[int]: ...  # noqa: D102


_live: weakref.WeakSet[SecureRandom] = weakref.WeakSet()


class SecureRandom(random.Random):
    """A ``random.Random`` whose bits come from ``os.urandom``, read in blocks.

    Like ``random.SystemRandom`` but one syscall per 4 KiB instead of one per call.
    The buffer is discarded in a forked child, so parent and child never reuse the
    same noise. ``seed``, ``getstate`` and ``setstate`` are meaningless for it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buf = b""
        self._pos = 0
        super().__init__()
        _live.add(self)

    def seed(self, *args: object, **kwargs: object) -> None:  # noqa: D102
        return None

    def getstate(self) -> object:  # noqa: D102
        raise NotImplementedError("a CSPRNG has no state to save")

    def setstate(self, state: object) -> None:  # noqa: D102
        raise NotImplementedError("a CSPRNG has no state to restore")

    def _forget(self) -> None:
        self._lock = threading.Lock()
        self._buf = b""
        self._pos = 0

    def getrandbits(self, k: int, /) -> int:
        """Return a non-negative int with ``k`` uniformly random bits."""
        if k < 0:
            raise ValueError("number of bits must be non-negative")
        if k == 0:
            return 0
        nbytes = (k + 7) // 8
        with self._lock:
            if self._pos + nbytes > len(self._buf):
                self._buf = os.urandom(max(_BLOCK, nbytes))
                self._pos = 0
            chunk = self._buf[self._pos : self._pos + nbytes]
            self._pos += nbytes
        return int.from_bytes(chunk, "big") >> (nbytes * 8 - k)

    def random(self) -> float:
        """Return a float in [0, 1) with 53 random bits."""
        return self.getrandbits(53) * 2.0**-53


def _after_fork_in_child() -> None:
    for rng in list(_live):
        rng._forget()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

_DEFAULT = SecureRandom()


def default_rng() -> SecureRandom:
    """The process-wide CSPRNG used when ``perturb`` is given no ``rng``."""
    return _DEFAULT


def _dyadic(p: float) -> tuple[int, int]:
    """Write the float ``p`` in (0, 1) exactly as ``num / 2**t``."""
    num, den = p.as_integer_ratio()
    return num, den.bit_length() - 1


def bernoulli(rng: RandomSource, p: float) -> bool:
    """Draw one exact Bernoulli(p) for the float ``p`` in (0, 1).

    A uniform U in [0, 1) is revealed 64 bits at a time and compared with the binary
    expansion of ``p``; the first differing bit decides U < p. The result is True with
    probability exactly ``p`` (the rational number the float denotes).
    """
    num, t = _dyadic(p)
    pos = 0
    while pos < t:
        width = min(_WORD, t - pos)
        u = rng.getrandbits(width)
        chunk = (num >> (t - pos - width)) & ((1 << width) - 1)
        if u != chunk:
            return u < chunk
        pos += width
    return False  # U agrees with p on all of p's bits, so U >= p


def bernoulli_lanes(rng: RandomSource, p: float, lanes: int) -> int:
    """Draw ``lanes`` independent exact Bernoulli(p) bits at once.

    Bit i of the result is lane i. Each lane compares its own uniform variate with
    ``p``; bit-plane j of all the variates is one ``getrandbits(lanes)`` call, and the
    comparison runs on whole planes with integer bit operations. A lane is decided at
    its first bit that differs from ``p``'s, so about log2(lanes) + 2 planes are drawn.
    """
    num, t = _dyadic(p)
    undecided = (1 << lanes) - 1
    ones = 0
    for j in range(t):
        remaining = t - j
        if not undecided or not num & ((1 << remaining) - 1):
            break  # no lane left to decide, or p has no 1-bit left: the rest stay 0
        plane = rng.getrandbits(lanes)
        if (num >> (remaining - 1)) & 1:
            ones |= undecided & ~plane  # U's bit 0 where p's is 1: U < p
            undecided &= plane
        else:
            undecided &= ~plane  # U's bit 1 where p's is 0: U > p
    return ones

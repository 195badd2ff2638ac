"""Randomness for perturbation: a buffered CSPRNG and exact Bernoulli sampling.

Every mechanism draws its randomness through the few primitives here, so that

* the default generator is cryptographically secure (``os.urandom``): a predictable
  generator would let anyone who can predict it undo the noise (RAPPOR's
  ``doc/randomness.md``);
* a Bernoulli(p) draw is *exact* for the float ``p`` the mechanism declares, not
  ``random() < p`` with 53 bits of resolution: the realised output distribution is
  the one the privacy proof is about, to the last bit;
* tests can inject any ``random.Random``-like object (seeded or scripted). Only
  ``getrandbits`` and ``randrange`` are used (and a :class:`SecureRandom`'s ``randbytes``,
  its buffer read without a round trip through an int).

References:
    Knuth & Yao (1976), "The complexity of nonuniform random number generation":
    comparing a uniform variate with the binary expansion of p bit by bit.
"""

from __future__ import annotations

import os
import random
import sys
import threading
import weakref
from array import array
from collections.abc import Callable, Iterator, Sequence
from itertools import compress
from typing import Any, Protocol

__all__ = [
    "RandomSource",
    "SecureRandom",
    "bernoulli",
    "bernoulli_lanes",
    "bits_from",
    "default_rng",
    "marked",
    "random_bytes",
    "subset_marks",
    "uniform_indices",
]

_BLOCK = 4096
"""Bytes read from ``os.urandom`` at a time: one syscall per ~4 OUE reports at k = 1024 (each
draws ~1 KiB). Larger blocks gain nothing: beyond ~1 KiB the kernel's cost is per byte
(about 3 ns on the benchmark machine, see docs/benchmarks/performance.md)."""

_PLANE_LANES = 64
"""Up to this many lanes :func:`bernoulli_lanes` compares bit planes (log2(lanes) + 2 draws
of ``lanes`` bits, the fewest random bits); above it, one byte per lane in a single draw.
With the CSPRNG the byte path is faster at every size (3× at 16 lanes, 1.7× at 1024: the
cost is per call); the bit planes are kept for small domains because their exact draw
sequence is what the golden vectors and seeded regression outputs of sue/oue pin."""

_MAX_INDEX_RANGE = 1 << 16
""":func:`uniform_indices` draws two random bytes per candidate, so n ≤ 2¹⁶: every domain
(``MAX_DOMAIN_SIZE`` is 65,536) fits."""

_POSITIONS_MAX = 8192
""":func:`marked` selects from a cached ``tuple(range(n))`` up to this n (about 300 KB at
8192), twice as fast as from a ``range``, whose every element is a new int object; larger
domains select from a ``range`` rather than keep megabytes of ints alive."""

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

    def getstate(self) -> tuple[Any, ...]:  # noqa: D102
        raise NotImplementedError("a CSPRNG has no state to save")

    def setstate(self, state: tuple[Any, ...]) -> None:  # noqa: D102
        raise NotImplementedError("a CSPRNG has no state to restore")

    def _forget(self) -> None:
        self._lock = threading.Lock()
        self._buf = b""
        self._pos = 0

    def randbytes(self, n: int) -> bytes:
        """Return ``n`` random bytes, the next ones of the buffer."""
        if n <= 0:
            if n:
                raise ValueError("number of bytes must be non-negative")
            return b""
        lock = self._lock
        lock.acquire()  # cheaper than ``with`` on this hot path; released in ``finally``
        try:
            buf, start = self._buf, self._pos
            end = start + n
            if end > len(buf):  # top up, keeping the unused tail: no random byte is wasted
                tail = buf[start:]
                buf = self._buf = tail + os.urandom(max(_BLOCK, n - len(tail)))
                start, end = 0, n
            self._pos = end
        finally:
            lock.release()
        return buf[start:end]

    def getrandbits(self, k: int, /) -> int:
        """Return a non-negative int with ``k`` uniformly random bits."""
        return bits_from(self.randbytes, k)

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


def bits_from(take: Callable[[int], bytes], k: int) -> int:
    """``getrandbits(k)`` from a source of bytes: the first ``k`` bits of ``⌈k/8⌉`` bytes,
    big-endian (the stream's first byte is the most significant)."""
    if k <= 0:
        if k:
            raise ValueError("number of bits must be non-negative")
        return 0
    nbytes = (k + 7) >> 3
    return int.from_bytes(take(nbytes), "big") >> ((nbytes << 3) - k)


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

    Bit i of the result is lane i. Each lane compares its own uniform variate U with
    ``p``, exactly as :func:`bernoulli` does, a whole batch of lanes at a time:

    * up to :data:`_PLANE_LANES` lanes, bit-plane j of all the variates is one
      ``getrandbits(lanes)`` call and the comparison runs on whole planes with integer bit
      operations; a lane is decided at its first bit that differs from ``p``'s, so about
      log2(lanes) + 2 planes are drawn;
    * above it, U is revealed one byte (base-256 digit) at a time: one ``getrandbits`` call
      gives every lane its first byte, ``bytes.translate`` compares all of them with p's
      first digit at C speed, and only the lanes whose byte equals it (1 in 256) go on to
      the next digit, recursively. About 8 random bits per lane and one call in all.
    """
    num, t = _dyadic(p)
    if lanes <= _PLANE_LANES:
        return _plane_lanes(rng, num, t, lanes)
    return int(_byte_lanes(rng, num, t, lanes), 2)


def _plane_lanes(rng: RandomSource, num: int, t: int, lanes: int) -> int:
    """Bit-plane comparison of ``lanes`` uniforms with ``num / 2**t``; bit i is lane i."""
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


_DIGIT_TABLES: dict[tuple[int, bool], bytes] = {}
"""``bytes.translate`` tables by (p's digit d, more digits follow): byte b < d → '1' (U < p),
b > d → '0', b = d → '?' (undecided) or '0' when p has no digits left (U ≥ p)."""


def _digit_table(digit: int, more: bool) -> bytes:
    table = _DIGIT_TABLES.get((digit, more))
    if table is None:
        table = b"1" * digit + (b"?" if more else b"0") + b"0" * (255 - digit)
        _DIGIT_TABLES[(digit, more)] = table
    return table


def _byte_lanes(rng: RandomSource, num: int, t: int, lanes: int) -> bytes:
    """``lanes`` ASCII marks b'0'/b'1', each b'1' with probability ``num / 2**t`` exactly."""
    if not num or not lanes:
        return b"0" * lanes
    # One draw: a first byte for every lane, and spare bytes for the few lanes that tie
    # (1 in 256), so that the next digit rarely needs a second call.
    size = lanes + 2 + lanes // 128
    return _compare_digits(rng, num, t, rng.getrandbits(8 * size).to_bytes(size), lanes)


def _compare_digits(rng: RandomSource, num: int, t: int, raw: bytes, lanes: int) -> bytes:
    """Marks of ``lanes`` uniforms vs ``num / 2**t``; ``raw[:lanes]`` are their first bytes.

    Bytes of ``raw`` beyond ``lanes`` are unused random bytes, spent on the next digit of
    the lanes that tie, before any new draw.
    """
    if t <= 8:
        rest_bits, digit, rest = 0, num << (8 - t), 0
    else:
        rest_bits = t - 8
        digit, rest = num >> rest_bits, num & ((1 << rest_bits) - 1)
    marks = raw[:lanes].translate(_digit_table(digit, bool(rest)))
    if not rest:
        return marks
    pieces = marks.split(b"?")
    undecided = len(pieces) - 1
    if not undecided:
        return marks
    # Lanes whose byte equals p's digit compare their next (fresh) digits with p's rest.
    spare = raw[lanes:]
    if len(spare) >= undecided:
        fill = _compare_digits(rng, rest, rest_bits, spare, undecided)
    else:
        fill = _byte_lanes(rng, rest, rest_bits, undecided)
    # The i-th '?' becomes fill[i] (marks hold only '0' and '1', never a '%').
    return b"%c".join(pieces) % tuple(fill)


def random_bytes(rng: RandomSource, n: int) -> bytes:
    """``n`` uniformly random bytes: a :class:`SecureRandom`'s buffer read directly, or
    ``rng.getrandbits(8n)`` in little-endian order (what ``random.Random.randbytes`` does)."""
    if isinstance(rng, SecureRandom):
        return rng.randbytes(n)
    return rng.getrandbits(8 * n).to_bytes(n, "little")


_NATIVE_IS_BIG = sys.byteorder == "big"


def uniform_indices(rng: RandomSource, n: int, batch: int) -> Iterator[int]:
    """An endless stream of independent, exactly uniform ints in ``range(n)``.

    Each candidate is two random bytes (a little-endian 16-bit word) masked to
    b = (n−1).bit_length() bits and kept when below n: rejection sampling, so every kept
    value has probability exactly 1/n, and more than half the candidates are kept.
    Candidates are drawn in one ``random_bytes`` call per ``batch`` values expected
    (batch·2^b/n candidates, and a few more).

    Raises:
        ValueError: ``n`` is not in ``[1, 2**16]``.
    """
    if not 1 <= n <= _MAX_INDEX_RANGE:
        raise ValueError(f"n must be in [1, {_MAX_INDEX_RANGE}], got {n}")
    mask = (1 << (n - 1).bit_length()) - 1
    size = 2 * (batch * (mask + 1) // n + 4)
    while True:
        for word in _random_words(rng, size):
            word &= mask
            if word < n:
                yield word


def _random_words(rng: RandomSource, nbytes: int) -> array[int]:
    """``nbytes`` random bytes as 16-bit little-endian words: the same stream on every
    platform."""
    words = array("H", random_bytes(rng, nbytes))
    if _NATIVE_IS_BIG:  # pragma: no cover - a big-endian machine
        words.byteswap()
    return words


_THRESHOLD_TABLES: dict[int, bytes] = {}
"""``bytes.translate`` tables by threshold t: byte b < t → 1, else 0."""


def _threshold_table(t: int) -> bytes:
    table = _THRESHOLD_TABLES.get(t)
    if table is None:
        table = _THRESHOLD_TABLES[t] = b"\x01" * t + b"\x00" * (256 - t)
    return table


def subset_marks(rng: RandomSource, population: int, size: int) -> bytearray:
    """A uniformly random ``size``-subset of ``range(population)`` as 0/1 marks.

    Byte i of the result is 1 when i is in the subset. Every element is first marked
    independently, when its random byte is below t = round(256·size/population) (one
    ``random_bytes`` call and one ``bytes.translate``, at C speed); then uniformly chosen
    marked elements are unmarked, or uniformly chosen unmarked ones marked (rejection
    sampling from :func:`uniform_indices`: each pick is uniform among the candidates
    left), one at a time until exactly ``size`` are marked. Both steps treat all elements
    alike, so the subset's law is invariant under every permutation of the population
    and, its size being fixed, uniform — whatever t is: t only sets how much fixing up
    there is (about √size elements). Cost: O(population) at C speed, O(√size) in Python.

    Raises:
        ValueError: ``size`` is not in ``[0, population]``, or ``population > 2**16``.
    """
    if not 0 <= size <= population:
        raise ValueError(f"cannot pick {size} of {population}")
    if population > _MAX_INDEX_RANGE:
        raise ValueError(f"population must be at most {_MAX_INDEX_RANGE}, got {population}")
    if size == 0 or size == population:
        return bytearray(b"\x01" * population if size else population)
    t = (256 * size + population // 2) // population
    marks = bytearray(random_bytes(rng, population).translate(_threshold_table(t)))
    have = marks.count(1)
    if have == size:
        return marks
    # Flip marks equal to ``old`` into ``new`` at uniformly chosen places until the count
    # is right; a place already flipped is a rejected draw like any non-candidate. This is
    # uniform_indices' rejection sampling, inlined: it runs ~30 times a report at k = 1024.
    old, new, todo = (1, 0, have - size) if have > size else (0, 1, size - have)
    candidates = have if old else population - have
    mask = (1 << (population - 1).bit_length()) - 1
    # Draws expected: todo·population/candidates, each kept with probability
    # population/(mask + 1); a quarter more, so that one batch almost always does.
    nbytes = 2 * ((todo * (mask + 1) // candidates) * 5 // 4 + 4)
    while True:
        for i in _random_words(rng, nbytes):
            i &= mask
            if i < population and marks[i] == old:
                marks[i] = new
                todo -= 1
                if not todo:
                    return marks


_positions: tuple[int, ...] = ()


def marked(marks: bytes | bytearray) -> list[int]:
    """The positions of the 1 bytes of 0/1 ``marks``, increasing, at C speed."""
    global _positions
    n = len(marks)
    if n > _POSITIONS_MAX:
        return list(compress(range(n), marks))
    positions = _positions  # one read: another thread may replace the cache meanwhile
    if n > len(positions):
        positions = _positions = tuple(range(max(n, 1024)))
    return list(compress(positions, marks))

"""Strings from an unknown domain: a prefix-level hashed sketch (kind ``string``).

A device holds one string (a search term, a new word, a domain). It normalises it
(:func:`normalise`: Unicode NFC, UTF-8, truncated at a character boundary to
``max_length`` bytes, then padded with NUL bytes to exactly ``max_length``), so every
value is a fixed-length byte string and its length leaks nothing beyond the ε-LDP report.

In full: ``docs/statistics/strings.md``.
"""

from __future__ import annotations

import hashlib
import unicodedata
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from client_sdk.errors import PayloadError
from client_sdk.mechanisms.base import FrequencyOracle, WireSized, check_epsilon, fields_of
from client_sdk.mechanisms.plausibility import Implausible
from client_sdk.mechanisms.randomness import RandomSource, default_rng
from client_sdk.mechanisms.rounding import exp
from client_sdk.mechanisms.rr import GeneralizedRR

__all__ = [
    "HASH_PRIME",
    "MAX_CELLS",
    "MAX_STRING_LENGTH",
    "StringSketch",
    "auto_cells",
    "auto_rows",
    "normalise",
    "string_from_params",
]

HASH_PRIME = (1 << 31) - 1
"""P of the hash family: a Mersenne prime below 2³¹, so every product of two residues
fits a signed 64-bit integer (numpy hashes candidates without overflow)."""

MAX_STRING_LENGTH = 64
"""Longest ``max_length`` in bytes. Each byte is a level that takes its share of the
users: beyond 64 (a long URL's host and path start) every level gets too few reports to
find anything at realistic N."""

MAX_CELLS = 1 << 20
"""Most counters of one string metric (levels × rows × cells): 8 MiB of packed counts per
window. The sketch's collision noise falls as 1/(rows × cells); beyond this a window's
counts cost more Redis memory than any gain is worth."""

CELLS_PER_LEVEL = 16_384
"""Target rows × cells of a level: the collision noise of an estimate has standard
deviation about √(Σf²/16384), 0.13 % for Zipf 1.1 — the size of the LDP noise at ε = 4
and n = 10⁶ — for 2 MiB of counts per window at max_length 16."""

MAX_AUTO_ROWS = 128
"""Most rows the automatic shape uses: discovery gathers every candidate's cell in every
row (65 k candidates × 128 rows per level, tens of milliseconds of numpy each)."""

MAX_AUTO_CELLS = 2048
"""Most cells per row the automatic shape uses (reached from ε ≈ 6.2 on)."""


def auto_cells(epsilon: float) -> int:
    """m: the largest power of two ≤ 4e^ε, in [4, 2048]: GRR's variance over m cells is
    then at most (e^ε + 4e^ε)/(e^ε−1)², below OLH's 4e^ε/(e^ε−1)² up to 25 %, and a row
    is as wide as that allows (fewer rows: cheaper discovery)."""
    target = 4 * exp(min(epsilon, 20.0))
    m = 4
    while 2 * m <= target and 2 * m <= MAX_AUTO_CELLS:
        m *= 2
    return m


def auto_rows(cells: int) -> int:
    """h: :data:`CELLS_PER_LEVEL` / m rows, within [8, :data:`MAX_AUTO_ROWS`]."""
    return max(8, min(MAX_AUTO_ROWS, CELLS_PER_LEVEL // cells))


def normalise(value: str, max_length: int) -> bytes:
    """The fixed-length byte string a device reports about.

    Unicode NFC, UTF-8, truncated to at most ``max_length`` bytes at a character boundary
    (a multi-byte character that does not fit is dropped whole), then padded with NUL
    bytes to exactly ``max_length``: every value has the same length, so the length of a
    string is protected like the rest of it.

    Raises:
        ValueError: not a string, or a string with a NUL character (NUL is the padding).
    """
    if not isinstance(value, str):
        raise ValueError(f"a string metric's value must be a str, got {type(value).__name__}")
    if "\x00" in value:
        raise ValueError("a string metric's value must not contain NUL (U+0000), its padding")
    raw = unicodedata.normalize("NFC", value).encode("utf-8")
    if len(raw) > max_length:
        cut = max_length
        while cut > 0 and (raw[cut] & 0xC0) == 0x80:  # raw[cut] continues a character
            cut -= 1
        raw = raw[:cut]
    return raw.ljust(max_length, b"\x00")


def display(padded: bytes) -> str:
    """A padded value as text: padding removed, invalid UTF-8 shown as U+FFFD."""
    return padded.rstrip(b"\x00").decode("utf-8", errors="replace")


def _check_whole(field: str, x: object, low: int, high: int) -> None:
    if isinstance(x, bool) or not isinstance(x, int) or not low <= x <= high:
        raise ValueError(f"{field} must be an integer in [{low}, {high}], got {x!r}")


def _check_salt(salt: object) -> None:
    if not isinstance(salt, str) or not 2 <= len(salt) <= 64:
        raise ValueError("salt must be a hex string of 2 to 64 digits")
    try:
        bytes.fromhex(salt)
    except ValueError:
        raise ValueError("salt must be a hex string of 2 to 64 digits") from None


@dataclass(frozen=True)
class StringSketch(WireSized):
    """The string mechanism: one (level, row, cell) report through an inner oracle at ε.

    Args:
        epsilon: ε of one report.
        max_length: L, bytes of the padded value and number of levels (1..64).
        rows: h, hash rows per level; 0: :func:`auto_rows` of the cells.
        cells: m, cells per row (GRR's domain, 2..65,536); 0: :func:`auto_cells` of ε.
        salt: hex string the hash coefficients derive from (public; part of the version).

    Raises:
        ValueError: a parameter outside its range.
    """

    epsilon: float
    max_length: int = 16
    rows: int = 0
    cells: int = 0
    salt: str = "00"

    name = "string-sketch"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        if self.cells == 0 and type(self.cells) is int:
            object.__setattr__(self, "cells", auto_cells(self.epsilon))
        if self.rows == 0 and type(self.rows) is int and type(self.cells) is int:
            object.__setattr__(self, "rows", auto_rows(self.cells))
        for field, low, high in (
            ("max_length", 1, MAX_STRING_LENGTH),
            ("rows", 1, 256),
            ("cells", 2, 1 << 16),
        ):
            _check_whole(field, getattr(self, field), low, high)
        if self.counters > MAX_CELLS:
            raise ValueError(
                f"max_length × rows × cells = {self.counters} counters exceeds {MAX_CELLS}"
            )
        _check_salt(self.salt)

    # -- parameters ----------------------------------------------------------------
    @property
    def levels(self) -> int:
        """L: one level per byte of the padded value."""
        return self.max_length

    @property
    def groups(self) -> int:
        """(level, row) pairs a device picks among: L·h."""
        return self.levels * self.rows

    @property
    def counters(self) -> int:
        """Length of the counts vector: L·h·m cell counts, cell c of group g at g·m + c."""
        return self.groups * self.cells

    @property
    def domain_size(self) -> int:
        """The counters the commit script keeps (the support vector's length)."""
        return self.counters

    @cached_property
    def inner(self) -> GeneralizedRR:
        """GRR over one row's m cells."""
        return GeneralizedRR(epsilon=self.epsilon, domain_size=self.cells)

    @cached_property
    def coefficients(self) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]]:
        """(A_r for each row, (C_{l,r}, B_{l,r}) for each group l·h + r), from the salt."""

        def draw(label: str, low: int) -> int:
            digest = hashlib.blake2b(
                f"{label}".encode(), key=bytes.fromhex(self.salt), digest_size=8
            ).digest()
            return low + int.from_bytes(digest, "big") % (HASH_PRIME - low)

        a = tuple(draw(f"A:{r}", 2) for r in range(self.rows))
        cb = tuple(
            (draw(f"C:{lv}:{r}", 1), draw(f"B:{lv}:{r}", 0))
            for lv in range(self.levels)
            for r in range(self.rows)
        )
        return a, cb

    def cell(self, padded: bytes, level: int, row: int) -> int:
        """H_{level,row} of the first level+1 bytes of a padded value (level is 0-based)."""
        a, cb = self.coefficients
        phi = 0
        mult = a[row]
        for byte in padded[: level + 1]:
            phi = (phi * mult + byte + 1) % HASH_PRIME
        c, b = cb[level * self.rows + row]
        return ((c * phi + b) % HASH_PRIME) % self.cells

    def params(self) -> dict[str, Any]:
        """Everything needed to rebuild this mechanism (:func:`string_from_params`)."""
        names = ("epsilon", "max_length", "rows", "cells", "salt")
        return {"mechanism": self.name, **fields_of(self, *names)}

    # -- device --------------------------------------------------------------------
    def perturb(self, value: str | bytes, rng: RandomSource | None = None) -> dict[str, Any]:
        """Randomize one string on the device (or its already padded bytes).

        Raises:
            ValueError: see :func:`normalise`; padded bytes of the wrong length.
        """
        rng = rng or default_rng()
        padded = value if isinstance(value, bytes) else normalise(value, self.max_length)
        if len(padded) != self.max_length:
            raise ValueError(f"padded value must have {self.max_length} bytes")
        group = rng.randrange(self.groups)
        level, row = divmod(group, self.rows)
        inner = self.inner.perturb(self.cell(padded, level, row), rng)
        return {"l": level, "r": row, **inner}

    # -- server --------------------------------------------------------------------
    @cached_property
    def inner_fields(self) -> tuple[str, ...]:
        """The inner oracle's payload fields, in order."""
        return tuple(self.inner.max_payload())

    def check_payload(self, payload: object) -> dict[str, Any]:
        """Validate one payload strictly and return it in canonical form.

        Raises:
            PayloadError: wrong type, missing or extra fields, out-of-range values.
        """
        if not isinstance(payload, dict) or payload.keys() != self._field_set:
            raise PayloadError(
                f"{self.name} payload {str(payload)[:80]!r}: must be an object with fields "
                f"{['l', 'r', *self.inner_fields]}"
            )
        level, row = payload["l"], payload["r"]
        for field, x, upper in (("l", level, self.max_length), ("r", row, self.rows)):
            if type(x) is not int or not 0 <= x < upper:
                raise PayloadError(
                    f"{self.name} payload: {field!r} must be an integer in range(0, {upper})"
                )
        inner = self.inner.check_payload({f: payload[f] for f in self.inner_fields})
        return {"l": level, "r": row, **inner}

    @cached_property
    def _field_set(self) -> frozenset[str]:
        # a payload's keys view is compared with it: no set built per payload
        return frozenset(("l", "r", *self.inner_fields))

    @cached_property
    def _inner_has_implausible(self) -> bool:
        return type(self.inner).implausible is not FrequencyOracle.implausible

    def implausible(self, payload: dict[str, Any]) -> Implausible | None:
        """The inner oracle's verdict on a valid payload (GRR and OLH have no implausible
        reports: every output is likely under some value)."""
        if not self._inner_has_implausible:
            return None
        return self.inner.implausible({f: payload[f] for f in self.inner_fields})

    def max_payload(self) -> dict[str, Any]:
        """A largest possible payload, to size the wire format."""
        return {"l": self.levels - 1, "r": self.rows - 1, **self.inner.max_payload()}

    def cell_variance(self, n: Any, frequency: Any = 0.0) -> Any:
        """Var of one cell's estimate F̂ = (G·C/n − q*)/(p* − q*) from n reports in all.

        A report lands in (group, cell) with probability π/G, π = q* + (p* − q*)·F, so
        C ~ Bin(n, π/G) and Var[F̂] = G·π·(1 − π/G) / (n·(p* − q*)²). Floats or arrays.
        """
        p, q, G = self.inner.p, self.inner.q, self.groups
        pi = q + (p - q) * frequency
        return G * pi * (1 - pi / G) / (n * (p - q) ** 2)

    def variance_star(self) -> float:
        """n·Var of a full-length string's frequency at f ≈ 0, ignoring hash collisions:
        the row-averaged cell variance L·(q*(1−q*/G))/(p*−q*)², times (m/(m−1))²."""
        m = self.cells
        return float(self.cell_variance(1.0) / self.rows * (m / (m - 1)) ** 2)

    def privacy_bounds(self) -> dict[str, Any]:
        """ε of one report (the inner oracle's, at the full ε)."""
        return {"per_report": self.epsilon}

    @property
    def realized_epsilon(self) -> float:
        """ε realised by one report: the inner oracle's (level and row are value-free)."""
        return self.inner.realized_epsilon

    def __repr__(self) -> str:
        return (
            f"StringSketch(epsilon={self.epsilon}, max_length={self.max_length}, "
            f"rows={self.rows}, cells={self.cells})"
        )


def string_from_params(params: dict[str, Any]) -> StringSketch:
    """Rebuild a :class:`StringSketch` from :meth:`StringSketch.params`.

    Raises:
        ValueError: unknown mechanism name or parameters.
    """
    rest = dict(params)
    name = rest.pop("mechanism", None)
    if name != StringSketch.name:
        raise ValueError(f"a string metric's mechanism is {StringSketch.name}, got {name!r}")
    unknown = set(rest) - {"epsilon", "max_length", "rows", "cells", "salt"}
    if unknown:
        raise ValueError(f"unknown parameters {sorted(unknown)}")
    if "epsilon" not in rest:
        raise ValueError("mechanism parameters lack 'epsilon'")
    return StringSketch(**rest)


def derived_salt(name: str) -> str:
    """The default salt of a metric: BLAKE2b of its name (stable across PUTs of one spec)."""
    return hashlib.blake2b(f"ldp-string:{name}".encode(), digest_size=16).hexdigest()


__all__ += ["derived_salt", "display"]

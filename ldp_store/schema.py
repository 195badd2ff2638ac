"""The schema of the counts and of window names: what the worker writes, readers read.

A counts hash (:func:`ldp_store.keys.counts_key`) of one metric version, shard and window
holds ``HINCRBY`` fields only, so commits add up and shards sum:

| field | metric kind | what |
|---|---|---|
| ``n`` | every kind | reports counted |
| ``c:<v>`` | frequency, before compact counts | C(v), the reports supporting value v (absent: 0) |
| ``s:<i>`` | numeric | limb i of Σy, y a report in units (:func:`limbs`) |
| ``s2:<i>`` | numeric | limb i of Σy² |

**Compact counts.** A frequency metric's support counts C(0..k−1) of a window live in one
string (:func:`ldp_store.keys.support_key`): k signed 64-bit big-endian counters
(:data:`SUPPORT_TYPE`, ``BITFIELD … INCRBY i64 #v``), C(v) at byte 8·v, created at its full
length of 8·k bytes when the window is first written. A hash field costs about 64 bytes a
value once k passes Redis's compact listpack encoding (128 fields); a counter costs 8,
plus the allocator's rounding (at most a quarter: 10 bytes a value at k = 2ᵐ). The
increments are still ``c:<v>`` pairs (:func:`frequency_increments`); the commit script
routes them to the string. Hashes written before compact counts keep their ``c:<v>``
fields, which readers add to the string's counts: both formats stay readable, and a
window written across the upgrade sums both exactly. ``n`` stays in the hash.

**Deltas.** A batch that raises many distinct counters (a string metric's sketch: one
counter in 262,144 a report) would cost one ``BITFIELD`` increment per counter and window,
about 1.2 µs of Redis each. A metric with k ≥ :data:`DELTA_MIN_K` sends every batch's
increments instead as one blob, the field ``d`` (:data:`DELTA_FIELD`):
little-endian u32 pairs (v, C(v)) (:data:`DELTA_DTYPE`), nothing else (no id, no time).
The commit script appends it to each window's ``delta:<window>`` list
(:func:`ldp_store.keys.delta_key`), with the window's expiry (its counts hash's). A
window's counts are the packed string plus every blob in its list; readers take the hash,
the string and the list in one script (one atomic snapshot). Workers tidy the lists
(every few delta commits, a process's first, and whenever a round finds nothing new): a
list worth half its string's bytes is folded into the string, a shorter one of two or
more blobs is merged into one, so no list keeps batch boundaries or arrival order for
long, and none grows past about one string's worth. Either way the worker reads that
snapshot, adds in numpy, and writes with a script that first checks the head of the list
and the string are still what it read (their SHA-1s; only folds write the string), then
trims what it took from the head. Its one refusable write (Redis at its memory limit)
comes before the trim, so a refused tidy changes nothing; the commit does not depend on
it.

**Overflow.** C(v) ≤ n for every value (a report supports a value at most once), and the
commit script refuses, before it acknowledges anything, a batch that would take a window's
``n`` past :data:`MAX_WINDOW_REPORTS` (2⁶², far below the counters' 2⁶³ − 1): the entries
stay pending, nothing is lost, and no counter can wrap. ``OVERFLOW FAIL`` on every
increment is the second line: a counter that would overflow anyway (corrupt counts) stays
as it is instead of wrapping, and readers refuse counts with C(v) > n.

Windows are ``all``, ``hour:<YYYY-MM-DDTHH>`` and ``day:<YYYY-MM-DD>`` of the entries'
arrival time (UTC): :func:`window_names` names them, :data:`WINDOW_PATTERN` recognises
them, and the windows sorted set (:func:`ldp_store.keys.windows_key`) scores each by its
start in seconds.

Standard library only: the writers (the worker's commit script) and the readers
(:mod:`aggregator.stream.counts`, the numeric statistics) share these definitions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Literal

__all__ = [
    "ALL",
    "COUNT_PREFIX",
    "DAY_MS",
    "DELTA_DTYPE",
    "DELTA_FIELD",
    "DELTA_MIN_K",
    "HOUR_MS",
    "LIMB_BITS",
    "MAX_WINDOW_REPORTS",
    "N",
    "SUM_PREFIX",
    "SUM_SQ_PREFIX",
    "SUPPORT_BYTES",
    "SUPPORT_DTYPE",
    "SUPPORT_TYPE",
    "WINDOW_PATTERN",
    "WINDOW_REGEX",
    "Field",
    "count_field",
    "frequency_increments",
    "limbs",
    "numeric_fields",
    "numeric_increments",
    "parse_field",
    "window_names",
    "window_span",
]

N = "n"
"""Reports counted, in every counts hash."""

COUNT_PREFIX = "c"
"""``c:<v>``: the support count of value v (frequency metrics)."""

SUM_PREFIX = "s"
"""``s:<i>``: limb i of Σy (numeric metrics)."""

SUM_SQ_PREFIX = "s2"
"""``s2:<i>``: limb i of Σy² (numeric metrics)."""

SUPPORT_TYPE = "i64"
"""The BITFIELD type of a packed support counter: signed 64-bit (BITFIELD has no u64)."""

SUPPORT_BYTES = 8
"""Bytes per packed support counter."""

SUPPORT_DTYPE = ">i8"
"""The numpy dtype of a packed support string: BITFIELD stores integers big-endian."""

DELTA_FIELD = "d"
"""The increments field that carries a batch's counts as one blob (see Deltas above)."""

DELTA_DTYPE = "<u4"
"""The numpy dtype of a delta blob: (v, C(v)) pairs of little-endian unsigned 32-bit
integers (a batch's C(v) ≤ its size, far below 2³²)."""

DELTA_MIN_K = 1024
"""Domain size k from which a metric's increments always go as delta blobs: a batch of
such a metric raises up to thousands of counters (0.4 µs of BITFIELD a report at k =
1024, 5 µs for a string metric's 262,144). Per metric, not per batch: only folds write
the packed string of such a metric, which is what lets a fold overwrite it safely."""

MAX_WINDOW_REPORTS = 1 << 62
"""Most reports one window of one shard may count (4.6·10¹⁸: a century and a half at 10⁹
reports a second). Below the counters' 2⁶³ − 1 with room to spare, so that neither ``n``
nor any C(v) ≤ n can ever overflow; the commit script checks it exactly (in two parts of
digits, since a Lua number is a double)."""

ALL = "all"
"""The window over all time."""

HOUR_MS = 3_600_000
DAY_MS = 86_400_000

WINDOW_REGEX = r"all|hour:\d{4}-\d{2}-\d{2}T\d{2}|day:\d{4}-\d{2}-\d{2}"
"""A window name, as the read APIs accept it (and the OpenAPI document states it)."""

WINDOW_PATTERN = re.compile(WINDOW_REGEX)

LIMB_BITS = 32
"""Bits per stored limb of Σy and Σy²: a commit adds less than 2³² in magnitude to each
field, so Redis's signed 64-bit fields hold 2³¹ (2·10⁹) commits at the least, whatever
the reports, while a batch's Σy² (< 2¹⁰⁷) takes at most four fields."""

_LIMB = 1 << LIMB_BITS
_HALF_LIMB = 1 << (LIMB_BITS - 1)

Field = tuple[Literal["n", "c", "s", "s2"], int]
"""A parsed field name: its kind and its index (0 for ``n``)."""


def count_field(value: int) -> str:
    """The field of C(value)."""
    return f"{COUNT_PREFIX}:{value}"


def parse_field(name: bytes | str) -> Field:
    """The kind and index of a counts hash field.

    Raises:
        ValueError: a name that no counts hash holds (corrupt counts).
    """
    text = name.decode() if isinstance(name, bytes) else name
    if text == N:
        return "n", 0
    prefix, _, index = text.partition(":")
    if prefix in (COUNT_PREFIX, SUM_PREFIX, SUM_SQ_PREFIX) and index.isdigit():
        return prefix, int(index)  # type: ignore[return-value]  # checked just above
    raise ValueError(f"field {text!r} does not belong to a counts hash")


def frequency_increments(n: int, support: Iterable[tuple[int, int]]) -> list[str | int]:
    """``HINCRBY`` field/increment pairs of a frequency batch.

    Args:
        n: reports in the batch.
        support: (value, C(value)) for the nonzero counts.
    """
    pairs: list[str | int] = [N, n]
    for value, count in support:
        pairs += [count_field(value), count]
    return pairs


def limbs(total: int) -> list[int]:
    """Split an integer into base-2³² limbs: low ones in [0, 2³²), the top one signed.

    ``sum(limb << (32 * i) for i, limb in enumerate(limbs(t))) == t`` for every int t; the
    top limb lies in [−2³¹, 2³¹), so every limb is below 2³² in magnitude.
    """
    out: list[int] = []
    while not -_HALF_LIMB <= total < _HALF_LIMB:
        out.append(total & (_LIMB - 1))
        total >>= LIMB_BITS  # floor division: exact for negative totals too
    out.append(total)
    return out


def numeric_increments(n: int, total: int, total_sq: int) -> list[str | int]:
    """``HINCRBY`` field/increment pairs of a numeric batch: ``n``, then nonzero limbs."""
    pairs: list[str | int] = [N, n]
    for prefix, value in ((SUM_PREFIX, total), (SUM_SQ_PREFIX, total_sq)):
        for i, limb in enumerate(limbs(value)):
            if limb:
                pairs += [f"{prefix}:{i}", limb]
    return pairs


def numeric_fields(fields: Mapping[bytes, bytes] | Mapping[str, str | int]) -> tuple[int, int, int]:
    """(n, Σy, Σy²) of a numeric counts hash, the limbs put back together.

    Raises:
        ValueError: a field that a numeric counts hash does not hold (corrupt counts).
    """
    n = total = total_sq = 0
    for raw_name, raw_value in fields.items():
        kind, index = parse_field(raw_name)
        value = int(raw_value)
        if kind == "n":
            n += value
        elif kind == SUM_PREFIX:
            total += value << (LIMB_BITS * index)
        elif kind == SUM_SQ_PREFIX:
            total_sq += value << (LIMB_BITS * index)
        else:
            raise ValueError(f"field {raw_name!r} does not belong to numeric counts")
    return n, total, total_sq


def window_names(ms: int) -> tuple[str, int, str, int]:
    """The hour and day windows of an arrival time.

    Args:
        ms: milliseconds since the epoch (an entry id's first part).

    Returns:
        (hour name, hour start, day name, day start), starts in seconds since the epoch,
        names as ``hour:YYYY-MM-DDTHH`` and ``day:YYYY-MM-DD`` (UTC).
    """
    hour_start = ms // HOUR_MS * 3600
    day_start = ms // DAY_MS * 86400
    hour = datetime.fromtimestamp(hour_start, tz=UTC)
    return f"hour:{hour:%Y-%m-%dT%H}", hour_start, f"day:{hour:%Y-%m-%d}", day_start


def window_span(window: str) -> tuple[float, float] | None:
    """(start, end) of an hour or day window in Unix seconds; None for ``all``.

    Raises:
        ValueError: not a window name (see :data:`WINDOW_PATTERN`).
    """
    if not WINDOW_PATTERN.fullmatch(window):
        raise ValueError(f"not a window name: {window!r}")
    if window == ALL:
        return None
    kind, _, when = window.partition(":")
    if kind == "hour":
        start = datetime.strptime(when, "%Y-%m-%dT%H").replace(tzinfo=UTC).timestamp()
        return start, start + HOUR_MS / 1000
    start = datetime.strptime(when, "%Y-%m-%d").replace(tzinfo=UTC).timestamp()
    return start, start + DAY_MS / 1000

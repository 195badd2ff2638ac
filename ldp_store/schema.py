"""The schema of the counts and of window names: what the worker writes, readers read.

A counts hash (:func:`ldp_store.keys.counts_key`) of one metric version, shard and window
holds ``HINCRBY`` fields only, so commits add up and shards sum:

In full: ``docs/architecture/storage.md``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from ldp_store.connection import as_text

__all__ = [
    "ALL",
    "SEGMENT_KEY",
    "SEGMENT_PREFIX",
    "segment_increments",
    "segment_n_field",
    "split_segments",
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
    "Increments",
    "count_field",
    "frequency_increments",
    "increment_fields",
    "limbs",
    "numeric_fields",
    "numeric_increments",
    "parse_field",
    "read_n",
    "window_names",
    "day_of",
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

SEGMENT_PREFIX = "g"
"""``g<s>:<field>``: field ``n``, ``c:<v>``, ``s:<i>`` or ``s2:<i>`` of segment s alone
(a metric with public dimensions, :mod:`client_sdk.wire.dimensions`), in the same counts
hash as the totals, so one commit adds both and one snapshot reads both. A metric
without dimensions has no such field: its hashes are exactly as before."""

SEGMENT_KEY = "_g"
"""The key of a stream entry's payload object that holds its segment index (a metric
with public dimensions; absent otherwise, so an entry without dimensions is stored
exactly as before). No mechanism's payload has a key starting with ``_``."""

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
    text = as_text(name)
    if text == N:
        return "n", 0
    prefix, _, index = text.partition(":")
    if prefix in (COUNT_PREFIX, SUM_PREFIX, SUM_SQ_PREFIX) and index.isdigit():
        return prefix, int(index)  # type: ignore[return-value]  # checked just above
    raise ValueError(f"field {text!r} does not belong to a counts hash")


@dataclass(frozen=True, slots=True)
class Increments:
    """What one batch adds to a window's counts, said without field names.

    A codec (:mod:`aggregator.stats.batch`) returns one per batch;
    :func:`increment_fields` words it as the commit script's field/increment pairs.
    """

    n: int
    """Reports in the batch."""
    values: Sequence[int] = ()
    """Support values v with a nonzero count C(v), ascending (frequency kinds)."""
    counts: Sequence[int] = ()
    """Their C(v), in the same order."""
    delta: bytes = b""
    """Or the batch's support counts as one delta blob (k ≥ :data:`DELTA_MIN_K`)."""
    sums: tuple[int, int] | None = None
    """Numeric kinds: Σy and Σy² of the batch, in integer units."""


_COUNT_FIELDS: list[str] = []
"""``c:<v>`` for v = 0, 1, …, grown on demand (formatting each costs more than a lookup)."""


def _count_fields(size: int) -> list[str]:
    """The table of count field names, at least ``size`` long (replaced whole when it
    grows, so a thread never sees it half built)."""
    global _COUNT_FIELDS  # noqa: PLW0603 (a cache)
    table = _COUNT_FIELDS
    if len(table) < size:
        table = [count_field(v) for v in range(max(size, 2 * len(table)))]
        _COUNT_FIELDS = table
    return table


def increment_fields(increments: Increments) -> list[str | int | bytes]:
    """The commit script's field/increment pairs of a batch: ``n`` first, then ``d`` and
    its delta blob, or ``c:<v>`` pairs (the packed support counts), or the nonzero limbs
    of a numeric batch's sums (the counts hash)."""
    pairs: list[str | int | bytes] = [N, increments.n]
    if increments.delta:
        pairs += [DELTA_FIELD, increments.delta]
    elif increments.values:
        names = _count_fields(max(increments.values) + 1)
        for v, c in zip(increments.values, increments.counts, strict=True):
            pairs += (names[v], c)
    if increments.sums is not None:
        pairs += numeric_increments(increments.n, *increments.sums)[2:]
    return pairs


def segment_increments(segment: int, increments: Increments) -> list[str | int | bytes]:
    """The commit script's field/increment pairs of one segment's part of a batch: the
    fields of :func:`increment_fields`, each under ``g<segment>:`` (never a delta blob:
    a metric with dimensions has fewer counters than :data:`DELTA_MIN_K`).

    Raises:
        ValueError: a delta blob.
    """
    if increments.delta:
        raise ValueError("segment counts are kept field by field, not as delta blobs")
    pairs = increment_fields(increments)
    head = f"{SEGMENT_PREFIX}{segment}:"
    for i in range(0, len(pairs), 2):
        pairs[i] = head + str(pairs[i])
    return pairs


def segment_n_field(segment: int) -> str:
    """The counts hash field holding segment ``segment``'s n (reports counted)."""
    return f"{SEGMENT_PREFIX}{segment}:{N}"


def split_segments(
    fields: Mapping[bytes, bytes],
) -> tuple[dict[bytes, bytes], dict[int, dict[bytes, bytes]]]:
    """A counts hash's fields parted into the totals' and each segment's (names without
    the ``g<s>:`` prefix)."""
    plain: dict[bytes, bytes] = {}
    segments: dict[int, dict[bytes, bytes]] = {}
    marker = SEGMENT_PREFIX.encode()
    for name, value in fields.items():
        if name[:1] == marker and b":" in name:
            head, _, rest = name.partition(b":")
            if head[1:].isdigit():
                segments.setdefault(int(head[1:]), {})[rest] = value
                continue
        plain[name] = value
    return plain, segments


def segment_count_fields(
    fields: Mapping[bytes, bytes],
) -> tuple[dict[int, int], list[int], list[int], list[int]] | None:
    """A frequency counts hash's segment fields in one pass: each segment's n, and the
    (segment, value, count) of every ``C(value)`` field as three lists; the totals'
    fields skipped. None when a segment's field is neither (the general reading,
    :func:`split_segments` then :func:`parse_field`, says which)."""
    head_mark, count_mark, n_field = (
        SEGMENT_PREFIX.encode(),
        f"{COUNT_PREFIX}:".encode(),
        N.encode(),
    )
    sizes: dict[int, int] = {}
    segs: list[int] = []
    values: list[int] = []
    counts: list[int] = []
    try:
        for name, raw in fields.items():
            head, _, rest = name.partition(b":")
            if head[:1] != head_mark or not head[1:].isdigit():
                continue  # the totals' fields
            if rest == n_field:
                segment = int(head[1:])
                sizes[segment] = sizes.get(segment, 0) + int(raw)
            elif rest[:2] == count_mark and rest[2:].isdigit():
                segs.append(int(head[1:]))
                values.append(int(rest[2:]))
                counts.append(int(raw))
            else:
                return None
    except ValueError:
        return None
    return sizes, segs, values, counts


def read_n(client: Any, counts_key: str) -> Any:
    """``HGET`` of a counts hash's ``n`` (on a client: the reply, bytes or None; on a
    pipeline: queued)."""
    return client.hget(counts_key, N)


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


def day_of(hour: str) -> str:
    """The day window holding an hour window (``hour:2026-05-01T13`` → ``day:2026-05-01``).

    Raises:
        ValueError: not an hour window's name.
    """
    if not hour.startswith("hour:") or not WINDOW_PATTERN.fullmatch(hour):
        raise ValueError(f"not an hour window: {hour!r}")
    return "day:" + hour[len("hour:") : len("hour:YYYY-MM-DD")]


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

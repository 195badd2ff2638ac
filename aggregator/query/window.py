"""Reading a window: its counts summed over shards, the windows a version has, lag.

Pure reads (a few HGETALL/GET/ZRANGE/XLEN calls, a window's counts by one read-only
script): the estimators (:mod:`aggregator.query.estimators`), the alarms, the overview
and ``ldp export`` call these. A version's ``definition.shards`` shards are read in one
pipeline (on a Redis Cluster, one round trip per node holding some of them) and summed.
See docs/architecture/pipeline.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import redis

from aggregator.stats.codecs import Counts
from aggregator.stats.detect import SEED_BINS
from aggregator.stats.numeric import NumericStats
from client_sdk.wire import MetricDefinition
from ldp_store import keys, schema, scripts
from ldp_store.connection import as_text, stream_gone

__all__ = [
    "Counters",
    "Lag",
    "add_deltas",
    "add_packed",
    "counters",
    "lag",
    "lag_details",
    "lag_details_many",
    "list_windows",
    "list_windows_many",
    "newest_arrival",
    "parse_segments",
    "per_shard",
    "read_counts",
    "read_counts_many",
    "read_numeric",
    "read_numeric_many",
    "read_segment_sizes",
    "read_segments",
    "read_seeds",
    "reports_counted",
    "reports_counted_many",
    "segment_hashes",
]


def per_shard(
    client: redis.Redis, definition: MetricDefinition, command: Callable[[Any, int], object]
) -> list[Any]:
    """``command(client_or_pipeline, shard)`` for every shard of a metric version.

    One shard is read directly; several go through one non-transactional pipeline, which
    redis-py's cluster client splits by node (no multi-slot command is ever sent).

    Returns:
        The replies, by shard.
    """
    if definition.shards == 1:
        return [command(client, 0)]
    with client.pipeline(transaction=False) as pipe:
        for shard in range(definition.shards):
            command(pipe, shard)
        return list(pipe.execute())


def _window_replies(
    client: redis.Redis, definition: MetricDefinition, window: str
) -> list[tuple[dict[bytes, bytes], bytes | None, list[bytes]]]:
    """Each shard's counts hash, packed support counts and unfolded delta blobs of a
    window, each shard's three as one snapshot (:data:`ldp_store.scripts.WINDOW`)."""
    name, version = definition.name, definition.version
    return [
        scripts.read_window(client, name=name, version=version, window=window, shard=shard)
        for shard in range(definition.shards)
    ]


def add_packed(support: np.ndarray, packed: bytes | None, key: str) -> None:
    """Add a packed support string (:mod:`ldp_store.schema`; None: none) to ``support``.

    Raises:
        ValueError: a string that is not k counters (corrupt counts).
    """
    if packed is None:
        return
    k = len(support)
    if len(packed) != schema.SUPPORT_BYTES * k:
        raise ValueError(
            f"{key}: {len(packed)} bytes, not the {schema.SUPPORT_BYTES * k} of k = {k} counters"
        )
    support += np.frombuffer(packed, dtype=schema.SUPPORT_DTYPE)


def add_deltas(support: np.ndarray, blobs: list[bytes], key: str) -> None:
    """Add stored delta blobs (see Deltas in :mod:`ldp_store.schema`) to ``support``.

    Raises:
        ValueError: a blob without its tag, not whole (v, C(v)) pairs, or naming a value
            outside 0..k−1 (corrupt counts).
    """
    k = len(support)
    for blob in blobs:
        if len(blob) % 8:
            raise ValueError(f"{key}: a delta blob of {len(blob)} bytes is not whole pairs")
        pairs = np.frombuffer(blob, dtype=schema.DELTA_DTYPE).reshape(-1, 2)
        if len(pairs) and int(pairs[:, 0].max()) >= k:
            raise ValueError(f"{key}: a delta names value {int(pairs[:, 0].max())}, k = {k}")
        support += np.bincount(pairs[:, 0], weights=pairs[:, 1], minlength=k).astype(np.int64)


def read_counts(client: redis.Redis, definition: MetricDefinition, window: str = "all") -> Counts:
    """The committed support counts of a metric version in a window, summed over shards.

    Reads both formats and adds them (:mod:`ldp_store.schema`): the packed support string
    (decoded by numpy), its unfolded delta blobs, and any ``c:<v>`` fields a counts hash
    kept from before compact counts; ``n`` is the hash's. Each shard's window is read as
    one snapshot (a script).

    Args:
        client: a redis-py client.
        definition: the metric version.
        window: ``"all"``, ``"hour:YYYY-MM-DDTHH"`` or ``"day:YYYY-MM-DD"`` (UTC).

    Returns:
        n and C(v) for v in 0..k-1 (zeros for a window without reports).

    Raises:
        ValueError: corrupt counts: a field naming a value outside the domain, a packed
            string of the wrong length, or a count above n.
    """
    return _summed(definition, window, _window_replies(client, definition, window))


def read_counts_many(
    client: redis.Redis, definition: MetricDefinition, windows: Sequence[str]
) -> list[Counts]:
    """:func:`read_counts` of many windows, read in a few round trips (a trend's months
    of windows: :func:`ldp_store.scripts.read_windows`).

    Raises:
        ValueError: corrupt counts (as :func:`read_counts`).
    """
    shards = definition.shards
    pairs = [(window, shard) for window in windows for shard in range(shards)]
    replies = scripts.read_windows(
        client, name=definition.name, version=definition.version, windows=pairs
    )
    return [
        _summed(definition, window, replies[i * shards : (i + 1) * shards])
        for i, window in enumerate(windows)
    ]


def _summed(
    definition: MetricDefinition, window: str, replies: Sequence[scripts.WindowReply]
) -> Counts:
    """A window's counts from its shards' replies, summed (see :func:`read_counts`)."""
    k = definition.k
    n = 0
    support = np.zeros(k, dtype=np.int64)
    for shard, (fields, packed, deltas) in enumerate(replies):
        key = keys.counts_key(definition.name, definition.version, window, shard)
        shard_n = 0
        shard_support = np.zeros(k, dtype=np.int64)
        add_packed(
            shard_support,
            packed,
            keys.support_key(definition.name, definition.version, window, shard),
        )
        add_deltas(
            shard_support,
            deltas,
            keys.delta_key(definition.name, definition.version, window, shard),
        )
        fields, _ = schema.split_segments(fields)  # segments: read_segments
        for raw_field, raw_value in fields.items():
            kind, v = schema.parse_field(raw_field)
            if kind == "n":
                shard_n += int(raw_value)
            elif kind == "c":
                if not 0 <= v < k:
                    raise ValueError(f"{key}: count of value {v} outside the domain 0..{k - 1}")
                shard_support[v] += int(raw_value)
        if k and (shard_support.min() < 0 or shard_support.max() > shard_n):
            raise ValueError(f"{key}: a support count outside [0, n = {shard_n}]")
        n += shard_n
        support += shard_support
    return Counts(n, support)


def read_numeric(
    client: redis.Redis, definition: MetricDefinition, window: str = "all"
) -> NumericStats:
    """The committed sums of a numeric metric version in a window, summed over shards.

    Args:
        client: a redis-py client.
        definition: the (numeric) metric version.
        window: ``"all"``, ``"hour:YYYY-MM-DDTHH"`` or ``"day:YYYY-MM-DD"`` (UTC).

    Returns:
        n, Σy and Σy² in units (zeros for a window without reports).

    Raises:
        ValueError: a field that numeric counts do not hold (corrupt counts).
    """
    stats = NumericStats.zeros()
    name, version = definition.name, definition.version
    replies = per_shard(
        client, definition, lambda c, s: c.hgetall(keys.counts_key(name, version, window, s))
    )
    for fields in replies:
        plain, _ = schema.split_segments(cast(dict[bytes, bytes], fields))
        stats += NumericStats.from_fields(plain)
    return stats


def read_numeric_many(
    client: redis.Redis, definition: MetricDefinition, windows: Sequence[str]
) -> list[NumericStats]:
    """:func:`read_numeric` of many windows in one pipeline (on a Redis Cluster, one
    round trip per node).

    Raises:
        ValueError: a field that numeric counts do not hold (corrupt counts).
    """
    name, version, shards = definition.name, definition.version, definition.shards
    with client.pipeline(transaction=False) as pipe:
        for window in windows:
            for shard in range(shards):
                pipe.hgetall(keys.counts_key(name, version, window, shard))
        replies = pipe.execute()
    out = []
    for i in range(len(windows)):
        stats = NumericStats.zeros()
        for fields in replies[i * shards : (i + 1) * shards]:
            plain, _ = schema.split_segments(cast(dict[bytes, bytes], fields))
            stats += NumericStats.from_fields(plain)
        out.append(stats)
    return out


def read_segments(
    client: redis.Redis, definition: MetricDefinition, window: str = "all"
) -> dict[int, Counts | NumericStats]:
    """Each segment's committed counts (public dimensions), summed over shards: support
    counts for a frequency or joint metric, sums for a numeric one. A segment without
    reports is absent.

    Raises:
        ValueError: corrupt counts (a value outside the domain, a count above n).
    """
    return parse_segments(definition, segment_hashes(client, definition, window))


def segment_hashes(
    client: redis.Redis, definition: MetricDefinition, window: str = "all"
) -> list[dict[bytes, bytes]]:
    """The counts hash of ``window`` in each shard, as Redis holds it (the I/O of
    :func:`read_segments`)."""
    name, version = definition.name, definition.version
    return per_shard(
        client, definition, lambda c, s: c.hgetall(keys.counts_key(name, version, window, s))
    )


def parse_segments(
    definition: MetricDefinition, replies: list[dict[bytes, bytes]]
) -> dict[int, Counts | NumericStats]:
    """Each segment's counts in the shards' counts hashes ``replies`` (the pure part of
    :func:`read_segments`, which says what it returns and raises)."""
    k = definition.k
    numeric = definition.kind == "numeric"
    out: dict[int, Any] = {}
    for fields in replies:
        for segment, found in _shard_segments(fields, k, numeric):
            before = out.get(segment)
            out[segment] = found if before is None else before + found
    return out


def _shard_segments(
    fields: dict[bytes, bytes], k: int, numeric: bool
) -> Iterable[tuple[int, Counts | NumericStats]]:
    """Each segment's counts in one shard's counts hash (:func:`parse_segments`)."""
    quick = None if numeric else _segment_counts(fields, k)
    if quick is not None:
        return quick.items()
    _, segments = schema.split_segments(fields)
    if numeric:
        return [(segment, NumericStats.from_fields(part)) for segment, part in segments.items()]
    return [(segment, _parsed_segment(segment, part, k)) for segment, part in segments.items()]


def _parsed_segment(segment: int, part: Mapping[bytes, bytes], k: int) -> Counts:
    """A segment's counts from its fields, the general way: each field checked.

    Raises:
        ValueError: a field that is not n or a count of a value in 0..k-1, or a count
            above n.
    """
    n, support = 0, np.zeros(k, dtype=np.int64)
    for raw_field, raw_value in part.items():
        kind, v = schema.parse_field(raw_field)
        if kind == "n":
            n += int(raw_value)
        elif kind == "c" and 0 <= v < k:
            support[v] += int(raw_value)
        else:
            raise ValueError(f"segment {segment}: field {raw_field!r} outside 0..{k - 1}")
    if k and support.max() > n:
        raise ValueError(f"segment {segment}: a support count above n = {n}")
    return Counts(n, support)


def _segment_counts(fields: dict[bytes, bytes], k: int) -> dict[int, Counts] | None:
    """Each segment's counts of one counts hash in one pass over its fields and a few
    array operations (a breakdown's hash holds a field per group and value: 64,000 at 64
    groups of 1,000 values); None when a field is not a segment's ``n`` or count of a
    value in the domain (the general reading then says which).

    Raises:
        ValueError: a support count above its segment's n.
    """
    parsed = schema.segment_count_fields(fields)
    if parsed is None:
        return None
    sizes, segs, values, counts = parsed
    seg = np.asarray(segs, dtype=np.int64)
    at = np.asarray(values, dtype=np.int64)
    got = np.asarray(counts, dtype=np.int64)
    if len(at) and (at.max() >= k or got.min() < 0):
        return None
    order = np.argsort(seg, kind="stable")
    seg, at, got = seg[order], at[order], got[order]
    starts = np.flatnonzero(np.r_[True, np.diff(seg) != 0]) if len(seg) else seg
    ends = np.r_[starts[1:], len(seg)].astype(np.int64) if len(seg) else seg
    out = {segment: Counts(n, np.zeros(k, dtype=np.int64)) for segment, n in sizes.items()}
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        segment = int(seg[start])
        support = np.zeros(k, dtype=np.int64)
        np.add.at(support, at[start:end], got[start:end])
        n = sizes.get(segment, 0)
        if k and support.max() > n:
            raise ValueError(f"segment {segment}: a support count above n = {n}")
        out[segment] = Counts(n, support)
    return out


def read_segment_sizes(
    client: redis.Redis, definition: MetricDefinition, windows: list[str]
) -> dict[str, list[int]]:
    """Each window's reports per segment (n only; index = segment), summed over shards,
    all windows read in one pipeline (what suppression across windows decides from)."""
    name, version = definition.name, definition.version
    fields = [schema.segment_n_field(s) for s in range(definition.segments)]
    with client.pipeline(transaction=False) as pipe:
        for window in windows:
            for shard in range(definition.shards):
                pipe.hmget(keys.counts_key(name, version, window, shard), fields)
        replies = iter(pipe.execute())
    out: dict[str, list[int]] = {}
    for window in windows:
        sizes = [0] * definition.segments
        for _ in range(definition.shards):
            for s, raw in enumerate(cast(list[bytes | None], next(replies))):
                sizes[s] += int(raw or 0)
        out[window] = sizes
    return out


def read_seeds(client: redis.Redis, definition: MetricDefinition, window: str) -> np.ndarray:
    """A local-hashing window's seed histogram (``SEED_BINS`` bins), summed over shards.

    Zeros for a window without one (another mechanism, or counted before seeds were kept).

    Raises:
        ValueError: a bin outside the histogram (corrupt seeds).
    """
    histogram = np.zeros(SEED_BINS, dtype=np.int64)
    name, version = definition.name, definition.version
    replies = per_shard(
        client, definition, lambda c, s: c.hgetall(keys.seeds_key(name, version, window, s))
    )
    for fields in replies:
        for raw_bin, raw_count in fields.items():
            index = int(raw_bin)
            if not 0 <= index < SEED_BINS:
                raise ValueError(f"seed bin {index} outside 0..{SEED_BINS - 1}")
            histogram[index] += int(raw_count)
    return histogram


def list_windows(
    client: redis.Redis, definition: MetricDefinition, now: float | None = None
) -> list[str]:
    """Windows that have counts, newest first (``all`` last), expired ones left out.

    Windows starting at the same time (a day and its first hour) come day first. A window
    past its expiry (:mod:`ldp_store.retention`) is left out even before a commit drops it
    from the windows set.
    """
    return list_windows_many(client, [definition], now)[0]


def list_windows_many(
    client: redis.Redis, definitions: Sequence[MetricDefinition], now: float | None = None
) -> list[list[str]]:
    """:func:`list_windows` of each definition, read in one pipeline (an overview page)."""
    now_ms = 1000 * (time.time() if now is None else now)
    with client.pipeline(transaction=False) as pipe:
        for d in definitions:
            for shard in range(d.shards):
                pipe.zrange(keys.windows_key(d.name, d.version, shard), 0, -1, withscores=True)
                pipe.zrangebyscore(keys.expiries_key(d.name, d.version, shard), "-inf", now_ms)
        replies = pipe.execute() if definitions else []
    found, at = [], 0
    for d in definitions:
        found.append(_live_windows(replies[at : at + 2 * d.shards]))
        at += 2 * d.shards
    return found


def _live_windows(replies: list[Any]) -> list[str]:
    """One version's windows, newest first, from its shards' replies (each shard's
    windows with their start, then its expired ones)."""
    starts: dict[str, float] = {}
    expired: set[str] = set()
    for members, gone in zip(replies[::2], replies[1::2], strict=True):
        expired.update(as_text(m) for m in cast(list[bytes | str], gone))
        for member, score in cast(list[tuple[bytes | str, float]], members):
            name = as_text(member)
            starts[name] = max(score, starts.get(name, score))
    live = [name for name in starts if name not in expired]
    return sorted(live, key=lambda name: (-starts[name], name))


def newest_arrival(client: redis.Redis, definition: MetricDefinition) -> float | None:
    """The start (Unix seconds) of the newest window with counts: reports of the version
    arrived at that time or later, by Redis's clock. None before any window.

    What keeps a reports-per-device bound from shrinking when the web server's clock is
    behind Redis's (or was set back): the bound runs to at least this time.
    """
    name_, version = definition.name, definition.version
    replies = per_shard(
        client,
        definition,
        lambda c, s: c.zrange(keys.windows_key(name_, version, s), -1, -1, withscores=True),
    )
    scores = [float(score) for members in replies for _, score in members]
    return max(scores) if scores else None


@dataclass(frozen=True)
class Lag:
    """How far the aggregators are behind on a metric version, for operators.

    ``length`` counts the reports still in the stream (its entries, plus what batch
    entries hold beyond one each). The worker trims what it has committed, so these are
    the reports not yet counted: never delivered, or delivered and not yet committed.
    ``pending`` counts the entries of the latter: a pending figure that stays high means a
    worker is stuck or dead, and XAUTOCLAIM will hand its entries to another.
    """

    length: int
    pending: int


def lag_details(client: redis.Redis, definition: MetricDefinition) -> Lag:
    """Stream length and pending entries of a metric version, summed over shards."""
    return lag_details_many(client, [definition])[0]


def lag_details_many(
    client: redis.Redis,
    definitions: Sequence[MetricDefinition],
    counted: Sequence[Counters] | None = None,
) -> list[Lag]:
    """:func:`lag_details` of each definition in a few calls: the lengths from
    :func:`counters` (given, or read), the pending entries (``XPENDING``) only of the
    versions whose streams hold entries (a pending entry is in its stream), in one
    pipeline."""
    if counted is None:
        counted = counters(client, definitions)
    busy = [d for d, c in zip(definitions, counted, strict=True) if c.lag]
    pending: dict[tuple[str, int], int] = {}
    if busy:
        with client.pipeline(transaction=False) as pipe:
            for d in busy:
                for shard in range(d.shards):
                    pipe.xpending(keys.stream_key(d.name, d.version, shard), keys.GROUP)
            replies = iter(pipe.execute(raise_on_error=False))
        for d in busy:
            pending[(d.name, d.version)] = sum(_pending(next(replies)) for _ in range(d.shards))
    return [
        Lag(c.lag, pending.get((d.name, d.version), 0))
        for d, c in zip(definitions, counted, strict=True)
    ]


def _pending(summary: Any) -> int:
    """A stream's pending entries from its ``XPENDING`` summary, or the error read in its
    place (none: no stream or no group yet; another error is raised)."""
    if isinstance(summary, Exception):
        if not stream_gone(summary):
            raise summary
        return 0
    return int(cast(dict[str, int], summary)["pending"])


def lag(client: redis.Redis, definition: MetricDefinition) -> int:
    """Reports of a metric version not yet counted: the stream length (pending included).

    See :func:`lag_details` for the pending part on its own.
    """
    return lag_details(client, definition).length


@dataclass(frozen=True)
class Counters:
    """What ``/metrics`` shows of a metric version, read with every other's at once."""

    n: int
    """Reports counted, all time (:func:`reports_counted`)."""
    lag: int
    """Reports in its streams not yet counted (:func:`lag`)."""
    dead: int
    """Entries in its dead-letter streams."""

    @property
    def active(self) -> bool:
        """Anything to show: reports counted, waiting or dead-lettered."""
        return bool(self.n or self.lag or self.dead)


def counters(client: redis.Redis, definitions: Sequence[MetricDefinition]) -> list[Counters]:
    """:class:`Counters` of every definition (every shard), in a call per 1,250 shards
    whose reply holds only the shards in use (:func:`ldp_store.scripts.units_in_use`): a
    scrape over ten thousand metrics, not four round trips per metric."""
    units = [(d.name, d.version, s) for d in definitions for s in range(d.shards)]
    in_use = scripts.units_in_use(client, units)
    found: list[Counters] = []
    at = 0
    for d in definitions:
        mine = [in_use[i] for i in range(at, at + d.shards) if i in in_use]
        at += d.shards
        found.append(
            Counters(
                sum(u.n for u in mine),
                sum(u.length + u.batched for u in mine),
                sum(u.dead for u in mine),
            )
            if mine
            else _NOTHING
        )
    return found


_NOTHING = Counters(0, 0, 0)


def reports_counted_many(client: redis.Redis, definitions: Sequence[MetricDefinition]) -> list[int]:
    """:func:`reports_counted` of every definition, in one call
    (:func:`ldp_store.scripts.read_many`)."""
    units = [(d, shard) for d in definitions for shard in range(d.shards)]
    raw = scripts.read_many(
        client, "HGET", [keys.counts_key(d.name, d.version, "all", s) for d, s in units], "n"
    )
    found, at = [], 0
    for d in definitions:
        found.append(sum(int(x or 0) for x in raw[at : at + d.shards]))
        at += d.shards
    return found


def reports_counted(client: redis.Redis, definition: MetricDefinition) -> int:
    """n of a metric version over all time (the ``n`` field of its counts, every shard).

    Read on its own rather than through :func:`read_counts`: n is what every kind of
    metric counts, whatever else its counts hold.
    """
    name, version = definition.name, definition.version
    replies = per_shard(
        client, definition, lambda c, s: schema.read_n(c, keys.counts_key(name, version, "all", s))
    )
    return sum(int(raw) for raw in replies if raw is not None)

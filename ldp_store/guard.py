"""The replay guard's layout: report ids as 64-bit integers in small bucketed sets.

An id's first 8 bytes are its **member** (an intset keeps it in 8 bytes), the leading j
bits of its last 8 pick its **bucket**, one of 2**j sets of a *generation* j. A metric
version's guard keeps two *epochs*, the current one (new ids) and the one before: a UTC
day each, unless the guard's budget made the current one end early (a *pressure epoch*,
``<day>.<k>``, never younger than :data:`MIN_WINDOW` when it ends). An epoch starts with
one generation sized from the epoch before and starts larger ones as it fills; a lookup
checks the id's bucket in every generation of both epochs, so a replay is always found.

The design, its costs (a false replay below 4e-16 a report), the budget's shares and
figures: docs/architecture/storage.md ("The replay guard") and
docs/benchmarks/performance.md.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from ldp_store import keys

__all__ = [
    "BUCKET_FILL",
    "GuardArgs",
    "BYTES_PER_ID",
    "EXPIRY_SLACK",
    "GENERATION_STEP",
    "MADE_BITS",
    "MADE_READ_WHOLE",
    "MIN_WINDOW",
    "RESERVED_SHARE",
    "SIZED_FOR",
    "TTL_SECONDS",
    "UNLIMITED",
    "Layout",
    "Shares",
    "bucket_of",
    "day_of",
    "day_pair",
    "day_start",
    "expires_at",
    "member_of",
    "parse_epoch",
    "parse_generations",
]

EXPIRY_SLACK = 3_600
"""Seconds a day's guard outlives the end of the day after it: collectors whose clocks
disagree by less than this still find yesterday's ids."""

TTL_SECONDS = 2 * 86_400 + EXPIRY_SLACK
"""The longest a guard key lives. A report id is checked against today's and yesterday's
guard (UTC), so a replay is caught for at least 24 hours (Mozilla's document-id dedup
horizon) and at most 48; a day's keys expire at the end of the day after it
(:func:`expires_at`), when no lookup can read them any more. (They used to live two days
after their last write: a third day of ids that nothing read, issue 29.)"""

BYTES_PER_ID = 20
"""What the collectors count an id of the guard as, to keep its memory within its budget
(``collector.memory``): ``benchmarks/bench_replay_guard.py`` measured ``used_memory``
growing 9.5 bytes an id on a metric's later days and 17.8–19.1 on its first (Redis 6.2
and 7: more, smaller sets, each a keyspace entry with a TTL), so this is the larger.
Ids a client crafts to crowd one bucket cost more (the set
becomes a hash table, about 60 bytes an id): the overview's measured figure shows it."""

SIZED_FOR = 128
"""Ids a bucket of a day's first generation is sized for at the previous day's volume:
the first generation has the fewest buckets (a power of two) that hold yesterday's ids at
this fill, so a steady metric's buckets end the day 64–128 full; each bucket key costs
about 100–150 bytes of its own, 1–2 bytes an id at that fill."""

BUCKET_FILL = 256
"""Ids a bucket holds on average before the day starts a new generation. Redis keeps a
set as an intset up to ``set-max-intset-entries`` = 512 members; the fullest of 2**20
buckets at a mean of 256 holds about 256 + 5.5 × 16 ≈ 345 (Poisson), well under 512.
So a day with twice the volume of the day before stays in one generation."""

GENERATION_STEP = 4
"""A new generation has 2**4 = 16 times the buckets of the last: a metric that goes from
nothing to 200 M reports in one day needs five (1 → 268 M ids of room), so a lookup
checks at most a handful of buckets."""


MIN_WINDOW = 1_800
"""Seconds the guard remembers every id it accepted, whatever its budget: an epoch ends
early (its ids become the previous epoch's, and the epoch before is dropped) only once it
is this old, and none starts within this long of the end of the UTC day, so the epoch the
day's end drops is at least this old too. A version whose share is full while its current
epoch is younger is refused (503) until it is not: at most ``3 × MIN_WINDOW`` (docs:
"The replay guard"). Half an hour holds the SDK's retries of a lost answer (its backoff
tops at 30 s, a ``Retry-After`` at 10 minutes)."""

RESERVED_SHARE = 0.5
"""The part of the guard's budget split equally among the metric versions' shards (every
version, every shard: the units one append script guards); the rest is a pool any of
them may use first come. Whatever the others send, a unit keeps its reserved part."""

MADE_BITS = 32
"""The largest generation whose buckets' expiry the append script tracks in a bitmap
(2**32 bits is Redis's largest string); above it, it sets a bucket's expiry at every write."""

MADE_READ_WHOLE = 19
"""The largest generation whose bitmap the append script reads whole (2**19 bits, 64 KiB)
and tests the written buckets' bits itself; a larger one's bits it asks ``BITFIELD``
for (about 1.7 µs a report more on calls of 500 to a generation of 4,096 buckets)."""


def day_pair(now: datetime) -> tuple[str, str]:
    """(today, yesterday) as the guard names its days: UTC dates, YYYY-MM-DD."""
    today = now.astimezone(UTC).date()
    return today.isoformat(), (today - timedelta(days=1)).isoformat()


def day_of(epoch: str) -> str:
    """The UTC day an epoch belongs to: ``2030-01-07.2`` → ``2030-01-07``."""
    return epoch.partition(".")[0]


def day_start(day: str) -> int:
    """00:00 UTC of ``day`` (Unix seconds)."""
    start = datetime.combine(date.fromisoformat(day), datetime.min.time(), UTC)
    return int(start.timestamp())


@dataclass(frozen=True, slots=True)
class Shares:
    """What one unit (a metric version's shard) may add to the guard now, as the APPEND
    script weighs it against the unit's own count.

    Attributes:
        reserve: ids the unit may hold whatever the others hold (its reserved part of the
            budget; -1: no budget, nothing is weighed).
        pool: ids the unit may add beyond its reserve (the pool's free room, as the
            collector last read it).
    """

    reserve: int = -1
    pool: int = 0


UNLIMITED = Shares()
"""No budget (Redis without ``maxmemory``): nothing is weighed, epochs are days."""


def expires_at(day: str | date) -> int:
    """When ``day``'s guard keys expire (Unix seconds): the end of the next day (UTC), the
    last moment a lookup reads them, plus :data:`EXPIRY_SLACK`."""
    first = date.fromisoformat(day) if isinstance(day, str) else day
    end = datetime.combine(first + timedelta(days=2), datetime.min.time(), UTC)
    return int(end.timestamp()) + EXPIRY_SLACK


def member_of(report_id: bytes) -> str:
    """The id's member: its first 8 bytes as a signed 64-bit integer, in decimal.

    Redis stores a set member that is the canonical decimal of a 64-bit integer as that
    integer (8 bytes in an intset).
    """
    return str(int.from_bytes(report_id[:8], "big", signed=True))


def bucket_of(report_id: bytes, generation: int) -> int:
    """The id's bucket in ``generation``: the leading ``generation`` bits of its last 8
    bytes (disjoint from the member's bytes, so the two together use 64 + j bits)."""
    return int.from_bytes(report_id[8:16], "big") >> (64 - generation) if generation else 0


def parse_generations(text: str | bytes) -> tuple[int, ...]:
    """A day's generations as the guard hash's ``g`` field holds them: ``"0,4,8"``."""
    if isinstance(text, bytes):
        text = text.decode()
    return tuple(int(x) for x in text.split(",")) if text else ()


@dataclass(frozen=True, slots=True)
class GuardArgs:
    """A batch's guard arguments for the APPEND script (:meth:`Layout.packed_args`); KEYS
    indexes are 1-based, as the script sees them."""

    keys: list[str]
    """Today's and yesterday's guard hashes, their legacy sets, the bitmap of today's
    newest generation (:func:`~ldp_store.keys.guard_made_key`), then every bucket the ids
    fall in, each once."""
    members: list[str]
    """Each id's member (:func:`member_of`), in the batch's order."""
    home: list[int]
    """Each id's bucket in today's newest generation (where new ids go): its KEYS index."""
    made: list[int]
    """The KEYS index of that generation's first bucket, then each of its buckets' numbers
    (their keys follow each other): their bits in the bitmap. Empty above
    :data:`MADE_BITS`."""
    lookups: list[tuple[list[int], list[int], list[str]]]
    """Every other generation (today's older ones, then yesterday's), its ids grouped by
    bucket: the runs (each a bucket's KEYS index and how many ids fall in it, flat), the
    ids' batch positions in run order (1-based) and their members in that order."""


@dataclass(frozen=True)
class Layout:
    """The guard of one metric version, shard and pair of days, as the caller believes it.

    Args:
        name: the metric.
        version: its version.
        shard: the shard.
        days: (today, yesterday), YYYY-MM-DD: their hashes hold the guard's state.
        today: the current epoch's generations (oldest first; new ids go to the last).
        yesterday: the previous epoch's generations (empty: none).
        epochs: the current and previous epochs' names; "" for today's and yesterday's
            natural epochs (the days themselves).
    """

    name: str
    version: int
    shard: int
    days: tuple[str, str]
    today: tuple[int, ...] = ()
    yesterday: tuple[int, ...] = ()
    epochs: tuple[str, str] = ("", "")

    @property
    def current(self) -> str:
        """The current epoch's name (where new ids go)."""
        return self.epochs[0] or self.days[0]

    @property
    def previous(self) -> str:
        """The previous epoch's name."""
        return self.epochs[1] or self.days[1]

    def packed_args(self, ids: bytes | Sequence[bytes], lead: int = 1) -> GuardArgs:
        """The APPEND script's guard keys (after the stream) and the ids' guard arguments.

        The ids' buckets are computed here, and grouped so that the script
        asks each bucket of an older generation once (``SMISMEMBER``) with a slice of a
        list it is given: the script parses and groups nothing per report (issue 27:
        splitting and grouping in Lua cost Redis ~2.5 µs a report).

        Returns:
            The :class:`GuardArgs`. The caller puts ``lead`` keys first (the stream, …),
            so bucket indexes start at ``lead`` + 6.
        """
        name, version, shard = self.name, self.version, self.shard
        newest = self.today[-1] if self.today else 0
        current, previous = self.current, self.previous
        script_keys = [
            keys.guard_key(name, version, self.days[0], shard),
            keys.guard_key(name, version, self.days[1], shard),
            keys.seen_key(name, version, self.days[0], shard),
            keys.seen_key(name, version, self.days[1], shard),
            keys.guard_made_key(name, version, current, newest, shard),
        ]
        raw = ids if isinstance(ids, bytes) else b"".join(ids)
        halves = struct.unpack(">" + "qQ" * (len(raw) // 16), raw)
        members = list(map(str, halves[0::2]))
        lows = halves[1::2]
        home: list[int] = []
        made: list[int] = []
        lookups: list[tuple[list[int], list[int], list[str]]] = []
        plan = [(current, j) for j in self.today] + [(previous, j) for j in self.yesterday]
        for n, (epoch, j) in enumerate(plan):
            prefix = keys.guard_bucket_key(name, version, epoch, j, 0, shard)[:-1]
            shift = 64 - j
            first = len(script_keys) + lead + 1  # KEYS index of this generation's first bucket
            buckets = [low >> shift for low in lows]
            if n == len(self.today) - 1:  # today's newest: where new ids go
                index = dict.fromkeys(buckets, 0)  # each bucket once, in order of appearance
                for k, b in enumerate(index, first):
                    index[b] = k
                home = list(map(index.__getitem__, buckets))
                script_keys += [f"{prefix}{b}" for b in index]
                if j <= MADE_BITS:
                    made = [first, *index]
                continue
            groups: dict[int, list[int]] = {}
            for position, b in enumerate(buckets, 1):
                group = groups.get(b)
                if group is None:
                    groups[b] = [position]
                else:
                    group.append(position)
            script_keys += [f"{prefix}{b}" for b in groups]
            runs: list[int] = []
            order: list[int] = []
            for k, group in enumerate(groups.values(), first):
                runs += (k, len(group))
                order += group
            lookups.append((runs, order, [members[i - 1] for i in order]))
        return GuardArgs(script_keys, members, home, made, lookups)

    def believed(self) -> tuple[str, str]:
        """The layout as the script states it: ``<epoch>:<generations>``, current, previous."""
        return (
            f"{self.current}:{','.join(map(str, self.today))}",
            f"{self.previous}:{','.join(map(str, self.yesterday))}",
        )


def parse_epoch(text: str | bytes) -> tuple[str, tuple[int, ...]]:
    """An epoch as the script states it (``2030-01-07.1:0,4``): its name and generations."""
    if isinstance(text, bytes):
        text = text.decode()
    name, _, gens = text.partition(":")
    return name, parse_generations(gens)

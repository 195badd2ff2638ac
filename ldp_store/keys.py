"""Redis key schema: every key of one metric version (and shard) shares a hash slot.

The hash tag ``{m:<name>:<version>:<shard>}`` keeps a stream, its counts, its dead
letters and its replay sets in one slot, so a Lua script may touch them together on a
Redis Cluster. Metric names allow only ``[a-z0-9_.-]``: no braces, no colons.
A version with ``shards`` N > 1 has N such sets of keys, shards 0..N−1, each its own slot
(a report goes to :func:`shard_of` its id); readers sum them.
A frequency metric's support counts C(v) of a window are packed in ``support:<window>``
(:mod:`ldp_store.schema`; hashes written before hold them as ``c:<v>`` fields), plus the
batches' sparse increments not yet folded into it, in ``delta:<window>``.
A numeric metric's counts hashes hold ``n`` and the limbs ``s:<i>``, ``s2:<i>`` of Σy and
Σy² instead of ``c:<v>`` (see :mod:`aggregator.stats.numeric`).

In full: ``docs/architecture/storage.md``.
"""

from __future__ import annotations

__all__ = [
    "ENTRY_REPORTS",
    "DOORBELL",
    "DOORBELL_LENGTH",
    "GROUP",
    "GUARD_UNITS_KEY",
    "IN_USE",
    "METRICS_SET",
    "REGISTRY_CHANGES",
    "REGISTRY_SOURCE_KEY",
    "SHUFFLE_MAX_DELAY",
    "SHUFFLE_MIN_BATCH",
    "claims_key",
    "counts_key",
    "dead_key",
    "delta_key",
    "expiries_key",
    "batched_key",
    "guard_bucket_key",
    "guard_made_key",
    "guard_ids_key",
    "guard_key",
    "guard_refused_key",
    "guard_unit",
    "made_key_of",
    "metric_key",
    "pool_key",
    "project_patterns",
    "quota_key",
    "retired_key",
    "seeds_key",
    "seen_key",
    "session_key",
    "signin_key",
    "shard_of",
    "shuffled_key",
    "stream_key",
    "support_key",
    "tag",
    "token_key",
    "TOKENS_SET",
    "warm_reads_key",
    "window_keys",
    "windows_key",
]

PREFIX = "ldp"
METRICS_SET = f"{PREFIX}:metrics"
REGISTRY_CHANGES = f"{PREFIX}:registry:changes"
"""A counter the registry increments after each new metric version: an idle aggregator
worker reads this one key every few seconds instead of every metric's versions, and
scans them all only when it moved (or once a minute)."""
TOKENS_SET = f"{PREFIX}:tokens"
GUARD_UNITS_KEY = f"{PREFIX}:registry:guard-units"
"""The replay guard's unit count and the :data:`REGISTRY_CHANGES` value it was counted at
(a hash, ``changes`` and ``units``): counted once per registry change, whichever process
asks first (:meth:`ldp_store.registry.Registry.units`)."""
IN_USE = f"{PREFIX}:in-use"
"""The metric versions that ever had reports appended (``<name>:<version>`` members) and,
once a scrape weighed every metric, the member ``*``: ``/metrics`` reads the counters
of these only (:mod:`ldp_store.in_use`)."""
DOORBELL = f"{PREFIX}:doorbell"
"""A stream of the report streams that got entries (field ``s``: the stream's key), rung
by the append and shuffle scripts on a single Redis: an idle aggregator worker blocks on
this one key (:mod:`aggregator.stream.worker`), not on every stream."""
DOORBELL_LENGTH = 10_000
"""The doorbell's length cap (``XADD MAXLEN ~``): about a megabyte. A worker busy while
more rings than this came finds the streams they named by its periodic sweep (every
claim interval, one ``XLEN`` of every stream in one call), not by the bell."""
REGISTRY_SOURCE_KEY = f"{PREFIX}:registry-source"
"""The metrics registry ``ldp serve --metrics`` applied last (:mod:`ldp_store.registry_source`)."""
"""The ids of every scoped token (:mod:`ldp_store.tokens`), revoked and expired ones too."""
SHUFFLE_MIN_BATCH = 100
"""B by default: a shuffle pool of relayed reports is released as soon as it holds B
(``LDP_SHUFFLE_MIN_BATCH``; the collectors release pools at it, the dashboard states the ε
it buys). Here because both services read it."""
SHUFFLE_MAX_DELAY = 3600.0
"""Seconds a relayed report waits in its pool at most (``LDP_SHUFFLE_MAX_DELAY``): a pool
below B is released that long after its oldest report arrived, by the aggregator's
workers (:mod:`ldp_store.shuffle`). An hour: a report is counted in the hour after it was
acknowledged at the latest, and a pool never spans more than two budget periods
(``docs/security/threat-model.md`` says what that costs ε_c)."""
GROUP = "aggregators"
"""The one consumer group every aggregator worker joins."""
ENTRY_REPORTS = 32
"""The most reports one stream entry holds (a batch entry, ``s``/``b`` fields; see
:data:`ldp_store.scripts.APPEND`): the per-entry costs (``XADD``, ``XACK``, the entry's
bytes) are shared by up to 32 reports, and a worker's read of N entries holds at most
32·N reports."""


def quota_key(project: str, minute: int) -> str:
    """Reports a project sent in one minute (Unix minutes), for its quota; expires."""
    return f"{PREFIX}:quota:{project}:{minute}"


def project_patterns(project: str) -> tuple[str, ...]:
    """``SCAN`` patterns of every key of a (non-default) project's metrics: its versions'
    keys and its registry hashes (a project name has no glob characters)."""
    return (f"{PREFIX}:{{m:{project}/*", f"{PREFIX}:metric:{{{project}/*")


def token_key(token_id: str) -> str:
    """One scoped token's record (a hash: its SHA-256, scopes, expiry, revocation)."""
    return f"{PREFIX}:token:{token_id}"


def session_key(hashed_id: str) -> str:
    """A dashboard session (:mod:`ldp_store.sessions`), by the SHA-256 of its cookie."""
    return f"{PREFIX}:session:{hashed_id}"


def signin_key(hashed_state: str) -> str:
    """A sign-in under way (:mod:`ldp_store.sessions`), by the SHA-256 of its state."""
    return f"{PREFIX}:signin:{hashed_state}"


def metric_key(name: str) -> str:
    """The registry hash of one metric (all its versions)."""
    return f"{PREFIX}:metric:{{{name}}}"


def tag(name: str, version: int, shard: int = 0) -> str:
    """The hash tag shared by all keys of one metric version and shard."""
    return f"{{m:{name}:{version}:{shard}}}"


def stream_key(name: str, version: int, shard: int = 0) -> str:
    """The stream of accepted reports."""
    return f"{PREFIX}:{tag(name, version, shard)}:reports"


def batched_key(name: str, version: int, shard: int = 0) -> str:
    """How many reports the stream's unacknowledged batch entries hold beyond one per
    entry: the stream holds ``XLEN`` + this many reports not yet counted (the backlog
    limit and the lag count reports, not entries). Absent means 0."""
    return f"{PREFIX}:{tag(name, version, shard)}:batched"


def dead_key(name: str, version: int, shard: int = 0) -> str:
    """The dead-letter stream."""
    return f"{PREFIX}:{tag(name, version, shard)}:dead"


def seen_key(name: str, version: int, day: str, shard: int = 0) -> str:
    """The legacy replay set of ``day`` (YYYY-MM-DD, UTC): raw 16-byte ids.

    Written by collectors before the bucketed guard (:mod:`ldp_store.guard`); still read
    for the two days its TTL keeps it, so a retry that spans an upgrade is still a replay.
    """
    return f"{PREFIX}:{tag(name, version, shard)}:seen:{day}"


def guard_key(name: str, version: int, day: str, shard: int = 0) -> str:
    """The replay guard's hash for ``day``: its epochs' generations (``g``) and ids
    (``n``), and the epochs a budget ended early that day (:data:`ldp_store.scripts.APPEND`)."""
    return f"{PREFIX}:{tag(name, version, shard)}:guard:{day}"


def guard_bucket_key(
    name: str, version: int, epoch: str, generation: int, bucket: int, shard: int = 0
) -> str:
    """Bucket ``bucket`` of the replay guard's ``generation`` (2**generation buckets) in
    ``epoch`` (a day, or ``<day>.<k>``: :mod:`ldp_store.guard`)."""
    return f"{PREFIX}:{tag(name, version, shard)}:guard:{epoch}:{generation}:{bucket}"


def guard_made_key(name: str, version: int, epoch: str, generation: int, shard: int = 0) -> str:
    """A bitmap of the buckets of the replay guard's ``generation`` whose expiry is set (bit
    ``bucket``): the append script sets a bucket's expiry when its bit is 0, not at every
    write. Deleted with each of those buckets (:func:`ldp_store.lifecycle.delete_keys`)."""
    return f"{PREFIX}:{tag(name, version, shard)}:guard:{epoch}:{generation}:made"


def made_key_of(bucket_key: bytes) -> bytes | None:
    """The :func:`guard_made_key` of a :func:`guard_bucket_key` (None for any other key)."""
    head, _, last = bucket_key.rpartition(b":")
    if not last.isdigit() or head.count(b":") < 5 or b"}:guard:" not in head:
        return None
    return head + b":made"


def guard_ids_key(day: str) -> str:
    """The replay guard's ids of ``day``'s epochs, by unit (field :func:`guard_unit`): the
    collectors' measure of the guard's memory and of each unit's part of it
    (``collector.memory``). Not a metric's key, so not hash-tagged; each collector adds
    its appends (and takes away an epoch it ended early) at most every 0.1 s, outside the
    append script: a count that lags, not a ledger. It expires with the day's guard."""
    return f"{PREFIX}:guard-ids:{day}"


def guard_refused_key() -> str:
    """Units the replay guard's shares are refusing (field :func:`guard_unit`), each with
    the Unix second it expects to take reports again: what ``/readyz`` lists."""
    return f"{PREFIX}:guard-refused"


def guard_unit(name: str, version: int, shard: int = 0) -> str:
    """A unit of the replay guard, as :func:`guard_ids_key` names it: ``name:version:shard``."""
    return f"{name}:{version}:{shard}"


def counts_key(name: str, version: int, window: str = "all", shard: int = 0) -> str:
    """Support counts for a window: "all", "hour:YYYY-MM-DDTHH" or "day:YYYY-MM-DD"."""
    return f"{PREFIX}:{tag(name, version, shard)}:counts:{window}"


def seeds_key(name: str, version: int, window: str, shard: int = 0) -> str:
    """The seed histogram of an hour or day window (local hashing's poisoning test).

    A key of its own beside the counts hash: written by the same commit script, read only
    by the alarms (:mod:`aggregator.stats.detect`).
    """
    return f"{PREFIX}:{tag(name, version, shard)}:seeds:{window}"


def support_key(name: str, version: int, window: str = "all", shard: int = 0) -> str:
    """A frequency metric's packed support counts C(0..k−1) for a window (see
    :mod:`ldp_store.schema`); ``n`` stays in :func:`counts_key`."""
    return f"{PREFIX}:{tag(name, version, shard)}:support:{window}"


def delta_key(name: str, version: int, window: str = "all", shard: int = 0) -> str:
    """A frequency metric's sparse increments of C for a window, committed but not yet
    folded into :func:`support_key` (a list of blobs; see :mod:`ldp_store.schema`)."""
    return f"{PREFIX}:{tag(name, version, shard)}:delta:{window}"


def window_keys(
    name: str, version: int, window: str = "all", shard: int = 0
) -> tuple[str, str, str]:
    """Every key holding a window's counts: its counts hash, its packed support counts and
    its unfolded increments."""
    return (
        counts_key(name, version, window, shard),
        support_key(name, version, window, shard),
        delta_key(name, version, window, shard),
    )


def expiries_key(name: str, version: int, shard: int = 0) -> str:
    """Sorted set of hour and day windows scored by their expiry (ms since the epoch):
    the commit drops expired ones from :func:`windows_key` (see :mod:`ldp_store.retention`)."""
    return f"{PREFIX}:{tag(name, version, shard)}:expiries"


def windows_key(name: str, version: int, shard: int = 0) -> str:
    """Sorted set of the windows that have counts."""
    return f"{PREFIX}:{tag(name, version, shard)}:windows"


def shard_of(report_id: bytes, shards: int) -> int:
    """The shard of a report: its 16-byte id (uniform, from a CSPRNG) modulo ``shards``.

    Deterministic, so a replayed report meets its first copy in the same shard's replay
    set. Ids come from the device's CSPRNG, so shards fill evenly; a client that picks ids
    to crowd one shard can fill its backlog, and then requests touching that shard get 503
    until the workers catch up (the same as flooding an unsharded metric).
    """
    return int.from_bytes(report_id, "big") % shards if shards > 1 else 0


def claims_key(name: str, version: int, shard: int = 0) -> str:
    """The claim fence: a counter the worker bumps whenever entries may change owner."""
    return f"{PREFIX}:{tag(name, version, shard)}:claims"


def retired_key(name: str, version: int, shard: int = 0) -> str:
    """Present while the metric is retired, holding when (Unix seconds): the registry's
    mark in the version's own slot, which the append script reads, so a retire is in force
    for every collector process once it returns (``ldp_store.registry.Registry.retire``)."""
    return f"{PREFIX}:{tag(name, version, shard)}:retired"


def pool_key(name: str, version: int, shard: int = 0) -> str:
    """The shuffle pool: relayed reports accepted but not yet appended to the stream, which
    receives them in shuffled batches (:data:`ldp_store.scripts.SHUFFLE`)."""
    return f"{PREFIX}:{tag(name, version, shard)}:pool"


def shuffled_key(name: str, version: int, shard: int = 0) -> str:
    """The shuffle pool's record (a hash): its release bound ``delay_ms``, as the collector
    that pooled last set it, and what was released: ``batches``, ``reports``, the
    ``smallest`` batch, ``released_ms`` (:data:`ldp_store.scripts.SHUFFLE`)."""
    return f"{PREFIX}:{tag(name, version, shard)}:shuffled"


def warm_reads_key(lane: str) -> str:
    """The expensive reads a read lane's processes served lately (a sorted set of their
    queries, scored by when last read: :mod:`aggregator.query.warm`); ``lane`` empty: a
    read service of one lane. One key, in its own slot."""
    return f"{PREFIX}:warm-reads:{lane or 'any'}"

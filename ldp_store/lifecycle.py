"""Every key of a metric version, found by its hash tag: to delete it, or to weigh it.

Every key a version owns carries its hash tag ``{m:<name>:<version>:<shard>}``
(:func:`ldp_store.keys.tag`), whatever its kind: the stream, dead letters, counts windows,
the windows index, the claim fence, the replay guard (whatever its key names become).
So the keys are found by SCANning the tag's pattern rather than by listing kinds: a kind
added later is deleted and weighed too. On a Redis Cluster, SCAN runs on every primary
(redis-py's ``RedisCluster.scan_iter``); a version's keys live in one slot per shard.

These SCANs are operator actions (``ldp metrics delete``), a cached dashboard figure
(:class:`MemoryUsage`) and the replay guard's shortening at its budget (once a day at
most, :func:`guard_day_keys`), never on the ordinary ingest or counting path.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import redis
from redis.cluster import RedisCluster

from ldp_store import keys, projects, scripts
from ldp_store.connection import is_cluster, node_infos

__all__ = [
    "MEMORY_CACHE_SECONDS",
    "MEMORY_FIRST_WAIT",
    "MEMORY_SCAN_KEYS",
    "SCAN_COUNT",
    "KeyReport",
    "MemoryReport",
    "MemoryUsage",
    "delete_keys",
    "guard_day_keys",
    "project_keys",
    "human_bytes",
    "kind_of",
    "measure_memory",
    "version_keys",
    "weigh",
]

SCAN_COUNT = 1000
"""Keys SCAN looks at per call: large enough that a million keys take a thousand round
trips, small enough that one call blocks Redis for about a millisecond."""

MEMORY_SCAN_KEYS = 200_000
"""The most keys one memory reading weighs (``MEMORY USAGE`` each, pipelined). A version
has a few hundred keys (an hour and a day window each, a replay set per day), so this
covers hundreds of metrics; past it the figures are marked partial instead of letting a
page view cost Redis seconds of work."""

MEMORY_CACHE_SECONDS = 60.0
"""A memory reading is reused for a minute: the dashboard refreshes every few seconds
per viewer and Prometheus scrapes every 15 s or so, while memory per metric changes over
hours (windows accumulate, replay sets expire); a SCAN of every key each time would cost
Redis more than the whole ingest path."""

MEMORY_FIRST_WAIT = 2.0
"""Seconds a reader waits for the first memory reading of a process: a deployment of a
few hundred metrics gets its figures at once; past that, the totals until it is done."""

DELETE_BATCH = 500
"""Keys per pipelined UNLINK round: one round trip per batch, each key on its own (a
cluster pipeline sends each to its slot's node)."""

_TAGGED = re.compile(rb"^ldp:\{m:([a-z0-9_./-]+):([0-9]+):([0-9]+)\}:([a-z_]+)")
"""A version's key: name (``project/name`` outside the default project), version, shard
and the first word of its kind."""


def _pattern(name: str, version: int | None) -> str:
    """The SCAN pattern of every key of ``name`` (one version, or all of them).

    Metric names hold only ``[a-z0-9_.-]`` (no glob character, no brace, no colon; a
    project's adds its name and ``/``: :mod:`ldp_store.projects`), so
    ``ldp:{m:app:1:*`` cannot match ``app.x`` or version 10.
    """
    which = f"{version}:*" if version is not None else "*"
    return f"{keys.PREFIX}:{{m:{name}:{which}"


def _scan(client: redis.Redis, pattern: str, limit: int | None = None) -> Iterator[bytes]:
    """Keys matching ``pattern`` on every primary, each once, at most ``limit``."""
    seen: set[bytes] = set()
    if is_cluster(client):
        found = cast(RedisCluster, client).scan_iter(
            match=pattern, count=SCAN_COUNT, target_nodes=RedisCluster.PRIMARIES
        )
    else:
        found = client.scan_iter(match=pattern, count=SCAN_COUNT)
    for key in found:
        raw = key.encode() if isinstance(key, str) else key
        if raw in seen:  # SCAN may return a key twice (rehashing)
            continue
        seen.add(raw)
        yield raw
        if limit is not None and len(seen) >= limit:
            return


def version_keys(client: redis.Redis, name: str, version: int | None = None) -> list[bytes]:
    """Every key of ``version`` of ``name`` (all versions when None), every shard, sorted.

    The result is exact: this is what :func:`delete_keys` removes and the tests check.
    """
    found = []
    for key in _scan(client, _pattern(name, version)):
        match = _TAGGED.match(key)
        if match and match.group(1).decode() == name:
            if version is None or int(match.group(2)) == version:
                found.append(key)
    return sorted(found)


def project_keys(client: redis.Redis, project: str) -> list[bytes]:
    """Every key of a project's metrics, on every primary: what its memory quota weighs.
    The default project's names have no prefix: its keys are the metrics' keys without
    a ``/`` (the whole keyspace is scanned)."""
    if project != projects.DEFAULT:
        return [k for pattern in keys.project_patterns(project) for k in _scan(client, pattern)]
    every = [f"{keys.PREFIX}:{{m:*", f"{keys.PREFIX}:metric:{{*"]
    return [k for pattern in every for k in _scan(client, pattern) if b"/" not in k]


def guard_day_keys(client: redis.Redis, day: str) -> list[bytes]:
    """Every metric's replay-guard keys of ``day`` (its hash, buckets and legacy set): what
    the collector drops when the guard reaches its budget (``collector.memory``)."""
    found = []
    for kind in ("guard", "seen"):
        pattern = f"{keys.PREFIX}:{{m:*}}:{kind}:{day}*"
        found += [k for k in _scan(client, pattern) if kind_of(k) == kind]
    return found


def kind_of(key: bytes) -> str:
    """The kind of a version's key: ``reports``, ``dead``, ``counts``, ``windows``, the
    replay guard's ``seen``/``guard``, ``claims``… (the word after the hash tag)."""
    match = _TAGGED.match(key)
    return match.group(4).decode() if match else "other"


@dataclass(frozen=True)
class KeyReport:
    """What a set of keys holds: how many of each kind and their memory."""

    keys: list[bytes]
    by_kind: dict[str, int]
    bytes: int
    """The sum of ``MEMORY USAGE`` over the keys (what Redis says they take)."""

    def summary(self) -> str:
        """One line for people, e.g. ``12 keys (counts 8, reports 1, …), 40.2 kB``."""
        kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(self.by_kind.items()))
        return f"{len(self.keys)} keys ({kinds or 'none'}), {human_bytes(self.bytes)}"


def human_bytes(n: int) -> str:
    """``n`` bytes as B, kB, MB or GB (powers of 1000)."""
    value = float(n)
    for unit in ("B", "kB", "MB"):
        if abs(value) < 1000:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.2f} GB"


def _memory_usage(client: redis.Redis, found: list[bytes]) -> list[int]:
    """``MEMORY USAGE`` of each key (0 for one gone meanwhile), pipelined by batches."""
    sizes: list[int] = []
    for start in range(0, len(found), DELETE_BATCH):
        with client.pipeline(transaction=False) as pipe:
            for key in found[start : start + DELETE_BATCH]:
                pipe.memory_usage(key)
            sizes += [int(x or 0) for x in pipe.execute()]
    return sizes


def weigh(client: redis.Redis, found: list[bytes]) -> KeyReport:
    """Count ``found`` by kind and add up their memory."""
    sizes = _memory_usage(client, found)
    return KeyReport(found, dict(Counter(kind_of(k) for k in found)), sum(sizes))


def delete_keys(client: redis.Redis, found: list[bytes]) -> int:
    """UNLINK ``found``, one key per command (cluster-safe); returns how many were there.

    A replay-guard bucket goes in one command with its generation's bitmap of buckets
    whose expiry is set (:func:`ldp_store.keys.guard_made_key`, same slot): a bucket an
    append makes again later is then not marked, and gets its expiry.
    """
    removed = 0
    for start in range(0, len(found), DELETE_BATCH):
        with client.pipeline(transaction=False) as pipe:
            for key in found[start : start + DELETE_BATCH]:
                made = keys.made_key_of(key)
                if made is None:
                    pipe.unlink(key)
                else:
                    pipe.execute_command("EVAL", scripts.UNLINK, 2, key, made)
            removed += sum(int(x) for x in pipe.execute())
    return removed


@dataclass(frozen=True)
class MemoryReport:
    """Redis memory: per metric (its keys' ``MEMORY USAGE``) and in total.

    Attributes:
        by_metric: bytes per metric name, all versions and shards.
        used: ``used_memory`` summed over the primaries.
        maxmemory: ``maxmemory`` summed over the primaries (0: no limit).
        keys: keys weighed.
        guard: bytes of the replay guard's keys (every metric), measured.
        partial: the scan stopped at :data:`MEMORY_SCAN_KEYS`.
        measured_at: Unix time of the reading.
    """

    by_metric: dict[str, int] = field(default_factory=dict)
    used: int = 0
    maxmemory: int = 0
    keys: int = 0
    guard: int = 0
    partial: bool = False
    measured_at: float = 0.0


def _info_memory(client: redis.Redis) -> list[dict[str, Any]]:
    if is_cluster(client):
        return node_infos(cast(Any, client).info("memory", target_nodes=RedisCluster.PRIMARIES))
    return [client.info("memory")]


def _totals(client: redis.Redis) -> tuple[int, int]:
    """``used_memory`` and ``maxmemory`` summed over the primaries (0: no limit)."""
    nodes = _info_memory(client)
    used = sum(int(n.get("used_memory", 0)) for n in nodes)
    return used, sum(int(n.get("maxmemory", 0) or 0) for n in nodes)


def measure_memory(
    client: redis.Redis, limit: int = MEMORY_SCAN_KEYS, now: float | None = None
) -> MemoryReport:
    """Weigh every metric's keys (a bounded SCAN) and read the total and the limit."""
    found = list(_scan(client, f"{keys.PREFIX}:{{m:*", limit + 1))
    partial = len(found) > limit
    found = found[:limit]
    by_metric: dict[str, int] = {}
    guard = 0
    for key, size in zip(found, _memory_usage(client, found), strict=True):
        match = _TAGGED.match(key)
        if match:
            name = match.group(1).decode()
            by_metric[name] = by_metric.get(name, 0) + size
            if match.group(4) in (b"guard", b"seen"):
                guard += size
    used, maxmemory = _totals(client)
    return MemoryReport(
        by_metric=by_metric,
        used=used,
        maxmemory=maxmemory,
        keys=len(found),
        guard=guard,
        partial=partial,
        measured_at=time.time() if now is None else now,
    )


class MemoryUsage:
    """:func:`measure_memory`, cached for ``ttl`` seconds (see :data:`MEMORY_CACHE_SECONDS`)
    and measured again off the reader's path.

    A reading older than ``ttl`` is still answered while a thread of its own measures the
    next (a SCAN weighing every key: seconds at ten thousand metrics, which a scrape or a
    page view must not wait for). Before the first reading a reader waits up to ``wait``
    seconds for it (a small deployment's takes milliseconds), then gets the totals alone
    (``INFO memory``, ``partial``) until it is done. Thread-safe: one measurement at a time.
    """

    def __init__(
        self,
        client: redis.Redis,
        ttl: float = MEMORY_CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        wait: float = MEMORY_FIRST_WAIT,
    ) -> None:
        self.client = client
        self.ttl = ttl
        self.wait = wait
        self._clock = clock
        self._lock = threading.Lock()
        self._reading: MemoryReport | None = None
        self._read_at = float("-inf")
        self._measuring: threading.Thread | None = None
        self._failure: Exception | None = None

    def read(self, wait: float | None = None) -> MemoryReport:
        """The latest reading; measured again (in the background) when older than ``ttl``.

        Args:
            wait: seconds to wait for a process's first reading (None: the reader's
                ``wait``; a scrape passes 0 and shows the totals until it is done).

        Raises:
            redis.RedisError: Redis could not be read (no reading yet, or the last
                measurement failed).
        """
        with self._lock:
            stale = self._reading is None or self._clock() - self._read_at >= self.ttl
            measuring = self._measuring
            if stale and measuring is None:
                self._failure = None
                measuring = self._measuring = threading.Thread(
                    target=self._measure, name="ldp-memory", daemon=True
                )
                measuring.start()
            if self._reading is not None:
                return self._reading
        if measuring is not None:  # always, without a reading
            measuring.join(self.wait if wait is None else wait)
        with self._lock:
            if self._failure is not None:
                failure, self._failure = self._failure, None
                raise failure
            if self._reading is not None:
                return self._reading
        used, maxmemory = _totals(self.client)  # the totals now, the per-metric figures later
        return MemoryReport(used=used, maxmemory=maxmemory, partial=True, measured_at=time.time())

    def _measure(self) -> None:
        try:
            reading = measure_memory(self.client)
        except Exception as exc:  # handed to the next reader  # noqa: BLE001
            with self._lock:
                self._failure, self._measuring = exc, None
                if self._reading is not None:
                    self._read_at = self._clock()  # try again after ttl, not at once
            return
        with self._lock:
            self._reading, self._read_at, self._measuring = reading, self._clock(), None

    def forget(self) -> None:
        """Measure again at the next read (after a delete)."""
        with self._lock:
            self._reading = None

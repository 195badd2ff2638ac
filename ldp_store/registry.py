"""The metric registry: definitions by name and version, in Redis.

Versions are immutable. Creating a metric makes version 1; changing its ε, domain,
mechanism or shards makes version N+1 (a change of description, device budget or
retention only updates the current version: none changes how reports decode). Reports name their
version, so old reports are always decoded with the old parameters.

On a Redis Cluster the name set ``ldp:metrics`` and a metric's hash live in different
hash slots, so a put cannot write both atomically. It adds the name first, then writes
the hash (one key: WATCH/MULTI/EXEC on one slot). A crash between the two leaves a listed
name without a definition, which every reader skips (``get`` answers None, ``versions``
is empty) until the put is retried; the other order could leave a definition the
collector accepts reports for but that no worker discovers.

Data lifecycle (issue 17). A metric can be *retired* (field ``retired``: when, Unix
seconds): the collector refuses its reports (410) while its estimates stay readable, and
no new version can be created until it is un-retired. A retire also sets each version's
:func:`~ldp_store.keys.retired_key` (one per shard, in the version's own slot), which the
append script reads: every collector process refuses the reports from the moment
:meth:`Registry.retire` returns, though its cached state lags up to :data:`CURRENT_TTL`;
and a process whose cache still says "retired" reads the state again before refusing
(:meth:`Registry.refusing`), so an unretire is in force at once too.

A version can be *deleted* (:mod:`ldp_store.lifecycle` removes its keys): its
``v<N>``/``t<N>`` fields go and its number joins the ``deleted`` list (JSON), a tombstone
with two jobs: every process drops its forever-cached definition of that version within
:data:`CURRENT_TTL` (the state is re-read with ``current``), and a later version never
reuses the number (so no process can mistake an old cached definition for a new one).
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

import redis
from redis.exceptions import RedisClusterException

from client_sdk.errors import DefinitionError
from client_sdk.wire import MetricDefinition, parse_spec
from ldp_store import keys, projects
from ldp_store.connection import as_text, unavailable
from ldp_store.scripts.many import guard_units, read_many

__all__ = [
    "MetricRetired",
    "MetricState",
    "Registry",
    "RegistryChange",
    "Snapshot",
    "version_numbers",
]

CURRENT_TTL = 1.0
"""Seconds a process trusts its cached "current version" of a metric. Versions
themselves never change, so they are cached without expiry (up to CACHE_SIZE)."""

SNAPSHOT_TTL = 60.0
"""Seconds a process keeps its list of every current definition while the registry's
change counter stays put: the bound on how long a registry write that did not move the
counter (an older ``ldp``) stays unseen there, as the aggregator's full rediscovery."""

SNAPSHOTS = 64
"""Projects whose lists of current definitions a process keeps at once."""

CACHE_SIZE = 16_384
"""Definitions kept per process: above the 10,000 metrics a large deployment defines, so
reading every current definition (the overview, the alarms) parses none again. Unknown
(name, version) pairs are remembered up to the same number, oldest forgotten first."""

UNITS_TTL = 60.0
"""Seconds a process trusts its count of the replay guard's units (:meth:`Registry.units`):
a version created meanwhile shrinks the others' reserves that much later."""

UNKNOWN_TTL = 1.0
"""Seconds a process trusts that a (name, version) is unknown: a client repeating a batch
of bogus versions costs no Redis round trip meanwhile. Short, because a version may be
created later (``put`` forgets it at once in its own process; others wait this long)."""


class MetricRetired(Exception):
    """A new version of a retired metric was asked for (un-retire it first)."""

    def __init__(self, name: str, since: float) -> None:
        super().__init__(f"metric {name!r} was retired on {retired_on(since)}")
        self.name = name
        self.since = since


def _state_of(raw: Any) -> MetricState:
    """A metric's state from its hash's current, retired and deleted fields."""
    current, retired, deleted = cast(list[bytes | None], raw)
    if current is None and retired is None and deleted is None:
        return _NO_STATE
    return MetricState(
        int(current) if current is not None else None,
        float(retired) if retired is not None else None,
        frozenset(json.loads(deleted)) if deleted is not None else frozenset(),
    )


def retired_on(since: float) -> str:
    """A retirement time for people: the UTC date and minute."""
    return datetime.fromtimestamp(since, UTC).strftime("%Y-%m-%d %H:%M UTC")


@dataclass(frozen=True)
class MetricState:
    """What the registry hash says of a metric beside its definitions.

    Attributes:
        current: the current version (None: no live version, or no such metric).
        retired: when it was retired (Unix seconds), None if it takes reports.
        deleted: versions whose data was deleted (never reused).
    """

    current: int | None
    retired: float | None
    deleted: frozenset[int]


_NO_STATE = MetricState(None, None, frozenset())


_K = TypeVar("_K")
_V = TypeVar("_V")


def _put_bounded(cache: OrderedDict[_K, _V], key: _K, value: _V) -> None:
    """Set ``cache[key]``, then drop the oldest entries past :data:`CACHE_SIZE`."""
    cache[key] = value
    while len(cache) > CACHE_SIZE:
        cache.popitem(last=False)


def _parse(name: str, raw: bytes | str) -> MetricDefinition:
    """A stored definition of the metric stored as ``name`` (qualified: the JSON holds
    the bare name, as served to apps)."""
    definition = MetricDefinition.from_dict(json.loads(raw))
    return definition if definition.name == name else replace(definition, name=name)


def _proposed_version(
    proposed: MetricDefinition,
    current: MetricDefinition | None,
    raw_retired: bytes | str | None,
    raw_deleted: bytes | str | None,
) -> tuple[MetricDefinition, bool, bool]:
    """What a put of ``proposed`` writes over ``current`` (of a metric retired at
    ``raw_retired``, whose versions ``raw_deleted`` lists as deleted), whether it changes
    anything, and whether it is a new version.

    The same decoding parameters keep the version (description, budget and retention
    are not decoding parameters); others make the version after every one used so far.

    Raises:
        MetricRetired: a new version of a retired metric.
    """
    if current is not None and current.same_parameters(proposed):
        definition = replace(
            current,
            description=proposed.description,
            budget=proposed.budget,
            retention=proposed.retention,
        )
        return definition, definition != current, False
    if raw_retired is not None:
        raise MetricRetired(proposed.name, float(raw_retired))
    deleted = json.loads(raw_deleted) if raw_deleted is not None else []
    last = max([current.version if current else 0, *deleted])
    return replace(proposed, version=last + 1), True, True


def version_numbers(fields: Iterable[bytes | str]) -> list[int]:
    """The versions a metric's hash defines, from its field names (``v<n>``)."""
    texts = (as_text(f) for f in fields)
    return [int(f[1:]) for f in texts if f.startswith("v") and f[1:].isdigit()]


def _dump(definition: MetricDefinition) -> str:
    """A definition's stored JSON: its bare name (an app's), whatever its project."""
    data = definition.to_dict()
    data["name"] = projects.bare(definition.name)
    return json.dumps(data)


def _stalled(exc: BaseException) -> bool:
    """Whether ``exc`` is (or wraps) a read that timed out: the node holds the socket
    and does not answer."""
    cause = exc.__cause__ or exc.__context__
    return isinstance(exc, redis.TimeoutError) or isinstance(cause, redis.TimeoutError)


class RegistryChange:
    """The outcome of a put: the definition now current, and whether it is new."""

    def __init__(self, definition: MetricDefinition, created: bool, changed: bool) -> None:
        self.definition = definition
        self.created = created
        self.changed = changed


@dataclass(frozen=True, eq=False)
class Snapshot:
    """Every current definition of a project, as read at one value of the registry's
    change counter (:meth:`Registry.snapshot`)."""

    changes: bytes | None
    """The change counter when it was read."""
    read_at: float
    """When (monotonic seconds)."""
    definitions: tuple[MetricDefinition, ...]
    """By name."""


class Registry:
    """Read and write metric definitions; reads are cached per process."""

    def __init__(self, client: redis.Redis, clock: Callable[[], float] = time.time) -> None:
        self.redis = client
        self._clock = clock
        self._lock = threading.Lock()
        self._versions: OrderedDict[tuple[str, int], MetricDefinition] = OrderedDict()
        self._state: dict[str, tuple[float, MetricState]] = {}
        self._unknown: OrderedDict[tuple[str, int], float] = OrderedDict()
        """(name, version) → until when (monotonic) it is taken as unknown."""
        self._units: tuple[float, int] | None = None
        self._snapshots: dict[str | None, Snapshot] = {}
        """Per project: :meth:`all_current` as of a value of the change counter."""

    # -- reads ---------------------------------------------------------------------------
    def names(self) -> list[str]:
        """All metric names (qualified), sorted: of the request's project while
        :data:`ldp_store.projects.CURRENT` is set, else of every project."""
        project = projects.CURRENT.get()
        return [n for n in self.every_name() if projects.in_project(n, project)]

    def every_name(self) -> list[str]:
        """Every project's metric names (qualified), sorted."""
        return sorted(x.decode() for x in self.redis.smembers(keys.METRICS_SET))  # type: ignore[union-attr]

    def state(self, name: str, fresh: bool = False) -> MetricState:
        """The current version, retirement and deleted versions of ``name`` (cached for
        CURRENT_TTL: one HMGET per name and second, whatever the request rate; ``fresh``:
        read now, for an operator's decision that another process's change must reach)."""
        now = time.monotonic()
        cached = self._state.get(name)
        if cached and not fresh and now - cached[0] < CURRENT_TTL:
            return cached[1]
        try:
            raw = self.redis.hmget(keys.metric_key(name), ["current", "retired", "deleted"])
        except (redis.RedisError, RedisClusterException) as exc:
            if not cached or fresh or not unavailable(exc) or _stalled(exc):
                raise
            # The node of the name's slot is down (a cluster primary failing over): the
            # state cached stands for another CURRENT_TTL, so the reports of this metric
            # reach the append script (which reads the retirement of its own slot) and
            # other metrics' reports are not refused with them. A node that timed out is
            # stalled, not gone: the next command would wait as long again, so the
            # request fails now (a 503 within the promised time).
            self._remember(name, now, cached[1])
            return cached[1]
        state = _state_of(raw)
        self._remember(name, now, state)
        return state

    def _remember(self, name: str, now: float, state: MetricState) -> None:
        if len(self._state) >= CACHE_SIZE:
            self._state.clear()
        self._state[name] = (now, state)

    def _keep(self, key: tuple[str, int], definition: MetricDefinition) -> None:
        with self._lock:
            _put_bounded(self._versions, key, definition)

    def current_version(self, name: str) -> int | None:
        """The current version of ``name`` (cached for CURRENT_TTL), or None."""
        return self.state(name).current

    def retired(self, name: str) -> float | None:
        """When ``name`` was retired (Unix seconds; cached for CURRENT_TTL), or None."""
        return self.state(name).retired

    def refusing(self, name: str) -> float | None:
        """When ``name`` was retired, or None: :meth:`retired`, read again from Redis when
        the cache says retired, so an unretire that another process answered is in force
        here at once. What refuses reports: a retire needs no fresh read (the append
        script reads the versions' :func:`~ldp_store.keys.retired_key`), and a refusal
        is rare (an SDK stops reporting at its first 410), so the read costs nothing on
        the ordinary path."""
        if self.state(name).retired is None:
            return None
        return self.state(name, fresh=True).retired

    def get(self, name: str, version: int | None = None) -> MetricDefinition | None:
        """A definition by name and version (default: current), or None if unknown."""
        if not projects.valid_qualified(name):
            return None
        state = self.state(name)
        if version is None and state.current is None:
            # Not cached as known: another process may have created it a moment ago,
            # and a 404 right after a create would contradict it. Unknown names cost
            # this read each time; known ones stay cached for CURRENT_TTL.
            state = self.state(name, fresh=True)
        if version is None:
            version = state.current
            if version is None:
                return None
        if version in state.deleted:
            return None  # its data is gone: a definition cached before is forgotten
        key = (name, version)
        with self._lock:
            found = self._versions.get(key)
            if found is not None:
                self._versions.move_to_end(key)
                return found
            if self._unknown.get(key, 0.0) > time.monotonic():
                return None
        raw = self.redis.hget(keys.metric_key(name), f"v{version}")
        if raw is None:
            with self._lock:
                _put_bounded(self._unknown, key, time.monotonic() + UNKNOWN_TTL)
                self._unknown.move_to_end(key)
            return None
        definition = _parse(name, raw)
        self._keep(key, definition)
        return definition

    def lookup(self, name: str, version: int) -> MetricDefinition | None:
        """``get`` with an explicit version (the signature ``check_report`` wants)."""
        return self.get(name, version)

    def created(self, name: str, version: int) -> float | None:
        """When ``version`` of ``name`` was created (Unix seconds, the server's clock).

        None for an unknown version, or one written before creation times were kept.
        What a memoized metric's intervals need: no device can have reported a version
        before it existed (see ``Budget.max_reports``).
        """
        raw = self.redis.hget(keys.metric_key(name), f"t{version}")
        return None if raw is None else float(raw)

    def exists(self, name: str, version: int) -> bool:
        """Whether ``version`` of ``name`` is defined now (read from Redis, not cached)."""
        return bool(self.redis.hexists(keys.metric_key(name), f"v{version}"))

    def versions(self, name: str) -> list[int]:
        """Every version of ``name`` (deleted ones excepted), ascending."""
        return sorted(version_numbers(self.redis.hkeys(keys.metric_key(name))))

    def units(self) -> int:
        """The replay guard's units: every shard of every version of every metric not
        retired (at least 1; cached for :data:`UNITS_TTL`). The guard's reserve is split
        equally among them (:mod:`ldp_store.guard`).

        Counted once per registry change for every process: the count is kept in Redis
        (:data:`~ldp_store.keys.GUARD_UNITS_KEY`) with the change counter it was read at,
        and a process whose counter matches takes it (one round trip); otherwise the
        shards are summed in Redis (:func:`~ldp_store.scripts.guard_units`).
        """
        now = time.monotonic()
        cached = self._units
        if cached is not None and now - cached[0] < UNITS_TTL:
            return cached[1]
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.get(keys.REGISTRY_CHANGES)
            pipe.hmget(keys.GUARD_UNITS_KEY, "changes", "units")
            changes, (kept_at, kept) = pipe.execute()
        if kept is not None and kept_at == (changes or b"0"):
            count = int(kept)
        else:
            # As read before the count: a version made during it moves the counter after
            # it, and the next reader counts again.
            count = self._count_units()
            self.redis.hset(
                keys.GUARD_UNITS_KEY, mapping={"changes": changes or b"0", "units": count}
            )
        self._units = (now, max(1, count))
        return self._units[1]

    def _count_units(self) -> int:
        """:meth:`units` counted from every metric's hash (in Redis, or here on a cluster)."""
        names = self.every_name()
        hashes = [keys.metric_key(n) for n in names]
        summed = guard_units(self.redis, hashes)
        if summed is not None:
            return summed
        now = time.monotonic()
        # Every metric's state and versions in two calls, the definitions not cached in one
        # pipeline: not a few round trips per metric (seconds at ten thousand metrics).
        states = read_many(self.redis, "HMGET", hashes, "current", "retired", "deleted")
        fields = read_many(self.redis, "HKEYS", hashes)
        live: list[tuple[str, int]] = []
        for name, raw, found in zip(names, states, fields, strict=True):
            state = _state_of(raw)
            self._remember(name, now, state)
            if state.retired is None:
                live += [(name, version) for version in version_numbers(found)]
        self._load_versions(live)
        count = 0
        with self._lock:
            for key in live:
                definition = self._versions.get(key)
                count += definition.shards if definition is not None else 1
        return count

    def retirements(self) -> dict[str, float | None]:
        """When each metric seen by :meth:`all_current` or :meth:`state` was retired (None:
        live), as last read: no round trip, for a pass over every metric just listed."""
        return {name: entry[1].retired for name, entry in self._state.items()}

    def all_current(self) -> list[MetricDefinition]:
        """The current definition of every metric (of the request's project), by name.

        Kept while the registry's change counter (:data:`~ldp_store.keys.REGISTRY_CHANGES`,
        moved by every new version, retire, unretire and delete) stays put, for at most
        :data:`SNAPSHOT_TTL`: a page over ten thousand metrics then costs one ``GET``.
        Otherwise every state is read in one call (:func:`~ldp_store.scripts.read_many`),
        the definitions not cached in one pipeline, not one round trip per metric.
        """
        return list(self.snapshot().definitions)

    def snapshot(self) -> Snapshot:
        """:meth:`all_current` as kept: the same object while nothing changed, so a caller
        can keep what it derives from the list (the overview's device-wide spend) with it.
        """
        kept, changes, now = self._kept()
        if kept is not None:
            return kept
        kept = Snapshot(changes, now, tuple(self._read_current(self.names(), now)))
        with self._lock:
            if len(self._snapshots) >= SNAPSHOTS:
                self._snapshots.clear()
            self._snapshots[projects.CURRENT.get()] = kept
        return kept

    def current_versions(self) -> dict[str, int]:
        """Every metric's current version (of the request's project), by name, without
        reading a definition: from the kept :meth:`snapshot` while the registry's change
        counter stays put, else from every state, read in one call. A process's first
        scrape at ten thousand metrics then reads no definition but those in use
        (:meth:`definitions`)."""
        kept, _, now = self._kept()
        if kept is not None:
            return {d.name: d.version for d in kept.definitions}
        return dict(self._current_pairs(self.names(), now))

    def definitions(self, wanted: list[tuple[str, int]]) -> list[MetricDefinition]:
        """The definitions of these (name, version) pairs that exist, in order; those not
        cached read in one pipeline."""
        self._load_versions(wanted)
        with self._lock:
            found = [self._versions.get(key) for key in wanted]
        return [d for d in found if d is not None]

    def _kept(self) -> tuple[Snapshot | None, bytes | None, float]:
        """The project's kept snapshot while it stands (else None), the change counter
        and the time (monotonic) it was read at."""
        changes = cast(bytes | None, self.redis.get(keys.REGISTRY_CHANGES))
        now = time.monotonic()
        with self._lock:
            kept = self._snapshots.get(projects.CURRENT.get())
        if kept is not None and kept.changes == changes and now - kept.read_at < SNAPSHOT_TTL:
            return kept, changes, now
        return None, changes, now

    def _changed(self) -> None:
        """After a write other processes' snapshots must not keep: move the counter."""
        self.redis.incr(keys.REGISTRY_CHANGES)
        with self._lock:
            self._snapshots.clear()

    def _read_current(self, names: list[str], now: float) -> list[MetricDefinition]:
        """The current definitions of ``names``: every state read in one call (the
        counter moved, or a minute passed: any state may have changed), the definitions
        not cached in one pipeline."""
        return self.definitions(self._current_pairs(names, now))

    def _current_pairs(self, names: list[str], now: float) -> list[tuple[str, int]]:
        """(name, current version) of those of ``names`` that have one, every state read."""
        self._refresh_states(names, now, every=True)
        found = []
        for name in names:
            state = self._state[name][1] if name in self._state else _NO_STATE
            if state.current is not None and state.current not in state.deleted:
                found.append((name, state.current))
        return found

    def _refresh_states(self, names: list[str], now: float, *, every: bool = False) -> None:
        """Read the states of ``names`` (``every`` one, or those not cached or older than
        :data:`CURRENT_TTL`), in one call."""
        stale = [
            n
            for n in names
            if every or n not in self._state or now - self._state[n][0] >= CURRENT_TTL
        ]
        if stale:
            fields = ["current", "retired", "deleted"]
            replies = read_many(self.redis, "HMGET", [keys.metric_key(n) for n in stale], *fields)
            for name, raw in zip(stale, replies, strict=True):
                self._remember(name, now, _state_of(raw))

    def _load_versions(self, wanted: list[tuple[str, int]]) -> None:
        """Read the definitions of ``wanted`` not cached, in one pipeline (once per
        version: definitions never change)."""
        with self._lock:
            missing = [key for key in wanted if key not in self._versions]
        if not missing:
            return
        pipe = self.redis.pipeline(transaction=False)
        for name, version in missing:
            pipe.hget(keys.metric_key(name), f"v{version}")
        for key, raw in zip(missing, pipe.execute(), strict=True):
            if raw is not None:
                self._keep(key, _parse(key[0], raw))

    # -- writes --------------------------------------------------------------------------
    def put(self, name: str, spec: Any) -> RegistryChange:
        """Create or change a metric from an operator's spec.

        Raises:
            DefinitionError: the spec is invalid (every problem listed).
            MetricRetired: the metric is retired and the spec would make a new version.
        """
        # validates before touching Redis
        proposed = replace(parse_spec(projects.bare(name), spec), name=name)
        key = keys.metric_key(name)
        self.redis.sadd(keys.METRICS_SET, name)  # first: see the module's docstring
        # transaction=True: redis-py's cluster pipeline WATCHes only in a transaction
        with self.redis.pipeline(transaction=True) as pipe:
            while True:
                try:
                    pipe.watch(key)
                    raw_current, raw_retired, raw_deleted = pipe.hmget(
                        key, ["current", "retired", "deleted"]
                    )
                    current = None
                    if raw_current is not None and pipe.hexists(key, f"v{int(raw_current)}"):
                        version = int(raw_current)
                        current = _parse(name, pipe.hget(key, f"v{version}"))  # type: ignore[arg-type]
                    definition, changed, created = _proposed_version(
                        proposed, current, raw_retired, raw_deleted
                    )
                    pipe.multi()
                    pipe.hset(key, f"v{definition.version}", _dump(definition))
                    if created:
                        pipe.hset(key, f"t{definition.version}", int(self._clock()))
                    pipe.hset(key, "current", definition.version)
                    pipe.execute()
                    break
                except redis.WatchError:
                    continue
        if created:  # after the version is written: a worker that sees it moved finds it
            self._changed()
        elif changed:  # a description or budget: this process shows it at once
            with self._lock:
                self._snapshots.clear()
        with self._lock:
            self._versions.pop((name, definition.version), None)
            self._unknown.pop((name, definition.version), None)
        self._state.pop(name, None)
        return RegistryChange(definition, created, changed)

    def retire(self, name: str, now: float | None = None) -> float:
        """Retire ``name``: refuse its reports from now on (estimates stay readable).

        Returns:
            When it was retired (the earlier time if it already was).

        Raises:
            KeyError: no such metric.
        """
        key = keys.metric_key(name)
        if not self.redis.exists(key):
            raise KeyError(name)
        when = float(int(self._clock() if now is None else now))
        self.redis.hsetnx(key, "retired", int(when))
        self._state.pop(name, None)
        raw = self.redis.hget(key, "retired")
        since = float(raw) if raw is not None else when
        # After the field: a put that made a version before it is listed here; one after
        # it finds the metric retired (its WATCH on the hash fails, it reads again).
        with self.redis.pipeline(transaction=False) as pipe:
            for marker in self._retired_keys(name):
                pipe.set(marker, int(since))
            pipe.execute()
        self._changed()
        return since

    def unretire(self, name: str) -> bool:
        """Take reports of ``name`` again; whether it was retired."""
        removed = self.redis.hdel(keys.metric_key(name), "retired")
        self._state.pop(name, None)
        with self.redis.pipeline(transaction=False) as pipe:
            for marker in self._retired_keys(name):
                pipe.delete(marker)
            pipe.execute()
        self._changed()
        return bool(removed)

    def _retired_keys(self, name: str) -> list[str]:
        """The :func:`~ldp_store.keys.retired_key` of every shard of every version."""
        found = []
        raw = cast(dict[bytes, bytes], self.redis.hgetall(keys.metric_key(name)))
        for field, value in raw.items():
            if field.startswith(b"v") and field[1:].isdigit():
                shards = _parse(name, value).shards
                version = int(field[1:])
                found += [keys.retired_key(name, version, shard) for shard in range(shards)]
        return found

    def forget(self, name: str, versions: list[int]) -> None:
        """Remove ``versions`` of ``name`` from the registry, leaving their tombstone.

        The hash keeps ``deleted`` (and ``retired``), so the numbers are never reused and
        other processes forget their cached definitions within CURRENT_TTL. ``current``
        goes when it names a removed version.
        """
        key = keys.metric_key(name)
        with self.redis.pipeline(transaction=True) as pipe:
            while True:
                try:
                    pipe.watch(key)
                    raw_current, raw_deleted = pipe.hmget(key, ["current", "deleted"])
                    deleted = set(json.loads(raw_deleted)) if raw_deleted is not None else set()
                    pipe.multi()
                    for version in versions:
                        pipe.hdel(key, f"v{version}", f"t{version}")
                    pipe.hset(key, "deleted", json.dumps(sorted(deleted | set(versions))))
                    if raw_current is not None and int(raw_current) in versions:
                        pipe.hdel(key, "current")
                    pipe.execute()
                    break
                except redis.WatchError:
                    continue
        with self._lock:
            for version in versions:
                self._versions.pop((name, version), None)
        self._state.pop(name, None)
        self._changed()


__all__ += ["DefinitionError"]

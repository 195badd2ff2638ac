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
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import redis

from client_sdk.errors import DefinitionError
from client_sdk.wire import MetricDefinition, check_name, parse_spec
from ldp_store import keys

__all__ = ["Registry", "RegistryChange"]

CURRENT_TTL = 1.0
"""Seconds a process trusts its cached "current version" of a metric. Versions
themselves never change, so they are cached without expiry (up to CACHE_SIZE)."""

CACHE_SIZE = 4096
"""Definitions kept per process: far more than the metrics anyone defines. Unknown
(name, version) pairs are remembered up to the same number, oldest forgotten first."""

UNKNOWN_TTL = 1.0
"""Seconds a process trusts that a (name, version) is unknown: a client repeating a batch
of bogus versions costs no Redis round trip meanwhile. Short, because a version may be
created later (``put`` forgets it at once in its own process; others wait this long)."""


class RegistryChange:
    """The outcome of a put: the definition now current, and whether it is new."""

    def __init__(self, definition: MetricDefinition, created: bool, changed: bool) -> None:
        self.definition = definition
        self.created = created
        self.changed = changed


class Registry:
    """Read and write metric definitions; reads are cached per process."""

    def __init__(self, client: redis.Redis, clock: Callable[[], float] = time.time) -> None:
        self.redis = client
        self._clock = clock
        self._lock = threading.Lock()
        self._versions: OrderedDict[tuple[str, int], MetricDefinition] = OrderedDict()
        self._current: dict[str, tuple[float, int | None]] = {}
        self._unknown: OrderedDict[tuple[str, int], float] = OrderedDict()
        """(name, version) → until when (monotonic) it is taken as unknown."""

    # -- reads ---------------------------------------------------------------------------
    def names(self) -> list[str]:
        """All metric names, sorted."""
        return sorted(x.decode() for x in self.redis.smembers(keys.METRICS_SET))  # type: ignore[union-attr]

    def current_version(self, name: str) -> int | None:
        """The current version of ``name`` (cached for CURRENT_TTL), or None."""
        now = time.monotonic()
        cached = self._current.get(name)
        if cached and now - cached[0] < CURRENT_TTL:
            return cached[1]
        raw = self.redis.hget(keys.metric_key(name), "current")
        version = int(raw) if raw is not None else None
        self._current[name] = (now, version)
        return version

    def get(self, name: str, version: int | None = None) -> MetricDefinition | None:
        """A definition by name and version (default: current), or None if unknown."""
        try:
            check_name(name)
        except ValueError:
            return None
        if version is None:
            version = self.current_version(name)
            if version is None:
                return None
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
                self._unknown[key] = time.monotonic() + UNKNOWN_TTL
                self._unknown.move_to_end(key)
                while len(self._unknown) > CACHE_SIZE:
                    self._unknown.popitem(last=False)
            return None
        definition = MetricDefinition.from_dict(json.loads(raw))
        with self._lock:
            self._versions[key] = definition
            while len(self._versions) > CACHE_SIZE:
                self._versions.popitem(last=False)
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

    def versions(self, name: str) -> list[int]:
        """Every version of ``name``, ascending."""
        fields = self.redis.hkeys(keys.metric_key(name))
        return sorted(int(f[1:]) for f in (x.decode() for x in fields) if f.startswith("v"))  # type: ignore[union-attr]

    def all_current(self) -> list[MetricDefinition]:
        """The current definition of every metric."""
        found = (self.get(name) for name in self.names())
        return [d for d in found if d is not None]

    # -- writes --------------------------------------------------------------------------
    def put(self, name: str, spec: Any) -> RegistryChange:
        """Create or change a metric from an operator's spec.

        Raises:
            DefinitionError: the spec is invalid (every problem listed).
        """
        proposed = parse_spec(name, spec)  # validates before touching Redis
        key = keys.metric_key(name)
        self.redis.sadd(keys.METRICS_SET, name)  # first: see the module's docstring
        # transaction=True: redis-py's cluster pipeline WATCHes only in a transaction
        with self.redis.pipeline(transaction=True) as pipe:
            while True:
                try:
                    pipe.watch(key)
                    raw_current = pipe.hget(key, "current")
                    current = None
                    if raw_current is not None:
                        version = int(raw_current)
                        current = MetricDefinition.from_dict(
                            json.loads(pipe.hget(key, f"v{version}"))  # type: ignore[arg-type]
                        )
                    if current is not None and current.same_parameters(proposed):
                        # description, budget and retention are not decoding parameters:
                        # same version
                        definition = replace(
                            current,
                            description=proposed.description,
                            budget=proposed.budget,
                            retention=proposed.retention,
                        )
                        changed, created = definition != current, False
                    else:
                        version = 1 if current is None else current.version + 1
                        definition = replace(proposed, version=version)
                        changed = created = True
                    pipe.multi()
                    pipe.hset(key, f"v{definition.version}", json.dumps(definition.to_dict()))
                    if created:
                        pipe.hset(key, f"t{definition.version}", int(self._clock()))
                    pipe.hset(key, "current", definition.version)
                    pipe.execute()
                    break
                except redis.WatchError:
                    continue
        with self._lock:
            self._versions.pop((name, definition.version), None)
            self._unknown.pop((name, definition.version), None)
        self._current.pop(name, None)
        return RegistryChange(definition, created, changed)


__all__ += ["DefinitionError"]

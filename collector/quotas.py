"""Per-project quotas: metrics, reports per minute, Redis memory (``LDP_PROJECT_QUOTAS``).

A project at a quota is refused with a 4xx naming the project, the quota and what to do
(429 with ``Retry-After`` for reports and memory, which the SDKs retry; 409 for one
metric too many), and only that project: its count is its own. Unset: no quotas, as
before projects. Docs: docs/guides/teams.md.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import redis

from client_sdk.numbers import is_count
from collector.errors import ApiError
from ldp_api.context import Slot
from ldp_store import keys, lifecycle, projects

__all__ = ["ANY", "MEMORY_TTL", "QUOTAS", "Quota", "ProjectQuotas", "parse_quotas"]

ANY = "*"
"""The key of ``LDP_PROJECT_QUOTAS`` whose quota holds for every project not named."""

MEMORY_TTL = 10.0
"""Seconds a process trusts a project's measured Redis memory: the measurement scans
the keyspace for the project's keys (O(keys)), so at most one scan per project and
process each 10 s. A project passes its memory quota by at most what it writes in that
time."""

_FIELDS = {"metrics", "reports_per_minute", "memory_mb"}


@dataclass(frozen=True)
class Quota:
    """One project's limits (None: unlimited)."""

    metrics: int | None = None
    reports_per_minute: int | None = None
    memory_bytes: int | None = None


def parse_quotas(value: Any) -> dict[str, Quota]:
    """``LDP_PROJECT_QUOTAS``: a JSON object, project (or ``*``) → ``{"metrics": n,
    "reports_per_minute": n, "memory_mb": n}`` (each optional, a positive integer).

    Raises:
        ValueError: anything else, with what was found.
    """
    if value in (None, ""):
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"PROJECT_QUOTAS must be a JSON object: {exc}") from None
    if not isinstance(value, Mapping):
        raise ValueError(f"PROJECT_QUOTAS must be a JSON object, got {str(value)[:80]!r}")
    return {project: _quota(project, limits) for project, limits in value.items()}


def _quota(project: str, limits: object) -> Quota:
    """One project's entry of ``LDP_PROJECT_QUOTAS`` (``project``: its key).

    Raises:
        ValueError: a bad project name, or not an object of positive integers.
    """
    if project != ANY:
        projects.check_project(project)
    if not isinstance(limits, Mapping) or set(limits) - _FIELDS:
        raise ValueError(
            f"PROJECT_QUOTAS[{project!r}] must be an object of {sorted(_FIELDS)}, "
            f"got {str(limits)[:80]!r}"
        )
    for key, number in limits.items():
        if not is_count(number):
            raise ValueError(
                f"PROJECT_QUOTAS[{project!r}].{key} must be a positive integer, got {number!r}"
            )
    memory = limits.get("memory_mb")
    return Quota(
        limits.get("metrics"),
        limits.get("reports_per_minute"),
        None if memory is None else memory * 2**20,
    )


@dataclass
class ProjectQuotas:
    """The app's quotas and the checks against them.

    Args:
        limits: by project, :data:`ANY` for the rest.
        clock: wall time (the minute a report counts in).
    """

    limits: dict[str, Quota]
    clock: Callable[[], float] = time.time
    _memory: dict[str, tuple[float, int]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def of(self, project: str) -> Quota:
        """``project``'s quota."""
        return self.limits.get(project) or self.limits.get(ANY) or Quota()

    def admit_metric(self, names: Callable[[], list[str]], name: str, project: str) -> None:
        """Refuse a new metric ``name`` past the project's metrics quota (409). Checked
        before the create: two creates at once may each pass a quota one short.

        Args:
            names: the project's metrics with a live version (qualified names; a deleted
                one frees its place), read only under a quota.
            name: the metric asked for (qualified).
            project: its project.
        """
        limit = self.of(project).metrics
        if limit is None:
            return
        held = names()
        if name in held or len(held) < limit:
            return
        raise ApiError(
            409,
            f"project {project!r} holds {len(held)} metrics, its quota",
            ["delete a metric first, or raise its metrics in LDP_PROJECT_QUOTAS"],
        )

    def admit_reports(self, client: redis.Redis, project: str, count: int) -> None:
        """Count ``count`` reports against the project's minute, or refuse them (429).

        Counted first and given back when over, so two requests together never pass the
        quota (at worst both are refused, and retried).
        """
        quota = self.of(project)
        if quota.memory_bytes is not None:
            self._admit_memory(client, project, quota.memory_bytes)
        limit = quota.reports_per_minute
        if limit is None or count == 0:
            return
        now = self.clock()
        key = keys.quota_key(project, int(now // 60))
        pipe = client.pipeline(transaction=False)
        pipe.incrby(key, count)
        pipe.expire(key, 120)
        total = int(pipe.execute()[0])
        if total <= limit:
            return
        client.decrby(key, count)
        retry = max(1, math.ceil(60 - now % 60))
        raise ApiError(
            429,
            f"project {project!r} is at its quota of {limit} reports a minute",
            [f"retry after {retry} s, or raise its reports_per_minute in LDP_PROJECT_QUOTAS"],
            {"Retry-After": str(retry)},
        )

    def memory_of(self, client: redis.Redis, project: str) -> int:
        """Bytes of Redis the project's metrics hold (measured at most each
        :data:`MEMORY_TTL` per process)."""
        now = time.monotonic()
        with self._lock:
            cached = self._memory.get(project)
            if cached is not None and now - cached[0] < MEMORY_TTL:
                return cached[1]
        total = lifecycle.weigh(client, lifecycle.project_keys(client, project)).bytes
        with self._lock:
            self._memory[project] = (now, total)
        return total

    def _admit_memory(self, client: redis.Redis, project: str, limit: int) -> None:
        used = self.memory_of(client, project)
        if used < limit:
            return
        raise ApiError(
            429,
            f"project {project!r} holds {used / 2**20:.1f} MiB of Redis, its quota is "
            f"{limit / 2**20:.0f} MiB",
            [
                "retire or delete its metrics, shorten their retention, or raise its "
                "memory_mb in LDP_PROJECT_QUOTAS"
            ],
            {"Retry-After": str(int(MEMORY_TTL))},
        )


QUOTAS: Slot[ProjectQuotas] = Slot("ldp.quotas", ProjectQuotas)
"""The app's quotas (the collector's factory attaches them)."""

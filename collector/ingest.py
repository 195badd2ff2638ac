"""Ingest: validate a batch of reports strictly, then append the valid ones exactly once.

Valid reports are grouped by metric version (and shard); each group is appended by one
call of the append script (:func:`ldp_store.scripts.append_call`), which refuses replays
through the replay guard and appends the rest, on keys that share one hash slot.

In full: ``docs/architecture/pipeline.md``.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

import msgspec
import redis
from redis.exceptions import RedisClusterException

from client_sdk.errors import ReportError
from client_sdk.mechanisms import FrequencyOracle, NumericMechanism
from client_sdk.wire import REPORT_FIELDS, MetricDefinition, check_report
from collector import plain
from collector.body import parse_json
from collector.errors import ApiError, Unavailable
from collector.memory import MemoryGuard
from collector.models import IngestError, IngestRefusal, IngestResult, Rejection, Retired, Retry
from collector.replicas import ReplicaWait
from ldp_edge.answers import clip
from ldp_store import guard, in_use, keys, projects, schema, scripts
from ldp_store.connection import out_of_memory, unavailable
from ldp_store.registry import retired_on

if TYPE_CHECKING:
    from collector.telemetry import Telemetry
    from ldp_store.registry import Registry


class IngestContext(Protocol):
    """What ingest uses of the collector's context (:class:`collector.context.Services`)."""

    @property
    def registry(self) -> Registry: ...
    @property
    def telemetry(self) -> Telemetry: ...
    @property
    def appender(self) -> Appender: ...


__all__ = [
    "MAX_VERSIONS_PER_REQUEST",
    "SEEN_TTL_SECONDS",
    "Appender",
    "NoValidReport",
    "PartlyStored",
    "Refused",
    "RetiredOnAppend",
    "RetiredOnly",
    "Validated",
    "ingest",
    "reports_of",
    "validate",
]

log = logging.getLogger(__name__)

SEEN_TTL_SECONDS = guard.TTL_SECONDS
"""The longest the replay guard keeps a day's ids (:data:`ldp_store.guard.TTL_SECONDS`)."""

LAYOUT_TRIES = 5
"""Script calls one append may take to agree on the guard's layout: the first may find a
new day, the second end an epoch (its share full), the third find a generation started by
another collector meanwhile; more means layouts change faster than requests finish, and
the client retries later."""

LEFTOVER_SECONDS = 10.0
"""Seconds a dropped epoch may stay listed before any collector deletes its keys: the
one that dropped it does so at once (milliseconds), so this only catches one that failed."""

MAX_LAYOUTS = 10_000
"""Guard layouts a collector process caches (one per metric version, shard and day); past
this the cache starts afresh, which costs one extra script call per version."""

MAX_VERSIONS_PER_REQUEST = 100
"""Distinct (metric, version) pairs one request may name. An app's batch holds reports
of the metrics it uses, a few dozen at most; each pair the process has not seen costs a
Redis round trip (unknown ones are then remembered for ``registry.UNKNOWN_TTL``), so a
thousand invented versions must not cost a thousand. More answer 413, which makes the
SDK halve its batch."""

_COMPACT = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
"""The stored form of a payload: compact JSON as this encoder writes it."""

_FAST = msgspec.json.Encoder().encode
"""The same bytes as :data:`_COMPACT` for payloads of ints and ASCII strings, at a tenth
of its cost (0.1-0.3 µs a payload against 2-3: the stdlib builds an encoder per call).
Floats it writes in another form (``1e-7``, not ``1e-07``), so metrics whose payloads hold
floats keep the stdlib's (:func:`_encoder`); ``tests/collector/test_collector_ingest.py``
pins the equality for every mechanism."""


def _holds_float(value: object) -> bool:
    if isinstance(value, dict):
        return any(_holds_float(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_float(v) for v in value)
    return isinstance(value, float)


def _encoder(definition: MetricDefinition) -> Callable[[Any], bytes]:
    """How ``definition``'s payloads are stored: :data:`_FAST` unless they hold floats
    (a numeric mechanism's do; a frequency oracle's largest payload shows its shape)."""
    mechanism = definition.mechanism
    if isinstance(mechanism, NumericMechanism) or _holds_float(mechanism.max_payload()):
        return lambda payload: _COMPACT.encode(payload).encode()
    return _FAST


Item = tuple[bytes, bytes]
"""One report as stored: (16-byte id, payload as compact JSON)."""


@dataclass
class Validated:
    """A validated request: the valid reports grouped by (metric, version), the rest."""

    groups: dict[tuple[str, int], list[Item]] = field(default_factory=dict)
    rejected: list[Rejection] = field(default_factory=list)
    shards: dict[tuple[str, int], int] = field(default_factory=dict)
    """Each group's ``definition.shards`` (its reports spread over that many streams)."""
    retired: dict[str, float] = field(default_factory=dict)
    """Retired metrics the rejected reports named, with when (Unix seconds)."""

    def retirements(self) -> list[Retired] | None:
        """The ``retired`` field of the answer (None when no report named one)."""
        if not self.retired:
            return None
        return [
            Retired(metric=name, retired_at=_iso(since))
            for name, since in sorted(self.retired.items())
        ]


def _iso(since: float) -> str:
    return datetime.fromtimestamp(since, UTC).isoformat().replace("+00:00", "Z")


class NoValidReport(ApiError):
    """A 400 for a request none of whose reports is valid, listing each in ``rejected``."""

    def __init__(self, rejected: list[Rejection], retired: list[Retired] | None = None) -> None:
        details = [f"reports[{r.index}]: {r.error}" for r in rejected]
        super().__init__(400, "no valid report in the request", details)
        self.rejected = rejected
        self.retired = retired

    def body(self) -> IngestError:
        """The JSON body: the error, its details, the rejections and retired metrics."""
        extra = {} if self.retired is None else {"retired": self.retired}
        return IngestError(error=self.error, details=self.details, rejected=self.rejected, **extra)


class RetiredOnly(NoValidReport):
    """A 410 Gone: every report of the request names a retired metric."""

    def __init__(self, rejected: list[Rejection], retired: list[Retired]) -> None:
        super().__init__(rejected, retired)
        self.status = 410
        self.error = "; ".join(
            f"metric {r.metric} was retired on {r.retired_at[:10]}; stop reporting it"
            for r in retired
        )


class RetiredOnAppend(Exception):
    """The append script found a metric retired that this process's cached registry state
    did not (a retire another process answered a moment ago): the reports of ``refused``
    were not appended; ``added`` and ``duplicates`` count what the version's other
    shards took before."""

    def __init__(
        self, name: str, since: float, added: int, duplicates: int, refused: list[bytes]
    ) -> None:
        super().__init__(f"metric {name!r} was retired on {retired_on(since)}")
        self.name = name
        self.since = since
        self.added = added
        self.duplicates = duplicates
        self.refused = refused


def _retired_error(name: str, since: float) -> str:
    return f"metric {name} was retired on {retired_on(since)}; stop reporting it"


class Refused(Unavailable):
    """A 503 for some of one version's reports: the reports of ``ids`` were not stored
    now (a shard's node is unavailable, its backlog is full, or the replay guard's shares
    refuse them), after ``appended`` of the version's reports were appended and
    ``duplicates`` found (the retry of ``ids`` may find some of them too)."""

    def __init__(
        self,
        error: str,
        reason: str,
        appended: int,
        duplicates: int,
        retry_after: int | None = None,
        ids: frozenset[bytes] = frozenset(),
    ) -> None:
        super().__init__(error, reason, retry_after)
        self.appended = appended
        self.duplicates = duplicates
        self.ids = ids


@dataclass
class _Later:
    """The shards of one version whose reports were not stored now, and why."""

    ids: set[bytes] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    wait: int = 0

    def add(self, part: list[Item], error: str, reason: str, wait: int | None = None) -> None:
        self.ids.update(rid for rid, _ in part)
        if error not in self.errors:
            self.errors.append(error)
        self.reasons.append(reason)
        self.wait = max(self.wait, wait or 0)

    def refused(self, appended: int, duplicates: int) -> Refused:
        return Refused(
            "; ".join(self.errors),
            self.reasons[0],
            appended,
            duplicates,
            self.wait or None,
            frozenset(self.ids),
        )


def shard_down(exc: BaseException) -> bool:
    """Whether a storage error of one shard's append says its node cannot take writes for
    now (:func:`ldp_store.connection.unavailable`, or out of memory), not that a command is
    wrong: the other shards' appends go on."""
    return out_of_memory(exc) or unavailable(exc)


def _shard_down_error(name: str, version: int, shard: int, exc: BaseException) -> tuple[str, str]:
    """The error and reason of a shard whose node cannot take writes now (logged)."""
    log.warning("storage: metric %s version %s shard %d refused: %s: %s",
                name, version, shard, type(exc).__name__, exc)  # fmt: skip
    why, reason = (
        ("out of memory", "oom") if out_of_memory(exc) else ("its node is unavailable", "redis")
    )
    return (
        f"storage cannot take metric {name!r} version {version}'s reports of shard {shard} "
        f"now ({why}); retry later",
        reason,
    )


class PartlyStored(Unavailable):
    """The 503 of a batch some of whose valid reports were not stored now: ``retry``
    lists them by position, and the body says what became of the rest (a client that
    reads ``retry`` sends only those again; one that does not sends the whole batch,
    whose stored reports then come back as duplicates).

    Args:
        reports: the request's reports.
        batch: their validation.
        later: each version's :class:`Refused` (the ids not stored, why).
        accepted: reports appended.
        duplicates: replays found.
    """

    def __init__(
        self,
        reports: list[Any],
        batch: Validated,
        later: list[Refused],
        accepted: int,
        duplicates: int,
    ) -> None:
        errors = list(dict.fromkeys(exc.error for exc in later))
        wait = max((exc.retry_after or 0 for exc in later), default=0)
        super().__init__("; ".join(errors), later[0].reason, wait or None)
        self.retry = _retries(reports, batch, later)
        self.accepted = accepted
        self.duplicates = duplicates
        self.rejected = batch.rejected
        self.retired = batch.retirements()

    def body(self) -> IngestRefusal:
        """The JSON body: the error, and every report's fate but the accepted ones'."""
        extra = {} if self.retired is None else {"retired": self.retired}
        return IngestRefusal(
            error=self.error,
            details=self.details,
            accepted=self.accepted,
            duplicates=self.duplicates,
            rejected=self.rejected,
            retry=self.retry,
            **extra,
        )


def _retries(reports: list[Any], batch: Validated, later: list[Refused]) -> list[Retry]:
    """The reports to send again (among ``later``'s ids, not rejected), each with why."""
    why = {rid.hex(): exc.error for exc in later for rid in exc.ids}
    done = {r.index for r in batch.rejected}
    return [
        Retry(index=i, error=clip(why[rid]))
        for i, rid in enumerate(map(_id, reports))
        if rid in why and i not in done
    ]


def _id(report: Any) -> str | None:
    """A report's id, lower-case (a decoded report, or a plain batch's struct)."""
    rid = report.get("id") if isinstance(report, dict) else getattr(report, "id", None)
    return rid.lower() if isinstance(rid, str) else None


def reports_of(body: object, max_reports: int) -> list[Any]:
    """The ``reports`` list of a request body, checked for shape and count (a
    :class:`~collector.plain.PlainBatch` has been).

    Raises:
        ApiError: 400 if the body is not ``{"reports": [...]}`` with at least one
            report, 413 if it holds more than ``max_reports``.
    """
    if isinstance(body, plain.PlainBatch):
        return body.reports
    if not isinstance(body, dict):
        raise ApiError(400, 'the body must be a JSON object {"reports": [...]}')
    if set(body) != {"reports"}:
        extra = sorted(set(body) - {"reports"})
        problem = f"unknown fields {clip(str(extra), 200)}" if extra else "missing 'reports'"
        raise ApiError(400, 'the body must be exactly {"reports": [...]}', [problem])
    reports = body["reports"]
    if not isinstance(reports, list):
        raise ApiError(400, "'reports' must be a list of reports")
    if not reports:
        raise ApiError(400, "'reports' is empty; send at least one report")
    if len(reports) > max_reports:
        raise ApiError(
            413,
            "too many reports in one request",
            [f"{len(reports)} reports; at most {max_reports} per request: split the batch"],
        )
    return reports


def _category(report: object, error: str) -> str:
    """The rejection category of a report ``check_report`` refused with ``error``."""
    if not isinstance(report, dict) or set(report) - {"dimensions"} != set(REPORT_FIELDS):
        return "shape"
    if error.startswith("unknown metric"):
        return "unknown_metric"
    if error.startswith("'"):  # 'metric', 'version' or 'id' is malformed
        return "field"
    return "payload"


def _plan(
    definition: MetricDefinition, retired: Callable[[str], float | None], batch: Validated
) -> tuple[str, float | None, Any, list[Item], Callable[[Any], bytes]]:
    """What :func:`validate` needs of a definition, once per request (see there)."""
    mechanism = definition.mechanism
    overridden = getattr(type(mechanism), "implausible", None) is not FrequencyOracle.implausible
    group = batch.groups.setdefault((definition.name, definition.version), [])
    since = retired(definition.name)
    check = mechanism.implausible if overridden else None
    return definition.name, since, check, group, _encoder(definition)


def _named_versions(reports: list[Any]) -> set[tuple[str, int]]:
    """The distinct (metric, version) pairs the reports name (those of the right types)."""
    named = set()
    for r in reports:
        if type(r) is dict:
            name, version = r.get("metric"), r.get("version")
            if type(name) is str and type(version) is int:
                named.add((name, version))
    return named


def validate(
    reports: list[Any],
    lookup: Callable[[str, int], MetricDefinition | None],
    retired: Callable[[str], float | None] = lambda name: None,
) -> Validated:
    """Check every report (strictly, then for plausibility under its mechanism: see
    :meth:`client_sdk.mechanisms.FrequencyOracle.implausible`); group the valid ones, list
    the others with their reasons.

    Args:
        reports: the decoded ``reports`` list.
        lookup: the registry's (name, version) → definition, or None if unknown.
        retired: the registry's name → when the metric was retired, or None; a report
            of a retired metric is rejected (reason ``retired``) however valid.

    Returns:
        The valid reports as storable items, by (metric, version), and the rejections.

    Raises:
        ApiError: 413 if the reports name more than MAX_VERSIONS_PER_REQUEST distinct
            (metric, version) pairs (before any look-up).
    """
    named = _named_versions(reports)
    if len(named) > MAX_VERSIONS_PER_REQUEST:
        raise ApiError(
            413,
            "too many metric versions in one request",
            [
                f"{len(named)} distinct (metric, version) pairs; at most "
                f"{MAX_VERSIONS_PER_REQUEST} per request: split the batch"
            ],
        )
    found: dict[tuple[str, int], MetricDefinition | None] = {}

    def cached(name: str, version: int) -> MetricDefinition | None:
        # One registry look-up per distinct (name, version) of the request, at most
        # MAX_VERSIONS_PER_REQUEST; the registry caches known and (briefly) unknown ones.
        key = (name, version)
        if key not in found:
            found[key] = lookup(name, version)
        return found[key]

    batch = Validated()
    # What each definition met in the request needs, looked up once: its name, when it
    # was retired (None: it was not), its plausibility check (None: its mechanism has
    # none), its group and how its payloads are stored.
    plans: dict[int, tuple[str, float | None, Any, list[Item], Callable[[Any], bytes]]] = {}
    fromhex = bytes.fromhex
    for index, report in enumerate(reports):
        try:
            definition, rid, payload = check_report(report, cached)
        except ReportError as exc:
            error = clip(str(exc))
            batch.rejected.append(
                Rejection(index=index, error=error, reason=_category(report, error))
            )
            continue
        plan = plans.get(id(definition))
        if plan is None:
            plan = plans[id(definition)] = _plan(definition, retired, batch)
        name, since, implausible_of, group, encode = plan
        if since is not None:
            batch.retired[name] = since
            error = _retired_error(name, since)
            batch.rejected.append(Rejection(index=index, error=error, reason="retired"))
            continue
        implausible = implausible_of(payload) if implausible_of is not None else None
        if implausible is not None:
            batch.rejected.append(
                Rejection(
                    index=index,
                    error=clip(implausible.detail),
                    reason="implausible",
                    metric=name,
                    test=implausible.reason,
                )
            )
            continue
        if definition.dimensions:  # checked by check_report; stored beside the payload
            payload = {**payload, schema.SEGMENT_KEY: definition.segment(report["dimensions"])}
        group.append((fromhex(rid), encode(payload)))
    batch.groups = {key: group for key, group in batch.groups.items() if group}
    for key in batch.groups:
        known = found.get(key)
        batch.shards[key] = known.shards if known is not None else 1
    return batch


class Appender:
    """Appends groups of reports to their stream through the append script
    (:func:`ldp_store.scripts.append_call`), within the replay guard's shares.

    Args:
        client: the Redis client (redis-py reloads the script after a restart).
        max_backlog: the most reports a stream may hold (not yet counted); a batch
            that would take it past this is refused.
        high_water: the share of what the guard's budget leaves of Redis's
            ``maxmemory`` at which ingest is refused (:class:`collector.memory.MemoryGuard`;
            checked by :func:`ingest`).
        replica_acks: replicas that must hold each append before it counts as done
            (``WAIT``; 0: none, answer once the primary has it).
        replica_wait_ms: how long that ``WAIT`` may take before :class:`Unavailable`.
        guard_share: the replay guard's budget, a share of ``maxmemory``.
        units: how many units (metric versions' shards) the guard's reserve is split
            among (:meth:`ldp_store.registry.Registry.units`); None: those it holds ids of.
    """

    def __init__(
        self,
        client: redis.Redis,
        max_backlog: int,
        high_water: float = 1.0,
        replica_acks: int = 0,
        replica_wait_ms: int = 200,
        guard_share: float = 0.0,
        units: Callable[[], int] | None = None,
    ) -> None:
        self.max_backlog = max_backlog
        self.client = client
        self.memory = MemoryGuard(client, high_water, guard_share, units=units)
        self._replicas = (
            ReplicaWait(client, replica_acks, replica_wait_ms) if replica_acks else None
        )
        self._layouts: dict[tuple[str, int, int, tuple[str, str]], guard.Layout] = {}
        self._leftovers: dict[str, float] = {}  # dropped epochs another call ended: first seen
        self._refusals: dict[str, int] = {}  # the refusals this process listed, by unit
        self.marks = in_use.Marks(client)
        """The versions this process appended to, in the set ``/metrics`` reads."""
        self.shortened: Callable[[], None] = lambda: None
        """Called when an append ends an epoch early (the app counts it)."""

    def append(
        self, name: str, version: int, items: list[Item], now: datetime, shards: int = 1
    ) -> tuple[int, int]:
        """Append one metric version's reports, skipping replays.

        With ``shards`` > 1 the reports are split by :func:`ldp_store.keys.shard_of`
        their id and each shard's part is appended by its own script call (one hash slot
        each). A shard that cannot take its part now (its node unavailable or out of
        memory, its replicas not confirming, its backlog full, its guard's share spent)
        does not stop the others: its reports are listed in :class:`Refused` for the
        client to send again, after the others were appended.

        Args:
            name: the metric.
            version: its version.
            items: (16-byte id, payload JSON) pairs.
            now: the current time (UTC), which picks the guard's days and ages its epochs.
            shards: the version's ``definition.shards``.

        Returns:
            (appended, duplicates).

        Raises:
            Refused: some shards' reports were not stored now (``ids``): their node is
                unavailable (reason ``redis``) or out of memory (``oom``), their replicas
                did not confirm (``replica``), their slot is moving (``moved``), they
                would take a stream past ``max_backlog`` (``backlog``), or the replay
                guard's shares refuse some of them (``guard``; those before are
                appended, and found as replays when sent again).
            RetiredOnAppend: the metric is retired (its reports, or a shard's, refused).
            redis.RedisError: a command was wrong (a bug).
        """
        days = guard.day_pair(now)
        parts: dict[int, list[Item]] = {0: items}
        if shards > 1:
            parts = {}
            for item in items:
                parts.setdefault(keys.shard_of(item[0], shards), []).append(item)
        added = duplicates = 0
        since: float | None = None
        refused: list[bytes] = []
        later = _Later()
        for shard, part in sorted(parts.items()):
            try:
                reply = self._append_part(name, version, shard, days, part, now)
            except Unavailable as exc:  # its replicas did not confirm, its slot is moving
                later.add(part, exc.error, exc.reason, exc.retry_after)
                continue
            except (redis.RedisError, RedisClusterException) as exc:
                if not shard_down(exc):
                    raise
                # This shard's node cannot take writes now (it died and its replica is
                # not promoted yet, say): the version's other shards still can.
                later.add(part, *_shard_down_error(name, version, shard, exc))
                continue
            added, duplicates = added + reply.appended, duplicates + reply.duplicates
            if reply.retired is not None:
                since = reply.retired
                refused += [rid for rid, _ in part]
            elif (held := self._held_back(name, version, reply, now)) is not None:
                later.add(part, *held)
        if since is not None:  # retired: so are the reports of shards that refused them
            refused += [rid for rid, _ in items if rid in later.ids]
            raise RetiredOnAppend(name, since, added, duplicates, refused)
        if later.ids:
            raise later.refused(added, duplicates)
        return added, duplicates

    def _held_back(
        self, name: str, version: int, reply: scripts.AppendReply, now: datetime
    ) -> tuple[str, str, int | None] | None:
        """Why a shard's reports were held back for later though its script ran (error,
        reason, seconds to wait): a backlog near its limit, or the replay guard's share
        spent; None when they were taken."""
        if reply.backlog:
            return (
                f"metric {name!r} version {version} has a backlog near its limit of "
                f"{self.max_backlog} reports; retry later",
                "backlog",
                None,
            )
        if reply.refused:
            until = datetime.fromtimestamp(now.timestamp() + reply.refused, UTC)
            return (
                f"metric {name!r} version {version} holds its share of the replay "
                f"guard's budget with ids younger than {guard.MIN_WINDOW // 60} minutes; "
                f"its reports are refused until about {until:%H:%M} UTC ({reply.refused} "
                "s), when its guard can forget older ids (other metrics are not refused)",
                "guard",
                reply.refused,
            )
        return None

    def _append_part(
        self,
        name: str,
        version: int,
        shard: int,
        days: tuple[str, str],
        part: list[Item],
        now: datetime,
    ) -> scripts.AppendReply:
        """One script call for one shard's reports, with the guard layout agreed first.

        The layout of each (version, shard, day pair) is cached; the script answers the
        layout it holds when the cache is stale (a new day, an epoch ended, a new
        generation), and the call is repeated with it. An epoch this call ends is
        counted off and its keys deleted here. :data:`LAYOUT_TRIES` bounds the calls.
        """
        cached = (name, version, shard, days)
        layout = self._layouts.get(cached) or guard.Layout(name, version, shard, days)
        unit = keys.guard_unit(name, version, shard)
        for _ in range(LAYOUT_TRIES):
            call = scripts.append_call(
                self.client,
                layout=layout,
                reports=part,
                max_backlog=self.max_backlog,
                now=now.timestamp(),
                shares=self.memory.shares(now),
                stream=self.target(name, version, shard),
            )
            reply = scripts.AppendReply.of(self._run(call))
            if reply.retired is not None:
                return reply
            if reply.layout is None:
                self._settle(reply, layout, unit, now)
                return reply
            layout = guard.Layout(name, version, shard, days, *reply.layout, reply.epochs)
            if len(self._layouts) >= MAX_LAYOUTS:
                self._layouts.clear()
            self._layouts[cached] = layout
            if reply.ended is not None:  # this call ended the epoch: the one before it went
                gone = reply.dropped.rpartition(";")[2].partition("|")[0]
                if reply.ended:
                    self.memory.count(guard.day_of(gone or layout.days[1]), unit, -reply.ended)
                self.shortened()
                log.warning(
                    "replay guard: metric %s version %s shard %d at its share of the budget; "
                    "its window now starts %s (no id younger than %d s was forgotten)",
                    name,
                    version,
                    shard,
                    layout.previous,
                    guard.MIN_WINDOW,
                )
                if reply.dropped:
                    scripts.forget_epochs(self.client, layout=layout, dropped=reply.dropped)
        raise Unavailable("the replay guard's layout kept changing; retry", "busy")

    def _settle(
        self, reply: scripts.AppendReply, layout: guard.Layout, unit: str, now: datetime
    ) -> None:
        """After a call the script ran with ``layout``: note what the guard's unit holds,
        count the reports added to its day (and mark the version in use), list a refusal
        for /readyz, and delete the dropped epochs other calls left."""
        self.memory.note(unit, sum(reply.held))
        if reply.appended:
            self.memory.count(layout.days[0], unit, reply.appended)
            self._mark(layout.name, layout.version)
        until = int(now.timestamp()) + reply.refused
        if reply.refused and self._refusals.get(unit) != until:
            self.client.hset(keys.guard_refused_key(), unit, until)  # for /readyz
            if len(self._refusals) >= MAX_LAYOUTS:
                self._refusals.clear()
            self._refusals[unit] = until
        if reply.dropped:
            self._forget_leftovers(layout, reply.dropped)

    def _mark(self, name: str, version: int) -> None:
        """Mark the version in use; a failure waits for the next append (or the worker's
        commit), the reports being stored already."""
        try:
            self.marks.mark(name, version)
        except (redis.RedisError, RedisClusterException) as exc:
            log.warning("metric %s version %d not marked in use: %s", name, version, exc)

    def _forget_leftovers(self, layout: guard.Layout, dropped: str) -> None:
        """Delete dropped epochs whose keys another call left (it failed, or is at it):
        only once this process has seen them listed for :data:`LEFTOVER_SECONDS`."""
        tick = self.memory.clock()
        first = self._leftovers.setdefault(dropped, tick)
        if tick - first >= LEFTOVER_SECONDS:
            del self._leftovers[dropped]
            scripts.forget_epochs(self.client, layout=layout, dropped=dropped)
        elif len(self._leftovers) > MAX_LAYOUTS:
            self._leftovers.clear()

    def target(self, name: str, version: int, shard: int) -> str:
        """The key the reports go to: the version's stream (a subclass may say otherwise:
        :class:`collector.ohttp_shuffle.PoolAppender`)."""
        return keys.stream_key(name, version, shard)

    def _run(self, call: scripts.Call) -> Any:
        """The append script's reply; with ``replica_acks``, once replicas hold it
        (:class:`collector.replicas.ReplicaWait`)."""
        if self._replicas is None:
            return call.run()
        return self._replicas.run(call)


def _count_appended(telemetry: Any, name: str, added: int, replayed: int) -> None:
    """Count a metric's reports appended and the replays found (the app's counters)."""
    if added:
        telemetry.accepted.labels(metric=name).inc(added)
    if replayed:
        telemetry.duplicates.labels(metric=name).inc(replayed)


def _refuse(batch: Validated) -> None:
    """Raise the answer to a request of which no report was taken: 410 if every report
    names a retired metric, else 400."""
    retirements = batch.retirements()
    if retirements and all(r.reason == "retired" for r in batch.rejected):
        raise RetiredOnly(batch.rejected, retirements)
    raise NoValidReport(batch.rejected, retirements)


def _retired_meanwhile(
    batch: Validated, reports: list[Any], version: int, exc: RetiredOnAppend
) -> None:
    """Reject, as retired, the reports the append script refused (by id: rare enough,
    just after a retire, to look them up one by one)."""
    refused = {rid.hex() for rid in exc.refused}
    batch.retired[exc.name] = exc.since
    error = _retired_error(exc.name, exc.since)
    for index, report in enumerate(reports):
        if isinstance(report, dict):
            metric, number, rid = report.get("metric"), report.get("version"), report.get("id")
        else:  # a plain batch's report struct (collector.plain), or a rejected value
            metric, number, rid = (getattr(report, f, None) for f in ("metric", "version", "id"))
        if (
            metric == exc.name
            and type(number) is int
            and number == version
            and isinstance(rid, str)
            and rid.lower() in refused
        ):
            batch.rejected.append(Rejection(index=index, error=error, reason="retired"))


def _lookup(registry: Registry, project: str) -> Callable[[str, int], MetricDefinition | None]:
    """The registry's look-up of a report's (bare) metric name in ``project``: a name that
    is not bare (``other/name``) is unknown, so a report reaches its own project only."""
    if project == projects.DEFAULT:
        return lambda name, version: None if "/" in name else registry.lookup(name, version)
    return lambda name, version: (
        None if "/" in name else registry.lookup(projects.qualify(project, name), version)
    )


def _validated(
    body: object, ctx: IngestContext, max_reports: int, project: str
) -> tuple[Any, Validated]:
    """The body's reports and their validation: a plain batch checked as a whole when it
    is plainly valid, else report by report (with every message). Groups are keyed by
    the stored (project-qualified) names.

    Raises:
        ApiError: 400/413 for a body of the wrong shape or size.
    """
    lookup = _lookup(ctx.registry, project)
    if isinstance(body, plain.PlainBatch):
        registry = ctx.registry
        found = plain.validate(body, lookup, registry.refusing, MAX_VERSIONS_PER_REQUEST)
        if found is not None:
            return body.reports, Validated(groups=found[0], shards=found[1])
        body = parse_json(body.raw)  # not plainly valid: report by report
    reports = reports_of(body, max_reports)
    return reports, validate(reports, lookup, ctx.registry.refusing)


def _count_rejections(batch: Validated, reports: int, telemetry: Any) -> None:
    """Count and log the batch's rejections by reason (implausible ones by test too)."""
    for reason, count in Counter(r.reason for r in batch.rejected).items():
        telemetry.rejected.labels(reason=reason).inc(count)
    for (metric, test), count in Counter(
        (r.metric, r.test) for r in batch.rejected if r.reason == "implausible"
    ).items():
        telemetry.implausible.labels(metric=metric, reason=test).inc(count)
    if batch.rejected:
        log.info(
            "rejected %d of %d reports: %s",
            len(batch.rejected),
            reports,
            dict(Counter(r.reason for r in batch.rejected)),
        )


def ingest(
    body: object,
    ctx: IngestContext,
    max_reports: int,
    now: datetime | None = None,
    project: str = projects.DEFAULT,
) -> IngestResult:
    """Validate a ``POST /v1/reports`` body and append its valid reports.

    Args:
        body: the decoded request body, or a :class:`~collector.plain.PlainBatch` (checked
            as a whole; report by report when it is not plainly valid).
        ctx: the app's services (registry, appender, telemetry).
        max_reports: the most reports one request may hold.
        now: the time that picks the replay sets; default: the current UTC time.
        project: the project whose metrics the reports name (the ingest key's).

    Returns:
        Counts of appended and replayed reports, and every rejection.

    Raises:
        ApiError: 400/413 for a body of the wrong shape or size, 400 if no report is
            valid (with every rejection), 410 if every report names a retired metric.
        PartlyStored: some valid reports were not stored now (their shard's node is
            unavailable, a stream's backlog is full, the replay guard's shares refuse
            them, ...): the others were, and the 503 lists those to send again.
        Unavailable: Redis is at its memory high-water mark (nothing stored).
        redis.RedisError: Redis is unavailable; the client should retry the batch.
    """
    reports, batch = _validated(body, ctx, max_reports, project)
    telemetry = ctx.telemetry
    _count_rejections(batch, len(reports), telemetry)
    if not batch.groups:
        _refuse(batch)
    when = now or datetime.now(UTC)
    ctx.appender.memory.check(when)
    accepted = duplicates = 0
    refused = False
    later: list[Refused] = []
    for (name, version), items in sorted(batch.groups.items()):
        shards = batch.shards.get((name, version), 1)
        try:
            added, replayed = ctx.appender.append(name, version, items, when, shards)
        except RetiredOnAppend as exc:
            added, replayed, refused = exc.added, exc.duplicates, True
            _retired_meanwhile(batch, reports, version, exc)
            telemetry.rejected.labels(reason="retired").inc(len(exc.refused))
        except Refused as exc:
            # Some of this version's reports were not stored now; the others' appends go
            # on, and the answer lists those to send again.
            later.append(exc)
            added, replayed = exc.appended, exc.duplicates
        accepted += added
        duplicates += replayed
        _count_appended(telemetry, name, added, replayed)
    log.debug("appended %d reports, %d replays", accepted, duplicates)
    if refused:
        batch.rejected.sort(key=lambda r: r.index)
    if later:  # before a 4xx: that would have the client drop these reports
        raise PartlyStored(reports, batch, later, accepted, duplicates)
    if refused and accepted + duplicates == 0:
        _refuse(batch)
    retired = batch.retirements()
    return IngestResult(
        accepted=accepted,
        duplicates=duplicates,
        rejected=batch.rejected,
        **({} if retired is None else {"retired": retired}),
    )

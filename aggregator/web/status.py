"""``GET /v1/overview``: every metric at a glance, for the dashboard's first page.

One row per metric's current version: what it is (kind, mechanism, ε per report and,
where the definition carries a device budget, per period), how many reports are
counted, the newest window with counts (the last update), and the aggregator's lag::

    {"metrics": [{"name", "version", "kind", "description", "mechanism", "epsilon",
                  "k", "range", "budget", "epsilon_per_period", "period",
                  "longitudinal", "permanent_epsilon", "n", "last_window",
                  "lag": {"length", "pending"}, "relayed_waiting": {"reports", "released_by",
                  "note"} | null, "alarms": [...], "memory_bytes", "retired_at",
                  "retention": {"hour", "day", "all", "note"}}],
     "memory": {"used", "maxmemory", "keys", "partial", "measured_at", "guard",
                "guard_budget"}}

Memory per metric sums ``MEMORY USAGE`` over every key of its versions, found by a
bounded SCAN of their hash tags; the reading is cached for a minute
(:data:`ldp_store.lifecycle.MEMORY_CACHE_SECONDS` says why), so the page and ``/metrics``
never make Redis weigh every key per view or scrape. ``retention`` says how long each kind
of window is kept after it ends, in seconds (``all``: null, kept while the version is
live), and in words.

Definitions are read through ``to_dict()`` with ``.get``: optional fields (``budget``,
``longitudinal``, numeric metrics' ``range``) show when a definition has them.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import redis
from flask import Blueprint, Flask, current_app, has_app_context, request
from werkzeug.exceptions import BadRequest

from aggregator.query.alarms import alarm_models, checked_alarm_rate, current_alarms
from aggregator.query.relayed import relayed_waiting_many
from aggregator.query.window import counters, lag_details_many, list_windows_many
from aggregator.stats.accounting import composed_epsilon, device_spend, epsilon_per_day_max
from aggregator.stats.detect import DEFAULT_ALARM_RATE, MIN_REPORTS, Alarm
from aggregator.web.access import UNAUTHORIZED, documented_read
from aggregator.web.models import (
    MAX_CANDIDATES_QUERY,
    MAX_OVERVIEW_PAGE,
    OVERVIEW_PAGE,
    Overview,
    OverviewQuery,
)
from aggregator.web.strings import overview_alarms
from client_sdk.device import DeviceCaps
from client_sdk.mechanisms import Memoized
from client_sdk.wire import MetricDefinition
from ldp_api.context import Slot, shared
from ldp_api.models import Error, answer
from ldp_api.openapi import UNAVAILABLE, Reply
from ldp_store import projects
from ldp_store.lifecycle import MemoryReport, MemoryUsage
from ldp_store.registry import CACHE_SIZE, Registry, Snapshot
from ldp_store.retention import RetentionPolicy

__all__ = [
    "alarm_rate",
    "bp",
    "describe",
    "install_retention",
    "published_caps",
    "overview_asked",
    "overview_body",
    "overview_rows",
    "read_memory",
    "retention_of",
]

bp = Blueprint("status", __name__)

log = logging.getLogger(__name__)

RETENTION = Slot("ldp_retention", RetentionPolicy)
"""Where the app keeps the deployment's retention policy (read once, at start)."""


def install_retention(app: Flask) -> None:
    """Read the deployment's retention policy from the environment, once, at start.

    Raises:
        ValueError: a retention variable out of range (the app does not start).
    """
    RETENTION.attach(app, RetentionPolicy.from_environ())


def retention_of(definition: MetricDefinition) -> RetentionPolicy:
    """How long this metric version's windows are kept: the deployment's policy with the
    metric's own overrides."""
    policy = RETENTION.find() or RetentionPolicy.from_environ()
    return policy.for_metric(definition)


def alarm_rate(app: Flask | None = None) -> float:
    """The configured false-alarm rate per window (``LDP_ALARM_RATE``).

    Raises:
        ValueError: ``ALARM_RATE`` is not a number in (0, 0.5).
    """
    raw: Any = (app or current_app).config.get("ALARM_RATE", DEFAULT_ALARM_RATE)
    return checked_alarm_rate(raw)


def describe(definition: MetricDefinition) -> dict[str, Any]:
    """What the dashboard shows of a definition, from its JSON form.

    ``epsilon_per_period`` is ``budget.reports_per_period × ε``: the most a device spends
    on the metric in one period (sequential composition). A longitudinal (memoized)
    metric also shows ``permanent_epsilon``, ε∞: what a device ever reveals about one
    unchanged value, however many reports it sends. ``epsilon_per_day_max`` is the most
    a device can spend on the metric in one UTC day under this definition: its whole
    period's allowance (a day lies within one period, and nothing stops a device from
    spending the period's reports on one day), a memoized metric at most ε∞; null without
    a budget (unbounded).
    """
    d = definition.to_dict()
    params = d["mechanism"]
    mechanism = definition.mechanism
    permanent = mechanism.permanent_epsilon if isinstance(mechanism, Memoized) else None
    budget = definition.budget
    per_period = None
    if budget is not None:
        per_period = composed_epsilon(float(params["epsilon"]), float(budget.reports_per_period))
    return {
        "name": projects.bare(definition.name),  # as its project's people call it
        "version": definition.version,
        "kind": definition.kind,
        "description": definition.description,
        "mechanism": params["mechanism"],
        "mechanism_params": params,
        "mechanism_reason": definition.mechanism_reason,
        "epsilon": params["epsilon"],
        "k": len(d.get("domain", ())) or None,
        "range": d.get("range"),
        "budget": d["budget"],
        "epsilon_per_period": per_period,
        "period": None if budget is None else budget.period,
        "longitudinal": permanent is not None,
        "permanent_epsilon": permanent,
        "epsilon_per_day_max": epsilon_per_day_max(per_period, permanent),
    }


def read_memory(memory: MemoryUsage | None) -> MemoryReport | None:
    """The cached memory reading, or None if there is none (Redis refused ``MEMORY``)."""
    if memory is None:
        return None
    try:
        return memory.read()
    except redis.ResponseError as exc:  # e.g. MEMORY disabled by a managed Redis
        log.warning("redis memory not read: %s", exc)
        return None


def overview_rows(
    client: redis.Redis,
    registry: Registry,
    memory: MemoryReport | None = None,
    alpha: float = DEFAULT_ALARM_RATE,
    definitions: list[MetricDefinition] | None = None,
) -> list[dict[str, Any]]:
    """One row per metric (current version; ``definitions``, default every metric): the
    definition, n, newest window, lag, memory (all versions), retirement, and the
    poisoning alarms of its newest hour and day windows and of the all-time window at
    false-alarm rate ``alpha`` (a string metric's: those of its last discovery,
    :func:`~aggregator.web.strings.overview_alarms`).

    The rows' counters, windows, pending entries and pools are read for all of them at
    once (a few calls, whatever the page's length); only a metric with enough reports to
    raise an alarm (:data:`~aggregator.stats.detect.MIN_REPORTS` over all time) has its
    windows' counts read and tested.
    """
    page = registry.all_current() if definitions is None else definitions
    counted = counters(client, page)
    lags = lag_details_many(client, page, counted)
    every_windows = list_windows_many(client, page)
    waiting = relayed_waiting_many(client, page)
    retired = registry.retirements()  # as all_current read them: no round trip per row
    rows = []
    for definition, count, details, windows, relayed in zip(
        page, counted, lags, every_windows, waiting, strict=True
    ):
        row = describe(definition)
        policy = retention_of(definition)
        row.update(
            {
                "retention": {**policy.to_dict(), "note": policy.describe()},
                "n": count.n,
                "last_window": _last_window(windows),
                "lag": {"length": details.length, "pending": details.pending},
                "relayed_waiting": relayed,
                "alarms": _overview_alarms(client, definition, count.n, windows, alpha),
                "memory_bytes": (
                    None if memory is None else memory.by_metric.get(definition.name, 0)
                ),
                "retired_at": _retired_at(
                    retired[definition.name]
                    if definition.name in retired
                    else registry.retired(definition.name)
                ),
            }
        )
        rows.append(row)
    return rows


def _last_window(windows: list[str]) -> str | None:
    """The newest hour window of a metric (newest first), else its newest day window."""
    for prefix in ("hour:", "day:"):
        for window in windows:
            if window.startswith(prefix):
                return window
    return None


def _overview_alarms(
    client: redis.Redis, definition: MetricDefinition, n: int, windows: list[str], alpha: float
) -> list[dict[str, Any]]:
    """A row's alarms: a string metric's of its last discovery, another's of its newest
    windows (none below :data:`~aggregator.stats.detect.MIN_REPORTS` reports in all)."""
    found: list[Alarm] = []
    labels = None
    if definition.kind == "string":
        found, labels = overview_alarms(definition, alpha)
    elif n >= MIN_REPORTS:  # fewer reports in every window: no test can alarm
        found = current_alarms(client, definition, alpha, windows)
    return [a.model_dump() for a in alarm_models(definition, found, labels)]


@bp.get("/v1/overview")
@documented_read(
    "Every metric's current version: definition, n, last window, lag.",
    {
        200: Reply("One row per metric of the page.", Overview),
        400: Reply("A bad offset, limit or q.", Error),
        401: UNAUTHORIZED,
        503: UNAVAILABLE,
    },
    query=OverviewQuery,
)
def get_overview() -> dict[str, Any]:
    """Every metric's current version (a page) with n so far, last update, lag and memory."""
    ext = shared()
    search, offset, limit = overview_asked()
    body = overview_body(
        ext.redis, ext.registry, ext.memory, alarm_rate(), published_caps(), search, offset, limit
    )
    return answer(Overview.model_validate(body))


def overview_asked() -> tuple[str, int, int]:
    """``?q=``, ``?offset=``, ``?limit=`` of the overview.

    Raises:
        BadRequest: an offset or limit out of range, or q too long.
    """
    search = request.args.get("q", "")
    if len(search) > MAX_CANDIDATES_QUERY:
        raise BadRequest(f"q must be at most {MAX_CANDIDATES_QUERY} characters")
    numbers = []
    for name, default, least, most in (
        ("offset", 0, 0, None),
        ("limit", OVERVIEW_PAGE, 1, MAX_OVERVIEW_PAGE),
    ):
        raw = request.args.get(name, str(default))
        value = int(raw) if raw.isascii() and raw.isdigit() else -1
        if value < least or (most is not None and value > most):
            bound = f"[{least}, {most}]" if most is not None else f"at least {least}"
            raise BadRequest(f"{name} must be an integer {bound}, got {raw[:40]!r}")
        numbers.append(value)
    return search, numbers[0], numbers[1]


def published_caps() -> DeviceCaps | None:
    """The device-wide caps the collector publishes (``LDP_DEVICE_EPSILON_…``, checked at
    start by the collector's settings), read from this app's config."""
    try:
        caps = DeviceCaps(
            DeviceCaps.check_cap(current_app.config.get("DEVICE_EPSILON_PER_DAY"), "per day"),
            DeviceCaps.check_cap(current_app.config.get("DEVICE_EPSILON_LIFETIME"), "lifetime"),
        )
    except ValueError:  # not through the collector's settings: treat as unset
        return None
    return None if caps == DeviceCaps() else caps


def overview_body(
    client: redis.Redis,
    registry: Registry,
    memory: MemoryUsage | None,
    alpha: float = DEFAULT_ALARM_RATE,
    caps: DeviceCaps | None = None,
    search: str = "",
    offset: int = 0,
    limit: int = OVERVIEW_PAGE,
) -> dict[str, Any]:
    """The ``/v1/overview`` answer (and what the page renders first): the device-wide
    spend over every metric, the rows of the metrics matching ``search`` (in name or
    description, any case) from ``offset``, at most ``limit``."""
    reading = read_memory(memory)
    snapshot = registry.snapshot()
    spend, texts = _spend_of(registry, snapshot, caps)
    needle = search.casefold()
    every = snapshot.definitions
    matching = every
    if needle:
        matching = tuple(
            d
            for d, (name, text) in zip(every, texts, strict=True)
            if needle in name or needle in text
        )
    page = list(matching[offset : offset + limit])
    rows = overview_rows(client, registry, reading, alpha, page)
    return {
        "device": spend,
        "metrics": rows,
        "total": len(matching),
        "offset": offset,
        "next_offset": offset + limit if offset + limit < len(matching) else None,
        "memory": None
        if reading is None
        else {
            "used": reading.used,
            "maxmemory": reading.maxmemory,
            "keys": reading.keys,
            "partial": reading.partial,
            "measured_at": reading.measured_at,
            "guard": reading.guard,
            "guard_budget": _guard_budget(reading.maxmemory),
        },
    }


_DESCRIBED: dict[tuple[str, int], dict[str, Any]] = {}
""":func:`describe` of each definition seen (a version never changes)."""


def _described(definition: MetricDefinition) -> dict[str, Any]:
    key = (definition.name, definition.version)
    found = _DESCRIBED.get(key)
    if found is None:
        if len(_DESCRIBED) >= CACHE_SIZE:
            _DESCRIBED.clear()
        found = _DESCRIBED[key] = describe(definition)
    return found


_SPEND: dict[int, tuple[Snapshot, DeviceCaps | None, dict[str, Any], list[tuple[str, str]]]] = {}
"""Per registry: the device-wide spend and the searchable texts of its latest snapshot."""


def _spend_of(
    registry: Registry, snapshot: Snapshot, caps: DeviceCaps | None
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """The device-wide spend over every live metric of ``snapshot``, and each metric's
    name and description (case folded, what ``?q=`` searches): computed once per
    snapshot, so a page over ten thousand metrics does not go through them all."""
    kept = _SPEND.get(id(registry))
    if kept is not None and kept[0] is snapshot and kept[1] == caps:
        return kept[2], kept[3]
    retired = registry.retirements()  # as the snapshot read them: no round trip per metric
    every = snapshot.definitions
    spend = device_spend(
        [{**_described(d), "retired_at": retired.get(d.name)} for d in every], caps
    )
    texts = [
        (projects.bare(d.name).casefold(), str(_described(d)["description"]).casefold())
        for d in every
    ]
    if len(_SPEND) >= 64:  # registries of a process: one, but tests make many
        _SPEND.clear()
    _SPEND[id(registry)] = (snapshot, caps, spend, texts)
    return spend, texts


def _guard_budget(maxmemory: int) -> int | None:
    """The replay guard's budget in bytes: the collector's ``GUARD_BUDGET`` percent."""
    share = current_app.config.get("GUARD_BUDGET") if has_app_context() else None
    if not maxmemory or not isinstance(share, int):
        return None
    return maxmemory * share // 100


def _retired_at(since: float | None) -> str | None:
    if since is None:
        return None
    return datetime.fromtimestamp(since, UTC).isoformat().replace("+00:00", "Z")

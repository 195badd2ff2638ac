"""The collector's configuration: defaults, environment, validation.

Every setting is a Flask config key; in the environment it carries the ``LDP_`` prefix
(``LDP_MAX_REPORTS=500``), except the Redis URL, which is also read from the plain
``REDIS_URL`` that hosting platforms set. See ``docs/reference/configuration.md``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from client_sdk.device import DeviceCaps
from client_sdk.numbers import is_count
from collector.quotas import parse_quotas
from ldp_api import oidc
from ldp_api.text_settings import (
    MIN_TOKEN_LENGTH,
    TEXT_SETTINGS,
    TOKEN_SETTINGS,
    ConfigError,
    check_tokens,
    tokens_from_env,
)
from ldp_store import auditlog
from ldp_store.projects import check_project

__all__ = [
    "DEFAULTS",
    "GUARD_BUDGET",
    "MAX_BACKLOG",
    "MAX_BODY_BYTES",
    "MAX_REPORTS",
    "MEMORY_HIGH_WATER",
    "REPLICA_ACKS",
    "REPLICA_WAIT_MS",
    "RETRY_AFTER",
    "SOURCE_REPORTS_PER_MINUTE",
    "SOURCE_REQUESTS_PER_SECOND",
    "MIN_TOKEN_LENGTH",
    "TOKEN_SETTINGS",
    "TEXT_SETTINGS",
    "ConfigError",
    "checked",
    "check_tokens",
    "device_budget",
    "tokens_from_env",
]

MAX_BODY_BYTES = 1 << 20
"""1 MiB: 1000 reports of the largest common kind (OUE at k = 1024, about 240 bytes each)
fit three times over; anything bigger is a bug or an attack, not a batch."""

MAX_REPORTS = 1000
"""Reports per request: the SDK sends batches of a few hundred; a cap bounds the work one
request can ask for (validation, one Lua script per metric version)."""

MAX_BACKLOG = 5_000_000
"""The most entries (reports not yet aggregated and trimmed) one stream may hold: a batch
that would take it past this answers 503. At a few hundred bytes per entry this is a few
GB of Redis memory; :data:`MEMORY_HIGH_WATER` bounds all streams together."""

MEMORY_HIGH_WATER = 90
"""Percent of what the replay guard's budget leaves of Redis's ``maxmemory`` (all but
:data:`GUARD_BUDGET`) at which ingest answers 503 (the global limit, across streams;
the guard's own memory is not counted against it): the last 10 % leave the aggregator
room to drain, which adds counts before it trims, and absorb what ingest adds between
two readings (:mod:`collector.memory`)."""

GUARD_BUDGET = 20
"""Percent of Redis's ``maxmemory`` the replay guard may hold (:mod:`collector.memory`):
memory only time frees, so it is kept out of the high-water mark, which applies to the
rest. 20 % of the embedded Redis's smallest ``maxmemory`` (256 MiB) holds about 2.7
million ids at :data:`ldp_store.guard.BYTES_PER_ID`: today's and yesterday's reports of a
deployment taking about 1.3 million a day. Half is reserved in equal parts for every
metric version's shard, half is a pool; a version past its share has its window
shortened or, for at most 90 minutes, its reports refused, and no other version is
(docs: "The replay guard"). At most 50: the backlog needs the rest."""

RETRY_AFTER = 5
"""Seconds a client waits after a 503 before retrying: long enough for a Redis restart
or failover to finish, short enough that on-device queues do not fill."""

REPLICA_ACKS = 0
"""Replicas that must hold an append before the collector answers 202 (``WAIT`` after the
append script, on the primary that ran it). 0, the default, answers as soon as the
primary has it: right for the embedded single server, which has no replica (a ``WAIT 1``
there would always time out). Redis replication is asynchronous, so with 0 a report
acknowledged in the last moments before a primary dies can be lost in the failover
(measured: ``benchmarks/bench_failover.py``); 1 closes that window at the cost of one
replica round trip per request. Recommended on a Redis Cluster with replicas: 1."""

REPLICA_WAIT_MS = 200
"""Milliseconds the ``WAIT`` may take before the request answers 503 (the client
retries; the replay guard turns the already appended reports into duplicates). A replica
on the same LAN acknowledges in about a millisecond; 200 ms rides out a busy moment.
At most :data:`MAX_REPLICA_WAIT_MS`."""

MAX_REPLICA_WAIT_MS = 900
"""The ``WAIT`` must answer within the collector's 1 s Redis read timeout
(``collector.SOCKET_TIMEOUT``), or the request would fail on the socket instead."""

SOURCE_REQUESTS_PER_SECOND = 20
"""Uploads one source (address) may send per second, and at once (:mod:`ldp_edge.admission`).
The SDK uploads once per ``flush_interval`` (5 s) or per ``flush_at`` (100) reports, one
request at a time; emptying a full queue (``max_queue`` 10,000 reports in batches of
``max_batch_reports`` 500) takes 20 requests back to back, which the bucket holds at
once. 20 a second is 100 times a device's steady rate; a flood of tiny requests is not."""

SOURCE_REPORTS_PER_MINUTE = 20_000
"""Reports one source may send per minute, and at once: two full SDK queues (10,000
reports each) in one go, then 333 a second. The largest device budget (1,000,000 reports
a day) is 12 a second; a device far below it. Must be at least ``MAX_REPORTS``, or a full
batch could never pass. Many devices behind one NAT address share it: raise it there."""

DEFAULTS: dict[str, Any] = {
    "REDIS_URL": None,
    "ADMIN_TOKEN": None,
    "READ_TOKEN": None,
    "METRICS_TOKEN": None,
    "MAX_BODY_BYTES": MAX_BODY_BYTES,
    "MAX_REPORTS": MAX_REPORTS,
    "MAX_BACKLOG": MAX_BACKLOG,
    "MEMORY_HIGH_WATER": MEMORY_HIGH_WATER,
    "GUARD_BUDGET": GUARD_BUDGET,
    "RETRY_AFTER": RETRY_AFTER,
    "REPLICA_ACKS": REPLICA_ACKS,
    "REPLICA_WAIT_MS": REPLICA_WAIT_MS,
    "SOURCE_REQUESTS_PER_SECOND": SOURCE_REQUESTS_PER_SECOND,
    "SOURCE_REPORTS_PER_MINUTE": SOURCE_REPORTS_PER_MINUTE,
    "SOURCE_HEADER": None,
    "DEVICE_EPSILON_PER_DAY": None,
    "DEVICE_EPSILON_LIFETIME": None,
    "CORS_ORIGINS": None,
    "REQUIRE_READ_TOKEN": False,
    "REQUIRE_INGEST_KEY": False,
    "AUDIT_RETENTION_DAYS": auditlog.RETENTION_DAYS,
    "AUDIT_MAX_ENTRIES": auditlog.MAX_ENTRIES,
    # Sign-in to the dashboard with OpenID Connect (ldp_api.oidc): off without an issuer.
    "OIDC_ISSUER": None,
    "OIDC_CLIENT_ID": None,
    "OIDC_CLIENT_SECRET": None,
    "OIDC_SCOPES": "openid email profile",
    "OIDC_ROLES_CLAIM": "groups",
    "OIDC_ROLES": None,
    "OIDC_REDIRECT_URI": None,
    "SESSION_SECONDS": oidc.SESSION_SECONDS,
    "TRUST_FORWARDED_PROTO": False,
    "PROJECT_QUOTAS": None,
    "INGEST_KEY_PROJECTS": None,
}

_POSITIVE_INTS = (
    "MAX_BODY_BYTES",
    "MAX_REPORTS",
    "MAX_BACKLOG",
    "MEMORY_HIGH_WATER",
    "GUARD_BUDGET",
    "RETRY_AFTER",
    "REPLICA_WAIT_MS",
    "AUDIT_RETENTION_DAYS",
    "AUDIT_MAX_ENTRIES",
)
_UPPER = {"MEMORY_HIGH_WATER": 100, "GUARD_BUDGET": 50, "REPLICA_WAIT_MS": MAX_REPLICA_WAIT_MS}
_LIMITS = ("SOURCE_REQUESTS_PER_SECOND", "SOURCE_REPORTS_PER_MINUTE", "REPLICA_ACKS")
"""Non-negative integers: 0 turns the limit (or the wait for replicas) off."""
_DEVICE_CAPS = ("DEVICE_EPSILON_PER_DAY", "DEVICE_EPSILON_LIFETIME")
"""The device-wide caps the collector publishes (``client_sdk.device``): None or ε > 0."""
_SWITCHES = ("REQUIRE_READ_TOKEN", "REQUIRE_INGEST_KEY", "TRUST_FORWARDED_PROTO")
"""On/off settings: reads need a token (``metrics:read``) even without ``LDP_READ_TOKEN``
(scoped tokens only); reports need an ingest key (scope ``ingest``); a proxy's
``X-Forwarded-Proto: https`` is believed (session cookies are then ``Secure``)."""
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}
_HEADER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,63}")


def redis_url_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    """The plain ``REDIS_URL`` of the environment, if set (``LDP_REDIS_URL`` wins later)."""
    env = os.environ if environ is None else environ
    return env.get("REDIS_URL") or None


def checked(config: Mapping[str, Any]) -> dict[str, Any]:
    """Check and normalise the collector's settings.

    Args:
        config: the app's config (or any mapping with the keys of :data:`DEFAULTS`).

    Returns:
        The normalised settings: ints as ints, an empty token as None.

    Raises:
        ConfigError: a setting is missing or out of range, with what was found.
    """
    out: dict[str, Any] = {}
    url = config.get("REDIS_URL")
    if not isinstance(url, str) or not url:
        raise ConfigError(
            "REDIS_URL is not set: point REDIS_URL (or LDP_REDIS_URL) at a Redis server, "
            "or start everything with `ldp serve`, which runs an embedded one"
        )
    out["REDIS_URL"] = url
    for key in _POSITIVE_INTS:
        out[key] = _positive_int(key, config.get(key, DEFAULTS[key]))
    for key in _LIMITS:
        out[key] = _limit(key, config.get(key, DEFAULTS[key]))
    per_minute = out["SOURCE_REPORTS_PER_MINUTE"]
    if 0 < per_minute < out["MAX_REPORTS"]:
        raise ConfigError(
            f"SOURCE_REPORTS_PER_MINUTE must be 0 (off) or at least MAX_REPORTS "
            f"({out['MAX_REPORTS']}), or a full batch could never pass; got {per_minute}"
        )
    out["SOURCE_HEADER"] = _source_header(config.get("SOURCE_HEADER"))
    for key in _DEVICE_CAPS:
        out[key] = _device_cap(key, config.get(key))
    out["CORS_ORIGINS"] = _origins(config.get("CORS_ORIGINS"))
    for key in _SWITCHES:
        out[key] = _switch(key, config.get(key, DEFAULTS[key]))
    out.update(check_tokens(config))
    try:
        oidc.settings_from(config)  # refused at start, not at the first sign-in
        out["PROJECT_QUOTAS"] = parse_quotas(config.get("PROJECT_QUOTAS"))
        out["INGEST_KEY_PROJECTS"] = _projects(config.get("INGEST_KEY_PROJECTS"))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return out


def _projects(value: object) -> frozenset[str]:
    """``INGEST_KEY_PROJECTS``: the projects whose reports need one of their ingest keys
    (a comma- or space-separated string, or a list); unset: none beyond
    ``REQUIRE_INGEST_KEY``'s."""
    if value in (None, ""):
        return frozenset()
    items = value.replace(",", " ").split() if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise ValueError(f"INGEST_KEY_PROJECTS must list project names, got {value!r}")
    return frozenset(check_project(item) for item in items)


def _positive_int(key: str, value: Any) -> int:
    """A positive int setting (digits in a string count), at most its :data:`_UPPER`."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    top = _UPPER.get(key)
    if not is_count(value):
        raise ConfigError(f"{key} must be a positive integer, got {value!r}")
    if top is not None and value > top:
        raise ConfigError(f"{key} must be at most {top}, got {value!r}")
    return value


def _source_header(header: Any) -> str | None:
    """``SOURCE_HEADER``: an HTTP header name, or None (unset or empty)."""
    if header in (None, ""):
        return None
    if isinstance(header, str) and _HEADER_NAME.fullmatch(header):
        return header
    raise ConfigError(
        f"SOURCE_HEADER must be an HTTP header name such as X-Real-IP, got {header!r}"
    )


def _device_cap(key: str, value: Any) -> Any:
    """A device-wide cap (:meth:`client_sdk.device.DeviceCaps.check_cap`); a string set
    directly (not through ``from_prefixed_env``'s JSON) is read as a number first."""
    if isinstance(value, str):
        try:
            value = float(value) if value.strip() else None
        except ValueError:
            pass
    try:
        return DeviceCaps.check_cap(value, key)
    except ValueError as exc:
        raise ConfigError(f"{exc} (unset: no cap)") from None


_ORIGIN = re.compile(r"https?://[a-z0-9.-]+(:[0-9]{1,5})?|\*")


def _origins(value: object) -> tuple[str, ...]:
    """The origins allowed cross-origin (``collector.cors``): a comma- or space-separated
    string, or a list; each ``scheme://host[:port]`` or ``*``; unset: none."""
    if value in (None, ""):
        return ()
    items = value.replace(",", " ").split() if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise ConfigError(f"CORS_ORIGINS must list origins like https://app.example, got {value!r}")
    out = []
    for item in items:
        origin = item.lower().rstrip("/") if isinstance(item, str) else item
        if not isinstance(origin, str) or not _ORIGIN.fullmatch(origin):
            raise ConfigError(
                f"CORS_ORIGINS: {item!r} is not an origin like https://app.example:8443 (or *)"
            )
        out.append(origin)
    return tuple(out)


def _switch(key: str, value: object) -> bool:
    """An on/off setting: a bool, 0/1, or true/false, yes/no, on/off as text."""
    if isinstance(value, bool):
        return value
    if value in (0, 1) and isinstance(value, int):
        return bool(value)
    if value is None:
        return False
    text = str(value).strip().lower()
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise ConfigError(f"{key} must be true or false (1/0, yes/no, on/off), got {value!r}")


def _limit(key: str, value: object) -> int:
    """A rate limit: a non-negative integer (0: off)."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if not is_count(value, 0):
        raise ConfigError(f"{key} must be a non-negative integer (0: off), got {value!r}")
    return value


def device_budget(config: Mapping[str, Any]) -> DeviceCaps | None:
    """The device-wide caps a collector publishes (``GET /v1/metrics``), None for none.

    Read from the checked settings ``DEVICE_EPSILON_PER_DAY`` and
    ``DEVICE_EPSILON_LIFETIME`` (environment: ``LDP_`` prefix); devices apply the stricter
    of these and their app's own (``client_sdk.device``).
    """
    budget = DeviceCaps(config.get("DEVICE_EPSILON_PER_DAY"), config.get("DEVICE_EPSILON_LIFETIME"))
    return None if budget == DeviceCaps() else budget

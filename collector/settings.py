"""The collector's configuration: defaults, environment, validation.

Every setting is a Flask config key; in the environment it carries the ``LDP_`` prefix
(``LDP_MAX_REPORTS=500``), except the Redis URL, which is also read from the plain
``REDIS_URL`` that hosting platforms set. See ``docs/pipeline.md``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

__all__ = [
    "DEFAULTS",
    "MAX_BACKLOG",
    "MAX_BODY_BYTES",
    "MAX_REPORTS",
    "MEMORY_HIGH_WATER",
    "RETRY_AFTER",
    "ConfigError",
    "checked",
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
"""Percent of Redis's ``maxmemory`` at which ingest answers 503 (the global limit, across
streams): the last 10 % leave the aggregator room to drain, which adds counts before it
trims, and absorb what ingest adds between two readings (:mod:`collector.memory`)."""

RETRY_AFTER = 5
"""Seconds a client waits after a 503 before retrying: long enough for a Redis restart
or failover to finish, short enough that on-device queues do not fill."""

DEFAULTS: dict[str, Any] = {
    "REDIS_URL": None,
    "ADMIN_TOKEN": None,
    "METRICS_TOKEN": None,
    "MAX_BODY_BYTES": MAX_BODY_BYTES,
    "MAX_REPORTS": MAX_REPORTS,
    "MAX_BACKLOG": MAX_BACKLOG,
    "MEMORY_HIGH_WATER": MEMORY_HIGH_WATER,
    "RETRY_AFTER": RETRY_AFTER,
}

_POSITIVE_INTS = (
    "MAX_BODY_BYTES",
    "MAX_REPORTS",
    "MAX_BACKLOG",
    "MEMORY_HIGH_WATER",
    "RETRY_AFTER",
)
_UPPER = {"MEMORY_HIGH_WATER": 100}


class ConfigError(ValueError):
    """The collector is misconfigured; raised by ``create_app``, never per request."""


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
        value = config.get(key, DEFAULTS[key])
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        top = _UPPER.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{key} must be a positive integer, got {value!r}")
        if top is not None and value > top:
            raise ConfigError(f"{key} must be at most {top}, got {value!r}")
        out[key] = value
    # from_prefixed_env parses values as JSON, so a numeric token arrives as an int.
    for key in ("ADMIN_TOKEN", "METRICS_TOKEN"):
        token = config.get(key)
        out[key] = None if token is None or token == "" else str(token)
    return out

"""How long each kind of window keeps its counts, and when a window expires.

Counts only grow: every hour of every metric version adds a window. A *retention
policy* says how long each kind is kept after the window **ends** (an hour window of
10:00–11:00 kept 14 days expires 14 days after 11:00):

| window | default | override |
|---|---|---|
| ``hour:…`` | 14 days | ``LDP_RETENTION_HOUR_SECONDS``; a metric's ``retention.hour`` |
| ``day:…`` | 400 days | ``LDP_RETENTION_DAY_SECONDS``; a metric's ``retention.day`` |
| ``all`` | while the version is live | none |

A metric's spec may override either kind (:class:`client_sdk.wire.Retention`); the
environment sets the defaults of every metric, for the worker and the web service alike
(:meth:`RetentionPolicy.from_environ`), so both must run with the same variables.

The worker's commit script (:data:`ldp_store.scripts.COMMIT`) gives a window's keys their
expiry (``PEXPIREAT``) in the same script that first writes them, so expiry never
touches the exactly-once argument; a window whose expiry has already passed when its
reports are counted (a backlog drained late) is not written at all. The expiry of each
window also goes into the version's expiries sorted set (:func:`ldp_store.keys.expiries_key`),
from which the commit removes expired windows from the windows listing and readers skip
them meanwhile. Changing a policy applies to windows first written afterwards.

Windows written before retention existed get their expiry when a worker joins their
version (:func:`expire_untimed`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import chain
from typing import cast

import redis

from client_sdk.wire import MetricDefinition, Retention
from ldp_store import keys, schema
from ldp_store.connection import as_text

__all__ = [
    "DEFAULT_DAY_SECONDS",
    "DEFAULT_HOUR_SECONDS",
    "ENV_DAY",
    "ENV_HOUR",
    "RetentionPolicy",
    "duration_label",
    "expire_untimed",
    "expired_message",
]

DEFAULT_HOUR_SECONDS = 14 * 86_400
"""Hour windows: two weeks, enough to compare this week's hours with last week's; a year
of them at k = 1,024 would otherwise take about 575 MB per metric in the old hash format."""

DEFAULT_DAY_SECONDS = 400 * 86_400
"""Day windows: a year and a month, so a day can be compared with the same day a year ago."""

ENV_HOUR = "LDP_RETENTION_HOUR_SECONDS"
ENV_DAY = "LDP_RETENTION_DAY_SECONDS"

_KIND_WORDS = {"hour": "hourly", "day": "daily"}


def duration_label(seconds: int) -> str:
    """A retention for people: ``14 days``, ``36 hours``, ``90 seconds``."""
    for unit, size in (("day", 86_400), ("hour", 3_600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds} second{'s' if seconds != 1 else ''}"


@dataclass(frozen=True)
class RetentionPolicy:
    """Seconds each window kind is kept after it ends (``all``: while the version is live)."""

    hour: int = DEFAULT_HOUR_SECONDS
    day: int = DEFAULT_DAY_SECONDS

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> RetentionPolicy:
        """The deployment's defaults: the built-in ones, overridden by the environment.

        Raises:
            ValueError: a variable that is not a whole number of seconds in range.
        """
        environ = os.environ if environ is None else environ
        raw_values = {
            "hour": environ.get("LDP_RETENTION_HOUR_SECONDS"),
            "day": environ.get("LDP_RETENTION_DAY_SECONDS"),
        }
        values = {"hour": DEFAULT_HOUR_SECONDS, "day": DEFAULT_DAY_SECONDS}
        for kind, raw in raw_values.items():
            if raw is None or not raw.strip():
                continue
            variable = ENV_HOUR if kind == "hour" else ENV_DAY
            seconds = int(raw) if raw.strip().isdigit() else None
            problem = Retention.problem(seconds if seconds is not None else raw)
            if problem:
                raise ValueError(f"{variable} {problem}")
            assert seconds is not None
            values[kind] = seconds
        return cls(**values)

    def for_metric(self, definition: MetricDefinition) -> RetentionPolicy:
        """This policy with the metric version's own overrides applied."""
        own = definition.retention
        if own is None:
            return self
        return RetentionPolicy(
            hour=self.hour if own.hour is None else own.hour,
            day=self.day if own.day is None else own.day,
        )

    def seconds(self, window: str) -> int | None:
        """How long ``window`` is kept after its end; None for ``all``."""
        if window == schema.ALL:
            return None
        return self.hour if window.startswith("hour:") else self.day

    def expires_at(self, window: str) -> float | None:
        """When ``window``'s counts expire (Unix seconds); None for ``all`` (never).

        Raises:
            ValueError: not a window name.
        """
        span = schema.window_span(window)
        kept = self.seconds(window)
        if span is None or kept is None:
            return None
        return span[1] + kept

    def to_dict(self) -> dict[str, int | None]:
        """``{"hour": s, "day": s, "all": None}``: None means kept while the version is live."""
        return {"hour": self.hour, "day": self.day, "all": None}

    def describe(self) -> str:
        """One sentence for the dashboard and the API."""
        return (
            f"hourly windows are kept {duration_label(self.hour)} after they end, daily windows "
            f"{duration_label(self.day)}, the all-time window while the version is live"
        )


def expired_message(definition: MetricDefinition, window: str, policy: RetentionPolicy) -> str:
    """What an estimate of an expired window answers (with its 404).

    Raises:
        ValueError: ``window`` is ``all`` (it never expires) or not a window name.
    """
    at = policy.expires_at(window)
    kept = policy.seconds(window)
    if at is None or kept is None:
        raise ValueError(f"window {window!r} never expires")
    when = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    kind = _KIND_WORDS[window.partition(":")[0]]
    return (
        f"window {window} of metric {definition.name} expired on {when} "
        f"({kind} windows are kept {duration_label(kept)})"
    )


def _pttls(client: redis.Redis, names: Iterable[str]) -> list[int]:
    """The PTTL of each key, read in one pipeline (-1: no expiry, -2: no key)."""
    with client.pipeline(transaction=False) as pipe:
        for key in names:
            pipe.pttl(key)
        return cast(list[int], pipe.execute())


def expire_untimed(
    client: redis.Redis, definition: MetricDefinition, policy: RetentionPolicy, shard: int = 0
) -> int:
    """Give the windows of one shard written before retention existed their expiry.

    The commit script sets a window's expiry when it first writes it; windows written
    by an earlier release have none. The worker calls this when it joins a version: every
    hour and day window listed in the windows set gets the expiry of ``policy`` (keys
    that already have one keep it), and the expired ones go at once, from the listing too.
    Idempotent; single-key commands only, so it runs unchanged on a Redis Cluster.

    Returns:
        The windows found expired (their keys deleted).
    """
    name, version = definition.name, definition.version
    members = cast(list[bytes | str], client.zrange(keys.windows_key(name, version, shard), 0, -1))
    listed = map(as_text, members)
    windows = [w for w in listed if w != schema.ALL and schema.WINDOW_PATTERN.fullmatch(w)]
    if not windows:
        return 0
    window_keys = [keys.window_keys(name, version, w, shard) for w in windows]
    ttls = _pttls(client, chain.from_iterable(window_keys))
    now_ms = time.time() * 1000
    expired: list[str] = []
    with client.pipeline(transaction=False) as pipe:
        width = len(window_keys[0])
        for i, (window, group) in enumerate(zip(windows, window_keys, strict=True)):
            at = round(1000 * cast(float, policy.expires_at(window)))
            for j, key in enumerate(group):
                if ttls[width * i + j] == -1:  # exists, without an expiry
                    pipe.pexpireat(key, at)  # in the past: deleted at once
            if at <= now_ms:
                expired.append(window)
            else:
                pipe.zadd(keys.expiries_key(name, version, shard), {window: at}, nx=True)
        if expired:
            pipe.zrem(keys.windows_key(name, version, shard), *expired)
        pipe.execute()
    return len(expired)

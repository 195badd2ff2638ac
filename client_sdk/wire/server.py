"""Fields of a definition that only the server acts on: stream shards and retention."""

from __future__ import annotations

from dataclasses import dataclass

from client_sdk.wire.fields import _json_integer

MAX_SHARDS = 64
"""Most stream shards of one metric version. One shard (a stream and its replay sets, one
hash slot) takes tens of thousands of reports per second; 64 spread a hot metric over
every node of any cluster this system would run on, while a read of its counts still sums
only 64 small hashes."""


def _check_shards(shards: object, problems: list[str]) -> int:
    """A spec's or definition's ``shards``: an int in [1, MAX_SHARDS]; absent (or null)
    means 1."""
    if shards is None:
        return 1
    count = _json_integer(shards)
    if count is None or not 1 <= count <= MAX_SHARDS:
        problems.append(f"shards must be an integer in [1, {MAX_SHARDS}], got {shards!r}")
        return 1
    return count


MIN_RETENTION_SECONDS = 1
"""Shortest retention a metric may ask for: one second past the window's end (tests use a
few seconds; an operator who wants a window gone at once should not count it at all)."""

MAX_RETENTION_SECONDS = 100 * 366 * 86_400
"""Longest retention: a century, which is "keep it" for any deployment; a larger number
is a typo (milliseconds for seconds)."""

RETENTION_KINDS = ("hour", "day")
"""The window kinds a retention names; the all-time window is kept while the version is
live."""


@dataclass(frozen=True)
class Retention:
    """A metric's own retention: seconds its hour and day windows are kept after they end.

    Either may be None: the deployment's default then applies
    (:class:`ldp_store.retention.RetentionPolicy`). Not a decoding parameter: a change
    keeps the version, and applies to windows first written afterwards.
    """

    hour: int | None = None
    day: int | None = None

    @staticmethod
    def problem(seconds: object) -> str:
        """What is wrong with a retention in seconds, or ``""`` if nothing."""
        value = _json_integer(seconds)
        if value is None or not MIN_RETENTION_SECONDS <= value <= MAX_RETENTION_SECONDS:
            return (
                f"must be a whole number of seconds in [{MIN_RETENTION_SECONDS}, "
                f"{MAX_RETENTION_SECONDS}], got {seconds!r}"
            )
        return ""

    def to_dict(self) -> dict[str, int | None]:
        """The JSON form, as in a spec: ``{"hour": 1209600, "day": null}``."""
        return {"hour": self.hour, "day": self.day}


def _check_retention(retention: object, problems: list[str]) -> Retention | None:
    """The :class:`Retention` of a spec's or definition's ``retention`` (None when absent)."""
    if retention is None:
        return None
    if not isinstance(retention, dict) or not set(retention) <= set(RETENTION_KINDS):
        problems.append(
            'retention must be {"hour": seconds, "day": seconds} (either may be left out '
            "or null: the deployment's default)"
        )
        return None
    values: dict[str, int | None] = {}
    for kind in RETENTION_KINDS:
        raw = retention.get(kind)
        if raw is None:
            values[kind] = None
            continue
        problem = Retention.problem(raw)
        if problem:
            problems.append(f"retention.{kind} {problem}")
            return None
        values[kind] = _json_integer(raw)
    if values["hour"] is None and values["day"] is None:
        return None
    return Retention(**values)

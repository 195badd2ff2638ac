"""The audit log: who did which admin action, on what, when, and how it ended.

One Redis stream, ``ldp:audit``, only ever appended to (``XADD``); its ids are the
times. Old entries go by the retention setting (``XADD … MINID``) and by a cap on the
number kept (``MAXLEN ~``), so a flood of refused requests cannot grow it without bound.
An entry holds an action, an actor (a token's name: ``admin-token`` or a prefix
``ldp_<id>``, never a secret), a project, a target (a metric name or a token prefix), an
outcome and the HTTP status: never anything of a device or of a request's origin.
Docs: docs/guides/teams.md.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ldp_store import keys
from ldp_store.connection import as_text

if TYPE_CHECKING:
    import redis

__all__ = [
    "AUDIT_STREAM",
    "MAX_ENTRIES",
    "RETENTION_DAYS",
    "AuditLog",
    "AuditRecord",
]

AUDIT_STREAM = f"{keys.PREFIX}:audit"

RETENTION_DAYS = 400
"""Days an entry is kept (``LDP_AUDIT_RETENTION_DAYS``): a year and a month, so a
yearly review finds last year's whole."""

MAX_ENTRIES = 100_000
"""Entries kept at most (``LDP_AUDIT_MAX_ENTRIES``), whatever their age: about 15 MB at
~150 bytes each. Refused attempts are logged too, and a flood of them would otherwise
take Redis's memory from the reports; at the cap the oldest entries go first."""

FIELDS = ("action", "actor", "project", "target", "outcome", "status")


@dataclass(frozen=True)
class AuditRecord:
    """One audit entry."""

    action: str
    """``metric.create``, ``metric.change``, ``metric.retire``, ``metric.unretire``,
    ``metric.delete``, ``metric.export``, ``token.create``, ``token.rotate``,
    ``token.revoke``, ``tokens.list``, ``audit.read``, ``session.signin`` (and failed
    sign-ins), ``session.signout``."""
    actor: str
    """Who: ``admin-token``, ``read-token``, a scoped token's prefix, ``sso:<e-mail>`` (a
    signed-in person), or ``anonymous``."""
    project: str
    target: str
    """What: a metric name, a token prefix, or empty."""
    outcome: str
    """``ok``, ``refused`` (401/403: not allowed) or ``failed`` (any other error)."""
    status: int
    time: str = ""
    """UTC, ISO 8601 (from the stream id; empty until appended)."""
    id: str = ""
    """The stream id (``<ms>-<seq>``): a cursor for older entries."""

    def to_dict(self) -> dict[str, Any]:
        """The entry as the API answers it."""
        return asdict(self)


_MAX_PART = 2**64 - 1


def _previous(entry_id: str) -> str | None:
    """The greatest stream id below ``entry_id`` (``<ms>-<seq>``), None below ``0-1``.

    Raises:
        ValueError: not a stream id.
    """
    ms_text, _, seq_text = entry_id.partition("-")
    ms, seq = int(ms_text), int(seq_text)
    if not (0 <= ms <= _MAX_PART and 0 <= seq <= _MAX_PART):
        raise ValueError(f"not a stream id: {entry_id!r}")
    if seq > 0:
        return f"{ms}-{seq - 1}"
    return None if ms == 0 else f"{ms - 1}-{_MAX_PART}"


class AuditLog:
    """Appends to and reads the audit stream.

    Args:
        client: the Redis client.
        retention_days: :data:`RETENTION_DAYS`.
        max_entries: :data:`MAX_ENTRIES`.
    """

    def __init__(
        self,
        client: redis.Redis,
        retention_days: int = RETENTION_DAYS,
        max_entries: int = MAX_ENTRIES,
    ) -> None:
        self.redis = client
        self.retention_days = retention_days
        self.max_entries = max_entries

    def append(self, entry: AuditRecord) -> str:
        """Append ``entry``; entries past the retention or the cap go. Returns its id."""
        fields = {name: str(getattr(entry, name)) for name in FIELDS}
        cap = self.max_entries
        added = as_text(self.redis.xadd(AUDIT_STREAM, fields, maxlen=cap, approximate=False))  # type: ignore[arg-type]
        # The ids are Redis's clock: the retention is counted from the new entry's.
        oldest_ms = int(added.split("-", 1)[0]) - self.retention_days * 86_400_000
        self.redis.xtrim(AUDIT_STREAM, minid=f"{oldest_ms}-0", approximate=False)
        return as_text(added)

    def read(self, limit: int, before: str | None = None) -> list[AuditRecord]:
        """The newest ``limit`` entries (older than the id ``before``), newest first.

        Raises:
            ValueError: ``before`` is not a stream id.
        """
        top = "+" if before is None else _previous(before)
        if top is None:
            return []
        rows = self.redis.xrevrange(AUDIT_STREAM, max=top, min="-", count=limit)
        out = []
        for raw_id, raw in rows or []:
            fields = {as_text(k): as_text(v) for k, v in (raw or {}).items()}
            entry_id = as_text(raw_id)
            ms = int(entry_id.split("-", 1)[0])
            stamp = datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")
            out.append(
                AuditRecord(
                    action=fields.get("action", ""),
                    actor=fields.get("actor", ""),
                    project=fields.get("project", ""),
                    target=fields.get("target", ""),
                    outcome=fields.get("outcome", ""),
                    status=int(fields.get("status", 0)),
                    time=stamp.replace("+00:00", "Z"),
                    id=entry_id,
                )
            )
        return out

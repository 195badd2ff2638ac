"""The durable store's view of its file: cached totals, the ledger, the opt-out, the secret.

:class:`StoreState` keeps in memory what ``report()`` checks on every call — the queue's
count and bytes, the ledger's recent charges (a :class:`~client_sdk.ledger.Tally`), the
opt-out flag — and reloads it whenever ``PRAGMA data_version`` shows that another
connection (another process sharing the directory) changed the file. It also reads and
changes the privacy state kept there: the opt-out, the device secret, the ledger's rows
and the metric definitions kept for offline starts. :class:`~client_sdk.store.Store`
(``reports.py``) adds the queue itself.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
from collections.abc import Callable
from datetime import date
from typing import Any

from client_sdk.errors import ReportingDisabledError, StoreError
from client_sdk.ledger import SECRET_BYTES, Tally, day_of, window_start
from client_sdk.store.sqlite import SQLiteFile, Transaction, spend

__all__ = ["StoreState"]

_RETIRED = "retired:"
"""Prefix of the ``meta`` keys naming metrics the collector retired."""
_RETIRED_END = "retired;"
"""The first key after every ``retired:…`` (``;`` follows ``:``)."""


class StoreState(SQLiteFile):
    """Cached totals and the privacy state of a store file (see the module docstring).

    Args:
        directory: where the database lives.
        wallclock: Unix time (ledger days, lease expiry).
    """

    persistent = True

    def __init__(self, directory: str | os.PathLike[str], wallclock: Callable[[], float]) -> None:
        self._wallclock = wallclock
        self._evicted = 0
        super().__init__(directory)

    def _reset(self) -> None:
        super()._reset()
        self._since = "9999"  # first day the tally holds
        self._tally = Tally()
        self._count = 0
        self._bytes = 0
        self._disabled = False
        self._secret: bytes | None = None

    def _refresh(self, conn: Transaction, since: str | None = None) -> None:
        """Reload the caches if another connection changed the database (in a transaction)."""
        (version,) = conn.execute("PRAGMA data_version").fetchone()
        if version == self._version and (since is None or since >= self._since):
            return
        start = window_start(day_of(self._wallclock())).isoformat()
        start = min(start, since or start)
        tally = Tally()
        for row in conn.execute(
            "SELECT metric, day, reports, epsilon FROM ledger WHERE day >= ? UNION ALL "
            "SELECT metric, day, count(*), total(epsilon) FROM reports WHERE day >= ? "
            "GROUP BY metric, day",
            (start, start),
        ):
            tally.add(*row)
        for metric, first, n, eps in conn.execute(  # older days: the lifetime sums only
            "SELECT metric, min(day), sum(reports), total(epsilon) FROM ledger WHERE day < ? "
            "GROUP BY metric",
            (start,),
        ):
            tally.add_past(metric, first, int(n), float(eps))
        tally.remember(self._tally.permanent)
        count, nbytes = conn.execute("SELECT count(*), total(length(data)) FROM reports").fetchone()
        disabled = conn.execute("SELECT 1 FROM meta WHERE key = 'disabled'").fetchone()
        self._tally, self._since = tally, start
        self._count, self._bytes = int(count), int(nbytes)
        self._disabled = disabled is not None
        self._secret = None
        self._version = version

    def __len__(self) -> int:
        """Reports queued (by every process using the directory). Never raises."""
        try:
            with self._locked():
                version = self._connection().execute("PRAGMA data_version").fetchone()[0]
                if version != self._version:
                    with self._transaction() as tx:
                        self._refresh(tx)
        except (StoreError, sqlite3.Error):
            pass
        return self._count

    def clear(self) -> int:
        """Delete every queued report (refunding those never sent); return how many."""
        with self._locked(), self._transaction() as conn:
            self._refresh(conn)
            n = self._wipe(conn)
            return n

    def _wipe(self, conn: Transaction) -> int:
        tried = conn.execute(
            "SELECT metric, day, count(*), total(epsilon) FROM reports "
            "WHERE tries > 0 AND metric != '' GROUP BY metric, day"
        ).fetchall()
        spend(conn, tried)  # the others never left the device: refunded
        n = conn.execute("DELETE FROM reports").rowcount
        self._version = None  # reload the caches next time
        return int(n)

    # -- the opt-out and the device secret ----------------------------------------------
    def is_disabled(self) -> bool:
        """Whether the user opted out. Never raises.

        Cached while False (every write checks it again in its transaction); re-read
        while True, so an ``enable()`` by another process takes effect here at once.
        """
        if self._version is None or self._disabled:
            len(self)  # reloads the caches if the database changed
        return self._disabled

    def disable(self) -> int:
        """Opt out, persistently: wipe the queue (refunding reports never sent) and the
        device secret, in one transaction. Returns the reports wiped."""
        with self._locked(), self._transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('disabled', 1)")
            conn.execute("DELETE FROM meta WHERE key = 'device_secret'")
            n = self._wipe(conn)
            conn.commit()
            self._secret = None
            try:  # old page images (the secret's) leave the WAL too
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            except sqlite3.Error:  # pragma: no cover - a reader in another process
                pass
            return n

    def enable(self) -> None:
        """Opt back in."""
        with self._locked(), self._transaction() as conn:
            conn.execute("DELETE FROM meta WHERE key = 'disabled'")
            self._version = None

    def device_secret(self) -> bytes:
        """The device secret of memoized responses: 32 CSPRNG bytes made on first use.

        Raises:
            ReportingDisabledError: after an opt-out (a new secret is made after ``enable()``).
            StoreError: the database failed.
        """
        with self._locked():
            if self._secret is not None:  # unchanged since read: no transaction needed
                try:
                    version = self._connection().execute("PRAGMA data_version").fetchone()[0]
                except sqlite3.Error as exc:
                    raise self._failed(exc) from None
                if version == self._version:
                    return self._secret
            return self._read_secret()

    def _read_secret(self) -> bytes:
        with self._transaction() as conn:
            self._refresh(conn)
            if self._disabled:
                raise ReportingDisabledError()
            if self._secret is None:
                row = conn.execute("SELECT value FROM meta WHERE key = 'device_secret'").fetchone()
                if row is None:
                    secret = secrets.token_bytes(SECRET_BYTES)
                    conn.execute("INSERT INTO meta VALUES ('device_secret', ?)", (secret,))
                else:
                    secret = bytes(row[0])
                conn.commit()
                self._secret = secret
            return self._secret

    # -- retired metrics ------------------------------------------------------------------
    def retire_metric(self, name: str) -> int:
        """Remember that the collector retired ``name`` (across restarts and processes) and
        delete its queued reports, refunding those never sent; returns how many."""
        with self._locked(), self._transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (_RETIRED + name, 1))
            tried = conn.execute(
                "SELECT metric, day, count(*), total(epsilon) FROM reports "
                "WHERE tries > 0 AND metric = ? GROUP BY metric, day",
                (name,),
            ).fetchall()
            spend(conn, tried)  # the others never left the device: refunded
            n = conn.execute("DELETE FROM reports WHERE metric = ?", (name,)).rowcount
            self._version = None  # reload the caches next time
            return int(n)

    def unretire_metric(self, name: str) -> None:
        """Forget :meth:`retire_metric`: the collector takes ``name``'s reports again."""
        with self._locked(), self._transaction() as conn:
            conn.execute("DELETE FROM meta WHERE key = ?", (_RETIRED + name,))

    def retired_metrics(self) -> set[str]:
        """The metrics :meth:`retire_metric` recorded."""
        with self._locked(), self._transaction() as conn:
            rows = conn.execute(
                "SELECT key FROM meta WHERE key >= ? AND key < ?", (_RETIRED, _RETIRED_END)
            ).fetchall()
        return {str(key)[len(_RETIRED) :] for (key,) in rows}

    # -- the ledger and the definitions kept for offline starts -------------------------
    def ledger(self, since: str) -> tuple[list[tuple[str, str, int, float]], dict[str, Any]]:
        """(metric, day, reports, ε) from day ``since`` (queued and sent reports), and the
        lifetime (reports, ε, first day) per metric."""
        charged = (
            "SELECT metric, day, reports AS n, epsilon AS e FROM ledger UNION ALL "
            "SELECT metric, day, count(*), total(epsilon) FROM reports WHERE metric != '' "
            "GROUP BY metric, day"
        )
        with self._locked(), self._transaction() as conn:
            rows = conn.execute(
                f"SELECT metric, day, sum(n), sum(e) FROM ({charged}) WHERE day >= ? "
                "GROUP BY metric, day",
                (since,),
            ).fetchall()
            lifetime = {
                m: (int(n), float(e), first)
                for m, n, e, first in conn.execute(
                    f"SELECT metric, sum(n), sum(e), min(day) FROM ({charged}) GROUP BY metric"
                )
            }
        return [(m, d, int(n), float(e)) for m, d, n, e in rows], lifetime

    def save_definition(self, name: str, text: str) -> None:
        """Keep the JSON of a metric's definition (so an app started offline can report)."""
        with self._locked(), self._transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO definitions VALUES (?, ?)", (name, text))

    def load_definition(self, name: str) -> str | None:
        """The JSON kept by :meth:`save_definition`, or None."""
        with self._locked(), self._transaction() as conn:
            row = conn.execute("SELECT json FROM definitions WHERE name = ?", (name,)).fetchone()
        return None if row is None else str(row[0])

    def today(self) -> date:
        """The current UTC day by this store's clock."""
        return day_of(self._wallclock())

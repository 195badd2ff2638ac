"""The durable queue: reports put, claimed (leased) for upload and acked, in SQLite.

:class:`Store` is the :class:`~client_sdk.queue.ReportQueue` of a client with a
``storage_dir``. It adds the ``reports`` table's side to :class:`~.state.StoreState`
(cached totals, the ledger, the opt-out, the device secret): :meth:`Store.put` commits a
report together with its ledger charge (one row holds both: a report is queued if and only
if it was charged) and evicts the oldest beyond the quotas; :meth:`Store.peek` claims the
batch to send, commits the claim and fsyncs the WAL before returning it (so nothing is sent
that a power cut could un-write); :meth:`Store.ack` deletes what the collector took or
refused for good, turning the charges of reports ever sent into spent ones.

Several processes may share a directory. The uploader *leases* the batch it sends (owner,
expiry), so two processes do not send the same reports; a lease of a process that died is
released at once (POSIX), others expire after :data:`LEASE_SECONDS`. Should a report still
be sent twice (a lease expired mid-upload, a response lost), the collector discards the
replay by its id. The package docstring (``client_sdk/store/__init__.py``) explains the
durability all this gives.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from client_sdk.errors import QueueFullError, ReportingDisabledError
from client_sdk.ledger import Charge
from client_sdk.queue import DEFAULT_MAX_BYTES, DEFAULT_MAX_COUNT, Entry, Quotas
from client_sdk.store.sqlite import Transaction, alive, chunks, marks, spend
from client_sdk.store.state import StoreState

__all__ = ["LEASE_SECONDS", "Store"]

LEASE_SECONDS = 300.0
"""How long a batch claimed for upload is reserved for its process: longer than any
upload attempt (a few timeouts of 10 s); a crashed process's lease is released at once on
POSIX, so this only matters for a hung process."""

_INSERT = "INSERT INTO reports (data, metric, day, epsilon) VALUES (?, ?, ?, ?)"
_ROW = "SELECT id, length(data), metric, day, epsilon, tries FROM reports"


class Store(StoreState, Quotas):
    """A :class:`~client_sdk.queue.ReportQueue` on SQLite, with the privacy ledger.

    Args:
        directory: where the database lives (created, mode 0700, if missing).
        max_count: most reports queued; beyond it the oldest are dropped.
        max_bytes: most bytes of reports queued, likewise.
        wallclock: Unix time (ledger days, lease expiry); injected by tests.

    No I/O happens here: the database is opened on first use, so a broken disk never
    raises into the app (calls raise :class:`~client_sdk.errors.StoreError` instead).
    """

    durable = True

    def __init__(
        self,
        directory: str | os.PathLike[str],
        max_count: int = DEFAULT_MAX_COUNT,
        max_bytes: int = DEFAULT_MAX_BYTES,
        wallclock: Callable[[], float] = time.time,
    ) -> None:
        Quotas.__init__(self, max_count, max_bytes)
        StoreState.__init__(self, directory, wallclock)

    # -- the app's side -----------------------------------------------------------------
    def put(self, item: bytes, charge: Charge | None = None) -> int:
        """Queue ``item`` and record its ``charge``, atomically; evict the oldest if full.

        Returns:
            The number of reports queued.

        Raises:
            QueueFullError: the item alone exceeds the byte quota.
            ReportingDisabledError: the user opted out.
            BudgetExhaustedError: the charge would exceed the metric's budget.
            StoreError: the database failed.
        """
        size = len(item)
        if size > self.max_bytes:
            raise QueueFullError(f"a {size}-byte item exceeds the queue's {self.max_bytes} bytes")
        metric, day, eps = (
            ("", "", 0.0) if charge is None else (charge.metric, charge.day, charge.epsilon)
        )
        with self._locked(), self._transaction() as conn:
            self._refresh(conn, None if charge is None else charge.since)
            if self._disabled:
                raise ReportingDisabledError()
            if charge is not None:
                self._tally.check(charge)
            conn.execute(_INSERT, (item, metric, day, eps))
            evicted, count, nbytes = self._oldest_over(conn, self._count + 1, self._bytes + size)
            refunds = self._retire(conn, evicted) if evicted else []
            conn.commit()
            # Committed: now the caches may change.
            self._count, self._bytes = count, nbytes
            if charge is not None:
                self._tally.add(metric, day, 1, eps)
            if evicted:
                self._evicted += len(evicted)
                for row in refunds:
                    self._tally.add(row[2], row[3], -1, -row[4])
            self._committed(conn)
            return count

    def _oldest_over(
        self, conn: Transaction, count: int, nbytes: int
    ) -> tuple[list[tuple[Any, ...]], int, int]:
        """The oldest rows to evict so that ``count`` reports of ``nbytes`` bytes fit the
        quotas (none when they fit), and the count and bytes left."""
        evicted: list[tuple[Any, ...]] = []
        if count <= self.max_count and nbytes <= self.max_bytes:
            return evicted, count, nbytes
        cursor = conn.execute(_ROW + " ORDER BY id")
        for row in cursor:
            evicted.append(row)
            count, nbytes = count - 1, nbytes - row[1]
            if count <= self.max_count and nbytes <= self.max_bytes:
                break
        cursor.close()
        return evicted, count, nbytes

    def _retire(self, conn: Transaction, rows: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """Delete rows; charges of rows ever sent become spent, the others are returned
        (to refund: they never left the device)."""
        spent: dict[tuple[str, str], list[Any]] = {}
        refunds = []
        for row in rows:
            _, _, metric, day, eps, tries = row
            if not metric:
                continue
            if tries:
                counts = spent.setdefault((metric, day), [0, 0.0])
                counts[0] += 1
                counts[1] += eps
            else:
                refunds.append(row)
        spend(conn, [(m, d, n, e) for (m, d), (n, e) in spent.items()])
        for chunk in chunks([r[0] for r in rows]):
            conn.execute(f"DELETE FROM reports WHERE id IN ({marks(chunk)})", chunk)
        return refunds

    # -- the uploader's side ----------------------------------------------------------
    def peek(self, max_count: int, max_bytes: int) -> list[Entry]:
        """Claim (lease) and return the oldest reports not leased by another process.

        The claim is committed, then the WAL fsynced, before the batch is returned: every
        earlier commit is then durable, so nothing is sent that a power cut could un-write.
        The WAL is checkpointed here first when due (the upload thread, not the app's).
        """
        self.checkpoint()
        batch = self._claim(max_count, max_bytes)
        if batch:
            self._sync()
        return batch

    def _claim(self, max_count: int, max_bytes: int) -> list[Entry]:
        with self._locked(), self._transaction() as conn:
            self._refresh(conn)
            if not self._count or self._disabled:
                return []
            now = self._wallclock()
            self._release_dead(conn, now)
            batch: list[Entry] = []
            total = -1  # n items joined by n - 1 commas
            for rid, data in conn.execute(
                "SELECT id, data FROM reports WHERE owner = ? OR lease_until <= ? "
                "OR lease_until > ? ORDER BY id LIMIT ?",
                (self._owner, now, now + LEASE_SECONDS, max_count),
            ):
                total += len(data) + 1
                if batch and total > max_bytes:
                    break
                batch.append(Entry(rid, data))
            for chunk in chunks([e.key for e in batch]):
                conn.execute(
                    "UPDATE reports SET owner = ?, lease_until = ?, tries = tries + 1 "
                    f"WHERE id IN ({marks(chunk)})",
                    (self._owner, now + LEASE_SECONDS, *chunk),
                )
            conn.commit()
            self._committed(conn)
            return batch

    def _release_dead(self, conn: Transaction, now: float) -> None:
        """Release the leases of processes that no longer exist (POSIX only)."""
        if os.name != "posix":
            return
        for (owner,) in conn.execute(
            "SELECT DISTINCT owner FROM reports WHERE owner IS NOT NULL AND owner != ? "
            "AND lease_until > ? AND lease_until <= ?",
            (self._owner, now, now + LEASE_SECONDS),
        ).fetchall():
            pid = str(owner).split(":")[0]
            if pid.isdigit() and int(pid) != os.getpid() and not alive(int(pid)):
                conn.execute(
                    "UPDATE reports SET owner = NULL, lease_until = 0 WHERE owner = ?", (owner,)
                )

    def ack(self, keys: Iterable[int]) -> None:
        """Delete reports this process sent (charges become spent); others are ignored."""
        ids = list(keys)
        if not ids:
            return
        with self._locked(), self._transaction() as conn:
            self._refresh(conn)
            rows = []
            for chunk in chunks(ids):
                rows += conn.execute(
                    _ROW + f" WHERE owner = ? AND id IN ({marks(chunk)})", (self._owner, *chunk)
                ).fetchall()
            refunds = self._retire(conn, rows)  # every row was tried: nothing to refund
            conn.commit()
            self._count -= len(rows)
            self._bytes -= sum(row[1] for row in rows)
            for row in refunds:  # pragma: no cover - a claimed row has tries >= 1
                self._tally.add(row[2], row[3], -1, -row[4])
            self._committed(conn)

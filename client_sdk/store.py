"""The durable store: queued reports, the privacy ledger and the device secret, in SQLite.

One file, ``ldp-telemetry.sqlite3``, in a directory the app chooses
(``Client(url, storage_dir=...)``); standard library ``sqlite3`` only.

Durability. Every report is committed *before* ``report()`` returns True, together with
its ledger charge (one transaction: a report is queued if and only if it was charged).
The database runs in WAL mode with ``synchronous=NORMAL``: a commit is a write to the
WAL file without an fsync, so it survives the app crashing or being killed (the bytes
are in the operating system's cache), and costs tens of µs instead of milliseconds. A
power cut may lose the last commits — but never one that was sent: before each upload the
worker claims its batch, commits the claim, and fsyncs the WAL file (what
``synchronous=FULL`` does at a commit, done here without holding the store's lock, so
``report()`` never waits for a disk flush), which makes the whole WAL up to the claim
durable: every report, and every ledger charge, is on stable storage before it leaves
the device. A report is deleted only after the collector took it (2xx) or rejected it as
invalid (the worker's ``classify``).

Several processes may share a directory: SQLite's locks serialise writers, and each
process keeps its caches coherent with ``PRAGMA data_version``. The worker *leases* the
batch it sends (owner, expiry), so two processes do not send the same reports; a lease
of a process that died is released at once (POSIX), others expire after
:data:`LEASE_SECONDS`. Should a report still be sent twice (a lease expired mid-upload,
a response lost), the collector discards the replay by its id.

A forked child never touches its parent's connection: it opens its own. Every SQLite
failure (a locked, full, read-only or corrupt database) surfaces as :class:`StoreError`,
which the client turns into a dropped report (``storage_error``), never an exception.
"""

from __future__ import annotations

import logging
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import date
from pathlib import Path
from typing import Any

from client_sdk.ledger import (
    SECRET_BYTES,
    Charge,
    ReportingDisabled,
    Tally,
    day_of,
    window_start,
)
from client_sdk.queue import DEFAULT_MAX_BYTES, DEFAULT_MAX_COUNT, Entry, QueueFull, StoreError

__all__ = [
    "BUSY_TIMEOUT",
    "FILENAME",
    "LEASE_SECONDS",
    "SCHEMA_VERSION",
    "Store",
    "StoreError",
]

logger = logging.getLogger("client_sdk")

FILENAME = "ldp-telemetry.sqlite3"

SCHEMA_VERSION = 1
"""``PRAGMA user_version`` of the file; a newer file (a later SDK) is not written to."""

BUSY_TIMEOUT = 1.0
"""Seconds a call waits for another process's write lock. Writes hold it for well under
a millisecond (a checkpoint, every :data:`CHECKPOINT_EVERY` commits: a few ms on slow
flash); a store locked for a second is stuck, and ``report()`` returns False rather than
block the app longer."""

LEASE_SECONDS = 300.0
"""How long a batch claimed for upload is reserved for its process: longer than any
upload attempt (a few timeouts of 10 s); a crashed process's lease is released at once on
POSIX, so this only matters for a hung process."""

REOPEN_DELAY = 5.0
"""Seconds between attempts to open a store that failed: a broken disk costs one attempt
per 5 s, not one per report."""

CHECKPOINT_EVERY = 1000
"""Commits (about 4 MB of WAL at one 4 KiB page each) between checkpoints, made by this
connection instead of SQLite's automatic ones: a checkpoint fsyncs twice, so it is made
rarely, and by whichever call reaches the count."""

WAL_SIZE_LIMIT = 4 * 1024 * 1024
"""Bytes the WAL file is truncated to after a checkpoint (``journal_size_limit``)."""

ID_CHUNK = 500
"""Ids per ``IN (...)`` list: below the 999 host parameters of SQLite before 3.32."""

_SCHEMA = f"""
BEGIN IMMEDIATE;
CREATE TABLE IF NOT EXISTS reports (
    id INTEGER PRIMARY KEY,
    data BLOB NOT NULL,
    metric TEXT NOT NULL,
    day TEXT NOT NULL,
    epsilon REAL NOT NULL,
    tries INTEGER NOT NULL DEFAULT 0,
    owner TEXT,
    lease_until REAL NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS ledger (
    metric TEXT NOT NULL,
    day TEXT NOT NULL,
    reports INTEGER NOT NULL,
    epsilon REAL NOT NULL,
    PRIMARY KEY (metric, day)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS definitions (name TEXT PRIMARY KEY, json TEXT NOT NULL) WITHOUT ROWID;
PRAGMA user_version = {SCHEMA_VERSION};
COMMIT;
"""

_INSERT = "INSERT INTO reports (data, metric, day, epsilon) VALUES (?, ?, ?, ?)"
_ROW = "SELECT id, length(data), metric, day, epsilon, tries FROM reports"

_abandoned: list[sqlite3.Connection] = []
"""Connections inherited across fork: never used, closed or garbage-collected in the child
(SQLite forbids carrying a connection across fork)."""


class Store:
    """A :class:`~client_sdk.queue.ReportQueue` on SQLite, with the privacy ledger.

    Args:
        directory: where the database lives (created, mode 0700, if missing).
        max_count: most reports queued; beyond it the oldest are dropped.
        max_bytes: most bytes of reports queued, likewise.
        wallclock: Unix time (ledger days, lease expiry); injected by tests.

    No I/O happens here: the database is opened on first use, so a broken disk never
    raises into the app (calls raise :class:`StoreError` instead).
    """

    durable = True
    persistent = True

    def __init__(
        self,
        directory: str | os.PathLike[str],
        max_count: int = DEFAULT_MAX_COUNT,
        max_bytes: int = DEFAULT_MAX_BYTES,
        wallclock: Callable[[], float] = time.time,
    ) -> None:
        for name, value in (("max_count", max_count), ("max_bytes", max_bytes)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.directory = Path(directory)
        self.path = self.directory / FILENAME
        self.max_count = max_count
        self.max_bytes = max_bytes
        self._wallclock = wallclock
        self._closed = False
        self._evicted = 0
        self._reset()

    def _reset(self) -> None:
        """Process-local state: a fresh lock, no connection, nothing cached."""
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._retry_open_at = 0.0
        self._owner = f"{os.getpid()}:{secrets.token_hex(4)}"
        self._version: int | None = None  # PRAGMA data_version the caches reflect
        self._since = "9999"  # first day the tally holds
        self._tally = Tally()
        self._count = 0
        self._bytes = 0
        self._disabled = False
        self._secret: bytes | None = None
        self._commits = 0
        self._dir_synced = False

    # -- connection -------------------------------------------------------------------
    def _connection(self) -> sqlite3.Connection:
        """The open connection (opened on first use). Call with the lock held."""
        if self._conn is not None:
            return self._conn
        if self._closed:
            raise StoreError("the store is closed")
        if time.monotonic() < self._retry_open_at:
            raise StoreError("the store could not be opened a moment ago")
        try:
            self._conn = self._open()
        except (sqlite3.Error, OSError, StoreError) as exc:
            self._retry_open_at = time.monotonic() + REOPEN_DELAY
            logger.warning("cannot open the report store (%s)", type(exc).__name__)
            raise StoreError(f"cannot open {self.path}: {exc}") from None
        return self._conn

    def _open(self) -> sqlite3.Connection:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        new = not self.path.exists()
        conn = sqlite3.connect(
            self.path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False
        )
        try:
            if new:
                os.chmod(self.path, 0o600)  # WAL and shm files inherit these permissions
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA wal_autocheckpoint = 0")  # the worker checkpoints
            conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
            conn.execute("PRAGMA secure_delete = ON")  # a wiped secret is overwritten
            (found,) = conn.execute("PRAGMA user_version").fetchone()
            if found > SCHEMA_VERSION:
                raise StoreError(f"{self.path} has schema {found}, newer than this SDK's")
            if found < SCHEMA_VERSION:
                conn.executescript(_SCHEMA)
        except BaseException:
            conn.close()
            raise
        return conn

    def _failed(self, exc: sqlite3.Error) -> StoreError:
        """Turn a SQLite error into a StoreError; drop the connection unless merely busy."""
        if not isinstance(exc, sqlite3.OperationalError) or "locked" not in str(exc):
            conn, self._conn, self._version = self._conn, None, None
            if conn is not None:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
            self._retry_open_at = time.monotonic() + REOPEN_DELAY
        logger.warning("report store error (%s)", type(exc).__name__)
        return StoreError(str(exc))

    def _transaction(self) -> _Tx:
        return _Tx(self, self._connection())

    def _refresh(self, conn: _Tx, since: str | None = None) -> None:
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
        count, nbytes = conn.execute("SELECT count(*), total(length(data)) FROM reports").fetchone()
        disabled = conn.execute("SELECT 1 FROM meta WHERE key = 'disabled'").fetchone()
        self._tally, self._since = tally, start
        self._count, self._bytes = int(count), int(nbytes)
        self._disabled = disabled is not None
        self._secret = None
        self._version = version

    # -- the queue --------------------------------------------------------------------
    def put(self, item: bytes, charge: Charge | None = None) -> int:
        """Queue ``item`` and record its ``charge``, atomically; evict the oldest if full.

        Returns:
            The number of reports queued.

        Raises:
            QueueFull: the item alone exceeds the byte quota.
            ReportingDisabled: the user opted out.
            BudgetExhausted: the charge would exceed the metric's budget.
            StoreError: the database failed.
        """
        size = len(item)
        if size > self.max_bytes:
            raise QueueFull(f"a {size}-byte item exceeds the queue's {self.max_bytes} bytes")
        metric, day, eps = (
            ("", "", 0.0) if charge is None else (charge.metric, charge.day, charge.epsilon)
        )
        with self._lock, self._transaction() as conn:
            self._refresh(conn, None if charge is None else charge.since)
            if self._disabled:
                raise ReportingDisabled()
            if charge is not None:
                self._tally.check(charge)
            conn.execute(_INSERT, (item, metric, day, eps))
            count, nbytes = self._count + 1, self._bytes + size
            evicted: list[tuple[Any, ...]] = []
            refunds: list[tuple[Any, ...]] = []
            if count > self.max_count or nbytes > self.max_bytes:
                cursor = conn.execute(_ROW + " ORDER BY id")
                for row in cursor:
                    evicted.append(row)
                    count, nbytes = count - 1, nbytes - row[1]
                    if count <= self.max_count and nbytes <= self.max_bytes:
                        break
                cursor.close()
                refunds = self._retire(conn, evicted)
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

    def _retire(self, conn: _Tx, rows: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
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
        _spend(conn, [(m, d, n, e) for (m, d), (n, e) in spent.items()])
        for chunk in _chunks([r[0] for r in rows]):
            conn.execute(f"DELETE FROM reports WHERE id IN ({_marks(chunk)})", chunk)
        return refunds

    def peek(self, max_count: int, max_bytes: int) -> list[Entry]:
        """Claim (lease) and return the oldest reports not leased by another process.

        The claim is committed, then the WAL fsynced, before the batch is returned: every
        earlier commit is then durable, so nothing is sent that a power cut could un-write.
        """
        batch = self._claim(max_count, max_bytes)
        if batch:
            self._sync()
        return batch

    def _claim(self, max_count: int, max_bytes: int) -> list[Entry]:
        with self._lock, self._transaction() as conn:
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
            for chunk in _chunks([e.key for e in batch]):
                conn.execute(
                    "UPDATE reports SET owner = ?, lease_until = ?, tries = tries + 1 "
                    f"WHERE id IN ({_marks(chunk)})",
                    (self._owner, now + LEASE_SECONDS, *chunk),
                )
            conn.commit()
            self._committed(conn)
            return batch

    def _sync(self) -> None:
        """fsync the WAL (else the database file): everything committed is then durable.

        Raises:
            StoreError: the flush failed (the batch is not sent).
        """
        try:
            for name in (f"{self.path}-wal", str(self.path)):
                try:
                    fd = os.open(name, os.O_RDONLY)
                except FileNotFoundError:  # no WAL: everything is in the database file
                    continue
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
                break
            if not self._dir_synced and os.name == "posix":  # the files' directory entries
                fd = os.open(self.directory, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
                self._dir_synced = True
        except OSError as exc:
            logger.warning("cannot flush the report store to disk (%s)", type(exc).__name__)
            raise StoreError(f"fsync failed: {exc}") from None

    def _release_dead(self, conn: _Tx, now: float) -> None:
        """Release the leases of processes that no longer exist (POSIX only)."""
        if os.name != "posix":
            return
        for (owner,) in conn.execute(
            "SELECT DISTINCT owner FROM reports WHERE owner IS NOT NULL AND owner != ? "
            "AND lease_until > ? AND lease_until <= ?",
            (self._owner, now, now + LEASE_SECONDS),
        ).fetchall():
            pid = str(owner).split(":")[0]
            if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
                conn.execute(
                    "UPDATE reports SET owner = NULL, lease_until = 0 WHERE owner = ?", (owner,)
                )

    def ack(self, keys: Iterable[int]) -> None:
        """Delete reports this process sent (charges become spent); others are ignored."""
        ids = list(keys)
        if not ids:
            return
        with self._lock, self._transaction() as conn:
            self._refresh(conn)
            rows = []
            for chunk in _chunks(ids):
                rows += conn.execute(
                    _ROW + f" WHERE owner = ? AND id IN ({_marks(chunk)})", (self._owner, *chunk)
                ).fetchall()
            refunds = self._retire(conn, rows)  # every row was tried: nothing to refund
            conn.commit()
            self._count -= len(rows)
            self._bytes -= sum(row[1] for row in rows)
            for row in refunds:  # pragma: no cover - a claimed row has tries >= 1
                self._tally.add(row[2], row[3], -1, -row[4])
            self._committed(conn)

    def _committed(self, conn: _Tx) -> None:
        """Count a commit; checkpoint every :data:`CHECKPOINT_EVERY` of them."""
        self._commits += 1
        if self._commits < CHECKPOINT_EVERY:
            return
        self._commits = 0
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error as exc:  # another process is checkpointing: fine
            logger.debug("checkpoint skipped (%s)", type(exc).__name__)

    def clear(self) -> int:
        """Delete every queued report (refunding those never sent); return how many."""
        with self._lock, self._transaction() as conn:
            self._refresh(conn)
            n = self._wipe(conn)
            return n

    def _wipe(self, conn: _Tx) -> int:
        tried = conn.execute(
            "SELECT metric, day, count(*), total(epsilon) FROM reports "
            "WHERE tries > 0 AND metric != '' GROUP BY metric, day"
        ).fetchall()
        _spend(conn, tried)  # the others never left the device: refunded
        n = conn.execute("DELETE FROM reports").rowcount
        self._version = None  # reload the caches next time
        return int(n)

    def __len__(self) -> int:
        """Reports queued (by every process using the directory). Never raises."""
        with self._lock:
            try:
                version = self._connection().execute("PRAGMA data_version").fetchone()[0]
                if version != self._version:
                    with self._transaction() as tx:
                        self._refresh(tx)
            except (StoreError, sqlite3.Error):
                pass
            return self._count

    @property
    def nbytes(self) -> int:  # noqa: D102
        return self._bytes

    @property
    def evicted(self) -> int:  # noqa: D102
        return self._evicted

    # -- the ledger and the opt-out -----------------------------------------------------
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
        with self._lock, self._transaction() as conn:
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
        with self._lock, self._transaction() as conn:
            conn.execute("DELETE FROM meta WHERE key = 'disabled'")
            self._version = None

    def device_secret(self) -> bytes:
        """The device secret of memoized responses: 32 CSPRNG bytes made on first use.

        Raises:
            ReportingDisabled: after an opt-out (a new secret is made after ``enable()``).
            StoreError: the database failed.
        """
        with self._lock:
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
                raise ReportingDisabled()
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

    def ledger(self, since: str) -> tuple[list[tuple[str, str, int, float]], dict[str, Any]]:
        """(metric, day, reports, ε) from day ``since`` (queued and sent reports), and the
        lifetime (reports, ε, first day) per metric."""
        charged = (
            "SELECT metric, day, reports AS n, epsilon AS e FROM ledger UNION ALL "
            "SELECT metric, day, count(*), total(epsilon) FROM reports WHERE metric != '' "
            "GROUP BY metric, day"
        )
        with self._lock, self._transaction() as conn:
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

    # -- definitions kept for offline starts --------------------------------------------
    def save_definition(self, name: str, text: str) -> None:
        """Keep the JSON of a metric's definition (so an app started offline can report)."""
        with self._lock, self._transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO definitions VALUES (?, ?)", (name, text))

    def load_definition(self, name: str) -> str | None:
        """The JSON kept by :meth:`save_definition`, or None."""
        with self._lock, self._transaction() as conn:
            row = conn.execute("SELECT json FROM definitions WHERE name = ?", (name,)).fetchone()
        return None if row is None else str(row[0])

    # -- lifecycle --------------------------------------------------------------------
    def close(self) -> None:
        """Release this process's leases and close the connection. Never raises."""
        with self._lock:
            conn, self._conn = self._conn, None
            self._closed = True
            if conn is None:
                return
            try:
                conn.execute(
                    "UPDATE reports SET owner = NULL, lease_until = 0 WHERE owner = ?",
                    (self._owner,),
                )
                conn.close()
            except sqlite3.Error as exc:
                logger.debug("closing the store: %s", type(exc).__name__)

    def after_fork_in_child(self) -> None:
        """Leave the parent's connection alone (never close it here); open our own."""
        if self._conn is not None:
            _abandoned.append(self._conn)
        self._reset()

    def today(self) -> date:
        """The current UTC day by this store's clock."""
        return day_of(self._wallclock())


class _Tx:
    """One write transaction: ``BEGIN IMMEDIATE`` … ``COMMIT``, ``ROLLBACK`` on exceptions.

    SQLite errors become :class:`StoreError`. ``commit()`` may be called early, so the
    caller changes its caches only after a commit that succeeded.
    """

    def __init__(self, store: Store, conn: sqlite3.Connection) -> None:
        self.store = store
        self.conn = conn
        self.open = False
        self.execute = conn.execute
        self.executemany = conn.executemany

    def __enter__(self) -> _Tx:
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise self.store._failed(exc) from None
        self.open = True
        return self

    def commit(self) -> None:
        """Commit now (a no-op once committed)."""
        if not self.open:
            return
        self.open = False
        try:
            self.conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback()
            raise self.store._failed(exc) from None

    def _rollback(self) -> None:
        try:
            self.conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        if exc is None:
            self.commit()
            return
        if self.open:
            self.open = False
            self._rollback()
        if isinstance(exc, sqlite3.Error):
            raise self.store._failed(exc) from None


def _spend(conn: _Tx, rows: Sequence[tuple[str, str, int, float]]) -> None:
    """Add (metric, day, reports, ε) to the ledger table (no UPSERT: SQLite < 3.24 too)."""
    conn.executemany(
        "INSERT OR IGNORE INTO ledger (metric, day, reports, epsilon) VALUES (?, ?, 0, 0.0)",
        [(m, d) for m, d, _, _ in rows],
    )
    conn.executemany(
        "UPDATE ledger SET reports = reports + ?, epsilon = epsilon + ? "
        "WHERE metric = ? AND day = ?",
        [(n, e, m, d) for m, d, n, e in rows],
    )


def _chunks(ids: Sequence[int]) -> Iterator[list[int]]:
    for start in range(0, len(ids), ID_CHUNK):
        yield list(ids[start : start + ID_CHUNK])


def _marks(chunk: Sequence[int]) -> str:
    return ",".join("?" * len(chunk))


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (signal 0 checks without signalling)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. EPERM: it exists, under another user
        return True
    return True

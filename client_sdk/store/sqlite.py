"""The SQLite file under the durable store: opening it, transactions, flushes, fork safety.

:class:`SQLiteFile` owns the connection of one process to ``ldp-telemetry.sqlite3``
(opened on first use, reopened at most every :data:`REOPEN_DELAY` seconds after a
failure, closed before a fork so that no SQLite state crosses it), turns every SQLite
failure into :class:`~client_sdk.errors.StoreError`, bounds what one thread's calls wait
in all (:meth:`SQLiteFile.limit_waits`), counts commits so that the uploader
checkpoints the WAL (off the ``report()`` path), and fsyncs the WAL before an upload.
:class:`~client_sdk.store.state.StoreState` and :class:`~client_sdk.store.Store` build the
ledger and the queue on it; the package docstring (``client_sdk/store/__init__.py``)
explains the durability this gives.
"""

from __future__ import annotations

import logging
import math
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from client_sdk.errors import StoreError

__all__ = [
    "BUSY_TIMEOUT",
    "CHECKPOINT_BACKSTOP",
    "CHECKPOINT_EVERY",
    "FILENAME",
    "FORK_WAIT",
    "ID_CHUNK",
    "PAGE_SIZE",
    "REOPEN_DELAY",
    "SCHEMA_VERSION",
    "WAL_SIZE_LIMIT",
    "SQLiteFile",
    "Transaction",
]

logger = logging.getLogger("client_sdk")

FILENAME = "ldp-telemetry.sqlite3"

SCHEMA_VERSION = 1
"""``PRAGMA user_version`` of the file; a newer file (a later SDK) is not written to."""

BUSY_TIMEOUT = 1.0
"""Seconds a call waits for another process's write lock, and what all the store calls of
one ``report()`` wait together (:meth:`SQLiteFile.limit_waits`). Writes hold the lock for
well under a millisecond (checkpoints, made every :data:`CHECKPOINT_EVERY` commits, do not
take it); a store locked for a second is stuck, and ``report()`` returns False rather
than block the app longer."""

BUSY_SLACK = 0.05
"""Seconds a call may wait past its thread's limit rather than change the connection's
busy timeout (a ``PRAGMA`` each time) for every call: one step of SQLite's busy handler."""

FORK_WAIT = 5.0
"""Seconds ``os.fork()`` waits for this process's threads to leave the store (a write
waits at most :data:`BUSY_TIMEOUT`; a checkpoint's fsyncs take milliseconds). Past it the
child cannot use the store (its calls raise ``StoreError``) rather than risk a SQLite lock
inherited held."""

OPEN_TIMEOUT = 5.0
"""Seconds the first use of a store waits while other processes create or convert the same
file (each attempt waits BUSY_TIMEOUT for the lock). Once per process."""

REOPEN_DELAY = 5.0
"""Seconds between attempts to open a store that failed: a broken disk costs one attempt
per 5 s, not one per report."""

CHECKPOINT_EVERY = 1000
"""Commits (about 1 MB of WAL at 1 KiB pages, 4 MB in a file an earlier SDK made with
4 KiB pages) between checkpoints, made by the uploader on a connection of its own
(:meth:`SQLiteFile.checkpoint`) instead of SQLite's automatic ones: a checkpoint fsyncs
twice (10–40 ms on the benchmark machine), which must not land inside ``report()``."""

CHECKPOINT_BACKSTOP = 10 * CHECKPOINT_EVERY
"""Commits after which a write checkpoints itself, in the caller's thread: only when no
uploader has checkpointed for that long (one that is stopped or never due); bounds the
WAL at ~10 MB (1 KiB pages)."""

PAGE_SIZE = 1024
"""Bytes per database page of a new file (SQLite's default is 4096). A commit appends
every page it changed, whole and checksummed, to the WAL: with 1 KiB pages queuing a
report cost 2 µs less alone and 5 µs less right after a perturbation (colder caches) on
the benchmark machine, and the WAL grows 4× slower. A ~270-byte report (OUE, k = 1024)
fits three to a page; larger ones spill into overflow pages, correct but slower. An
existing file keeps the page size it was made with."""

WAL_SIZE_LIMIT = 4 * 1024 * 1024
"""Bytes the WAL file is truncated to after a checkpoint (``journal_size_limit``)."""

ID_CHUNK = 500
"""Ids per ``IN (...)`` list: below the 999 host parameters of SQLite before 3.32."""

SCHEMA = f"""
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

_abandoned: list[sqlite3.Connection] = []
"""Connections inherited across a fork that could not be quiesced: never used, closed or
garbage-collected in the child (SQLite forbids carrying a connection across fork)."""


class SQLiteFile:
    """One process's connection to the store's file, with the store's lock.

    Args:
        directory: where the database lives (created, mode 0700, if missing).

    Subclasses keep caches of the file's contents; :meth:`_reset` clears them (after a
    fork) and ``_version``, the ``PRAGMA data_version`` they reflect, is forgotten
    whenever the connection is dropped.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.path = self.directory / FILENAME
        self._closed = False
        self._unsafe = False  # a fork caught a thread inside SQLite: see before_fork
        self._reset()

    def _reset(self) -> None:
        """Process-local state: a fresh lock, no connection, nothing cached."""
        self._lock = threading.Lock()
        self._waits = _Waits()
        self._quiet = False  # before_fork holds the locks, the connections closed
        self._conn: sqlite3.Connection | None = None
        self._busy = BUSY_TIMEOUT  # the connection's busy timeout, seconds
        self._retry_open_at = 0.0
        self._owner = f"{os.getpid()}:{secrets.token_hex(4)}"
        self._version: int | None = None  # PRAGMA data_version the caches reflect
        self._commits = 0  # since the last checkpoint
        self._dir_synced = False
        self._checkpoint_lock = threading.Lock()
        self._checkpointer: sqlite3.Connection | None = None  # checkpoint()'s connection

    def limit_waits(self, seconds: float | None = BUSY_TIMEOUT) -> float | None:
        """Let the calling thread's store calls from now on wait at most ``seconds`` in all.

        What counts is waiting: for the store's lock (another thread's call), in
        ``BEGIN IMMEDIATE`` (another process's write lock, up to the connection's busy
        timeout, which is set to what is left, with :data:`BUSY_SLACK` to spare) and
        opening the file; not the work of a call. Once the time is used up, or a wait
        ended in "database is locked", each call raises :class:`StoreError` at once
        instead of waiting. ``Client.report()`` gives itself :data:`BUSY_TIMEOUT` so,
        however many store calls it makes.

        Args:
            seconds: the limit; None: no limit (each call waits up to BUSY_TIMEOUT).

        Returns:
            The limit before (give it back to restore it).
        """
        waits = self._waits
        previous = waits.left
        waits.left = seconds
        return previous

    def _locked(self) -> AbstractContextManager[Any]:
        """The store's lock for one call, within the calling thread's limit (see there)."""
        waits = self._waits
        return self._lock if waits.left is None else _Locked(self._lock, waits)

    def _busy_now(self) -> None:
        """A wait for the file's lock ended in "database is locked": the calling thread's
        limit, if any, is used up."""
        if self._waits.left is not None:
            self._waits.left = 0.0

    def _wait_left(self) -> float | None:
        """Seconds the calling thread may still wait (None: no limit).

        Raises:
            StoreError: none left.
        """
        left = self._waits.left
        if left is not None and left <= 0:
            raise StoreError("the store stayed busy for all the time this call may wait")
        return left

    def _waited(self, since: float) -> None:
        """Take the time since ``since`` (``time.monotonic()``) off the thread's limit."""
        waits = self._waits
        if waits.left is not None:
            waits.left = max(0.0, waits.left - (time.monotonic() - since))

    def _fit_busy(self, conn: sqlite3.Connection) -> float | None:
        """Make the connection's busy timeout what the calling thread may wait; return
        its limit (None: none)."""
        left = self._wait_left()
        wait = BUSY_TIMEOUT if left is None else min(BUSY_TIMEOUT, left)
        if not wait <= self._busy <= wait + BUSY_SLACK:
            ms = math.ceil(wait * 1000)
            try:
                conn.execute(f"PRAGMA busy_timeout = {ms}")
            except sqlite3.Error as exc:
                raise self._failed(exc) from None
            self._busy = ms / 1000
        return left

    def _connection(self) -> sqlite3.Connection:
        """The open connection (opened on first use). Call with the lock held."""
        if self._conn is not None:
            return self._conn
        if self._closed:
            raise StoreError("the store is closed")
        if self._unsafe:
            raise StoreError(
                "this process was forked while another thread was inside the store: it "
                "cannot use the store safely"
            )
        if time.monotonic() < self._retry_open_at:
            raise StoreError("the store could not be opened a moment ago")
        self._wait_left()  # none left: fail now, not REOPEN_DELAY long as a broken file
        try:
            self._conn = self._open()
        except (sqlite3.Error, OSError, StoreError) as exc:
            # Locked: another process is creating or converting the file right now; the
            # next call tries again. Anything else waits REOPEN_DELAY.
            if not (isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)):
                self._retry_open_at = time.monotonic() + REOPEN_DELAY
            logger.debug("cannot open the report store (%s: %s)", type(exc).__name__, exc)
            raise StoreError(f"cannot open {self.path}: {exc}") from None
        return self._conn

    def _open(self) -> sqlite3.Connection:
        """Open (creating if need be) the file, retrying while another process holds it.

        Several processes may create or convert the same new file at once; one holds the
        write lock meanwhile, which on a loaded machine can outlast BUSY_TIMEOUT. Opening
        happens once per process, so it waits up to :data:`OPEN_TIMEOUT` for them (at
        most what the calling thread may still wait, if it has a limit).
        """
        left = self._waits.left
        start = time.monotonic()
        deadline = start + (OPEN_TIMEOUT if left is None else left)
        try:
            while True:
                try:
                    return self._open_once(min(BUSY_TIMEOUT, deadline - time.monotonic()))
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) or time.monotonic() >= deadline:
                        raise
                    time.sleep(0.02)
        finally:
            self._waited(start)

    def _open_once(self, wait: float) -> sqlite3.Connection:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        new = not self.path.exists()
        conn = sqlite3.connect(
            self.path, timeout=max(0.001, wait), isolation_level=None, check_same_thread=False
        )
        self._busy = max(0.001, wait)
        try:
            if new:
                os.chmod(self.path, 0o600)  # WAL and shm files inherit these permissions
                conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")  # before the file has pages
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA wal_autocheckpoint = 0")  # see _committed
            conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
            conn.execute("PRAGMA secure_delete = ON")  # a wiped secret is overwritten
            (found,) = conn.execute("PRAGMA user_version").fetchone()
            if found > SCHEMA_VERSION:
                raise StoreError(f"{self.path} has schema {found}, newer than this SDK's")
            if found < SCHEMA_VERSION:
                conn.executescript(SCHEMA)
        except BaseException:
            conn.close()
            raise
        return conn

    def _failed(self, exc: sqlite3.Error) -> StoreError:
        """Turn a SQLite error into a StoreError; drop the connection unless merely busy.

        Logged at DEBUG: the caller says what it meant (a dropped report is warned about
        once per reason, ``privacy()`` answers with the error, the uploader logs it).
        """
        if not isinstance(exc, sqlite3.OperationalError) or "locked" not in str(exc):
            conn, self._conn, self._version = self._conn, None, None
            if conn is not None:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
            self._retry_open_at = time.monotonic() + REOPEN_DELAY
        else:
            self._busy_now()
        logger.debug("report store error (%s: %s)", type(exc).__name__, exc)
        return StoreError(str(exc))

    def _transaction(self) -> Transaction:
        return Transaction(self, self._connection())

    def _committed(self, conn: sqlite3.Connection | Transaction) -> None:
        """Count a commit; checkpoint here only past :data:`CHECKPOINT_BACKSTOP` of them."""
        self._commits += 1
        if self._commits < CHECKPOINT_BACKSTOP:
            return
        self._commits = 0
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error as exc:  # another process is checkpointing: fine
            logger.debug("checkpoint skipped (%s)", type(exc).__name__)

    @property
    def checkpoint_due(self) -> bool:
        """Whether :data:`CHECKPOINT_EVERY` commits were made since the last checkpoint."""
        return self._commits >= CHECKPOINT_EVERY

    def checkpoint(self) -> None:
        """Copy the WAL into the database file once :data:`CHECKPOINT_EVERY` commits were
        made (else do nothing). Never raises.

        Called by the uploader. It runs on a connection of its own and without the
        store's lock, so ``report()`` on another thread neither waits for its fsyncs nor
        stops appending to the WAL meanwhile (a PASSIVE checkpoint lets writers go on).
        """
        if not self.checkpoint_due or self._closed:
            return
        with self._checkpoint_lock:
            if self._closed:  # closed while we waited for the lock
                return
            try:
                if self._checkpointer is None:
                    self._checkpointer = sqlite3.connect(
                        self.path.absolute().as_uri() + "?mode=rw",  # never creates a file
                        timeout=BUSY_TIMEOUT,
                        isolation_level=None,
                        check_same_thread=False,
                        uri=True,
                    )
                self._commits = 0  # a racing increment lost: one commit more before the next
                self._checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            except sqlite3.Error as exc:  # another process is checkpointing: fine
                logger.debug("checkpoint skipped (%s)", type(exc).__name__)

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

    def close(self) -> None:
        """Release this process's leases and close the connections. Never raises."""
        with self._checkpoint_lock:
            self._closed = True
            if self._checkpointer is not None:
                self._checkpointer.close()
                self._checkpointer = None
        with self._lock:
            conn, self._conn = self._conn, None
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

    def before_fork(self) -> None:
        """Quiesce before ``os.fork()``: wait until no thread of this process is inside
        SQLite for this file (at most :data:`FORK_WAIT`), hold the locks, and close the
        connections, so that no SQLite state of the file (its locks, its shared memory)
        crosses the fork. :meth:`after_fork_in_parent` lets go; the parent reopens on next
        use. Never raises."""
        if not self._checkpoint_lock.acquire(timeout=FORK_WAIT):
            logger.warning("fork while the store is busy: the child will not use the store")
            return
        if not self._lock.acquire(timeout=FORK_WAIT):
            self._checkpoint_lock.release()
            logger.warning("fork while the store is busy: the child will not use the store")
            return
        self._quiet = True
        conns = (self._conn, self._checkpointer)
        self._conn = self._checkpointer = None
        self._version = None  # PRAGMA data_version is the connection's: reload the caches
        for conn in conns:
            if conn is not None:
                try:
                    conn.close()
                except sqlite3.Error as exc:  # pragma: no cover - nothing is in flight
                    logger.debug("closing the store before a fork: %s", type(exc).__name__)

    def after_fork_in_parent(self) -> None:
        """Let go of what :meth:`before_fork` held."""
        if self._quiet:
            self._quiet = False
            self._lock.release()
            self._checkpoint_lock.release()

    def after_fork_in_child(self) -> None:
        """Start afresh: own locks, own connection on first use. If the fork caught a
        thread inside SQLite, its state crossed the fork (a lock may be held for ever): the
        inherited connections are left alone and the store is not used in this child."""
        if not self._quiet:
            self._unsafe = True
            for conn in (self._conn, self._checkpointer):
                if conn is not None:
                    _abandoned.append(conn)
        self._reset()


class _Waits(threading.local):
    """Per thread: ``left``, the seconds its store calls may still wait (None: no limit;
    :meth:`SQLiteFile.limit_waits`)."""

    left: float | None = None


class _Locked:
    """The store's lock for one call of a thread with a limit on waits: a wait for the
    lock is taken off the limit, and may last no longer than what is left."""

    __slots__ = ("lock", "waits")

    def __init__(self, lock: threading.Lock, waits: _Waits) -> None:
        self.lock = lock
        self.waits = waits

    def __enter__(self) -> None:
        lock = self.lock
        if lock.acquire(False):
            return
        waits = self.waits
        left = waits.left or 0.0
        start = time.monotonic()
        acquired = left > 0 and lock.acquire(timeout=left)
        waits.left = max(0.0, left - (time.monotonic() - start)) if acquired else 0.0
        if not acquired:
            raise StoreError("the store stayed busy for all the time this call may wait")

    def __exit__(self, *exc_info: object) -> None:
        self.lock.release()


class Transaction:
    """One write transaction: ``BEGIN IMMEDIATE`` … ``COMMIT``, ``ROLLBACK`` on exceptions.

    SQLite errors become :class:`StoreError`. ``commit()`` may be called early, so the
    caller changes its caches only after a commit that succeeded.
    """

    def __init__(self, file: SQLiteFile, conn: sqlite3.Connection) -> None:
        self.file = file
        self.conn = conn
        self.open = False
        self.execute = conn.execute
        self.executemany = conn.executemany

    def __enter__(self) -> Transaction:
        file = self.file
        limited = file._fit_busy(self.conn) is not None
        start = time.monotonic() if limited else 0.0
        try:
            self.conn.execute("BEGIN IMMEDIATE")  # waits here for another's write lock
        except sqlite3.Error as exc:
            raise file._failed(exc) from None
        finally:
            if limited:
                file._waited(start)
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
            raise self.file._failed(exc) from None

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
            raise self.file._failed(exc) from None


def spend(conn: Transaction, rows: Sequence[tuple[str, str, int, float]]) -> None:
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


def chunks(ids: Sequence[int]) -> Iterator[list[int]]:
    """``ids`` in lists of at most :data:`ID_CHUNK` (one ``IN (...)`` each)."""
    for start in range(0, len(ids), ID_CHUNK):
        yield list(ids[start : start + ID_CHUNK])


def marks(chunk: Sequence[int]) -> str:
    """``?,?,…``: one host parameter per id."""
    return ",".join("?" * len(chunk))


def alive(pid: int) -> bool:
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

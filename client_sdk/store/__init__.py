"""The durable store: queued reports, the privacy ledger and the device secret, in SQLite.

One file, ``ldp-telemetry.sqlite3``, in a directory the app chooses
(``Client(url, storage_dir=...)``); standard library ``sqlite3`` only, imported only by a
client that has a ``storage_dir``. Three modules, each built on the one before:

* ``sqlite.py`` — :class:`~client_sdk.store.sqlite.SQLiteFile`: the connection,
  transactions, checkpoints, fsync, fork safety; the schema;
* ``state.py`` — :class:`~client_sdk.store.state.StoreState`: cached totals, the opt-out,
  the device secret, the ledger's rows, the definitions kept for offline starts;
* ``reports.py`` — :class:`Store`: the queue itself (put, claim, ack), with leases for
  processes sharing the directory.

Durability. Every report is committed *before* ``report()`` returns True, together with
its ledger charge (one row holds both: a report is queued if and only if it was charged).
The database runs in WAL mode with ``synchronous=NORMAL``: a commit is a write to the
WAL file without an fsync, so it survives the app crashing or being killed (the bytes
are in the operating system's cache), and costs tens of µs instead of milliseconds. A
power cut or an operating system crash may lose the last commits — but never one that
was sent: before each upload the uploader claims its batch, commits the claim, and fsyncs
the WAL file (what ``synchronous=FULL`` does at a commit, done here without holding the
store's lock, so ``report()`` never waits for a disk flush), which makes the whole WAL
up to the claim durable: every report, and every ledger charge, is on stable storage
before it leaves the device. A report is deleted only after the collector took it (2xx)
or rejected it as invalid (the uploader's ``classify``).

Several processes may share a directory: SQLite's locks serialise writers, and each
process keeps its caches coherent with ``PRAGMA data_version``; the leases of
``reports.py`` keep two processes from sending the same reports.

A forked child never touches its parent's connection: it opens its own. Every SQLite
failure (a locked, full, read-only or corrupt database) surfaces as
:class:`~client_sdk.errors.StoreError`, which the client turns into a dropped report
(``storage_error``), never an exception.
"""

from __future__ import annotations

from client_sdk.store.reports import LEASE_SECONDS, Store
from client_sdk.store.sqlite import BUSY_TIMEOUT, FILENAME, SCHEMA_VERSION

__all__ = ["BUSY_TIMEOUT", "FILENAME", "LEASE_SECONDS", "SCHEMA_VERSION", "Store"]

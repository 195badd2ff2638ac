"""The durable store: queued reports, the privacy ledger and the device secret, in SQLite.

One file, ``ldp-telemetry.sqlite3``, in a directory the app chooses
(``Client(url, storage_dir=...)``); standard library ``sqlite3`` only, imported only by a
client that has a ``storage_dir``. Three modules, each built on the one before:

In full: ``docs/architecture/sdk-storage.md``.
"""

from __future__ import annotations

from client_sdk.store.reports import LEASE_SECONDS, Store
from client_sdk.store.sqlite import BUSY_TIMEOUT, FILENAME, FORK_WAIT, SCHEMA_VERSION

__all__ = ["BUSY_TIMEOUT", "FILENAME", "FORK_WAIT", "LEASE_SECONDS", "SCHEMA_VERSION", "Store"]

"""A cap on the connections one source holds open at once, per worker process.

A gevent worker holds ``worker_connections`` sockets; a source that opens that many and
sends nothing useful (headers, then a body a byte at a time) left no room for anyone
else, even with every wait bounded. Past :attr:`SourceConnections.per_source` open
connections, a source's next one is answered ``429`` at once and closed
(:mod:`ldp_edge.gunicorn_worker`), so one address never holds more than its share. The
address is named by its keyed hash only (:class:`ldp_edge.admission.SourceNames`), and
forgotten when its last connection closes. In full: ``docs/security/limits.md``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ldp_edge.admission import SourceNames

__all__ = ["SourceConnections"]


class SourceConnections:
    """Each source's open connections, counted under a keyed hash of its address.

    Thread- and greenlet-safe (one lock, held for a dictionary update).

    Args:
        per_source: the most connections one source may hold at once; 0: no cap.
        clock: monotonic seconds (the key's rotation).
    """

    def __init__(self, per_source: int, clock: Callable[[], float] = time.monotonic) -> None:
        if per_source < 0:
            raise ValueError(f"per_source must be >= 0, got {per_source}")
        self.per_source = per_source
        self._lock = threading.Lock()
        self._open: dict[bytes, int] = {}
        self._names = SourceNames(clock, self._forget)

    def __len__(self) -> int:
        """Sources with a connection open."""
        return len(self._open)

    def enter(self, address: str) -> bytes | None:
        """Count a new connection from ``address``: its source's name (give it back to
        :meth:`leave` when the connection closes), or None when the source already holds
        ``per_source`` connections (refuse it; nothing was counted)."""
        name = self._names.name(address)
        with self._lock:
            held = self._open.get(name, 0)
            if self.per_source and held >= self.per_source:
                return None
            self._open[name] = held + 1
        return name

    def add(self, name: bytes) -> None:
        """Count one more connection of a source named by :meth:`enter`, never refused
        (a kept-alive connection whose next request is already in)."""
        with self._lock:
            self._open[name] = self._open.get(name, 0) + 1

    def leave(self, name: bytes) -> None:
        """A connection counted by :meth:`enter` closed."""
        with self._lock:
            held = self._open.get(name, 0)
            if held <= 1:
                self._open.pop(name, None)  # forgotten with its last connection
            else:
                self._open[name] = held - 1

    def _forget(self) -> None:
        """On a new key: connections named under the old one are no longer counted (they
        are few and short-lived; their :meth:`leave` finds nothing)."""
        with self._lock:
            self._open.clear()

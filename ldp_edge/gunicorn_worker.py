"""Gunicorn's gevent worker with a per-source connection cap: imported only where
gunicorn runs (``ldp_relay/gunicorn_conf.py``, ``collector/gunicorn_conf.py``).

A connection past its source's cap (:class:`ldp_edge.connections.SourceConnections`) is
answered ``429`` with ``Retry-After`` before anything of it is read, and closed: it never
holds one of the worker's ``worker_connections`` slots longer than that. What counts is
a connection from its opening until its first request is answered, and again while each
later one is served: not the keep-alive wait between two requests, which ``keepalive``
already bounds (a device that opens a fresh connection per upload leaves a trail of idle
ones behind; they cost the worker a slot for 5 s each, and are no flood). In full:
``docs/security/limits.md``.
"""

from __future__ import annotations

import json
import socket
from typing import Any

from gunicorn.workers.ggevent import GeventWorker  # type: ignore[import-untyped]

from ldp_edge.connections import SourceConnections

__all__ = ["CappedGeventWorker", "capped_worker"]

RETRY_AFTER = 1
"""Seconds a refused connection is asked to wait: one of the source's own connections
frees within the deadlines (a kept-alive idle one within ``keepalive``)."""


def _refusal(per_source: int) -> bytes:
    body = json.dumps(
        {
            "error": "too many connections from this source",
            "details": [
                f"at most {per_source} open connections per source",
                f"retry after {RETRY_AFTER} s; nothing of this request was read",
            ],
        }
    ).encode()
    head = (
        "HTTP/1.1 429 Too Many Requests\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        f"Retry-After: {RETRY_AFTER}\r\n"
        "Cache-Control: no-store\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + body


def _refuse(client: Any, per_source: int) -> None:
    """Answer 429 and close, having read what already came (closing a socket with unread
    bytes resets it, and the client might never see the answer)."""
    try:
        client.sendall(_refusal(per_source))
        client.shutdown(socket.SHUT_WR)
        client.setblocking(False)
        client.recv(65536)
    except OSError:
        pass
    finally:
        client.close()


class CappedGeventWorker(GeventWorker):
    """A gevent worker that refuses a source's connections past :attr:`per_source`.

    The source is the peer's address (the cap is for edges without a trusted proxy in
    front: behind one, every connection comes from the proxy, which caps per address
    itself, e.g. nginx's ``limit_conn``).
    """

    per_source = 0
    """The cap (set by :func:`capped_worker`); 0: none."""

    connections: SourceConnections
    _counted: dict[int, tuple[bytes, bool]]
    """Per open connection (by its socket's id): its source's name, and whether it counts
    now (False while it waits, kept alive, for its next request)."""

    def init_process(self) -> None:
        """Start this worker's count (per process), then run as gevent's worker."""
        self.connections = SourceConnections(self.per_source)
        self._counted = {}
        super().init_process()

    def handle(self, listener: Any, client: Any, addr: Any) -> None:
        """Serve the connection, or refuse it if its source holds its share already."""
        address = addr[0] if isinstance(addr, tuple) and addr else ""
        if not self.per_source or not isinstance(address, str) or not address:
            super().handle(listener, client, addr)
            return
        name = self.connections.enter(address)
        if name is None:
            _refuse(client, self.per_source)
            return
        self._counted[id(client)] = (name, True)
        try:
            super().handle(listener, client, addr)
        finally:
            name, counts = self._counted.pop(id(client))
            if counts:
                self.connections.leave(name)

    def handle_request(self, listener_name: Any, req: Any, sock: Any, addr: Any) -> None:
        """Serve one request of a connection, counted while it is served; a connection
        kept alive after it stops counting until its next request's headers are in."""
        found = self._counted.get(id(sock))
        if found is not None and not found[1]:
            self.connections.add(found[0])  # its request is in: counted, never refused
            self._counted[id(sock)] = (found[0], True)
        super().handle_request(listener_name, req, sock, addr)
        found = self._counted.get(id(sock))
        if found is not None and found[1]:  # answered, and kept alive: idle until the next
            self.connections.leave(found[0])
            self._counted[id(sock)] = (found[0], False)


def capped_worker(per_source: int) -> type[CappedGeventWorker]:
    """The worker class for gunicorn's ``worker_class``, capped at ``per_source``
    connections per source and worker process (0: gevent's own worker, uncapped)."""
    if per_source < 0:
        raise ValueError(f"the connection cap must be >= 0, got {per_source}")
    return type("CappedGeventWorker", (CappedGeventWorker,), {"per_source": per_source})

"""The relay's defaults (standard library only: ``ldp --help`` imports them)."""

from __future__ import annotations

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_SOURCE_CONNECTIONS",
    "DEFAULT_SOURCE_REQUESTS_PER_SECOND",
    "DEFAULT_TIMEOUT",
    "DEFAULT_WORKER_CONNECTIONS",
    "KEEPALIVE_SECONDS",
]

DEFAULT_SOURCE_REQUESTS_PER_SECOND = 20
"""Sealed requests (uploads, and the definition fetches of a device that reports through
the relay) one device (address) may send per second, and at once: the collector's own
default for a direct source (``LDP_SOURCE_REQUESTS_PER_SECOND``), which now applies here,
where the source is visible. The reports in them are sealed, so the relay cannot count
reports; the collector's ``LDP_MAX_REPORTS`` per request bounds them."""

KEEPALIVE_SECONDS = 5
"""How long an idle kept-alive connection stays open, and how long a request's headers
may take to arrive (gunicorn's gevent worker bounds both with it): a device uploading
every few seconds reuses its connection; an idle or silent one is closed."""

DEFAULT_SOURCE_CONNECTIONS = DEFAULT_SOURCE_REQUESTS_PER_SECOND * KEEPALIVE_SECONDS
"""Connections one address may hold at once per worker, counted from their opening until
their request is answered (a kept-alive one waiting for its next request does not count):
100, what the request limit lets in while each request's headers may take
:data:`KEEPALIVE_SECONDS` (devices behind one NAT on slow links). One address never holds
more than a tenth of a worker's :data:`DEFAULT_WORKER_CONNECTIONS`, however slowly it
sends."""

DEFAULT_WORKER_CONNECTIONS = 1000
"""Connections one gevent worker holds at once; past it the worker stops accepting until
one closes. Slow ones are cut by the body deadline (``ldp_edge.slow_bodies``)."""

DEFAULT_MAX_BODY_BYTES = (1 << 20) + 1024
"""The collector's default body limit plus the encapsulation's overhead
(``client_sdk.ohttp.keys.SEALING_OVERHEAD``; a test holds them equal): a larger body
could only be refused by the gateway, so it is refused here without forwarding."""

DEFAULT_TIMEOUT = 10.0
"""Seconds to connect to the gateway and to wait for its answer (it answers within 2 s
even when its Redis is in trouble: ``collector.LONGEST_REDIS_WAIT``)."""

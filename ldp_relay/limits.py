"""The relay's defaults (standard library only: ``ldp --help`` imports them)."""

from __future__ import annotations

__all__ = ["DEFAULT_MAX_BODY_BYTES", "DEFAULT_SOURCE_REQUESTS_PER_SECOND", "DEFAULT_TIMEOUT"]

DEFAULT_SOURCE_REQUESTS_PER_SECOND = 20
"""Uploads one device (address) may send per second, and at once: the collector's own
default for a direct source (``LDP_SOURCE_REQUESTS_PER_SECOND``), which now applies here,
where the source is visible. The reports in them are sealed, so the relay cannot count
reports; the collector's ``LDP_MAX_REPORTS`` per request bounds them."""

DEFAULT_MAX_BODY_BYTES = (1 << 20) + 1024
"""The collector's default body limit plus the encapsulation's overhead
(``client_sdk.ohttp.keys.SEALING_OVERHEAD``; a test holds them equal): a larger body
could only be refused by the gateway, so it is refused here without forwarding."""

DEFAULT_TIMEOUT = 10.0
"""Seconds to connect to the gateway and to wait for its answer (it answers within 2 s
even when its Redis is in trouble: ``collector.LONGEST_REDIS_WAIT``)."""

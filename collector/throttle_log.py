"""Says, at most once a minute, that sources were throttled by the admission limits
(:mod:`ldp_edge.admission`): how many requests, reports and sources, never which.

In full: ``docs/security/limits.md``.
"""

from __future__ import annotations

import logging
import threading

from ldp_edge.admission import MAX_SOURCES, Admission

__all__ = ["THROTTLE_LOG_INTERVAL", "ThrottleLog"]

log = logging.getLogger(__name__)

THROTTLE_LOG_INTERVAL = 60.0
"""Seconds between two log lines about throttled sources: the first refusal after a quiet
interval is logged at once, the ones after it are added up into the next line, so a
flood writes one line a minute, not one per request. ``/metrics`` counts every one
(``ldp_collector_rate_limited_total``, ``ldp_collector_rate_limited_reports_total``)."""


class ThrottleLog:
    """Says, at most once per ``interval``, that sources were throttled: how many
    requests, reports and distinct sources, never which (no address, no hash).

    Honest traffic meets the limits too (devices behind one carrier-grade NAT or proxy
    share an address): the line names the settings that raise them.

    Args:
        admission: the limiter whose limits the line quotes (and whose clock it uses).
        interval: seconds between two lines.
    """

    def __init__(self, admission: Admission, interval: float = THROTTLE_LOG_INTERVAL) -> None:
        self.admission = admission
        self.interval = interval
        self._lock = threading.Lock()
        self._last = float("-inf")
        self._requests: dict[str, int] = {}
        self._reports = 0
        self._sources: set[bytes] = set()

    def refused(self, source: bytes, limit: str, reports: int) -> None:
        """Note one refused request (``limit``: which bucket; ``reports``: how many it
        carried, 0 when refused before its body was read); log if the interval is over."""
        with self._lock:
            self._requests[limit] = self._requests.get(limit, 0) + 1
            self._reports += reports
            if len(self._sources) < MAX_SOURCES:
                self._sources.add(source)  # counted, never written anywhere
            now = self.admission.clock()
            if now - self._last < self.interval:
                return
            since = now - self._last
            requests, self._requests = self._requests, {}
            reports_refused, self._reports = self._reports, 0
            sources, self._sources = len(self._sources), set()
            self._last = now
        a = self.admission
        window = "" if since == float("inf") else f" in the last {since:.0f} s"
        log.warning(
            "throttled %d requests (%d by the request limit, %d by the report limit; "
            "%d reports) from %d sources%s. Limits per source and worker: %d requests/s "
            "(LDP_SOURCE_REQUESTS_PER_SECOND), %d reports/min "
            "(LDP_SOURCE_REPORTS_PER_MINUTE); devices behind one NAT or proxy share a "
            "source: raise them if these are honest",
            sum(requests.values()),
            requests.get("requests", 0),
            requests.get("reports", 0),
            reports_refused,
            sources,
            window,
            a.requests_per_second,
            a.reports_per_minute,
        )

"""Reports through the collector's Flask test client, then counted by a real stream worker
(one pass): the in-process pipeline most aggregator tests start from."""

from __future__ import annotations

from typing import Any

from aggregator.stream.worker import Worker

BATCH = 500
"""Reports a POST: a device's upload size."""


def post_reports(web: Any, reports: list[dict[str, Any]]) -> None:
    """POST ``reports`` to ``/v1/reports``, :data:`BATCH` at a time; each answered 202."""
    for start in range(0, len(reports), BATCH):
        posted = web.post("/v1/reports", json={"reports": reports[start : start + BATCH]})
        assert posted.status_code == 202, posted.json


def post_and_count(web: Any, redis_client: Any, reports: list[dict[str, Any]]) -> None:
    """:func:`post_reports`, then one pass of a stream worker over what waits."""
    post_reports(web, reports)
    Worker(redis_client, handle_signals=False, block_ms=10).run(once=True)

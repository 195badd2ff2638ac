"""Reports through the collector's Flask test client, then counted by a real stream worker
(one pass): the in-process pipeline most aggregator tests start from."""

from __future__ import annotations

from typing import Any

from aggregator.stream.worker import Worker
from client_sdk.wire import MetricDefinition
from ldp_server.app import create_server_app

TOKEN = "test-admin-token-ingest"
ADMIN = {"Authorization": f"Bearer {TOKEN}"}

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


def app_client(redis_url: str) -> Any:
    """The server app (collector and read APIs, admin :data:`TOKEN`)'s Flask test client."""
    app = create_server_app({"REDIS_URL": redis_url, "ADMIN_TOKEN": TOKEN, "TESTING": True})
    return app.test_client()


def define(web: Any, name: str, spec: dict[str, Any]) -> MetricDefinition:
    """Define ``name`` as ``spec`` (201 expected); its definition."""
    created = web.put(f"/v1/metrics/{name}", json=spec, headers=ADMIN)
    assert created.status_code == 201, created.json
    return MetricDefinition.from_dict(created.json)


def load_time_spec(epsilon: float, **more: Any) -> dict[str, Any]:
    """A page-load-time distribution: 1 to 10,000 ms in 64 log-scale bins, at ``epsilon``,
    with ``more`` fields."""
    return {
        "kind": "numeric",
        "range": [1, 10000],
        "epsilon": epsilon,
        "distribution": {"bins": 64, "scale": "log"},
        **more,
    }

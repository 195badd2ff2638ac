"""Throttling is visible before users see it: one log line a minute, and counters.

Issue 29: the per-source defaults are met by ~1,200 devices behind one carrier-grade NAT
uploading once a minute, and nothing said so. Now every refusal counts in ``/metrics``
(requests by bucket, and the reports they carried), and a warning says how many requests,
reports and sources were throttled, at most once per interval, never with an address
or its hash.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from collector_helpers import THEME_SPEC, define, make_app, reports
from test_collector_admission import FLOODER, OTHER, samples

from collector.context import services
from collector.throttle_log import THROTTLE_LOG_INTERVAL
from tests.clock import Clock


def _post(client: Any, batch: list[Any], peer: str) -> Any:
    return client.post("/v1/reports", json={"reports": batch}, environ_base={"REMOTE_ADDR": peer})


def test_throttling_is_logged_once_per_interval_without_the_address_and_counted(
    redis_db: Any, caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app(
        redis_db.url, SOURCE_REQUESTS_PER_SECOND=3, SOURCE_REPORTS_PER_MINUTE=20, MAX_REPORTS=10
    )
    admission = services(app).admission
    clock = Clock(1000.0)
    admission.clock = clock
    admission.rotate()
    client = app.test_client()
    theme = define(client, "app.theme", THEME_SPEC)
    caplog.set_level(logging.INFO)

    # Reports: 20 a minute; two batches of 10 pass, the next ones are refused whole.
    statuses = [_post(client, reports(theme, 10, seed=i), FLOODER).status_code for i in range(3)]
    assert statuses == [202, 202, 429]
    # Requests: 3 at once; the third bucket-token went to the refused batch above.
    statuses = [_post(client, reports(theme, 1, seed=10 + i), OTHER).status_code for i in range(5)]
    assert statuses == [202, 202, 202, 429, 429]
    lines = [r.getMessage() for r in caplog.records if r.name == "collector.throttle_log"]
    assert len(lines) == 1, lines  # the first refusal at once, the others held back
    assert (
        "throttled 1 requests (0 by the request limit, 1 by the report limit; 10 reports) "
        "from 1 sources." in lines[0]
    )
    assert "LDP_SOURCE_REPORTS_PER_MINUTE" in lines[0]

    clock.now += THROTTLE_LOG_INTERVAL  # buckets refill too
    statuses = [_post(client, reports(theme, 1, seed=20 + i), OTHER).status_code for i in range(4)]
    assert statuses == [202, 202, 202, 429]
    lines = [r.getMessage() for r in caplog.records if r.name == "collector.throttle_log"]
    assert len(lines) == 2, lines
    assert (
        "throttled 3 requests (3 by the request limit, 0 by the report limit; 0 reports)"
        in (lines[1])
    )
    assert "from 1 sources in the last 60 s" in lines[1]

    everything = "\n".join(r.getMessage() for r in caplog.records)
    for peer in (FLOODER, OTHER):
        assert peer not in everything
        assert admission.source({"REMOTE_ADDR": peer}).hex() not in everything
    found = samples(client)
    assert found[("ldp_collector_rate_limited_total", (("limit", "requests"),))] == 3
    assert found[("ldp_collector_rate_limited_total", (("limit", "reports"),))] == 1
    assert found[("ldp_collector_rate_limited_reports_total", (("limit", "reports"),))] == 10
    assert found[("ldp_collector_rate_limited_reports_total", (("limit", "requests"),))] == 0

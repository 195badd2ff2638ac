"""Which reads go to ``ldp serve``'s heavy lane, and a heavy read that waited too long
(issue 43 item 1; the lanes themselves: tests/ldp_server/test_serve_read_isolation.py)."""

from __future__ import annotations

import time
from typing import Any

from aggregator.web import lanes
from ldp_server.app import create_server_app
from ldp_store.registry import Registry

SPECS = {
    "lane.small": {"domain": ["a", "b", "c", "d"], "epsilon": 1.0},
    "lane.big": {"domain": [f"v{i}" for i in range(3000)], "epsilon": 1.0},
    "lane.groups": {
        "domain": [f"v{i}" for i in range(100)],
        "epsilon": 1.0,
        "dimensions": [{"name": "region", "values": [f"r{i}" for i in range(30)]}],
    },
    "lane.joint": {
        "kind": "joint",
        "attributes": [{"name": n, "domain": [str(i) for i in range(64)]} for n in "abc"],
        "epsilon": 2.0,
    },
    "lane.words": {"kind": "string", "max_length": 8, "epsilon": 4.0},
    "lane.mean": {"kind": "numeric", "range": [0, 10], "epsilon": 1.0},
}


def test_reads_are_heavy_by_the_rows_their_answer_builds(redis_db: Any) -> None:
    for name, spec in SPECS.items():
        Registry(redis_db.client()).put(name, spec)
    app = create_server_app({"REDIS_URL": redis_db.url, "TESTING": True})

    def heavy(path: str, endpoint: str = "estimates.get_estimates") -> bool:
        name, _, query = path.partition("?")
        return lanes.heavy_read(app, endpoint, {"name": name}, {"QUERY_STRING": query})

    assert not heavy("lane.small")
    assert not heavy("lane.big")  # the top 256 of 3,000 values
    assert heavy("lane.big?values=all")
    assert heavy("lane.big?top=3000")
    assert heavy("lane.big?format=csv")  # every row
    assert not heavy("lane.big?format=csv&top=10")
    assert not heavy("lane.big?top=0")  # a 400
    assert not heavy("lane.groups?by=region")  # 30 groups × the top 8
    assert heavy("lane.groups?by=region&values=all")  # 30 groups × 100 values
    assert heavy("lane.groups?by=region&top=100")
    assert not heavy("lane.joint")  # three 1-way marginals of 64 cells
    assert not heavy("lane.joint?marginal=a,b")  # the top 256 of 4,096 cells
    assert heavy("lane.joint?marginal=a,b&values=all")
    assert heavy("lane.words")  # a discovery
    assert not heavy("lane.mean")
    assert not heavy("lane.mean", "estimates.get_trend")  # a mean per window
    assert not heavy("lane.small", "estimates.get_trend")  # 4 values × 400 windows
    assert heavy("lane.groups", "estimates.get_trend")  # the top 8 × 400 windows
    assert not heavy("lane.groups?values=v1,v2", "estimates.get_trend")  # 2 × 400
    assert not heavy("no.such")  # a 404, at once
    assert not heavy("lane.big?version=7")
    assert heavy("lane.big", "export.get_export_rows")
    assert not heavy("", "status.get_overview")


def test_a_heavy_read_that_waited_too_long_is_refused(redis_db: Any) -> None:
    Registry(redis_db.client()).put("lane.small", SPECS["lane.small"])
    web = create_server_app({"REDIS_URL": redis_db.url, "TESTING": True}).test_client()
    stale = {lanes.SENT_AT_HEADER: f"{time.time() - lanes.HEAVY_WAIT_SECONDS - 1:.3f}"}
    refused = web.get("/v1/estimates/lane.small", headers=stale)
    assert refused.status_code == 503 and int(refused.headers["Retry-After"]) > 0
    assert "retry after" in refused.get_json()["error"]
    fresh = {lanes.SENT_AT_HEADER: f"{time.time():.3f}"}
    assert web.get("/v1/estimates/lane.small", headers=fresh).status_code == 200
    assert web.get("/v1/estimates/lane.small").status_code == 200

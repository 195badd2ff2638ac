"""The overview in pages, searchable (issue 43 item 3): rows for one page, the device-wide
spend over every metric whatever the page."""

from __future__ import annotations

from typing import Any

from ldp_server.app import create_server_app
from ldp_store.registry import Registry

NAMES = ["app.alpha", "app.beta", "app.gamma", "web.delta", "web.epsilon"]


def test_the_overview_is_paged_and_searchable(redis_db: Any) -> None:
    registry = Registry(redis_db.client())
    for i, name in enumerate(NAMES):
        spec: dict[str, Any] = {"domain": ["a", "b"], "epsilon": 1.0 + i}
        spec["description"] = "Checkout funnel" if name == "web.delta" else ""
        spec["budget"] = {"reports_per_period": 1, "period": "day"}
        registry.put(name, spec)
    web = create_server_app({"REDIS_URL": redis_db.url, "TESTING": True}).test_client()
    whole = web.get("/v1/overview").get_json()
    assert [m["name"] for m in whole["metrics"]] == NAMES  # a few metrics: all, as before
    assert (whole["total"], whole["offset"], whole["next_offset"]) == (5, 0, None)
    first = web.get("/v1/overview?limit=2").get_json()
    assert [m["name"] for m in first["metrics"]] == NAMES[:2]
    assert (first["total"], first["next_offset"]) == (5, 2)
    last = web.get("/v1/overview?limit=2&offset=4").get_json()
    assert ([m["name"] for m in last["metrics"]], last["next_offset"]) == (NAMES[4:], None)
    assert first["device"] == last["device"] == whole["device"]  # every metric's spend
    assert whole["device"]["epsilon_per_day_max"] == sum(1.0 + i for i in range(5))
    found = web.get("/v1/overview?q=WEB").get_json()
    assert [m["name"] for m in found["metrics"]] == ["web.delta", "web.epsilon"]
    found = web.get("/v1/overview?q=funnel").get_json()  # in the description
    assert ([m["name"] for m in found["metrics"]], found["total"]) == (["web.delta"], 1)
    for bad in ("limit=0", "limit=100000", "offset=-1", "offset=x"):
        reply = web.get(f"/v1/overview?{bad}")
        assert reply.status_code == 400 and reply.get_json()["error"], bad
    page = web.get("/?limit=2&offset=2").get_data(as_text=True)
    assert 'data-metric="app.gamma"' in page and 'data-metric="app.alpha"' not in page
    assert "3–4 of 5" in page and "offset=4" in page and "offset=0" in page

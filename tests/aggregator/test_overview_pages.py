"""The overview in pages, searchable (issue 43 item 3): rows for one page, the device-wide
spend over every metric whatever the page."""

from __future__ import annotations

import random
from typing import Any

from aggregator.query.alarms import alarm_models, current_alarms
from aggregator.query.relayed import relayed_waiting
from aggregator.query.window import lag_details, list_windows, reports_counted
from aggregator.stats.detect import DEFAULT_ALARM_RATE
from aggregator.stream.worker import Worker
from aggregator.web.status import overview_body, overview_rows
from ldp_server.app import create_server_app
from ldp_store import keys
from ldp_store.registry import Registry
from tests.aggregator.test_worker import append, perturbed
from tests.round_trips import round_trips

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


def one_at_a_time(client: Any, definition: Any) -> dict[str, Any]:
    """What a row said when each metric was read on its own."""
    windows = list_windows(client, definition)
    hours = [w for w in windows if w.startswith("hour:")]
    days = [w for w in windows if w.startswith("day:")]
    lagging = lag_details(client, definition)
    waiting = relayed_waiting(client, definition)
    alarms = current_alarms(client, definition, DEFAULT_ALARM_RATE)
    return {
        "n": reports_counted(client, definition),
        "last_window": hours[0] if hours else days[0] if days else None,
        "lag": {"length": lagging.length, "pending": lagging.pending},
        "relayed_waiting": waiting,
        "alarms": [a.model_dump() for a in alarm_models(definition, alarms)],
    }


def test_a_page_reads_its_rows_at_once_and_says_what_one_metric_at_a_time_said(
    redis_db: Any,
) -> None:
    client = redis_db.client()
    registry = Registry(client)
    spec = {"domain": ["a", "b", "c", "d"], "epsilon": 1.0}
    every = [registry.put(f"page.m{i:02d}", spec).definition for i in range(40)]
    rng = random.Random(5)
    # A counted metric (its alarms tested), a waiting one, one
    # read by a worker that died (pending entries), one with a relayed report in its pool.
    counted, waiting, pending, relayed = every[3], every[10], every[11], every[20]
    values = [0] * 3000 + [rng.randrange(4) for _ in range(500)]
    append(client, counted, perturbed(counted, values, seed=1))
    Worker(client, handle_signals=False).run(once=True)
    append(client, waiting, perturbed(waiting, [1, 2, 3], seed=2))
    append(client, pending, perturbed(pending, [1, 2], seed=3))
    client.xreadgroup(keys.GROUP, "gone", {keys.stream_key(pending.name, pending.version): ">"})
    client.xadd(keys.pool_key(relayed.name, relayed.version, 0), {"p": "{}"})
    app = create_server_app({"REDIS_URL": redis_db.url, "TESTING": True})
    with app.app_context():
        found = overview_rows(client, registry, None, DEFAULT_ALARM_RATE, every)
    rows = {r["name"]: r for r in found}
    for d in every:
        row = rows[d.name]
        shown = {k: row[k] for k in ("n", "last_window", "lag", "relayed_waiting", "alarms")}
        assert shown == one_at_a_time(client, d), d.name
    assert rows[counted.name]["n"] == 3500 and rows[counted.name]["last_window"]
    assert rows[waiting.name]["lag"] == {"length": 3, "pending": 0}
    assert rows[pending.name]["lag"] == {"length": 2, "pending": 2}
    assert rows[relayed.name]["relayed_waiting"] is not None


def test_a_page_costs_the_same_round_trips_whatever_its_rows(redis_db: Any) -> None:
    client = redis_db.client()
    registry = Registry(client)
    spec = {"domain": ["a", "b"], "epsilon": 1.0}
    for i in range(60):
        registry.put(f"trips.m{i:02d}", spec)
    with create_server_app({"REDIS_URL": redis_db.url, "TESTING": True}).app_context():
        overview_body(client, registry, None)  # the registry's list, read once
        few = round_trips(client, lambda: overview_body(client, registry, None, limit=2))
        many = round_trips(client, lambda: overview_body(client, registry, None, limit=50))
    assert many == few, (few, many)  # not a few round trips per row

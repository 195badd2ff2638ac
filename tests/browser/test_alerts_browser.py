"""The Alerts page in a real Chromium: an operator defines a rule with the page's form,
sees it refused with the API's reason or listed, and acknowledges, silences, resolves and
deletes it with the page's buttons once the real worker fired it; a rule on a group the
breakdown hides says it waits (docs/guides/alerts.md).

The server is the real read and change API (``create_server_app``) on a real Redis,
served by Werkzeug; reports are appended to the metric's stream and counted by the real
aggregator worker, which evaluates the rules as it counts.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import pytest
from browser_helpers import Watched, chromium_missing

_missing = chromium_missing()
if _missing:
    pytest.skip(_missing, allow_module_level=True)

from wsgi_helpers import serving  # noqa: E402

from aggregator.alerts.evaluate import Alerts  # noqa: E402
from aggregator.stream.worker import Worker  # noqa: E402
from client_sdk.wire import MetricDefinition  # noqa: E402
from ldp_store import alerts as store  # noqa: E402
from ldp_store import keys  # noqa: E402
from ldp_store.registry import Registry  # noqa: E402
from ldp_store.schema import SEGMENT_KEY  # noqa: E402

ADMIN = "admin-token-alerts-page-40"
SPEC = {
    "domain": ["light", "dark", "auto", "contrast"],
    "epsilon": 2.0,
    "mechanism": "grr",
    "dimensions": [{"name": "platform", "values": ["ios", "web"]}],
}
NULL = [0.5, 0.2, 0.2, 0.1]
MOVED = [0.2, 0.6, 0.1, 0.1]


class Site:
    """The served app, its Redis and the metric."""

    def __init__(self, url: str, redis: Any, definition: MetricDefinition) -> None:
        self.url, self.redis, self.definition = url, redis, definition

    def send(self, shares: list[float], n: int, platform: str, seed: int) -> None:
        """``n`` perturbed reports of ``platform``'s devices, counted by the worker (which
        evaluates the rules)."""
        d, rng = self.definition, random.Random(seed)
        segment = d.segment({"platform": platform})
        payloads = []
        for v in rng.choices(range(d.k), shares, k=n):
            payload = d.mechanism.perturb(v, rng=rng)
            payload[SEGMENT_KEY] = segment  # what the collector adds beside a report
            payloads.append(json.dumps(payload))
        stream = keys.stream_key(d.name, d.version)
        for i in range(0, n, 1000):
            pipe = self.redis.pipeline(transaction=False)
            for p in payloads[i : i + 1000]:
                pipe.xadd(stream, {"p": p})
            pipe.execute()
        alerts = Alerts(self.redis, min_segment_reports=50)
        Worker(self.redis, handle_signals=False, block_ms=10, on_counted=alerts.evaluate).run(
            once=True
        )


@pytest.fixture
def server(redis_db: Any) -> Iterator[Site]:
    from ldp_server.app import create_server_app

    client = redis_db.client()
    definition = Registry(client).put("app.theme", SPEC).definition
    app = create_server_app({"REDIS_URL": redis_db.url, "ADMIN_TOKEN": ADMIN, "TESTING": True})
    with serving(app) as url:
        site = Site(url, client, definition)
        site.send(NULL, 2000, "ios", seed=1)
        site.send(NULL, 10, "web", seed=2)  # web: hidden from the breakdown
        yield site


def _define(w: Watched, **fields: str) -> None:
    form = w.page.locator("#new-alert")
    for name, value in fields.items():
        if name == "kind":
            form.locator("select[name=kind]").select_option(value)
        else:
            form.locator(f"input[name={name}]").fill(value)
    form.locator("button[type=submit]").click()


def _logged(w: Watched, status: str) -> None:
    """Wait for the console's report of the refused request (it can reach the test after
    the page showed the refusal), check that it is the only error, and forget it."""
    for _ in range(200):
        if w.errors:
            break
        w.page.wait_for_timeout(50)
    assert w.errors and all(status in e for e in w.errors), w.errors
    w.errors.clear()


def _row(w: Watched, rule_id: str) -> Any:
    return w.page.locator(f"#alerts-table tr[data-rule='{rule_id}']")


def _click(w: Watched, rule_id: str, action: str) -> None:
    """An action on a rule, with the admin token entered again (the page keeps it nowhere:
    each action reloads it)."""
    w.page.locator("#new-alert input[name=token]").fill(ADMIN)
    with w.page.expect_navigation():
        _row(w, rule_id).locator(f"button[data-action={action}]").click()


def test_an_operator_defines_and_handles_a_rule_on_the_alerts_page(
    server: Site, watched: Watched
) -> None:
    w, page = watched, watched.page
    page.goto(f"{server.url}/ui/alerts")
    rule = {"metric": "app.theme", "kind": "share_above", "value": "nope", "level": "0.3"}
    _define(w, **rule, token=ADMIN)
    status = page.locator("#alert-form-status")
    status.filter(has_text="refused").wait_for()
    assert "'nope' is not in the domain" in status.inner_text()
    _logged(w, "400")  # the refused POST, as the console reports it

    status.evaluate("e => { e.textContent = ''; }")
    _define(w, value="dark", token="wrong-token")
    status.filter(has_text="refused").wait_for()
    assert store.rules(server.redis) == {}  # a wrong token changes nothing
    _logged(w, "403")

    with page.expect_navigation():
        _define(w, value="dark", token=ADMIN)
    (rule_id,) = store.rules(server.redis)
    row = _row(w, rule_id)
    assert row.get_attribute("data-status") == "ok"
    assert "app.theme" in row.inner_text() and "reports at" in row.inner_text()  # the delay

    server.send(MOVED, 3000, "ios", seed=3)  # the worker fires it
    page.reload()
    assert row.get_attribute("data-status") == "firing"
    banner = page.locator(f"li.alarm[data-rule='{rule_id}']")
    fired = store.firings(server.redis)[rule_id]
    assert f"{fired['n']:,}" in row.inner_text()
    assert "above 30.00%" in banner.inner_text()
    assert "/ui/metric/app.theme" in banner.inner_text()

    _click(w, rule_id, "acknowledge")
    assert row.get_attribute("data-status") == "acknowledged"
    _click(w, rule_id, "silence")
    assert store.states(server.redis)["silences"][rule_id]["until"] > fired["at"]
    _click(w, rule_id, "resolve")
    assert row.get_attribute("data-status") == "ok"
    assert store.firings(server.redis) == {}
    events = page.locator("#events li")
    kinds = {events.nth(i).get_attribute("data-type") for i in range(events.count())}
    assert {"created", "fired", "acknowledged", "silenced", "resolved"} <= kinds
    _click(w, rule_id, "delete")
    assert row.count() == 0 and store.rules(server.redis) == {}
    w.check()


def test_a_rule_on_a_hidden_group_says_on_the_page_that_it_waits(
    server: Site, watched: Watched
) -> None:
    w, page = watched, watched.page
    page.goto(f"{server.url}/ui/alerts")
    fields = {"metric": "app.theme", "kind": "share_above", "value": "dark", "level": "0.3"}
    with page.expect_navigation():
        _define(w, **fields, dimension="platform", group="web", token=ADMIN)
    (rule_id,) = store.rules(server.redis)
    server.send(MOVED, 20, "web", seed=4)  # evaluated: still hidden (30 reports)
    page.reload()
    text = _row(w, rule_id).inner_text()
    assert "waiting: platform=web is hidden from the breakdown" in text
    assert store.firings(server.redis) == {}
    w.check()

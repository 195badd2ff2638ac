"""The poisoning alarm banners in a real Chromium, on the real system.

Two GRR metrics, each with six honest past hours in its stream (appended with entry ids
in those hours, as ``tests/test_poisoning_e2e.py`` does: a window is its entries'
arrival hour, and a test cannot wait six hours), then the current hour's reports
through ``POST /v1/reports``: for one, honest reports plus 5 % crafted ones that always
report the target (the maximal-gain attack on GRR), for its twin the same number of
honest reports. The real aggregator worker counts them; the metric page (whose banner
is drawn by ``metric.js``) and the overview (drawn by the template, then redrawn by
``overview.js``) must show exactly the API's alarms for the first and no banner for
the twin.

Margin: k = 16, ε = 1, N = 3,000 honest reports an hour. The target's support rate is
π = q* + f(p* − q*) ≈ 0.059 (f ≈ 2.5 %), about 176 reports an hour with σ ≈ 13, ×1.08
against the six-hour baseline; the 150 crafted reports make z ≈ 10 against Holm's first
threshold z(10⁻³/16) = 3.8. The twin's windows are honest: a false alarm has probability
at most 10⁻³ per window, and the reports are seeded.
"""

from __future__ import annotations

import random
import time
import urllib.error
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import redis
from browser_helpers import Watched, chromium_missing

_missing = chromium_missing()
if _missing:
    pytest.skip(_missing, allow_module_level=True)

from playwright.sync_api import Browser  # noqa: E402
from poisoning_helpers import append_past_hours, zipf_population  # noqa: E402
from test_dashboard_browser import _request  # noqa: E402

from client_sdk.wire import MetricDefinition, build_report  # noqa: E402
from ldp_server.serve import Server  # noqa: E402
from ldp_store import schema  # noqa: E402

K, N = 16, 3_000
FAKES = N // 20
"""5 % of the current hour: 1 % of N = 3,000 is 30 reports, z ≈ 2, below the threshold at
this size (the CLI's 1 % is measured at n = 10⁵)."""
PAST_HOURS = 6
POISONED, TWIN = "shop.page", "shop.page-twin"
FRESH = "shop.fresh"
"""A metric with the current hour's honest reports only: no baseline yet (issue 35)."""
TARGET = "page-11"
DOMAIN = [f"page-{i}" for i in range(K)]
SPEC = {"domain": DOMAIN, "epsilon": 1.0, "mechanism": "grr"}


def post(url: str, reports: list[dict[str, Any]]) -> None:
    """Through the collector, in batches of 1,000, waiting out a 429 (per-source limits)."""
    for i in range(0, len(reports), 1000):
        while True:
            try:
                body = _request(f"{url}/v1/reports", "POST", {"reports": reports[i : i + 1000]})
                break
            except urllib.error.HTTPError as exc:
                if exc.code != 429:
                    raise
                time.sleep(float(exc.headers.get("Retry-After", "1")))
        assert body["accepted"] == len(reports[i : i + 1000])


def current_hour(definition: MetricDefinition, fakes: int, seed: int) -> list[dict[str, Any]]:
    """N honest reports from the SDK's randomizer plus ``fakes`` that skip it."""
    rng = random.Random(seed)
    values = np.random.default_rng(seed).choice(K, size=N, p=zipf_population(K))
    reports = [build_report(definition, int(v), rng) for v in values]
    for _ in range(fakes):
        fake = build_report(definition, 0, rng)
        fake["payload"] = {"v": DOMAIN.index(TARGET)}
        reports.append(fake)
    rng.shuffle(reports)
    return reports


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The real system with a poisoned metric and its honest twin counted."""
    left = schema.HOUR_MS - int(time.time() * 1000) % schema.HOUR_MS
    if left < 120_000:  # the current window must hold all of its reports
        time.sleep(left / 1000 + 1)
    data = tmp_path_factory.mktemp("alarms")
    with Server(port=0, data_dir=data, web_workers=1, aggregators=1, quiet=True) as s:
        client = redis.Redis.from_url(s.redis_url)
        for seed, (name, fakes) in enumerate(((POISONED, FAKES), (TWIN, 0))):
            body = _request(f"{s.url}/v1/metrics/{name}", "PUT", SPEC, s.admin_token)
            definition = MetricDefinition.from_dict(body)
            append_past_hours(client, definition, seed, N, PAST_HOURS)
            post(s.url, current_hour(definition, fakes, seed=101 + seed))
        body = _request(f"{s.url}/v1/metrics/{FRESH}", "PUT", SPEC, s.admin_token)
        post(s.url, current_hour(MetricDefinition.from_dict(body), 0, seed=103))
        counted = ((POISONED, (PAST_HOURS + 1) * N + FAKES), (TWIN, (PAST_HOURS + 1) * N))
        for name, n in (*counted, (FRESH, N)):
            deadline = time.monotonic() + 60
            while _request(f"{s.url}/v1/estimates/{name}")["n"] < n:
                assert time.monotonic() < deadline, f"{name} not counted"
                time.sleep(0.2)
        client.close()
        yield s


def banner_lines(banner: Any) -> list[tuple[str, str, str]]:
    """(kind, window, text) of each line of an alarm banner."""
    items = banner.locator("li")
    return [
        (
            items.nth(i).get_attribute("data-kind") or "",
            items.nth(i).get_attribute("data-window") or "",
            items.nth(i).inner_text(),
        )
        for i in range(items.count())
    ]


def expected_lines(alarms: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [
        (a["kind"], a["window"], f"{a['kind']} · {a['window']}: {a['evidence']}") for a in alarms
    ]


def test_the_api_alarms_on_the_poisoned_metric_only(server: Server) -> None:
    hour = schema.window_names(int(time.time() * 1000))[0]
    alarms = _request(f"{server.url}/v1/estimates/{POISONED}")["alarms"]
    shift = next(a for a in alarms if a["window"] == hour)
    assert shift["kind"] == "shift" and shift["values"][0] == TARGET
    assert _request(f"{server.url}/v1/estimates/{TWIN}")["alarms"] == []


def test_metric_page_banner_shows_the_apis_alarms(watched: Watched, server: Server) -> None:
    page = watched.page
    api = _request(f"{server.url}/v1/estimates/{POISONED}")
    assert api["alarms"], "no alarm to show"
    page.goto(f"{server.url}/ui/metric/{POISONED}")
    page.wait_for_selector(f"main[data-state='ready'][data-n='{api['n']}']")
    banner = page.locator("#alarms")
    assert banner.is_visible() and banner.get_attribute("data-count") == str(len(api["alarms"]))
    assert banner_lines(banner) == expected_lines(api["alarms"])
    assert "Possible poisoning" in banner.inner_text()
    rate = banner.locator('[data-field="alarm-rate"]').inner_text()
    assert rate == f"{round(1 / api['alarm_rate']):,}"

    twin = page.context.new_page()
    twin.goto(f"{server.url}/ui/metric/{TWIN}")
    twin.wait_for_selector("main[data-state='ready']")
    assert twin.locator("#alarms").is_hidden()
    assert twin.locator("#alarms li").count() == 0
    watched.check()


def test_overview_banner_shows_the_apis_alarms(
    watched: Watched, server: Server, browser: Browser
) -> None:
    """As the template draws it (JavaScript off), and as overview.js redraws it from
    /v1/overview (the status turns live once the first redraw is done)."""
    overview = {m["name"]: m for m in _request(f"{server.url}/v1/overview")["metrics"]}
    assert overview[POISONED]["alarms"] and overview[TWIN]["alarms"] == []
    static = browser.new_context(java_script_enabled=False)
    pages = [static.new_page(), watched.page]
    pages[0].goto(server.url + "/")
    pages[1].goto(server.url + "/")
    pages[1].wait_for_selector("#refresh-status.live")
    for page in pages:
        rows = '#overview-table tr[data-metric="{}"] [data-field="alarms"]'
        poisoned, twin = page.locator(rows.format(POISONED)), page.locator(rows.format(TWIN))
        assert poisoned.is_visible() and twin.is_hidden()
        assert banner_lines(poisoned) == expected_lines(overview[POISONED]["alarms"])
        assert poisoned.get_attribute("data-count") == str(len(overview[POISONED]["alarms"]))
        assert twin.locator("li").count() == 0 and twin.get_attribute("data-count") == "0"
    static.close()
    watched.check()


def test_a_fresh_metric_page_says_it_has_no_baseline_yet(watched: Watched, server: Server) -> None:
    """Issue 35: until the alarms have previous windows, the page says so, with how far
    1 % of crafted reports could move a value (the API's note); with history it does not."""
    said = _request(f"{server.url}/v1/estimates/{FRESH}")["poisoning_baseline"]
    assert not said["exists"]
    page = watched.page
    page.goto(f"{server.url}/ui/metric/{FRESH}")
    page.wait_for_selector("main[data-state='ready']")
    notice = page.locator("#no-baseline")
    assert notice.is_visible() and notice.inner_text() == said["note"]
    assert "No baseline yet" in said["note"] and "percentage points" in said["note"]
    page.goto(f"{server.url}/ui/metric/{TWIN}")
    page.wait_for_selector("main[data-state='ready']")
    assert page.locator("#no-baseline").is_hidden()
    watched.check()

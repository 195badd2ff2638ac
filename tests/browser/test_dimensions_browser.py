"""A metric's breakdown by a public dimension in a real Chromium, on the real system.

Devices report a theme with their platform through the Python SDK over HTTP; the real
aggregator counts each segment. The page must label the breakdown as not protected by ε,
draw each shown group's shares with their intervals (the estimates API's numbers), and
list the groups it does not show with the reason, with no console errors or requests
leaving the server's origin.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from browser_helpers import Watched, chromium_missing

_missing = chromium_missing()
if _missing:
    pytest.skip(_missing, allow_module_level=True)

from playwright.sync_api import expect  # noqa: E402
from test_dashboard_browser import _request, close, counted_server, graph  # noqa: E402

from ldp_server.serve import Server  # noqa: E402

NAME = "app.theme"
SPEC = {
    "domain": ["light", "dark", "auto"],
    "epsilon": 2.0,
    "dimensions": [
        {"name": "platform", "values": ["ios", "android", "web"]},
        {"name": "app_version", "values": ["1.0", "2.0"]},
    ],
}
SIZES = {"ios": 600, "android": 400, "web": 20}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    def reports() -> Iterator[tuple[str, dict[str, str]]]:
        picker = random.Random(6)
        for platform, n in SIZES.items():
            for i in range(n):
                value = "dark" if platform == "android" or picker.random() < 0.3 else "light"
                yield value, {"platform": platform, "app_version": "2.0" if i % 2 else "1.0"}

    with counted_server(tmp_path_factory.mktemp("dims"), NAME, SPEC, reports()) as s:
        yield s


def test_breakdown_by_a_dimension_is_labelled_and_hides_small_groups(
    watched: Watched, server: Server
) -> None:
    page = watched.page
    page.goto(f"{server.url}/ui/metric/{NAME}")
    view = page.get_by_test_id("segments-view")
    expect(view).to_contain_text("not protected by ε")
    table = page.locator("#segments-table tbody")
    expect(table.locator("tr")).to_have_count(3)
    body = _request(f"{server.url}/v1/estimates/{NAME}?by=platform")
    groups = {g["value"]: g for g in body["groups"]}
    # web has 20 reports: not shown; android is held back with it (else total − ios − android = web)
    assert [g for g in groups if groups[g]["shown"]] == ["ios"]
    expect(table.locator('tr[data-group="web"]')).to_contain_text("fewer than 50 reports")
    expect(table.locator('tr[data-group="android"]')).to_contain_text("held back")
    expect(table.locator('tr[data-group="web"]')).not_to_contain_text("20")
    page.wait_for_function("document.getElementById('segments-chart').data !== undefined")
    traces = graph(page, "segments-chart")
    assert [t["name"] for t in traces] == ["platform = ios"]
    ios = groups["ios"]["estimates"]["estimates"]
    assert traces[0]["x"] == ["light", "dark", "auto"]
    assert close(traces[0]["y"], [r["frequency"] for r in ios])
    assert close(traces[0]["err"]["array"], [r["ci_high"] - r["frequency"] for r in ios])
    expect(page.locator("#segments-released")).to_contain_text("NOT protected by ε")

    page.locator("#segments-by").select_option("app_version")
    expect(table.locator('tr[data-shown="true"]')).to_have_count(2)
    page.wait_for_function("document.getElementById('segments-chart').data.length === 2")
    traces = graph(page, "segments-chart")
    assert [t["name"] for t in traces] == ["app_version = 1.0", "app_version = 2.0"]
    watched.check()


def test_the_breakdown_follows_the_pages_estimand_and_multiplicity(
    watched: Watched, server: Server
) -> None:
    """The breakdown asks ?by= with the intervals and share chosen on the page and names
    them in the panel: it used to ask with the defaults whatever was chosen, so its bars
    were the reporters' one-at-a-time intervals beside a page showing the population's
    (fails on the old code)."""
    page = watched.page
    page.goto(f"{server.url}/ui/metric/{NAME}")
    view = page.get_by_test_id("segments-view")
    page.wait_for_selector("#segments-view[data-estimand='reporters'][data-multiplicity='each']")
    expect(page.get_by_test_id("segments-modes")).to_contain_text("each for its value alone")
    expect(page.get_by_test_id("segments-modes")).to_contain_text("the devices that reported")

    page.locator('[data-share="population"]').click()
    page.locator('[data-intervals="fdr"]').click()
    page.wait_for_selector("#segments-view[data-estimand='population'][data-multiplicity='fdr']")
    modes = page.get_by_test_id("segments-modes")
    expect(modes).to_contain_text("the population the devices were drawn from")
    expect(modes).to_contain_text("Benjamini–Hochberg")
    asked = "by=platform&estimand=population&multiplicity=fdr"
    body = _request(f"{server.url}/v1/estimates/{NAME}?{asked}")
    assert (body["estimand"], body["multiplicity"], body["level"]) == ("population", "fdr", None)
    ios = next(g for g in body["groups"] if g["value"] == "ios")["estimates"]
    plain = _request(f"{server.url}/v1/estimates/{NAME}?by=platform")
    mine = next(g for g in plain["groups"] if g["value"] == "ios")["estimates"]
    wider = [a["ci_high"] - a["ci_low"] > b["ci_high"] - b["ci_low"] for a, b in
             zip(ios["estimates"], mine["estimates"], strict=True)]  # fmt: skip
    assert all(wider)  # the two answers differ: the chart shows which one was asked
    page.wait_for_function(
        "(h) => { const d = document.getElementById('segments-chart').data;"
        " return d && d[0].error_y.array[0] === h; }",
        arg=ios["estimates"][0]["ci_high"] - ios["estimates"][0]["frequency"],
    )
    traces = graph(page, "segments-chart")
    assert close(
        traces[0]["err"]["array"], [r["ci_high"] - r["frequency"] for r in ios["estimates"]]
    )
    assert close(
        traces[0]["err"]["minus"], [r["frequency"] - r["ci_low"] for r in ios["estimates"]]
    )
    expect(view.locator('tr[data-group="web"]')).to_contain_text("fewer than 50 reports")

    page.locator('[data-intervals="simultaneous"]').click()
    page.wait_for_selector("#segments-view[data-multiplicity='simultaneous']")
    expect(modes).to_contain_text("hold for all its values at once")
    watched.check()

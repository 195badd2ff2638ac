"""A joint metric's breakdown page in a real Chromium, on the real system.

Devices report (os, version, crash) tuples through the Python SDK over HTTP; the real
aggregator counts them. The page must draw one attribute's shares with their intervals
(and the consistent estimate beside them), then, broken down by another attribute,
grouped bars with intervals and a heatmap, every number the estimates API's, with no
console errors or requests leaving the server's origin.
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

NAME = "app.crashes"
SPEC = {
    "kind": "joint",
    "attributes": [
        {"name": "os", "domain": ["android", "ios", "web"]},
        {"name": "version", "domain": ["1.0", "1.1", "2.0"]},
        {"name": "crash", "domain": ["none", "oom", "anr"]},
    ],
    "epsilon": 4.0,
    "description": "Crashes by OS and version",
}
USERS = 3000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    def reports() -> Iterator[tuple[dict[str, str], None]]:
        picker = random.Random(6)
        for _ in range(USERS):
            os_ = picker.choices(["android", "ios", "web"], [5, 3, 2])[0]
            crash = "oom" if os_ == "android" and picker.random() < 0.5 else "none"
            yield {"os": os_, "version": picker.choice(["1.0", "1.1", "2.0"]), "crash": crash}, None

    with counted_server(tmp_path_factory.mktemp("joint"), NAME, SPEC, reports()) as s:
        yield s


def test_breakdown_page_draws_bars_intervals_and_a_heatmap(
    watched: Watched, server: Server
) -> None:
    page = watched.page
    page.goto(f"{server.url}/ui/metric/{NAME}")
    expect(page.get_by_test_id("fact-n")).to_have_text(f"{USERS:,}")
    expect(page.get_by_test_id("fact-layout")).to_have_text("marginals")
    one = _request(f"{server.url}/v1/estimates/{NAME}?marginal=os")["marginals"][0]
    table = page.get_by_test_id("cells-table")
    expect(table.locator("tbody tr")).to_have_count(3)
    page.wait_for_function("document.getElementById('bars-chart').data !== undefined")
    traces = graph(page, "bars-chart")
    assert [t["name"] for t in traces] == ["unbiased ± interval", "consistent (post-processed)"]
    assert traces[0]["x"] == ["android", "ios", "web"]
    assert close(traces[0]["y"], [c["frequency"] for c in one["cells"]])
    assert close(traces[0]["err"]["array"], [c["ci_high"] - c["frequency"] for c in one["cells"]])
    assert close(traces[1]["y"], [c["consistent"] for c in one["cells"]])
    assert page.get_by_test_id("heatmap-chart").is_hidden()

    page.get_by_test_id("attr-select").select_option("crash")
    page.get_by_test_id("by-select").select_option("os")
    expect(table.locator("tbody tr")).to_have_count(9)
    two = _request(f"{server.url}/v1/estimates/{NAME}?marginal=crash&by=os")["marginals"][0]
    assert two["attributes"] == ["os", "crash"]
    page.wait_for_function("document.getElementById('bars-chart').data.length === 3")
    traces = graph(page, "bars-chart")
    assert [t["name"] for t in traces] == ["os = android", "os = ios", "os = web"]
    android = [c for c in two["cells"] if c["cell"][0] == "android"]
    assert traces[0]["x"] == ["none", "oom", "anr"]
    assert close(traces[0]["y"], [c["frequency"] for c in android])
    assert close(traces[0]["err"]["minus"], [c["frequency"] - c["ci_low"] for c in android])
    expect(page.get_by_test_id("heatmap-chart")).to_be_visible()
    heat = page.evaluate("document.getElementById('heatmap-chart').data[0].z")
    assert close([x for row in heat for x in row], [c["frequency"] for c in two["cells"]])
    # the breakdown shows what was reported: android's oom share is far from zero
    oom = next(c for c in android if c["cell"][1] == "oom")
    assert oom["ci_low"] > 0.1
    watched.check()

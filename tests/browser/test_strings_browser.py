"""The string metric page and the explorer's string mode in a real Chromium, on the real
system.

A string metric (search terms) gets 3,000 reports from the SDK over HTTP; the real
aggregator counts them. The page must list exactly the values the estimates API
discovered, with their intervals, show the detection threshold at the current n, and
estimate values typed into its form (``?candidates=``); the tradeoff explorer, switched
to strings, must draw the planning API's curve and answer "how many users to find values
of x %" with the API's number; all without console errors or requests leaving the
server's origin.
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
from test_dashboard_browser import _request, counted_server, graph, points  # noqa: E402

from ldp_server.serve import Server  # noqa: E402

NAME = "search.term"
SPEC = {"kind": "string", "max_length": 8, "epsilon": 6.0, "description": "What people search"}
TERMS = {"pizza": 0.4, "sushi": 0.25, "crêpe": 0.15}
USERS = 3000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    def reports() -> Iterator[tuple[str, None]]:
        picker = random.Random(6)
        tail = [f"w{i:03d}" for i in range(500)]
        for _ in range(USERS):
            x, value = picker.random(), None
            for term, share in TERMS.items():
                if x < share:
                    value = term
                    break
                x -= share
            yield value or picker.choice(tail), None

    with counted_server(tmp_path_factory.mktemp("strings"), NAME, SPEC, reports()) as s:
        yield s


def test_string_page_shows_the_discovered_values_threshold_and_candidates(
    watched: Watched, server: Server
) -> None:
    api = _request(f"{server.url}/v1/estimates/{NAME}")
    found = [row["value"] for row in api["estimates"]]
    assert set(TERMS) <= set(found)
    page = watched.page
    page.goto(f"{server.url}/ui/metric/{NAME}")
    table = page.get_by_test_id("discovered-table")
    expect(table.locator("tbody tr")).to_have_count(len(found))
    assert table.locator("tbody tr td.value").all_inner_texts() == found
    first = api["estimates"][0]
    row = table.locator("tbody tr").first
    low, high = max(first["ci_low"], 0) * 100, first["ci_high"] * 100
    expect(row).to_contain_text(f"{first['frequency'] * 100:.2f}%")
    expect(row).to_contain_text(f"{low:.2f}% – {high:.2f}%")
    expect(page.get_by_test_id("fact-n")).to_have_text(f"{USERS:,}")
    threshold = f"{api['detection_threshold'] * 100:.2f}% at n = {USERS:,}"
    expect(page.get_by_test_id("fact-threshold")).to_have_text(threshold)

    page.locator("#candidates-input").fill("pizza, ramen")
    page.get_by_role("button", name="Estimate").click()
    candidates = page.get_by_test_id("candidates-table")
    expect(candidates.locator("tbody tr")).to_have_count(2)
    asked = _request(f"{server.url}/v1/estimates/{NAME}?candidates=pizza,ramen")["candidates"]
    assert candidates.locator("tbody tr td.value").all_inner_texts() == ["pizza", "ramen"]
    expect(candidates.locator("tbody tr").nth(0)).to_contain_text("yes")
    expect(candidates.locator("tbody tr").nth(1)).to_contain_text(
        f"{asked[1]['frequency'] * 100:.2f}%"
    )

    page.locator("#plan-frequency").fill("1")
    page.get_by_role("button", name="Users needed").click()
    planned = _request(f"{server.url}/v1/plan/strings?epsilon=6&max_length=8&frequency=0.01")
    expect(page.get_by_test_id("plan-answer")).to_contain_text(f"{planned['users']:,} users")
    watched.check()


def _ready(watched: Watched, **data: str) -> None:
    """Wait until the explorer has drawn what its inputs ask (data-* of #explorer)."""
    marks = "".join(f"[data-{k.replace('_', '-')}='{v}']" for k, v in data.items())
    watched.page.wait_for_selector(f"#explorer[data-state='ready'][data-kind='string']{marks}")


def test_the_explorer_answers_how_many_users_find_a_frequency(
    watched: Watched, server: Server
) -> None:
    page = watched.page
    page.goto(f"{server.url}/ui/explorer?epsilon=2")
    page.wait_for_selector("#explorer[data-state='ready'][data-kind='categorical']")
    expect(page.locator("#length-input")).to_be_hidden()
    page.get_by_test_id("kind-select").select_option("string")
    expect(page.locator("#k-input")).to_be_hidden()
    expect(page.get_by_test_id("half-width")).to_be_hidden()
    page.locator("#epsilon-input").fill("4")
    page.locator("#frequency-input").fill("0.5")
    _ready(watched, epsilon="4", max_length="16", n="10000")
    assert "kind=string" in page.url

    plan = f"{server.url}/v1/plan/strings?epsilon=4&max_length=16&concentration=0"
    need = _request(f"{plan}&frequency=0.005")
    answer = page.get_by_test_id("string-answer")
    expect(answer).to_contain_text(f"{need['users']:,} users")
    assert int(answer.get_attribute("data-users") or -1) == need["users"]
    at_n = _request(f"{plan}&users=10000")
    expect(page.get_by_test_id("found-now")).to_contain_text(f"{points(at_n['frequency'])} %")
    # the chart is the curve API's, over an axis reaching past the users needed
    n_max = max(1e8, 10 * 10_000, 10 * need["users"])
    curve = _request(f"{plan}&n_max={n_max}&points=81".replace("/strings?", "/strings/curve?"))
    traces = {t["meta"]: t for t in graph(page, "string-chart")}
    assert traces["frequency"]["x"] == pytest.approx(curve["n"])
    assert traces["frequency"]["y"] == [f if f <= 1 else None for f in curve["frequency"]]
    assert traces["needed"]["x"] == [need["users"]] and traces["now"]["x"] == [10_000]

    # with collisions: the floor is drawn, and below it no number of users suffices
    page.locator("#concentration-input").fill("0.01")
    page.locator("#frequency-input").fill("0.1")
    floored = _request(plan.replace("concentration=0", "concentration=0.01") + "&frequency=0.001")
    assert floored["users"] is None and floored["floor"] > 0.001
    expect(answer).to_contain_text("No number of users finds values of 0.10 %")
    expect(answer).to_contain_text(f"{points(floored['floor'])} %")
    expect(page.locator("#string-chart")).to_contain_text("collision floor")
    watched.check()


def test_a_string_metrics_explorer_starts_at_its_epsilon_length_and_n(
    watched: Watched, server: Server
) -> None:
    page = watched.page
    page.goto(f"{server.url}/ui/metric/{NAME}")
    page.get_by_role("link", name="Tradeoff explorer").click()
    _ready(watched, epsilon="6", max_length="8", n=str(USERS))
    expect(page.get_by_test_id("kind-select")).to_be_disabled()
    expect(page.locator("#length-input")).to_have_value("8")
    need = _request(f"{server.url}/v1/plan/strings?epsilon=6&max_length=8&frequency=0.005")
    answer = page.get_by_test_id("string-answer")
    expect(answer).to_contain_text(f"{need['users']:,} users")
    expect(answer).to_contain_text(f"So far: {USERS:,} reports")
    watched.check()

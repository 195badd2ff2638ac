"""Device- and admin-written text on the dashboard, in a real Chromium on the real system.

A categorical metric whose admin-set labels hold Plotly pseudo-HTML (``<b>``, ``<br>``,
``<a href>``, an entity), a zero-width space and joiner, and a right-to-left override;
a string metric whose devices report such values (3,000 reports from the SDK over
HTTP, counted by the real aggregator). Every value must be shown as the text it is: in
the tables with its invisible characters as escapes in their own style, in the charts'
ticks, legends and hover text neither as markup nor with characters hidden; and the
page's ``LDP.visible`` must escape exactly what ``aggregator.safe_text.visible`` does.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

import pytest
from browser_helpers import Watched, chromium_missing

_missing = chromium_missing()
if _missing:
    pytest.skip(_missing, allow_module_level=True)

from test_dashboard_browser import _request  # noqa: E402

from aggregator.safe_text import visible  # noqa: E402
from client_sdk import Client  # noqa: E402
from ldp_server.serve import Server  # noqa: E402

LABELS = {
    "<b>bold</b>": 0.2,
    "line<br>break": 0.15,
    '<a href="http://example.invalid/">link</a>': 0.15,
    "pay\u200bpal\u200d.com": 0.15,
    "abc\u202etxt.exe": 0.1,
    "&lt;i&gt;": 0.1,
    "%{y} plain": 0.1,
    "plain": 0.05,
}
"""Labels of app.labels and their shares among its reports."""
VALUES = ["pay\u200bpal\u200d.com", "<b>bold</b>", "abc\u202etxt.exe"]
"""What the devices report to app.terms, in equal shares."""
STRING_SPEC = {"kind": "string", "max_length": 16, "epsilon": 8.0}
USERS = 3000
VECTORS = [
    "paypal.com",
    "pay\u200bpal\u200d.com",
    "\u202egnp.exe",
    "a\u2066b\u2069c\u200e\u200f",
    "\ufeffbom\u00adsoft",
    "nul\x00esc\x1b[31m\x7f\x85",
    "tab\tnew\nline\u2028para\u2029",
    "tag\U000e0041\U000e007f",
    "\u3164\u115f\u1160\uffa0\u034f\u180b\u180e",
    "private\ue000\U000f0000",
    "crêpe 寿司 ÿ 🍕 \u00a0nbsp",
    "<b>x</b> & %{y}",
]
"""Python's and the page's escaping must agree on these (no unassigned code points:
the two Unicode databases may differ on those)."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("text")
    with Server(port=0, data_dir=data, web_workers=1, aggregators=1, quiet=True) as s:
        spec = {"domain": list(LABELS), "epsilon": 2.0, "mechanism": "oue"}
        _request(f"{s.url}/v1/metrics/app.labels", "PUT", spec, s.admin_token)
        _request(f"{s.url}/v1/metrics/app.terms", "PUT", STRING_SPEC, s.admin_token)
        client = Client(s.url, flush_at=500, rng=random.Random(7))
        picker = random.Random(8)
        for i in range(USERS):
            assert client.report("app.terms", VALUES[i % len(VALUES)])
            if i % 5 == 0:
                assert client.report(
                    "app.labels", picker.choices(list(LABELS), list(LABELS.values()))[0]
                )
        assert client.flush(timeout=60)
        client.shutdown()
        deadline = time.monotonic() + 60
        while (
            _request(f"{s.url}/v1/estimates/app.terms")["n"] < USERS
            or _request(f"{s.url}/v1/estimates/app.labels")["n"] < USERS // 5
        ):
            assert time.monotonic() < deadline, "not counted"
            time.sleep(0.2)
        yield s


def test_the_pages_escaping_is_pythons(watched: Watched, server: Server) -> None:
    page = watched.page
    page.goto(f"{server.url}/ui/metric/app.labels")
    page.wait_for_selector("main[data-state='ready']")
    shown = page.evaluate("(xs) => xs.map(window.LDP.visible)", VECTORS)
    assert shown == [visible(v) for v in VECTORS]
    watched.check()


def test_labels_are_text_in_the_table_and_the_charts(watched: Watched, server: Server) -> None:
    page = watched.page
    page.goto(f"{server.url}/ui/metric/app.labels")
    page.wait_for_selector("main[data-state='ready']")
    expected = [visible(label) for label in LABELS]

    # The bar chart's ticks: the labels' own characters, no markup, no link (on the y
    # axis: labels this long lie, one row each).
    assert page.evaluate("() => document.getElementById('freq-chart').data[0].orientation") == "h"
    ticks = page.locator("#freq-chart .ytick text").all_text_contents()
    assert ticks == expected

    # The table: each label as text, invisible characters as escapes in their own style.
    cells = page.locator("#estimates-table tbody td:first-child")
    assert cells.all_text_contents() == expected
    paypal = page.locator('#estimates-table tbody tr[data-value="pay\u200bpal\u200d.com"]')
    marks = paypal.locator(".hidden-char")
    assert marks.all_text_contents() == ["\\u200b", "\\u200d"]
    assert (
        marks.first.get_attribute("title", timeout=5000)
        == "U+200B: a character that prints nothing"
    )
    assert marks.first.evaluate("(e) => getComputedStyle(e).backgroundColor") != "rgba(0, 0, 0, 0)"

    for chart in ("#freq-chart", "#trend-chart"):
        assert page.locator(f"{chart} svg a").count() == 0, chart
        bold = page.locator(f"{chart} tspan[style*='bold']")
        assert bold.count() == 0, chart

    # The trend's legend: its series named by the labels as text.
    legend = page.locator("#trend-chart .legendtext").all_text_contents()
    series = [name for name in legend if name != "reports in the window (n)"]
    assert len(series) == 6 and set(series) <= set(expected), legend
    assert any("<" in name for name in series)

    # Hover text: the label as text, the %{y} inside a label not substituted.
    hover = page.evaluate(
        "() => document.getElementById('freq-chart').data[0].customdata.map((c) => c[3])"
    )
    assert hover[list(LABELS).index("%{y} plain")] == "%{y} plain"
    assert hover[0] == "&lt;b&gt;bold&lt;/b&gt;"  # drawn by Plotly as <b>bold</b>
    watched.check()


def test_discovered_values_show_their_invisible_characters(
    watched: Watched, server: Server
) -> None:
    page = watched.page
    api = _request(f"{server.url}/v1/estimates/app.terms")
    assert {r["value"] for r in api["estimates"]} == set(VALUES)  # raw in JSON
    page.goto(f"{server.url}/ui/metric/app.terms")
    page.wait_for_selector("#discovered-table tbody tr")
    cells = page.locator("#discovered-table tbody td.value").all_text_contents()
    assert sorted(cells) == sorted(visible(v) for v in VALUES)
    assert "pay\\u200bpal\\u200d.com" in cells and "abc\\u202etxt.exe" in cells
    marks = page.locator("#discovered-table .hidden-char").all_text_contents()
    assert sorted(marks) == ["\\u200b", "\\u200d", "\\u202e"]
    # Typed-in values are shown the same way.
    page.fill("#candidates-input", "pay\u200bpal\u200d.com, paypal.com")
    page.click("#candidates-form button[type=submit]")
    page.wait_for_selector("#candidates-table:not([hidden]) tbody tr")
    typed = page.locator("#candidates-table tbody td.value").all_text_contents()
    assert typed == ["pay\\u200bpal\\u200d.com", "paypal.com"]
    watched.check()

"""``/ui/try`` against a real ``ldp serve``: a value reported from the page leaves it
perturbed (the page shows the exact body the collector received, and the true value never
leaves), and the page shows n going up by exactly one once the aggregator has counted it."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import chromium_missing, watch
from playwright.sync_api import expect

_missing = chromium_missing()
if _missing:
    pytest.skip(_missing, allow_module_level=True)

from test_dashboard_browser import _request  # noqa: E402

from aggregator.web.dashboard import CONTENT_SECURITY_POLICY  # noqa: E402
from ldp_server.serve import Server  # noqa: E402

SPECS = {
    "app.theme": {"domain": ["light", "dark", "sepia-zq"], "epsilon": 1.0},
    "app.layout": {"domain": [f"layout-{i}" for i in range(40)], "epsilon": 2.0},
    "session.minutes": {"kind": "numeric", "range": [0, 120], "epsilon": 1.0},
    "search.term": {"kind": "string", "max_length": 8, "epsilon": 4.0},
    # `auto` picks OLH here: its reports carry (a, b, y)
    "app.screen": {"domain": [f"screen-{i}" for i in range(300)], "epsilon": 1.0},
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("try")
    with Server(port=0, data_dir=data, web_workers=1, aggregators=1, quiet=True) as s:
        for name, spec in SPECS.items():
            _request(f"{s.url}/v1/metrics/{name}", "PUT", spec, s.admin_token)
        yield s


def _send_from_the_page(page: Any, server: Server, metric: str, value: str) -> Any:
    """Open /ui/try, pick ``metric`` (its label) and ``value``, send; the status line."""
    page.goto(f"{server.url}/ui/try")
    status = page.locator("#try-status")
    expect(status).to_have_text("ready", timeout=60_000)
    page.select_option("#try-metric", label=metric)
    page.select_option("#try-value", value)
    page.click("#try-send")
    return status


def test_the_page_lists_categorical_metrics_under_the_dashboards_policy(server: Server) -> None:
    with urllib.request.urlopen(f"{server.url}/ui/try", timeout=10) as r:
        assert r.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
        html = r.read().decode()
    assert "app.theme (v1)" in html and "app.layout (v1)" in html
    assert "session.minutes" not in html and "search.term" not in html


def test_a_value_reported_from_the_page_arrives_perturbed_and_counted_once(
    browser: Any, server: Server
) -> None:
    page = browser.new_page()
    page.set_default_timeout(60_000)
    watched = watch(page, server.url)
    bodies: list[str] = []
    page.on(
        "request",
        lambda r: (
            bodies.append(r.post_data or "")
            if r.method == "POST" and r.url.endswith("/v1/reports")
            else None
        ),
    )
    status = _send_from_the_page(page, server, "app.theme (v1)", "sepia-zq")
    expect(status).to_have_text("counted", timeout=60_000)

    assert len(bodies) == 1
    body = bodies[0]
    assert "sepia-zq" not in body  # the true value never left the page
    sent = json.loads(body)["reports"]
    assert [r["metric"] for r in sent] == ["app.theme"]
    # what the page shows is exactly what left it
    assert page.text_content("#try-payload") == body
    assert page.text_content("#try-true") == "sepia-zq"
    assert _request(f"{server.url}/v1/estimates/app.theme")["n"] == 1
    assert page.text_content("#try-n") == "1"
    assert page.text_content("#try-n-status") == "(was 0)"
    assert page.locator("#try-estimates tbody tr").count() == 3
    # the SDK came from ldp serve itself
    assert f"{server.url}/sdk/ldp-telemetry/index.js" in watched.requests
    watched.check()
    page.close()


def test_the_readmes_web_page_snippet_works_when_pasted(browser: Any, server: Server) -> None:
    """The README's "In a web page" block, pasted into a page of ``ldp serve``'s origin
    (served here by Playwright: ``ldp serve`` hosts no user pages), reports one value."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## In a web page", 1)[1]
    snippet = re.search(r"```html\n(.*?)```", section, re.S)
    assert snippet is not None
    html = snippet.group(1).replace("http://127.0.0.1:8000", server.url)
    before = _request(f"{server.url}/v1/estimates/app.theme")["n"]
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.route(
        f"{server.url}/pasted.html",
        lambda route: route.fulfill(content_type="text/html", body=f"<!doctype html>{html}"),
    )
    page.goto(f"{server.url}/pasted.html")
    deadline = time.monotonic() + 60
    while _request(f"{server.url}/v1/estimates/app.theme")["n"] != before + 1:
        assert not errors, errors
        assert time.monotonic() < deadline, "the snippet's report was not counted"
        time.sleep(0.3)
    assert not errors, errors
    page.close()


def test_an_olh_value_from_the_page_is_counted(browser: Any, server: Server) -> None:
    """Issue 35: the page sent OLH reports without their a and b; the collector refused
    them and the page said "not counted within a minute: is the aggregator running?"."""
    assert _request(f"{server.url}/v1/metrics/app.screen")["mechanism"]["mechanism"] == "olh"
    page = browser.new_page()
    page.set_default_timeout(60_000)
    status = _send_from_the_page(page, server, "app.screen (v1)", "screen-299")
    expect(status).to_have_text("counted", timeout=60_000)
    assert set(json.loads(page.text_content("#try-payload") or "")["reports"][0]["payload"]) == {
        "a",
        "b",
        "y",
    }
    page.close()


def test_a_report_the_collector_refuses_shows_its_reason(browser: Any, server: Server) -> None:
    """When the collector refuses the report, the page says why (the collector's own
    words), not that the aggregator may be down. The upload is altered on its way (its
    payload loses a field, as the SDK's OLH bug did) and reaches the real collector."""
    page = browser.new_page()
    page.set_default_timeout(60_000)

    def damage(route: Any) -> None:
        body = json.loads(route.request.post_data or "")
        for report in body["reports"]:
            report["payload"].pop("a", None)
        route.continue_(post_data=json.dumps(body))

    page.route(f"{server.url}/v1/reports", damage)
    status = _send_from_the_page(page, server, "app.screen (v1)", "screen-3")
    expect(status).to_contain_text("refused by the collector: HTTP 400", timeout=60_000)
    expect(status).to_contain_text("missing ['a']")
    assert "aggregator" not in (status.text_content() or "")
    page.close()

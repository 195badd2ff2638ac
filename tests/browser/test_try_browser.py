"""``/ui/try`` against a real ``ldp serve``: a value reported from the page leaves it
perturbed (the page shows the exact body the collector received, and the true value never
leaves), and the page shows n going up by exactly one once the aggregator has counted it."""

from __future__ import annotations

import base64
import json
import re
import time
import urllib.request
from collections.abc import Callable, Iterator
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
from collector.ingest import Refused  # noqa: E402
from ldp_edge.admission import TooManyRequests  # noqa: E402
from ldp_server.serve import Server  # noqa: E402
from tests.serve_helpers import defined_server  # noqa: E402

SPECS = {
    "app.theme": {"domain": ["light", "dark", "sepia-zq"], "epsilon": 1.0},
    "app.layout": {"domain": [f"layout-{i}" for i in range(40)], "epsilon": 2.0},
    "session.minutes": {"kind": "numeric", "range": [0, 120], "epsilon": 1.0},
    "search.term": {"kind": "string", "max_length": 8, "epsilon": 4.0},
    # `auto` picks OLH here: its reports carry (a, b, y)
    "app.screen": {"domain": [f"screen-{i}" for i in range(300)], "epsilon": 1.0},
    # OUE at k = 20, ε = 1: an all-ones report is implausible (client_sdk plausibility)
    "app.bits": {"domain": [f"b{i}" for i in range(20)], "epsilon": 1.0, "mechanism": "oue"},
    "app.old": {"domain": ["yes", "no"], "epsilon": 1.0},  # retired by a test
    "app.region": {
        "domain": ["light", "dark"],
        "epsilon": 2.0,
        "dimensions": [
            {"name": "platform", "values": ["ios", "android", "web"]},
            {"name": "app_version", "values": ["1.0", "2.0"]},
        ],
    },
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with defined_server(tmp_path_factory.mktemp("try"), SPECS) as s:
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


def _altered(change: Callable[[dict[str, Any]], None]) -> Callable[[Any], None]:
    """A route handler that applies ``change`` to each report of an upload, then lets it
    reach the real collector."""

    def handle(route: Any) -> None:
        body = json.loads(route.request.post_data or "")
        for report in body["reports"]:
            change(report)
        route.continue_(post_data=json.dumps(body))

    return handle


def _answered(status: int, error: str, details: list[str], retry_after: int) -> Any:
    """A route handler that answers as the collector's edge does when it refuses an upload
    for now (a 429 of the per-source limits, a 503 of storage), without reaching it."""
    body = json.dumps({"error": error, "details": details})
    headers = {"Retry-After": str(retry_after)}
    return lambda route: route.fulfill(
        status=status, content_type="application/json", body=body, headers=headers
    )


def test_every_reason_the_collector_refuses_for_is_shown_in_its_words(
    browser: Any, server: Server
) -> None:
    """The collector refuses a report for a reason in its ``rejected`` list (its shape, a
    field, the payload, an unknown metric, a retired one, an implausible payload), or the
    whole request (400, 413, 415, and for now 429 or 503): the page shows each in the
    collector's words, never "not counted within a minute: is the aggregator running?".
    Uploads are altered on their way to the real collector (the payload case:
    test_a_report_the_collector_refuses_shows_its_reason); only the 429 and 503 are
    answered here (from the collector's own error classes). Old code: a retired metric's
    410 and the 429/503 ran into "not counted within a minute" or "the collector did not
    answer"."""
    page = browser.new_page()
    page.set_default_timeout(60_000)
    status = _send_from_the_page(page, server, "app.old (v1)", "yes")
    expect(status).to_have_text("counted", timeout=60_000)  # its definition is now cached
    _request(f"{server.url}/v1/metrics/app.old/retire", "POST", None, server.admin_token)
    too_many = TooManyRequests("reports", 30, "at most 2000 reports per minute per source")
    guard = Refused(
        "metric 'app.theme' version 1 holds its share of the replay guard", "guard", 0, 0
    )
    all_ones = {"b": base64.b64encode(b"\xff\xff\xf0").decode()}  # 20 bits set
    cases: list[tuple[str, str, Callable[[Any], None] | None, list[str]]] = [
        (
            "app.old (v1)",
            "no",
            None,
            ["HTTP 410: metric app.old was retired on", "stop reporting it"],
        ),
        (
            "app.theme (v1)",
            "dark",
            _altered(lambda r: r.update(version="1")),
            ["HTTP 400: 'version' must be a positive integer"],
        ),
        (
            "app.theme (v1)",
            "dark",
            _altered(lambda r: r.update(extra=1)),
            ["HTTP 400: unknown fields ['extra'] (a report has exactly"],
        ),
        (
            "app.theme (v1)",
            "dark",
            _altered(lambda r: r.update(metric="app.nosuch")),
            ["HTTP 400: unknown metric 'app.nosuch' version 1"],
        ),
        (
            "app.bits (v1)",
            "b3",
            _altered(lambda r: r.update(payload=all_ones)),
            ["HTTP 400: oue payload", "implausible under oue: 20 of 20 bits are set"],
        ),
        (
            "app.theme (v1)",
            "dark",
            lambda route: route.continue_(post_data='{"reports": 5}'),
            ["HTTP 400: 'reports' must be a list of reports"],
        ),
        (
            "app.theme (v1)",
            "dark",
            lambda route: route.continue_(
                headers={**route.request.headers, "content-type": "text/plain"}
            ),
            ["HTTP 415: the request body must be JSON"],
        ),
        (
            "app.theme (v1)",
            "dark",
            lambda route: route.continue_(
                post_data=json.dumps(
                    {"reports": [json.loads(route.request.post_data)["reports"][0]] * 1001}
                )
            ),
            ["HTTP 413: too many reports in one request"],
        ),
        (
            "app.theme (v1)",
            "dark",
            _answered(429, too_many.error, too_many.details, 30),
            [
                "not delivered yet",
                "HTTP 429: too many requests from this source: at most 2000",
                "sends it again",
            ],
        ),
        (
            "app.theme (v1)",
            "dark",
            _answered(503, guard.error, guard.details, 60),
            ["not delivered yet", "HTTP 503: metric 'app.theme' version 1 holds its share"],
        ),
    ]
    for metric, value, handler, wanted in cases:
        if handler is not None:
            page.route(f"{server.url}/v1/reports", handler)
        page.select_option("#try-metric", label=metric)
        page.select_option("#try-value", value)
        expect(page.locator("#try-send")).to_be_enabled()
        page.click("#try-send")
        for text in wanted:
            expect(status).to_contain_text(text, timeout=60_000)
        assert "aggregator" not in (status.text_content() or ""), metric
        if handler is not None:
            page.unroute(f"{server.url}/v1/reports")
    page.close()


def test_a_metric_with_dimensions_is_sent_with_the_values_picked(
    browser: Any, server: Server
) -> None:
    """A metric with public dimensions: the page offers a select of each dimension's
    values (none for a metric without), and the report carries the values picked, in the
    clear beside its payload, and is counted. Old code: no select, and the SDK dropped the
    report as invalid_dimensions ("not sent")."""
    page = browser.new_page()
    page.set_default_timeout(60_000)
    page.goto(f"{server.url}/ui/try")
    status = page.locator("#try-status")
    expect(status).to_have_text("ready", timeout=60_000)
    page.select_option("#try-metric", label="app.theme (v1)")
    expect(page.locator("#try-dimensions")).to_be_hidden()
    page.select_option("#try-metric", label="app.region (v1)")
    fieldset = page.locator("#try-dimensions")
    expect(fieldset).to_be_visible()
    expect(fieldset).to_contain_text("not protected by ε")
    platform = page.get_by_label("platform")
    version = page.get_by_label("app_version")
    assert platform.locator("option").all_text_contents() == ["ios", "android", "web"]
    assert version.locator("option").all_text_contents() == ["1.0", "2.0"]
    platform.select_option("web")
    version.select_option("2.0")
    page.select_option("#try-value", "dark")
    page.click("#try-send")
    expect(status).to_have_text("counted", timeout=60_000)
    sent = json.loads(page.text_content("#try-payload") or "")["reports"]
    assert [r["dimensions"] for r in sent] == [{"platform": "web", "app_version": "2.0"}]
    assert _request(f"{server.url}/v1/estimates/app.region")["n"] == 1
    page.close()

"""Every dashboard page on a phone (390 px) and a laptop (1,280 px), in a real Chromium.

One real system (``ldp_server.serve.Server``, a read token set) holds a metric of every
kind the pages draw: categorical with short, long and many labels, memoized, numeric,
string, joint, with public dimensions, PRAM, an older version. The pages are the
dashboard routes of the app's own ``url_map`` (a new route fails here until it is
listed), each visited at both widths in one browser, where ``layout_check.js`` measures
that nothing scrolls sideways, no element leaves the screen, no two text boxes overlap
(chart ticks and labels included) and no text runs past its box or its bar; then
axe-core (pinned in ``tests/browser/package.json``, installed by ``tasks.py test``) must
find no serious or critical violation.
"""

from __future__ import annotations

import base64
import json
import os
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import redis
from browser_helpers import Watched, chromium_missing, watch

_missing = chromium_missing()
if _missing:
    pytest.skip(_missing, allow_module_level=True)

from playwright.sync_api import Browser, BrowserContext, Page  # noqa: E402
from poisoning_helpers import counted  # noqa: E402
from test_dashboard_browser import METRICS as DASHBOARD_METRICS  # noqa: E402
from test_dashboard_browser import _request  # noqa: E402

from aggregator.web.access import PUBLIC_ENDPOINTS  # noqa: E402
from client_sdk import Client  # noqa: E402
from client_sdk.mechanisms import new_secret  # noqa: E402
from client_sdk.wire import MetricDefinition, build_report  # noqa: E402
from ldp_server.app import create_server_app  # noqa: E402
from ldp_server.serve import Server  # noqa: E402

HERE = Path(__file__).resolve().parent
AXE = HERE / "node_modules" / "axe-core" / "axe.min.js"
CHECK = (HERE / "layout_check.js").read_text()
WIDTHS = (390, 1280)
SLACK = 1.0
"""CSS px a box may pass another's edge by: sub-pixel rounding, not a layout fault."""
READ_TOKEN = "layout-test-read-token-0123456789"

LONG = [
    "Settings › Privacy and security › Advanced",
    "Home feed (recommended for you)",
    "Search results for a saved query",
    "Notifications centre",
    "Profile of another user",
    "Checkout, step 2: delivery address",
]
COUNTRIES = [f"{a}{b}" for a in "ABCDEFG" for b in "AEIOUYZ"][:48]
LONG_NAME = "checkout.payment_provider_selection_after_address_validation_2"
"""A 62-character metric name, one word to a browser: it must wrap, not widen a page."""
MIDDLE = [  # long labels that differ only in their middles: cut, they must stay apart
    "Checkout, step 1 of 3: delivery address, billing address and gift options",
    "Checkout, step 2 of 3: delivery address, billing address and gift options",
    "Checkout, step 3 of 3: delivery address, billing address and gift options",
    "Settings › Privacy and security › Site settings › Cookies and other site data",
    "Settings › Privacy and security › Page settings › Cookies and other site data",
    "a_single_unbroken_identifier_of_sixty_two_characters_for_tests",
]
METRICS: dict[str, dict[str, Any]] = {
    "app.screen": {"domain": LONG, "epsilon": 2.0, "mechanism": "oue"},
    "app.country": {"domain": COUNTRIES, "epsilon": 4.0, "description": "48 values: the top 40"},
    "user.age": DASHBOARD_METRICS["user.age"],  # pram
    "app.theme": {  # its first version is measured: the page says a newer one exists
        "domain": ["light", "dark", "auto", "high-contrast"],
        "epsilon": 1.0,
        "mechanism": "grr",
        "description": "The colour theme the app runs in, by platform.",
        "dimensions": [
            {"name": "platform", "values": ["ios", "android", "web"]},
            {"name": "app_version", "values": ["1.0", "2.0"]},
        ],
    },
    "session.minutes": {
        "kind": "numeric",
        "range": [0, 120],
        "epsilon": 1.0,
        "description": "Minutes in the app per session.",
    },
    "search.term": {"kind": "string", "max_length": 8, "epsilon": 6.0},
    LONG_NAME: {  # no budget: the overview lists it among those with none
        "domain": MIDDLE,
        "epsilon": 2.0,
        "mechanism": "grr",
        "dimensions": [{"name": "storefront_region_code", "values": ["north-america", "eu"]}],
    },
    "app.crashes": {
        "kind": "joint",
        "attributes": [
            {"name": "os", "domain": ["android", "ios", "web"]},
            {"name": "version", "domain": ["1.0", "1.1", "2.0"]},
            {"name": "crash", "domain": ["none", "out of memory", "not responding"]},
        ],
        "epsilon": 4.0,
    },
}
MEMOIZED = {
    "domain": ["on", "off", "ask"],
    "epsilon": 1.0,
    "longitudinal": {"permanent_epsilon": 4.0},
    "budget": {"reports_per_period": 2, "period": "day"},
}
USERS = 400


def _value(name: str, rng: random.Random) -> tuple[Any, dict[str, str] | None]:
    """One device's value of ``name`` (and its dimensions)."""
    spec = METRICS[name]
    if name == "session.minutes":
        return min(120.0, rng.expovariate(1 / 20)), None
    if name == "search.term":  # three frequent values, found, and a tail that is not
        terms = ["pizza", "sushi", "crêpe", f"w{rng.randrange(300)}"]
        return rng.choices(terms, [4, 3, 2, 3])[0], None
    if name == "app.crashes":
        os_ = rng.choices(["android", "ios", "web"], [5, 3, 2])[0]
        crash = rng.choice(["none", "out of memory"]) if os_ == "android" else "none"
        return {"os": os_, "version": rng.choice(["1.0", "1.1", "2.0"]), "crash": crash}, None
    domain = spec["domain"]
    value = rng.choices(domain, [1 / (i + 1) for i in range(len(domain))])[0]
    if name == LONG_NAME:
        return value, {"storefront_region_code": rng.choice(["north-america", "eu"])}
    if "dimensions" in spec:
        return value, {"platform": rng.choice(["ios", "android"]), "app_version": "2.0"}
    return value, None


def populate(s: Server) -> None:
    """Define :data:`METRICS` and the memoized app.notify, send their reports, wait until
    the aggregator has counted them, then define app.theme's second version."""
    token = s.admin_token  # grants reads too
    for name, spec in METRICS.items():
        _request(f"{s.url}/v1/metrics/{name}", "PUT", spec, token)
    _request(f"{s.url}/v1/metrics/app.notify", "PUT", MEMOIZED, token)
    client = Client(s.url, flush_at=500, rng=random.Random(3))
    rng = random.Random(4)
    sizes = {name: USERS * (4 if name == "search.term" else 1) for name in METRICS}
    for name, n in sizes.items():
        for _ in range(n):
            value, dimensions = _value(name, rng)
            assert client.report(name, value, dimensions=dimensions)
    assert client.flush(timeout=60)
    client.shutdown()
    notify = MetricDefinition.from_dict(_request(f"{s.url}/v1/metrics/app.notify"))
    reports = [
        build_report(notify, rng.choice(notify.domain), rng, secret=new_secret())
        for _ in range(USERS)
    ]  # one device each: one Client is one device, held to the budget
    _request(f"{s.url}/v1/reports", "POST", {"reports": reports})
    sizes["app.notify"] = USERS
    deadline = time.monotonic() + 90
    redis_client = redis.Redis.from_url(s.redis_url)
    for name, n in sizes.items():  # the counts' n: estimating (strings: a discovery) is dear
        definition = MetricDefinition.from_dict(_request(f"{s.url}/v1/metrics/{name}"))
        while counted(redis_client, definition) < n:
            assert time.monotonic() < deadline, f"{name} not counted"
            time.sleep(0.2)
    redis_client.close()
    for name, n in sizes.items():  # and the API sees them all
        assert _request(f"{s.url}/v1/estimates/{name}", token=token, timeout=60)["n"] == n
    theme_v2 = {**METRICS["app.theme"], "epsilon": 2.0}
    _request(f"{s.url}/v1/metrics/app.theme", "PUT", theme_v2, token)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The system, read token set, with every kind of metric defined and counted."""
    data = tmp_path_factory.mktemp("layout")
    with (
        mock.patch.dict(os.environ, {"LDP_READ_TOKEN": READ_TOKEN}),
        Server(port=0, data_dir=data, web_workers=1, aggregators=1, quiet=True) as s,
    ):
        populate(s)
        yield s


# -- the pages ----------------------------------------------------------------------------


def _send_one(page: Page) -> None:
    """/ui/try: report a value and wait until the reply and the counted n are shown."""
    page.select_option("#try-metric", label="app.screen (v1)")
    page.click("#try-send")
    page.wait_for_selector("#try-result:not([hidden])")
    page.wait_for_function("() => document.getElementById('try-status').textContent === 'counted'")


def _send_long(page: Page) -> None:
    """/ui/try: a long label of the metric with a 62-character name and a dimension, until
    counted: the estimates table holds its long labels."""
    page.select_option("#try-metric", label=f"{LONG_NAME} (v1)")
    page.select_option("#try-value", MIDDLE[4])
    page.select_option("#try-dimensions select", "north-america")
    page.click("#try-send")
    page.wait_for_function(
        "() => document.getElementById('try-status').textContent === 'counted'"
        " && document.getElementById('try-name').textContent.startsWith('checkout.')"
    )


def _break_down(page: Page) -> None:
    """A joint metric broken down by a second attribute: grouped bars and the heatmap."""
    page.select_option("#attr-select", "crash")
    page.select_option("#by-select", "os")
    page.wait_for_selector("#heatmap-chart:not([hidden]) .main-svg")


def _candidates(page: Page) -> None:
    page.fill("#candidates-input", "pizza, sushi, a value nobody typed, ramen")
    page.click("#candidates-form button")
    page.wait_for_selector("#candidates-table:not([hidden]) tbody tr")


def _show_all(page: Page) -> None:
    page.click("#top-note button")
    page.wait_for_function(
        "() => document.getElementById('top-note').textContent.includes('all 48')"
    )


def _string_mode(page: Page) -> None:
    page.select_option("#kind-select", "string")
    page.wait_for_selector("#explorer[data-state='ready'][data-kind='string']")


@dataclass(frozen=True)
class Visit:
    """A page, measured as it opens and then after each of ``then`` in turn."""

    path: str
    then: tuple[Callable[[Page], None], ...] = ()
    anonymous: bool = False  # with a wrong read token: the sign-in page
    admin: bool = False  # with the admin token (the audit log wants audit:read)


PAGES: dict[str, list[Visit]] = {
    "/": [Visit("/"), Visit("/", anonymous=True)],
    "/ui/metric/<name>": [
        Visit("/ui/metric/app.theme?version=1"),  # with dimensions; v2 exists
        Visit("/ui/metric/app.screen"),
        Visit("/ui/metric/app.country", (_show_all,)),
        Visit("/ui/metric/user.age"),
        Visit("/ui/metric/app.notify"),
        Visit("/ui/metric/session.minutes"),
        Visit("/ui/metric/search.term", (_candidates,)),
        Visit("/ui/metric/app.crashes", (_break_down,)),
        Visit(f"/ui/metric/{LONG_NAME}"),
        Visit("/ui/metric/no.such.metric"),
    ],
    "/ui/metric/<name>/explorer": [
        Visit("/ui/metric/app.screen/explorer"),
        Visit("/ui/metric/search.term/explorer"),
        Visit("/ui/metric/session.minutes/explorer"),  # numeric: not offered
    ],
    "/ui/explorer": [Visit("/ui/explorer", (_string_mode,))],
    "/ui/try": [Visit("/ui/try", (_send_one, _send_long))],
    "/ui/audit": [Visit("/ui/audit", admin=True)],
    "/ui/alerts": [Visit("/ui/alerts")],
    "/ui/dictionary": [Visit("/ui/dictionary")],
}
"""Every page (and state) to measure, by the dashboard route that serves it."""


def dashboard_pages(server: Server) -> set[str]:
    """The app's HTML routes: the dashboard blueprint's, but its static files."""
    app = create_server_app({"REDIS_URL": server.redis_url, "TESTING": True})
    return {
        rule.rule
        for rule in app.url_map.iter_rules()
        if rule.endpoint.startswith("dashboard.") and rule.endpoint not in PUBLIC_ENDPOINTS
    }


def settle(page: Page) -> None:
    """Wait until the page's reads are answered and its charts drawn."""
    page.wait_for_load_state("networkidle")
    page.wait_for_function(
        """() => Array.from(document.querySelectorAll('.chart')).every((c) =>
            c.offsetParent === null || c.querySelector('.main-svg') || c.textContent.trim())"""
    )
    page.evaluate("() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")


@dataclass
class Measured:
    """One page in one state at one width: what layout_check.js and axe-core found."""

    url: str
    width: int
    problems: list[str] = field(default_factory=list)
    labels: int = 0
    axe: list[dict[str, Any]] = field(default_factory=list)

    @property
    def serious(self) -> list[dict[str, Any]]:
        return [v for v in self.axe if v["impact"] in ("serious", "critical")]


AXE_RUN = """async () => {
  const result = await axe.run(document, {resultTypes: ["violations"]});
  return result.violations.map((v) => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 3).map((n) => n.target.join(" "))}));
}"""


def basic(password: str) -> dict[str, str]:
    """The header a signed-in browser sends. Sent as a header, not as Playwright's
    ``http_credentials``: those turn the HTTP cache off, and every page would load and
    compile plotly.js anew."""
    return {"Authorization": "Basic " + base64.b64encode(f"ops:{password}".encode()).decode()}


def measure(browser: Browser, server: Server, axe: str | None) -> list[Measured]:
    """Every page of :data:`PAGES` at each of :data:`WIDTHS`: layout problems and axe's
    violations."""
    results: list[Measured] = []
    contexts = {
        "read": browser.new_context(extra_http_headers=basic(READ_TOKEN)),
        # A wrong password gets the sign-in page (none: Chromium gives up on the challenge).
        "wrong": browser.new_context(http_credentials={"username": "ops", "password": "wrong"}),
        "admin": browser.new_context(extra_http_headers=basic(server.admin_token)),
    }
    for context in contexts.values():
        context.set_default_timeout(30_000)
    walk = [(visit, width) for width in WIDTHS for visits in PAGES.values() for visit in visits]

    def opened(visit: Visit, width: int) -> Watched:
        who = "admin" if visit.admin else "wrong" if visit.anonymous else "read"
        return start_visit(contexts[who], server, visit, width)

    try:
        # One page ahead: the next page loads (and waits out its network) while this one is
        # measured. No step changes what the page after it shows (the steps that send
        # reports are /ui/try's; the audit log after it lists no reports).
        ahead = opened(*walk[0])
        for i, (visit, width) in enumerate(walk):
            watched = ahead
            if i + 1 < len(walk):
                ahead = opened(*walk[i + 1])
            results.extend(visit_page(watched, visit, width, axe))
    finally:
        for context in contexts.values():
            context.close()
    return results


def start_visit(context: BrowserContext, server: Server, visit: Visit, width: int) -> Watched:
    """A new page of ``context`` at ``width``, navigating to ``visit``'s page (its response
    begun; :func:`visit_page` waits for the rest)."""
    watched = watch(context.new_page(), server.url)
    watched.page.set_viewport_size({"width": width, "height": 900})
    sep = "&" if "?" in visit.path else "?"
    watched.page.goto(f"{server.url}{visit.path}{sep}refresh=0", wait_until="commit")
    return watched


def visit_page(watched: Watched, visit: Visit, width: int, axe: str | None) -> list[Measured]:
    """``visit``'s page (opened by :func:`start_visit`) at ``width``, measured as it opens
    and after each of its steps."""
    page = watched.page
    page.wait_for_load_state("load")
    name = visit.path + (" (wrong token)" if visit.anonymous else "")
    results = []
    for then in (None, *visit.then):
        if then is not None:
            then(page)
            name = f"{visit.path} ({then.__name__.strip('_').replace('_', ' ')})"
        settle(page)
        page.evaluate("() => window.scrollTo(0, 0)")  # the top bar sticks
        got = page.evaluate(CHECK, SLACK)
        m = Measured(name, width, got["problems"], got["labels"])
        if axe is not None:
            if not page.evaluate("() => typeof axe !== 'undefined'"):  # a new document
                page.evaluate(axe)
            m.axe = page.evaluate(AXE_RUN)
        results.append(m)
    if not visit.anonymous and "no.such" not in visit.path:  # 401 and 404: errors logged
        watched.check()
    page.close()
    return results


def test_every_page_fits_a_phone_and_a_laptop_with_no_serious_axe_violation(
    browser: Browser, server: Server
) -> None:
    served = dashboard_pages(server)
    assert served == set(PAGES), f"measure the new dashboard routes too: {served ^ set(PAGES)}"
    axe = AXE.read_text() if AXE.is_file() else None
    results = measure(browser, server, axe)

    def line(m: Measured) -> str:
        ids = sorted({v["id"] for v in m.serious})
        milder = sorted({f"{v['id']} ({v['impact']})" for v in m.axe if v not in m.serious})
        axe_found = "-" if axe is None else f"{len(m.serious)} {' '.join(ids)}"
        return (
            f"{m.width:>5} px  {m.url:<46} {m.labels:>4} text boxes, "
            f"{len(m.problems)} layout problems; axe serious/critical: {axe_found}"
            + (f"; milder: {', '.join(milder)}" if milder else "")
        )

    report = "\n".join(line(m) for m in results)
    print("\n" + report)
    bad = {f"{m.url} @ {m.width}": m.problems for m in results if m.problems}
    assert not bad, json.dumps(bad, indent=1, ensure_ascii=False)
    if axe is None:
        pytest.skip(
            f"layout checked; axe-core missing: run `npm ci` in {HERE} (tasks.py test does)"
        )
    violations = {f"{m.url} @ {m.width}": m.serious for m in results if m.serious}
    assert not violations, json.dumps(violations, indent=1, ensure_ascii=False)


CATEGORY_TICKS = """(id) => {
  const chart = document.getElementById(id);
  const axis = chart._fullLayout.yaxis.type === "category" ? "ytick" : "xtick";
  const shown = (t) => Array.from(t.childNodes).filter((n) => n.nodeName !== "title");
  return Array.from(chart.querySelectorAll(`.${axis} text`), (t) => ({
    text: shown(t).map((n) => n.textContent).join(""),
    title: t.querySelector("title")?.textContent ?? null,
  }));
}"""
"""The texts of a chart's category ticks (on y when the bars lie, else on x), each with its
tooltip (the whole label of a cut one)."""

LEGEND_CHART = """(names) => {
  const chart = document.createElement("div");
  chart.className = "chart";
  chart.id = "legend-check";
  document.querySelector("main").append(chart);
  const labels = ["a", "b", "c"];
  const traces = names.map((name, i) => ({
    type: "bar", name: LDP.plotText(name), x: labels, y: [0.1, 0.2 + i / 10, 0.3],
  }));
  const drawn = LDP.drawBars(chart, labels, traces, { tickformat: ".0%" }, { barmode: "group" });
  return drawn.then(() => true);
}"""
"""Bars of three traces named ``names``, drawn by the dashboard's own LDP.drawBars into a
chart appended to the page."""


@pytest.mark.parametrize("width", WIDTHS)
def test_long_chart_labels_are_cut_in_the_middle_and_stay_apart(
    browser: Browser, server: Server, width: int
) -> None:
    """Labels that differ only in their middles ("… › Site settings › …" and "… › Page
    settings › …") are cut to fit in their middles, keeping where they differ: no two
    ticks of the metric's chart read alike, each cut one keeps its label's start and end.
    A legend of long trace names (three that differ only in their middles) is cut to the
    chart's width, each entry apart, inside the chart and clear of the plot. Old code cut
    labels at their ends, and names not at all: on a phone two ticks read "Settings ›
    Privacy and s…" and the legend ran past the chart."""
    context = browser.new_context(extra_http_headers=basic(READ_TOKEN))
    page = context.new_page()
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{server.url}/ui/metric/{LONG_NAME}?refresh=0")
    settle(page)
    got = page.evaluate(CATEGORY_TICKS, "freq-chart")
    ticks = [t["text"] for t in got]
    assert len(ticks) == len(MIDDLE), got
    assert len(set(ticks)) == len(ticks), ticks
    assert any("…" in t for t in ticks), ticks  # the labels were cut
    for t in got:
        whole = t["title"] or t["text"]
        assert whole in MIDDLE, t
        head, *_, tail = t["text"].split("…")
        assert whole.startswith(head) and whole.endswith(tail), t
    names = [f"{LONG_NAME} = {label}" for label in MIDDLE[:3]]
    assert page.evaluate(LEGEND_CHART, names)
    frame = page.locator("#legend-check svg.main-svg").first.bounding_box()
    plot = page.locator("#legend-check .bglayer rect").first.bounding_box()
    assert frame is not None and plot is not None
    entries = page.eval_on_selector_all(
        "#legend-check .legend text.legendtext",
        """(ts) => ts.map((t) => {
            const r = t.getBoundingClientRect();
            return {text: t.textContent, left: r.left, right: r.right, top: r.top,
                    bottom: r.bottom};
        })""",
    )
    assert len(entries) == 3 and len({e["text"] for e in entries}) == 3, entries
    for e in entries:
        assert (
            frame["x"] - SLACK <= e["left"] and e["right"] <= frame["x"] + frame["width"] + SLACK
        ), e
        assert e["top"] >= frame["y"] - SLACK and e["bottom"] <= plot["y"] + SLACK, (e, plot)
    context.close()

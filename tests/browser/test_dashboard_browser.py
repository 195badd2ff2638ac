"""The operators' dashboard in a real Chromium, on the real system.

``ldp_server.serve.Server`` runs gunicorn, an aggregator worker and an embedded Redis;
the SDK's ``Client`` sends perturbed reports over HTTP; the worker counts them. Then
Chromium (Debian's, driven by Playwright) opens the pages, and the tests read what the
page drew — Plotly's own graph data and the SVG it rendered — against the JSON APIs.
Every page is also checked for console errors and page errors (a Content-Security-Policy
violation is one) and for requests to anything but the server's origin.
"""

from __future__ import annotations

import json
import math
import os
import random
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import Watched, chromium_missing, watch

_missing = chromium_missing()
if _missing:
    pytest.skip(_missing, allow_module_level=True)

from playwright.sync_api import Browser, Page, Route  # noqa: E402
from playwright.sync_api import Error as PlaywrightError  # noqa: E402

from client_sdk import Client  # noqa: E402
from client_sdk.mechanisms import new_secret  # noqa: E402
from client_sdk.wire import MetricDefinition, build_report  # noqa: E402
from ldp_server.serve import Server  # noqa: E402
from ldp_store.lifecycle import human_bytes  # noqa: E402
from tests.http_helpers import answer  # noqa: E402
from tests.serve_helpers import defined_server  # noqa: E402

METRICS: dict[str, dict[str, Any]] = {
    "app.theme": {
        "domain": ["light", "dark", "auto", "high-contrast"],
        "epsilon": 1.0,
        "mechanism": "grr",
        "description": "The colour theme the app runs in.",
    },
    "app.screen": {
        "domain": [f"screen-{i}" for i in range(12)],
        "epsilon": 2.0,
        "mechanism": "oue",
    },
    "app.live": {"domain": ["on", "off"], "epsilon": 1.0},
    "user.age": {  # pram: ε read off the matrix (ln 5), estimated by its inverse
        "domain": ["<18", "18-34", "35-64", "65+"],
        "mechanism": "pram",
        "options": {
            "matrix": [
                ["0.5", "0.3", "0.1", "0.1"],
                ["0.2", "0.5", "0.2", "0.1"],
                ["0.1", "0.2", "0.5", "0.2"],
                ["0.1", "0.1", "0.3", "0.5"],
            ]
        },
    },
}
SHARES = {
    "app.theme": [0.55, 0.33, 0.12, 0.0],  # nobody uses high-contrast: not distinguishable
    "app.screen": [1 / (i + 1) for i in range(12)],
    "app.live": [0.7, 0.3],
    "user.age": [0.15, 0.4, 0.3, 0.15],
}
USERS = 2000
NUMERIC = {"kind": "numeric", "range": [0, 120], "epsilon": 1.0}
MEMOIZED = {
    "domain": ["on", "off", "ask"],
    "epsilon": 1.0,
    "longitudinal": {"permanent_epsilon": 4.0},
    "budget": {"reports_per_period": 2, "period": "day"},
}
"""A memoized metric: its page says how many reports per device the intervals assume."""
"""A numeric metric, defined where the server's wire format knows the kind."""
TOL = 1e-9


# -- the system ---------------------------------------------------------------------------


def _request(
    url: str, method: str = "GET", body: Any = None, token: str | None = None, timeout: float = 10
) -> Any:
    kind, text = answer(url, method, body, token, timeout=timeout)
    return json.loads(text) if kind == "application/json" else text


def send(url: str, metric: str, users: int, seed: int) -> None:
    """``users`` devices report one value of ``metric`` through the SDK over HTTP."""
    client = Client(url, flush_at=500, rng=random.Random(seed))
    picker = random.Random(seed + 1)
    domain = METRICS[metric]["domain"]
    for _ in range(users):
        assert client.report(metric, picker.choices(domain, SHARES[metric])[0])
    assert client.flush(timeout=60)
    client.shutdown()


def send_memoized(url: str, token: str, devices: int) -> None:
    """``devices`` devices, each with its own secret, report app.notify once (one Client
    would be one device, held to the budget)."""
    _request(f"{url}/v1/metrics/app.notify", "PUT", MEMOIZED, token)
    definition = MetricDefinition.from_dict(_request(f"{url}/v1/metrics/app.notify"))
    rng = random.Random(8)
    reports = [
        build_report(definition, rng.choice(definition.domain), rng, secret=new_secret())
        for _ in range(devices)
    ]
    _request(f"{url}/v1/reports", "POST", {"reports": reports})


def wait_counted(url: str, metric: str, n: int, timeout: float = 60) -> dict[str, Any]:
    """The metric's estimates once the aggregator has counted ``n`` reports."""
    deadline = time.monotonic() + timeout
    while True:
        body: dict[str, Any] = _request(f"{url}/v1/estimates/{metric}")
        if body["n"] >= n or time.monotonic() > deadline:
            assert body["n"] == n, f"{metric}: counted {body['n']}, expected {n}"
            return body
        time.sleep(0.2)


@contextmanager
def counted_server(
    data: Path, name: str, spec: dict[str, Any], reports: Iterable[tuple[Any, Any]]
) -> Iterator[Server]:
    """The real system (1 web worker, 1 aggregator) with ``name`` defined, its ``reports``
    (value, dimensions) sent through the SDK (seeded) and counted."""
    with defined_server(data, {name: spec}) as s:
        client = Client(s.url, flush_at=500, rng=random.Random(5))
        sent = 0
        for value, dimensions in reports:
            assert client.report(name, value, dimensions=dimensions)
            sent += 1
        assert client.flush(timeout=60)
        client.shutdown()
        wait_counted(s.url, name, sent)
        yield s


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The real system with the metrics defined and USERS devices' reports counted."""
    data = tmp_path_factory.mktemp("dashboard")
    with defined_server(data, METRICS, web_workers=2) as s:
        for i, name in enumerate(METRICS):
            send(s.url, name, USERS, seed=11 + 10 * i)
        try:
            _request(f"{s.url}/v1/metrics/session.minutes", "PUT", NUMERIC, s.admin_token)
            client = Client(s.url, flush_at=500, rng=random.Random(3))
            picker = random.Random(4)
            for _ in range(USERS):
                assert client.report("session.minutes", min(120.0, picker.expovariate(1 / 20)))
            assert client.flush(timeout=60)
            client.shutdown()
            wait_counted(s.url, "session.minutes", USERS)
        except urllib.error.HTTPError as exc:
            assert exc.code == 400  # no numeric metrics in this version
        for name in METRICS:
            wait_counted(s.url, name, USERS)
        send_memoized(s.url, s.admin_token, devices=500)
        wait_counted(s.url, "app.notify", 500)
        yield s


def graph(page: Page, div: str) -> list[dict[str, Any]]:
    """The traces Plotly holds for a chart div (what it drew from)."""
    return page.evaluate(  # type: ignore[no-any-return]
        """(id) => document.getElementById(id).data.map((t) => ({
            meta: t.meta, name: t.name, type: t.type, x: t.x, y: t.y,
            err: t.error_y ? {array: t.error_y.array, minus: t.error_y.arrayminus} : null,
        }))""",
        div,
    )


def points(x: float) -> str:
    """A half-width in percentage points as the pages print it (LDP.points)."""
    p = x * 100
    return f"{p:.1f}" if p >= 10 else f"{p:.2f}" if p >= 0.1 else f"{p:.2g}"


def close(got: list[float | None], want: list[float | None]) -> bool:
    """Equal lists of numbers (None where the API has none)."""
    return len(got) == len(want) and all(
        (g is None and w is None) or (g is not None and w is not None and abs(g - w) <= TOL)
        for g, w in zip(got, want, strict=True)
    )


# -- the tests ----------------------------------------------------------------------------


def test_overview_lists_every_metric_with_n_and_lag(watched: Watched, server: Server) -> None:
    page = watched.page
    overview = _request(f"{server.url}/v1/overview")
    page.goto(server.url + "/")
    page.wait_for_selector("#refresh-status.live")
    rows = page.locator("#overview-table tbody tr")
    assert rows.count() == len(overview["metrics"]) >= len(METRICS)
    for m in overview["metrics"]:
        row = page.locator(f'#overview-table tr[data-metric="{m["name"]}"]')
        assert row.locator('[data-field="n"]').inner_text() == f"{m['n']:,}"
        assert "waiting" in row.locator('[data-field="lag"]').inner_text()
        when = row.locator('[data-field="last_window"] .when').inner_text()
        assert when in ("this hour", "the hour before")  # the hour may just have turned
        assert m["mechanism"] in row.inner_text()
    watched.check()


def test_overview_shows_redis_memory_per_metric_as_the_api(
    watched: Watched, server: Server
) -> None:
    """Memory per metric (its keys' MEMORY USAGE) and the total, as /v1/overview says."""
    page = watched.page
    overview = _request(f"{server.url}/v1/overview")
    assert overview["memory"]["used"] > 0
    page.goto(server.url + "/")
    page.wait_for_selector("#refresh-status.live")
    page.wait_for_function(
        "() => document.querySelectorAll('[data-field=memory][data-bytes]').length > 0"
    )
    for m in overview["metrics"]:
        assert m["memory_bytes"] > 0, m["name"]  # every metric has counts and replay sets
        cell = page.locator(f'#overview-table tr[data-metric="{m["name"]}"] [data-field="memory"]')
        assert int(cell.get_attribute("data-bytes") or -1) == m["memory_bytes"]
        assert cell.inner_text().split("\n")[0].strip() == human_bytes(m["memory_bytes"])
    line = page.locator("#redis-memory").inner_text()
    assert line.startswith("Redis memory:") and " used of " in line
    # The replay guard (memory only time frees) against its own budget (issue 29).
    memory = overview["memory"]
    assert 0 < memory["guard"] < memory["guard_budget"] == memory["maxmemory"] // 5
    shown = page.locator('#redis-memory [data-field="guard"]').inner_text()
    assert shown == human_bytes(memory["guard"])
    assert f"of its budget {human_bytes(memory['guard_budget'])}" in line
    watched.check()


def test_metric_page_draws_k_bars_with_the_apis_intervals(watched: Watched, server: Server) -> None:
    page, name = watched.page, "app.theme"
    api = _request(f"{server.url}/v1/estimates/{name}")
    rows, k = api["estimates"], len(METRICS[name]["domain"])
    page.goto(f"{server.url}/ui/metric/{name}")
    page.wait_for_selector(f"main[data-state='ready'][data-n='{api['n']}']")

    traces = {t["meta"]: t for t in graph(page, "freq-chart")}
    assert set(traces) == {"raw", "norm_sub"}
    raw, norm_sub = traces["raw"], traces["norm_sub"]
    assert raw["x"] == norm_sub["x"] == METRICS[name]["domain"]
    assert close(raw["y"], [r["frequency"] for r in rows])
    assert close(raw["err"]["array"], [r["ci_high"] - r["frequency"] for r in rows])
    assert close(raw["err"]["minus"], [r["frequency"] - r["ci_low"] for r in rows])
    assert close(norm_sub["y"], [r["norm_sub"] for r in rows])
    assert norm_sub["err"] is None
    assert "Unbiased" in raw["name"] and "raw" in raw["name"]
    assert "Norm-Sub" in norm_sub["name"] and "post-processed" in norm_sub["name"]
    # What Plotly rendered: k bars per trace, k error bars, both labelled in the legend.
    bars = page.locator("#freq-chart .barlayer .trace")
    assert bars.count() == 2
    assert bars.nth(0).locator(".point").count() == k
    assert bars.nth(1).locator(".point").count() == k
    assert page.locator("#freq-chart g.errorbar").count() == k
    legend = page.locator("#freq-chart .legendtext").all_text_contents()
    assert legend == [raw["name"], norm_sub["name"]]

    table = page.locator("#estimates-table tbody tr")
    assert table.count() == k
    for i, r in enumerate(rows):
        cells = table.nth(i).locator("td")
        assert cells.nth(0).inner_text() == r["value"]
        assert cells.nth(1).inner_text() == f"{r['frequency'] * 100:.2f}%"
        assert float(cells.nth(1).get_attribute("data-value") or "nan") == r["frequency"]
        assert float(cells.nth(4).get_attribute("data-value") or "nan") == r["norm_sub"]
        assert cells.nth(3).inner_text() == f"[{r['ci_low'] * 100:.2f}%, {r['ci_high'] * 100:.2f}%]"
        assert int(cells.nth(5).get_attribute("data-value") or -1) == r["support_count"]
        note = cells.nth(6).inner_text()
        expected = "" if r["distinguishable_from_zero"] else "not distinguishable from zero"
        assert note == expected
    assert any(not r["distinguishable_from_zero"] for r in rows), "seed gave no zero value"
    # The shuffled view's ε, as the API states it, with its condition.
    shuffled = page.locator("#fact-shuffled")
    assert shuffled.is_visible()
    assert shuffled.locator('[data-field="shuffled-epsilon"]').inner_text() == str(
        api["shuffled_epsilon"]["epsilon"]
    )
    assert api["shuffled_epsilon"]["condition"][5:] in (shuffled.text_content() or "")

    csv_href = page.locator("#csv-link").get_attribute("href") or ""
    csv = _request(server.url + csv_href)
    assert csv.splitlines()[0].startswith(
        "metric,version,window,n,confidence,interval,estimand,reports_per_device,value,frequency"
    )
    assert len(csv.splitlines()) == k + 1
    trend = {t["meta"]: t for t in graph(page, "trend-chart")}
    assert trend["n"]["y"] == [
        w["n"] for w in _request(f"{server.url}/v1/estimates/{name}/trend?format=json")["windows"]
    ]
    watched.check()


def test_explorer_follows_epsilon_with_the_planners_numbers(
    watched: Watched, server: Server
) -> None:
    page, name = watched.page, "app.theme"
    n, k = USERS, len(METRICS[name]["domain"])
    page.goto(f"{server.url}/ui/metric/{name}/explorer")
    root = "#explorer[data-state='ready']"
    page.wait_for_selector(f"{root}[data-epsilon='1'][data-n='{n}']")

    def check(epsilon: float, width: float = 0.01) -> float:
        at_n = _request(f"{server.url}/v1/plan?epsilon={epsilon}&k={k}&users={n}")
        need = _request(f"{server.url}/v1/plan?epsilon={epsilon}&k={k}&width={width}")
        curve = _request(f"{server.url}/v1/plan/curve?epsilon={epsilon}&k={k}&mechanism=grr")
        grr = next(r for r in at_n["rows"] if r["mechanism"] == "grr")
        shown = page.locator("#hw-now")
        assert shown.get_attribute("data-mechanism") == "grr"
        half_width = float(shown.get_attribute("data-half-width") or "nan")
        assert half_width == pytest.approx(grr["half_width"], rel=1e-12)
        assert f"±{points(grr['half_width'])} pp" in shown.inner_text()  # as the metric page
        traces = {t["meta"]: t for t in graph(page, "curve-chart")}
        for c in curve["curves"]:
            in_pp = [100 * h for h in c["half_width"]]  # drawn in percentage points
            assert close(traces[c["mechanism"]]["y"], in_pp), c["mechanism"]
            assert close(traces[c["mechanism"]]["x"], curve["n"])
        assert "central laplace" in traces and traces["now"]["x"] == [n]
        answer = page.locator("#plan-answer")
        grr_need = next(r for r in need["rows"] if r["mechanism"] == "grr")
        assert int(answer.get_attribute("data-users") or -1) == grr_need["users"]
        assert f"{grr_need['users']:,} users" in answer.inner_text()
        table = page.locator("#plan-table tbody tr")
        assert table.count() == len(at_n["rows"])
        assert "%" not in page.locator("#plan-table tbody").inner_text()  # pp, as the metric page
        metric_unit = " pp"  # the metric page's "± half-width" cells (renderTable in metric.js)
        assert metric_unit in table.first.inner_text()
        check_robustness(epsilon)
        return half_width

    def check_robustness(epsilon: float, fakes: float = 0.01) -> None:
        """The fourth axis: the shift fake clients can make, as /v1/plan computes it."""
        query = f"epsilon={epsilon}&k={k}&users={n}&fake_fraction={fakes}"
        rows = {r["mechanism"]: r for r in _request(f"{server.url}/v1/plan?{query}")["rows"]}
        shown = page.locator("#robustness")
        assert shown.get_attribute("data-mechanism") == "grr"
        assert float(shown.get_attribute("data-fake-fraction") or "nan") == fakes
        figure = float(shown.get_attribute("data-max-gain") or "nan")
        assert figure == pytest.approx(rows["grr"]["max_gain"], rel=1e-12)
        assert f"+{points(figure)} pp" in shown.inner_text()
        for mechanism, row in rows.items():
            cell = page.locator(f"#plan-table tr[data-mechanism='{mechanism}'] td").nth(5)
            assert float(cell.get_attribute("data-value") or "nan") == row["max_gain"]

    at_1 = check(1.0)
    page.fill("#epsilon-input", "2")  # typing a value
    page.wait_for_selector(f"{root}[data-epsilon='2']")
    at_2 = check(2.0)
    assert at_2 < at_1
    slider = page.locator("#epsilon-range")  # dragging the slider
    slider.evaluate(
        "(e) => { e.value = '0.5'; e.dispatchEvent(new Event('input', {bubbles: true})); }"
    )
    page.wait_for_selector(f"{root}[data-epsilon='0.5']")
    assert page.input_value("#epsilon-input") == "0.5"
    assert check(0.5) > at_1
    page.fill("#width-input", "0.5")  # the planner: users for ±0.5 pp
    page.wait_for_function(
        "() => document.querySelector('[data-field=target]').textContent === '±0.50 pp'"
    )
    page.wait_for_selector(root)
    check(0.5, width=0.005)
    page.fill("#fakes-input", "5")  # robustness: 5 % of the reports fake
    page.wait_for_selector("#robustness[data-fake-fraction='0.05']")
    page.wait_for_selector(root)
    check_robustness(0.5, fakes=0.05)
    watched.check()


def test_metric_page_refreshes_while_reports_arrive(watched: Watched, server: Server) -> None:
    page, name = watched.page, "app.live"
    before = _request(f"{server.url}/v1/estimates/{name}")["n"]
    page.goto(f"{server.url}/ui/metric/{name}?refresh=1")
    page.wait_for_selector(f"main[data-state='ready'][data-n='{before}']")
    send(server.url, name, 400, seed=99)
    after = wait_counted(server.url, name, before + 400)
    page.wait_for_selector(f"main[data-n='{after['n']}']", timeout=15_000)  # no reload
    raw = next(t for t in graph(page, "freq-chart") if t["meta"] == "raw")
    assert close(raw["y"], [r["frequency"] for r in after["estimates"]])
    assert page.locator("#fact-n").inner_text() == f"{after['n']:,}"
    watched.check()


def test_numeric_metric_shows_its_mean_over_time(watched: Watched, server: Server) -> None:
    """The page draws by the API's ``kind``: numeric answers (as aggregator.web.estimates gives
    them for numeric metrics) are fulfilled here for a categorical metric's URLs."""
    page, name = watched.page, "app.screen"
    mean = {
        "metric": name, "version": 1, "kind": "numeric", "mechanism": "duchi", "epsilon": 1.0,
        "n": 1200, "confidence": 0.95, "window": "all", "mean": 31.5, "std_error": 1.25,
        "ci_low": 29.05, "ci_high": 33.95, "range": [0, 120],
    }  # fmt: skip
    windows = [
        {"window": "hour:2026-11-25T10", "n": 500, "mean": 30.0, "std_error": 2.0,
         "ci_low": 26.08, "ci_high": 33.92},
        {"window": "hour:2026-11-25T11", "n": 700, "mean": 32.6, "std_error": 1.7,
         "ci_low": 29.27, "ci_high": 35.93},
    ]  # fmt: skip
    trend = {"metric": name, "version": 1, "granularity": "hour", "confidence": 0.95,
             "windows": windows}  # fmt: skip

    def fulfil(route: Route) -> None:
        body = trend if "/trend" in route.request.url else mean
        route.fulfill(status=200, content_type="application/json", body=json.dumps(body))

    page.route(f"{server.url}/v1/estimates/{name}**", fulfil)
    page.goto(f"{server.url}/ui/metric/{name}")
    page.wait_for_selector("main[data-state='ready'][data-kind='numeric']")
    assert page.locator("#categorical-view").is_hidden()
    assert page.locator("#numeric-mean").inner_text() == "31.50 ± 2.45"
    assert "[29.05, 33.95]" in page.locator("#numeric-detail").inner_text()
    traces = {t["meta"]: t for t in graph(page, "trend-chart")}
    assert traces["mean"]["y"] == [30.0, 32.6]
    assert close(traces["mean"]["err"]["array"], [3.92, 3.33])
    watched.check()


def test_an_empty_numeric_metric_says_no_reports_yet(watched: Watched, server: Server) -> None:
    """No report yet: the trend says so, with no axes (Plotly's empty ones run −1…6)."""
    page, name = watched.page, "app.live"
    empty = {
        "metric": name, "version": 1, "kind": "numeric", "mechanism": "duchi", "epsilon": 1.0,
        "n": 0, "confidence": 0.95, "window": "all", "mean": None, "std_error": None,
        "ci_low": None, "ci_high": None, "range": [0, 120],
    }  # fmt: skip
    trend = {"metric": name, "version": 1, "granularity": "hour", "confidence": 0.95,
             "windows": []}  # fmt: skip

    def fulfil(route: Route) -> None:
        body = trend if "/trend" in route.request.url else empty
        route.fulfill(status=200, content_type="application/json", body=json.dumps(body))

    page.route(f"{server.url}/v1/estimates/{name}**", fulfil)
    page.goto(f"{server.url}/ui/metric/{name}")
    page.wait_for_selector("main[data-state='ready'][data-kind='numeric']")
    assert page.locator("#numeric-mean").inner_text() == "no reports yet"
    chart = page.locator("#trend-chart")
    assert "no reports yet" in chart.locator(".annotation-text").all_text_contents()
    ticks = chart.locator(".xtick text, .ytick text, .y2tick text")
    assert ticks.count() == 0, ticks.all_inner_texts()
    watched.check()


def _overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return not (
        a["x"] + a["width"] <= b["x"]
        or b["x"] + b["width"] <= a["x"]
        or a["y"] + a["height"] <= b["y"]
        or b["y"] + b["height"] <= a["y"]
    )


@pytest.mark.parametrize("width", [1280, 760, 390])
def test_the_mode_bar_covers_no_tick_label(browser: Browser, server: Server, width: int) -> None:
    context = browser.new_context(viewport={"width": width, "height": 900})
    context.set_default_timeout(20_000)
    watched = watch(context.new_page(), server.url)
    page = watched.page
    charts = {
        "/ui/metric/app.screen": ("main[data-state='ready']", ("freq-chart", "trend-chart")),
        "/ui/metric/app.screen/explorer": ("#explorer[data-state='ready']", ("curve-chart",)),
    }
    try:
        for path, (ready, divs) in charts.items():
            page.goto(f"{server.url}{path}")
            page.wait_for_selector(ready)
            for div in divs:
                chart = page.locator(f"#{div}")
                chart.scroll_into_view_if_needed()
                chart.locator(".nsewdrag").first.hover()  # the mode bar shows on hover
                bar = chart.locator(".modebar")
                bar.wait_for(state="visible")
                box = bar.bounding_box()
                assert box is not None and box["height"] > 10
                labels = chart.locator(".xtick text, .ytick text, .y2tick text, .legendtext")
                assert labels.count() > 2, div
                for i in range(labels.count()):
                    label = labels.nth(i).bounding_box()
                    assert label is not None
                    text = labels.nth(i).text_content()
                    assert not _overlap(box, label), (path, div, width, text, box, label)
        watched.check()
    finally:
        context.close()


def test_a_real_numeric_metric_shows_the_apis_mean(watched: Watched, server: Server) -> None:
    page, name = watched.page, "session.minutes"
    try:
        _request(f"{server.url}/v1/metrics/{name}")
    except urllib.error.HTTPError:
        pytest.skip("this version has no numeric metrics")
    api = wait_counted(server.url, name, USERS)
    assert api["kind"] == "numeric"
    trend = _request(f"{server.url}/v1/estimates/{name}/trend")
    page.goto(f"{server.url}/ui/metric/{name}")
    page.wait_for_selector(f"main[data-state='ready'][data-kind='numeric'][data-n='{USERS}']")
    shown = page.locator("#numeric-mean")
    for key in ("mean", "ci_low", "ci_high"):
        assert float(shown.get_attribute(f"data-{key.replace('_', '-')}") or "nan") == api[key]
    assert page.locator("#categorical-view").is_hidden()
    traces = {t["meta"]: t for t in graph(page, "trend-chart")}
    assert close(traces["mean"]["y"], [w["mean"] for w in trend["windows"]])
    assert close(
        traces["mean"]["err"]["array"], [w["ci_high"] - w["mean"] for w in trend["windows"]]
    )
    # Valid while you watch: the mean's confidence sequence, in the number and the trend.
    page.locator('#numeric-view [data-intervals="anytime"]').click()
    page.wait_for_selector("main[data-state='ready'][data-intervals='anytime']")
    assert float(shown.get_attribute("data-ci-low") or "nan") == api["cs_low"]
    assert float(shown.get_attribute("data-ci-high") or "nan") == api["cs_high"]
    assert "while you watch" in page.locator("#numeric-detail").inner_text()
    assert "every look" in (
        page.locator('#numeric-view [data-field="interval-note"]').text_content() or ""
    )
    traces = {t["meta"]: t for t in graph(page, "trend-chart")}
    assert close(
        traces["mean"]["err"]["array"], [w["cs_high"] - w["mean"] for w in trend["windows"]]
    )
    watched.check()


def test_read_token_guards_pages_and_the_apis_fetches(browser: Browser, tmp_path: Path) -> None:
    """With LDP_READ_TOKEN set, the browser signs in (HTTP Basic, the token as the
    password) and the page's own fetches to the estimates API are let through."""
    os.environ["LDP_READ_TOKEN"] = "read-me-7741-7741"
    try:
        s = Server(port=0, data_dir=tmp_path, web_workers=1, aggregators=0, quiet=True).start()
    finally:
        del os.environ["LDP_READ_TOKEN"]
    try:
        _request(f"{s.url}/v1/metrics/app.theme", "PUT", METRICS["app.theme"], s.admin_token)
        stranger = browser.new_context()  # no password: Chromium gives up on the challenge
        with pytest.raises(PlaywrightError, match="ERR_INVALID_AUTH_CREDENTIALS"):
            stranger.new_page().goto(s.url + "/ui/metric/app.theme")
        stranger.close()
        wrong = browser.new_context(http_credentials={"username": "x", "password": "wrong"})
        response = wrong.new_page().goto(s.url + "/ui/metric/app.theme")
        assert response is not None and response.status == 401
        assert "Read token required" in response.text()
        wrong.close()
        context = browser.new_context(
            http_credentials={"username": "operator", "password": "read-me-7741-7741"}
        )
        w = watch(context.new_page(), s.url)
        w.page.goto(s.url + "/ui/metric/app.theme")
        w.page.wait_for_selector("main[data-state='ready'][data-n='0']")
        w.check()
        context.close()
    finally:
        s.stop()


def table_intervals(page: Page) -> list[tuple[float, float]]:
    """The (low, high) the metric page's table shows, from its data attributes."""
    cells = page.locator('#estimates-table tbody td[data-label="interval"]')
    pairs = []
    for i in range(cells.count()):
        low, high = (cells.nth(i).get_attribute("data-value") or "nan,nan").split(",")
        pairs.append((float(low), float(high)))
    return pairs


def test_the_page_offers_intervals_valid_while_you_watch_and_for_all_values(
    watched: Watched, server: Server
) -> None:
    """One look (fixed n), valid while you watch (the confidence sequence), all values at
    once (Bonferroni): each draws the API's own numbers and says what it promises."""
    page, name = watched.page, "app.screen"
    api = _request(f"{server.url}/v1/estimates/{name}")
    page.goto(f"{server.url}/ui/metric/{name}")
    page.wait_for_selector("main[data-state='ready'][data-intervals='fixed']")
    note = page.locator('#categorical-view [data-field="interval-note"]')
    assert "confidence" in (note.text_content() or "") and "misses 0" in (note.text_content() or "")
    fixed = table_intervals(page)
    assert close([lo for lo, _ in fixed], [r["ci_low"] for r in api["estimates"]])
    assert page.locator("#interval-head").inner_text() == "confidence interval"

    page.locator('#categorical-view [data-intervals="anytime"]').click()
    page.wait_for_selector("main[data-state='ready'][data-intervals='anytime']")
    watching = table_intervals(page)
    assert close([lo for lo, _ in watching], [r["cs_low"] for r in api["estimates"]])
    assert close([hi for _, hi in watching], [r["cs_high"] for r in api["estimates"]])
    assert all(h2 - l2 > h1 - l1 for (l1, h1), (l2, h2) in zip(fixed, watching, strict=True))
    assert "every look" in (note.text_content() or "")
    raw = next(t for t in graph(page, "freq-chart") if t["meta"] == "raw")
    assert "valid while you watch" in raw["name"]
    assert close(raw["err"]["minus"], [r["frequency"] - r["cs_low"] for r in api["estimates"]])
    assert page.locator("#interval-head").inner_text() == "valid while you watch"

    page.locator('#categorical-view [data-intervals="simultaneous"]').click()
    page.wait_for_selector("main[data-state='ready'][data-intervals='simultaneous']")
    band = _request(f"{server.url}/v1/estimates/{name}?simultaneous=true")
    together = table_intervals(page)
    assert close([lo for lo, _ in together], [r["ci_low"] for r in band["estimates"]])
    assert all(h2 - l2 > h1 - l1 for (l1, h1), (l2, h2) in zip(fixed, together, strict=True))
    assert "Bonferroni" in (note.text_content() or "")
    watched.check()


@pytest.mark.parametrize("name", ["app.theme", "app.screen", "user.age"])
def test_the_pages_flags_are_its_intervals_in_every_mode(
    watched: Watched, server: Server, name: str
) -> None:
    """Issue 36: a value was marked distinguishable from zero beside an interval holding
    0. In each mode the page offers, a row's note and its bar's hatching say "not
    distinguishable" exactly when the interval drawn beside it holds 0, and the caption
    says in one line what a flag means there."""
    page = watched.page
    page.goto(f"{server.url}/ui/metric/{name}")
    page.wait_for_selector("main[data-state='ready'][data-intervals='fixed']")
    modes = ["fixed", "fdr", "simultaneous"] + (["anytime"] if name != "user.age" else [])
    for mode in modes:
        page.locator(f'#categorical-view [data-intervals="{mode}"]').click()
        page.wait_for_selector(f"main[data-state='ready'][data-intervals='{mode}']")
        rows = page.locator("#estimates-table tbody tr")
        raw = next(t for t in graph(page, "freq-chart") if t["meta"] == "raw")
        hatched = page.evaluate(
            """() => document.getElementById('freq-chart').data
                .find((t) => t.meta === 'raw').marker.pattern.shape"""
        )
        for i, (low, high) in enumerate(table_intervals(page)):
            holds = low <= 0 <= high
            note = rows.nth(i).locator("td").nth(6).inner_text()
            assert (note == "not distinguishable from zero") == holds, (mode, i, low, high)
            j = raw["x"].index(rows.nth(i).get_attribute("data-value"))
            assert (hatched[j] == "/") == holds, (mode, i)
        caption = page.locator('#freq-caption [data-field="flags-note"]').text_content() or ""
        assert "misses 0" in caption
        if mode == "fdr":
            assert "Benjamini–Hochberg" in caption
    watched.check()


def test_an_answer_to_the_mode_before_a_click_is_not_drawn_as_the_new_modes(
    watched: Watched, server: Server
) -> None:
    """A refresh of one mode still under way when the operator picks another: its answer
    was drawn, and the page marked ready in the new mode, with the old mode's intervals
    and caption (CI saw "the test of that value alone" under FDR). Now an answer to an
    older question is dropped and the queued refresh draws the new mode."""
    page, name = watched.page, "app.theme"
    page.goto(f"{server.url}/ui/metric/{name}")
    page.wait_for_selector("main[data-state='ready'][data-intervals='fixed']")
    held: list[Route] = []

    def hold(route: Route) -> None:
        if "multiplicity" in route.request.url:
            route.continue_()
        else:
            held.append(route)  # the fixed mode's answer, released after the click

    estimates = f"{server.url}/v1/estimates/{name}"
    page.route(lambda url: url.split("?")[0] == estimates, hold)
    page.locator('#categorical-view [data-intervals="fixed"]').click()  # a refresh, held
    deadline = time.monotonic() + 20
    while not held:
        assert time.monotonic() < deadline, "no estimates request to hold"
        page.wait_for_timeout(50)
    page.locator('#categorical-view [data-intervals="fdr"]').click()  # queued behind it
    for route in held:
        route.continue_()
    page.wait_for_selector("main[data-state='ready'][data-intervals='fdr']")
    caption = page.locator('#freq-caption [data-field="flags-note"]').text_content() or ""
    assert "Benjamini–Hochberg" in caption
    watched.check()


def test_the_page_says_whose_share_and_offers_the_populations(
    watched: Watched, server: Server
) -> None:
    """Issue 28 (3b): the page says its intervals are for the devices that reported, and a
    control asks for the share of the population they were drawn from (the API's
    ?estimand=population): wider intervals, named in the caption, the note and the links."""
    page, name = watched.page, "app.theme"
    mine = _request(f"{server.url}/v1/estimates/{name}")
    theirs = _request(f"{server.url}/v1/estimates/{name}?estimand=population")
    page.goto(f"{server.url}/ui/metric/{name}")
    page.wait_for_selector("main[data-state='ready'][data-estimand='reporters']")
    caption = page.locator('#freq-caption [data-field="estimand"]')
    note = page.locator('#categorical-view [data-field="interval-note"]')
    assert caption.text_content() == "the devices that reported"
    assert "devices that reported" in (note.text_content() or "")
    reporters = table_intervals(page)
    assert close([lo for lo, _ in reporters], [r["ci_low"] for r in mine["estimates"]])
    pressed = page.locator('[data-share="reporters"]')
    assert pressed.get_attribute("aria-pressed") == "true"

    page.locator('[data-share="population"]').click()
    page.wait_for_selector("main[data-state='ready'][data-estimand='population']")
    assert caption.text_content() == "the population the devices were drawn from"
    assert "larger population" in (note.text_content() or "")
    assert pressed.get_attribute("aria-pressed") == "false"
    drawn = table_intervals(page)
    assert close([lo for lo, _ in drawn], [r["ci_low"] for r in theirs["estimates"]])
    assert close([hi for _, hi in drawn], [r["ci_high"] for r in theirs["estimates"]])
    for (l1, h1), (l2, h2), row in zip(reporters, drawn, mine["estimates"], strict=True):
        if row["frequency"] > 0:
            assert h2 - l2 > h1 - l1
    for link in ("#csv-link", "#json-link"):
        assert "estimand=population" in (page.locator(link).get_attribute("href") or "")

    page.locator('#categorical-view [data-intervals="simultaneous"]').click()
    page.wait_for_selector("main[data-state='ready'][data-intervals='simultaneous']")
    band = _request(f"{server.url}/v1/estimates/{name}?simultaneous=true&estimand=population")
    assert close([lo for lo, _ in table_intervals(page)], [r["ci_low"] for r in band["estimates"]])
    watched.check()


def test_a_memoized_metric_says_how_many_reports_per_device_it_assumes(
    watched: Watched, server: Server
) -> None:
    page = watched.page
    api = _request(f"{server.url}/v1/estimates/app.notify")
    assert api["reports_per_device"] == 4  # 2 a day: today and one day for clock skew
    page.goto(f"{server.url}/ui/metric/app.notify")
    page.wait_for_selector("main[data-state='ready']")
    note = page.locator('#categorical-view [data-field="per-device-note"]')
    assert note.is_visible()
    assert "up to 4 reports from one device" in note.inner_text()
    assert "2 per day" in note.inner_text()
    plain = watched.page.context.new_page()
    plain.goto(f"{server.url}/ui/metric/app.theme")
    plain.wait_for_selector("main[data-state='ready']")
    assert not plain.locator('#categorical-view [data-field="per-device-note"]').is_visible()
    watched.check()


def test_a_pram_metric_page_and_explorer_show_the_apis_numbers(
    watched: Watched, server: Server
) -> None:
    """A pram metric: bars and intervals as /v1/estimates says (no confidence sequence),
    ε as read off its matrix, and its own curve in the explorer."""
    page, name = watched.page, "user.age"
    api = _request(f"{server.url}/v1/estimates/{name}")
    assert api["mechanism"] == "pram" and abs(api["epsilon"] - math.log(5)) < 1e-9
    page.goto(f"{server.url}/ui/metric/{name}")
    page.wait_for_selector(f"main[data-state='ready'][data-n='{api['n']}']")
    raw = {t["meta"]: t for t in graph(page, "freq-chart")}["raw"]
    rows = api["estimates"]
    assert raw["x"] == METRICS[name]["domain"]
    assert close(raw["y"], [r["frequency"] for r in rows])
    assert close(raw["err"]["array"], [r["ci_high"] - r["frequency"] for r in rows])
    assert "pram" in page.locator("main").inner_text()
    page.goto(f"{server.url}/ui/metric/{name}/explorer")
    page.wait_for_function(
        "() => (document.getElementById('curve-chart')?.data || []).some((t) => t.meta === 'pram')"
    )
    (mine,) = [t for t in graph(page, "curve-chart") if t["meta"] == "pram"]
    assert "this metric" in mine["name"]
    watched.check()


def test_the_overview_shows_what_a_device_can_spend_per_day(
    watched: Watched, server: Server
) -> None:
    page = watched.page
    overview = _request(f"{server.url}/v1/overview")
    page.goto(server.url + "/")
    page.wait_for_selector("#refresh-status.live")
    line = page.locator("#device-spend").inner_text()
    assert overview["device"]["epsilon_per_day_max"] is None  # metrics without budgets
    assert "unbounded" in line and "user.age" in line and "none per day" in line
    memo = page.locator('#overview-table tr[data-metric="app.notify"]')
    assert memo.locator('[data-field="epsilon_per_day_max"]').inner_text().startswith("2")
    watched.check()


OVERFLOW = """() => Array.from(document.querySelectorAll('table')).filter((t) => !t.hidden
    && t.offsetParent !== null).map((t) => ({
        id: t.id, right: t.getBoundingClientRect().right,
        wide: t.scrollWidth, room: t.parentElement.clientWidth,
        last: t.querySelector('th:last-child, td:last-child')?.getBoundingClientRect().right,
    }))"""
"""Every shown table: its right edge, its width and its container's, its last column."""


@pytest.mark.parametrize("width", [1400, 1920])
def test_no_table_is_wider_than_a_desktop_screen(
    browser: Browser, server: Server, width: int
) -> None:
    """New-user finding: the overview's last column (Redis memory) was off screen at 1,400
    and 1,920 px, behind a scroll bar of the table's container."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    context.set_default_timeout(20_000)
    w = watch(context.new_page(), server.url)
    try:
        for path, ready in [
            ("/", "#refresh-status.live"),
            ("/ui/metric/app.screen", "main[data-state='ready']"),
            ("/ui/metric/app.screen/explorer", "#explorer[data-state='ready']"),
        ]:
            w.page.goto(server.url + path)
            w.page.wait_for_selector(ready)
            tables = w.page.evaluate(OVERFLOW)
            assert tables, path
            for t in tables:
                assert t["wide"] <= t["room"], (path, width, t)
                assert t["right"] <= width and (t["last"] or 0) <= width, (path, width, t)
            page_width = w.page.evaluate("() => document.documentElement.scrollWidth")
            assert page_width <= width, (path, page_width)
        w.check()
    finally:
        context.close()

"""Three tabs of one origin share the stored queue, the privacy ledger, the device
secret, the opt-out and the upload backoff: the JavaScript SDK in a real Chromium
(IndexedDB, Web Locks, BroadcastChannel) against a server that records every report id
posted to it.

Issue 35: 100 reports stored while the collector was down, a second tab opened, the
collector back: 200 posts for 100 ids. Each tab now waits for the origin's one sender
(a Web Lock; without Web Locks, a lease in IndexedDB), which reads the queue afresh
before it sends. Then the seams that one sender left open: each tab saved its own copy
of the ledger over the others' (three tabs spent a budget of 10 reports 30 times), each
made its own device secret, ``disable()`` wiped only the reports its tab knew of, and
each tab kept its own backoff while the collector was down. The collector is "down" for
the browser alone: its upload requests are aborted (or answered) by the browser's
network emulation, so the server counts exactly what arrived.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from browser_helpers import RATIONED, REPORT_MANY_JS, RecordingCollector, open_page

PAGE = (
    b"""<!doctype html><meta charset="utf-8"><title>ldp tabs</title>
<script type="module">
import { Client } from "/src/index.js";
window.client = new Client(location.origin, {
  flushAt: 1000, flushInterval: 600000, random: window.jitter,
});
window.reportEach = async (metric, n) => {
  let ok = 0;
  for (let i = 0; i < n; i++) ok += await client.report(metric, i % 2);
  return ok;
};
"""
    + REPORT_MANY_JS
)

WITHOUT_WEB_LOCKS = "Object.defineProperty(Navigator.prototype, 'locks', { get: () => undefined });"
"""An init script: the page's browser has no Web Locks (the IndexedDB lease is used)."""


@pytest.fixture
def server() -> Iterator[tuple[str, RecordingCollector]]:
    with RecordingCollector(PAGE) as recorder:
        yield recorder.url, recorder


def _context(browser: Any, *scripts: str) -> Any:
    """A fresh browser context (an origin's storage of its own) whose pages run ``scripts``
    first."""
    context = browser.new_context()
    context.set_default_timeout(60_000)
    for script in scripts:
        context.add_init_script(script)
    return context


def _tabs(browser: Any, url: str, n: int, *scripts: str) -> tuple[Any, list[Any], list[str]]:
    """A fresh context (see :func:`_context`) with ``n`` tabs open on the page; the list
    their uncaught errors go to."""
    context = _context(browser, *scripts)
    errors: list[str] = []
    return context, [_open(context, url, errors) for _ in range(n)], errors


def _at_once(tabs: list[Any], scripts: list[str]) -> list[Any]:
    """Start each tab's script (a JS expression; a promise is awaited) without waiting for
    it, then wait for every one: the tabs run them at the same time."""
    for t, script in zip(tabs, scripts, strict=True):
        t.evaluate(f"() => {{ window.result = {script}; }}")
    return [t.evaluate("window.result") for t in tabs]


FLUSH_CHECKED = """(async () => {
  const delivered = await client.flush();
  const dropped = Object.values(client.stats().dropped).reduce((a, b) => a + b, 0);
  const clean = dropped === (window.droppedAtFlush ?? 0);
  window.droppedAtFlush = dropped;
  return [delivered, clean];
})()"""
"""Flush; what flush() answered, and whether the tab dropped no report between the
previous flush's return and this one's (read once it returned: a report admitted by the
tab can still be dropped when the storage charges it, after report() resolved)."""


def _flushed(tabs: list[Any]) -> None:
    """Every tab flushes at once (each sends, or waits its turn, until nothing is left);
    each answers whether everything was delivered: true unless it dropped reports since
    its previous flush (a budget's or an opt-out's), as flush() promises."""
    for delivered, clean in _at_once(tabs, [FLUSH_CHECKED] * len(tabs)):
        assert delivered == clean
    for t in tabs:
        t.wait_for_function("client.stats().queued === 0 && client.uploading === null")


def _open(context: Any, url: str, errors: list[str]) -> Any:
    page = open_page(context, f"{url}/page.html", errors)
    page.evaluate("client.ready")
    return page


@pytest.mark.parametrize("locks", ["web locks", "indexeddb lease"])
def test_three_tabs_post_each_stored_report_once(
    browser: Any, server: tuple[str, RecordingCollector], locks: str
) -> None:
    url, recorder = server
    context = _context(browser, *([WITHOUT_WEB_LOCKS] if locks == "indexeddb lease" else []))
    errors: list[str] = []
    down = lambda route: route.abort()  # noqa: E731 - the collector is unreachable
    context.route(f"{url}/v1/reports", down)
    first = _open(context, url, errors)
    assert first.evaluate("typeof navigator.locks") == (
        "object" if locks == "web locks" else "undefined"
    )
    assert first.evaluate("reportMany(0, 100)") == 100
    assert first.evaluate("client.flush()") is False  # the collector is down: stored
    tabs = [first, _open(context, url, errors), _open(context, url, errors)]
    assert [t.evaluate("client.stats().queued") for t in tabs] == [100, 100, 100]
    assert recorder.ids == {}

    context.unroute(f"{url}/v1/reports", down)  # the collector is back
    assert _at_once(tabs, ["client.flush()"] * 3) == [True, True, True]  # all three send
    for t in tabs:
        t.wait_for_function("client.stats().queued === 0 && client.uploading === null")
    # the two later tabs close (their pagehide hands over to the others), then the first
    for t in (tabs[2], tabs[1], tabs[0]):
        t.close(run_before_unload=True)
    time.sleep(1.0)  # nothing a closing tab sent with keepalive could still arrive
    assert not errors, errors
    assert len(recorder.ids) == 100
    assert set(recorder.ids.values()) == {1}, (
        f"{sum(recorder.ids.values())} posts for 100 stored reports"
    )
    context.close()


def test_three_tabs_reporting_at_once_post_each_report_once(
    browser: Any, server: tuple[str, RecordingCollector]
) -> None:
    """Each tab reports while the others send (uploads of 20 every 200 ms): every report
    of every tab is posted once."""
    url, recorder = server
    context, tabs, errors = _tabs(browser, url, 3)
    for t in tabs:
        t.evaluate("() => { client.flushAt = 20; client.flushInterval = 200; }")
    made = _at_once(tabs, [f"reportMany({i * 300}, {i * 300 + 300})" for i in range(3)])
    assert made == [300, 300, 300]
    _flushed(tabs)
    for t in tabs:
        t.close(run_before_unload=True)
    time.sleep(1.0)  # nothing a closing tab sent with keepalive could still arrive
    assert not errors, errors
    assert len(recorder.ids) == 900
    assert set(recorder.ids.values()) == {1}, f"{sum(recorder.ids.values())} posts for 900"
    context.close()


@pytest.mark.parametrize("locks", ["web locks", "indexeddb lease"])
def test_three_tabs_reporting_at_once_spend_a_budget_of_n_reports_once(
    browser: Any, server: tuple[str, RecordingCollector], locks: str
) -> None:
    """Each tab loaded the ledger empty and reports the budget's worth at once: the budget
    is charged in the storage, in the transaction that stores each report, so N reports
    leave the device in all, not N per tab (the old code posted 3N: each tab saved its own
    ledger over the others')."""
    url, recorder = server
    n = RATIONED["reports_per_period"]
    context, tabs, errors = _tabs(
        browser, url, 3, *([WITHOUT_WEB_LOCKS] if locks == "indexeddb lease" else [])
    )
    for t in tabs:  # every tab has the definition (and an empty ledger) before any report
        t.evaluate("client.definition('app.rationed').then(() => true)")
    made = _at_once(tabs, [f"reportEach('app.rationed', {n})"] * 3)
    _flushed(tabs)
    stats = [t.evaluate("client.stats()") for t in tabs]
    assert not errors, errors
    assert recorder.metrics.get("app.rationed") == n, (
        f"{recorder.metrics.get('app.rationed')} reports under a budget of {n} (made: {made})"
    )
    assert sum(s["reported"] for s in stats) == n
    assert sum(s["dropped"]["budget"] for s in stats) == 3 * n - n
    # a tab opened now, and every tab, sees the budget spent
    late = _open(context, url, errors)
    assert late.evaluate("client.report('app.rationed', 0)") is False
    for t in [*tabs, late]:
        spent = t.evaluate("client.privacy().metrics['app.rationed'].period")
        assert spent["reports"] == n
    context.close()


def test_two_tabs_making_memoized_reports_at_once_share_one_device_secret(
    browser: Any, server: tuple[str, RecordingCollector]
) -> None:
    """A memoized metric's permanent responses rest on one device secret: two secrets
    would make two permanent responses of the same value, each worth ε∞. The first tab that
    needs it makes it in the transaction that finds none stored (the old code: each tab
    made its own and saved it over the other's)."""
    url, _ = server
    context, tabs, errors = _tabs(browser, url, 2)
    for t in tabs:
        t.evaluate("client.definition('app.lang').then(() => true)")
    assert _at_once(tabs, ["reportEach('app.lang', 5)"] * 2) == [5, 5]
    secrets = [t.evaluate("Array.from(client.secret)") for t in tabs]
    assert len(secrets[0]) == 32
    assert secrets[0] == secrets[1], "two device secrets in one origin"
    late = _open(context, url, errors)
    assert late.evaluate("Array.from(client.secret)") == secrets[0]
    assert not errors, errors
    context.close()


def test_disable_in_one_tab_wipes_every_tabs_reports_and_stops_them_all(
    browser: Any, server: tuple[str, RecordingCollector]
) -> None:
    """Three tabs store 30 reports each; one tab opts out: every stored report is wiped
    (and refunded: none was sent), the other tabs stop reporting and sending, and nothing
    reaches the collector (the old code wiped only the disabling tab's own reports: the
    others' 60 were sent)."""
    url, recorder = server
    context, tabs, errors = _tabs(browser, url, 3)
    for i, t in enumerate(tabs):
        assert t.evaluate(f"reportMany({i * 30}, {i * 30 + 30})") == 30
        t.evaluate("client._commitSoon(true).then(() => true)")  # stored, not yet sent
    assert tabs[0].evaluate("client.disable()") is True
    assert tabs[0].evaluate("client.stats().dropped.disabled") == 90  # every tab's
    for t in tabs:  # told on the BroadcastChannel
        t.wait_for_function("client.disabled && client.stats().queued === 0")
        assert t.evaluate("client.report('app.theme', 0)") is False
        assert t.evaluate("client.privacy().metrics['app.theme'].lifetime.reports") == 0
    _flushed(tabs)
    for t in (tabs[2], tabs[1], tabs[0]):
        t.close(run_before_unload=True)
    time.sleep(1.0)  # nothing a closing tab sent with keepalive could still arrive
    assert recorder.ids == {}, f"{len(recorder.ids)} reports sent after the opt-out"
    # the opt-out is stored: a tab opened later is disabled too, and enable() is for all
    tabs = [_open(context, url, errors) for _ in range(2)]
    assert tabs[0].evaluate("client.privacy().enabled") is False
    assert tabs[0].evaluate("client.enable()") is True
    tabs[1].wait_for_function("client.privacy().enabled")
    assert tabs[1].evaluate("client.report('app.theme', 0)") is True
    assert not errors, errors
    context.close()


def _attempts_in_an_outage(browser: Any, url: str, n_tabs: int, failure: str) -> int:
    """Uploads tried while the collector is down: a tab stores 30 reports and flushes
    (the collector down: it keeps trying by its backoff, the jitter zero), then n_tabs − 1
    more tabs open (each loads the stored queue and tries to send it): every tab has
    tried, and waits, when this counts."""
    context = _context(browser, "window.jitter = () => 0;")
    attempts = 0

    def down(route: Any) -> None:
        nonlocal attempts
        attempts += 1
        if failure == "network error":
            route.abort()
        else:
            route.fulfill(status=503, headers={"Retry-After": "600"}, body="{}")

    context.route(f"{url}/v1/reports", down)
    errors: list[str] = []
    # Full jitter at zero: retried at once twice, then the pause of every third failure
    # (30 s); or the 503's Retry-After (600 s) after the first.
    failures = 3 if failure == "network error" else 1
    waiting = f"client.failures >= {failures} && client.uploading === null"
    first = _open(context, url, errors)
    assert first.evaluate("reportMany(0, 30)") == 30
    assert first.evaluate("client.flush()") is False
    first.wait_for_function(waiting)
    for _ in range(n_tabs - 1):
        tab = _open(context, url, errors)
        assert tab.evaluate("client.stats().queued") == 30
        tab.evaluate("client._upload().then(() => true)")  # its try (its load schedules one)
        tab.wait_for_function(waiting)
    assert not errors, errors
    context.close()
    return attempts


@pytest.mark.parametrize("failure", ["network error", "503 with Retry-After"])
def test_three_tabs_try_a_down_collector_as_often_as_one_tab(
    browser: Any, server: tuple[str, RecordingCollector], failure: str
) -> None:
    """The backoff is the origin's: each failure stores when the next upload is due, and a
    tab that takes over the sender's role waits for it (the old code: each tab kept its own
    backoff, so three tabs tried three times as often)."""
    url, _ = server
    one, three = (_attempts_in_an_outage(browser, url, n, failure) for n in (1, 3))
    assert (one, three) == ((3, 3) if failure == "network error" else (1, 1))

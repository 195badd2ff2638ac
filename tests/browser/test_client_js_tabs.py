"""Three tabs of one origin share the stored queue, and it is posted once: the JavaScript
SDK in a real Chromium (IndexedDB, Web Locks, BroadcastChannel) against a server that
records every report id posted to it.

Issue 35: 100 reports stored while the collector was down, a second tab opened, the
collector back: 200 posts for 100 ids. Each tab now waits for the origin's one sender
(a Web Lock; without Web Locks, a lease in IndexedDB), which reads the queue afresh
before it sends. The collector is "down" for the browser alone: its upload requests are
aborted by the browser's network emulation, so the server counts exactly what arrived.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from browser_helpers import REPORT_MANY_JS, RecordingCollector, open_page

PAGE = (
    b"""<!doctype html><meta charset="utf-8"><title>ldp tabs</title>
<script type="module">
import { Client } from "/src/index.js";
window.client = new Client(location.origin, { flushAt: 1000, flushInterval: 600000 });
"""
    + REPORT_MANY_JS
)

WITHOUT_WEB_LOCKS = "Object.defineProperty(Navigator.prototype, 'locks', { get: () => undefined });"
"""An init script: the page's browser has no Web Locks (the IndexedDB lease is used)."""


@pytest.fixture
def server() -> Iterator[tuple[str, RecordingCollector]]:
    with RecordingCollector(PAGE) as recorder:
        yield recorder.url, recorder


def _open(context: Any, url: str, errors: list[str]) -> Any:
    page = open_page(context, f"{url}/page.html", errors)
    page.evaluate("client.ready")
    return page


@pytest.mark.parametrize("locks", ["web locks", "indexeddb lease"])
def test_three_tabs_post_each_stored_report_once(
    browser: Any, server: tuple[str, RecordingCollector], locks: str
) -> None:
    url, recorder = server
    context = browser.new_context()
    context.set_default_timeout(60_000)
    if locks == "indexeddb lease":
        context.add_init_script(WITHOUT_WEB_LOCKS)
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
    for t in tabs:  # all three send at once
        t.evaluate("() => { window.flushed = client.flush(); }")
    assert [t.evaluate("window.flushed") for t in tabs] == [True, True, True]
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
    context = browser.new_context()
    context.set_default_timeout(60_000)
    errors: list[str] = []
    tabs = [_open(context, url, errors) for _ in range(3)]
    for t in tabs:
        t.evaluate("() => { client.flushAt = 20; client.flushInterval = 200; }")
    for i, t in enumerate(tabs):
        t.evaluate(f"() => {{ window.made = reportMany({i * 300}, {i * 300 + 300}); }}")
    assert [t.evaluate("window.made") for t in tabs] == [300, 300, 300]
    for t in tabs:
        t.evaluate("() => { window.flushed = client.flush(); }")
    assert [t.evaluate("window.flushed") for t in tabs] == [True, True, True]
    for t in tabs:
        t.wait_for_function("client.stats().queued === 0 && client.uploading === null")
        t.close(run_before_unload=True)
    time.sleep(1.0)  # nothing a closing tab sent with keepalive could still arrive
    assert not errors, errors
    assert len(recorder.ids) == 900
    assert set(recorder.ids.values()) == {1}, f"{sum(recorder.ids.values())} posts for 900"
    context.close()

"""The JavaScript client in a real Chromium: IndexedDB keeps reports made offline across
a reload, and every report reaches the collector exactly once.

The page loads ``client_js/src/index.js`` as an ES module from a small same-origin server
that also plays the collector's two routes (definitions and ingest), so the browser's
storage, offline mode and reload are real while no Redis is needed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from browser_helpers import REPORT_MANY_JS, RecordingCollector

PAGE = (
    b"""<!doctype html><meta charset="utf-8"><title>ldp client</title>
<script type="module">
import { Client } from "/src/index.js";
window.client = new Client(location.origin, { flushAt: 50, flushInterval: 200 });
"""
    + REPORT_MANY_JS
)


@pytest.fixture
def collector() -> Iterator[tuple[str, RecordingCollector]]:
    with RecordingCollector(PAGE) as state:
        yield state.url, state


def test_offline_reports_survive_a_reload_and_arrive_once(
    browser: Any, collector: tuple[str, RecordingCollector]
) -> None:
    url, state = collector
    context = browser.new_context()
    context.set_default_timeout(60_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{url}/page.html")
    page.wait_for_function("window.ready === true")
    assert page.evaluate("reportMany(0, 600)") == 600
    assert page.evaluate("client.flush()") is True
    context.set_offline(True)
    assert page.evaluate("reportMany(600, 1000)") == 400  # definitions are cached
    assert page.evaluate("client.flush()") is False  # offline: kept in IndexedDB
    # Leave the page. Its pagehide flush may get through (Chromium lets keepalive requests
    # of an unloading page out even in offline emulation); the reports stay in IndexedDB
    # until acknowledged, so the next page resends them and the collector's replay guard
    # (here: counting ids) keeps them from counting twice.
    page.goto("about:blank")
    context.set_offline(False)
    page.goto(f"{url}/page.html")  # the page again: its client finds the 400 in IndexedDB
    page.wait_for_function("window.ready === true")
    page.evaluate("client.ready")
    page.wait_for_function("client.stats().queued === 0 || client.flush()")
    assert page.evaluate("client.flush()") is True
    assert not errors, errors
    assert len(state.ids) == 1000, "every report counted once"
    assert page.evaluate("client.stats().sent") + page.evaluate("client.stats().queued") >= 400
    assert state.metrics == {"app.theme": 334, "session.minutes": 333, "search.term": 333}
    context.close()

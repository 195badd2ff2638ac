"""What every browser test module shares: one headless Chromium a module, and a fresh
laptop-sized page a test on the module's own ``server`` fixture."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from browser_helpers import Watched, chromium_missing, launch, watch


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module."""
    missing = chromium_missing()
    if missing:
        pytest.skip(missing)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = launch(pw)
        yield b
        b.close()


@pytest.fixture
def watched(browser: Any, server: Any) -> Iterator[Watched]:
    """A fresh laptop-sized page (own context: no cache shared between tests)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(20_000)
    w = watch(context.new_page(), server.url)
    yield w
    context.close()

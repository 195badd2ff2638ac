"""Debian's Chromium under Playwright, as headless Chromium needs it on these machines.

``playwright install`` cannot download browsers here: the tests drive the system's
``/usr/bin/chromium`` (``tasks.py test`` installs Debian's package when it is missing).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import Page

CHROMIUM = os.environ.get("LDP_CHROMIUM", "/usr/bin/chromium")

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",  # root in a container: the setuid sandbox is unavailable
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    # The machine's network is closed: without these, Chromium keeps trying to reach
    # Google's update, sync and component services, and logs every refusal.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_missing() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    if not Path(CHROMIUM).exists() and shutil.which(CHROMIUM) is None:
        return (
            f"no Chromium at {CHROMIUM}: `python3 tasks.py test` installs Debian's package "
            "(as root), or set LDP_CHROMIUM"
        )
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[dev]')"
    return None


def launch(playwright: Any) -> Any:
    """A fresh headless Chromium (Playwright gives it a new empty profile directory)."""
    return playwright.chromium.launch(
        executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True, timeout=30_000
    )


@dataclass
class Watched:
    """A page with everything it logged and requested."""

    page: Page
    origin: str
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def check(self) -> None:
        """No console or page errors; no request left the server's origin."""
        assert self.errors == [], self.errors
        foreign = [u for u in self.requests if not u.startswith(self.origin + "/")]
        assert foreign == [], foreign
        assert self.requests, "the page made no requests at all?"


def watch(page: Page, origin: str) -> Watched:
    """Record the page's console errors, uncaught exceptions and requests."""
    w = Watched(page, origin)
    page.on(
        "console", lambda m: w.errors.append(f"console: {m.text}") if m.type == "error" else None
    )
    page.on("pageerror", lambda e: w.errors.append(f"pageerror: {e}"))
    page.on("request", lambda r: w.requests.append(r.url))
    return w


REPORT_MANY_JS = b"""window.values = (i) => [["app.theme", i % 3], ["session.minutes", i % 121],
                        ["search.term", ["caf\\u00e9", "ldp", "x" + (i % 7)][i % 3]]][i % 3];
window.reportMany = async (from, to) => {
  let ok = 0;
  for (let i = from; i < to; i++) ok += await client.report(...values(i));
  return ok;
};
window.ready = true;
</script>"""
"""The end of a JS SDK test page: three kinds of values by index, and a loop reporting a
range of them through ``window.client`` (the page makes the client first)."""

"""Debian's Chromium under Playwright, as headless Chromium needs it on these machines.

``playwright install`` cannot download browsers here: the tests drive the system's
``/usr/bin/chromium`` (``tasks.py test`` installs Debian's package when it is missing).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

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

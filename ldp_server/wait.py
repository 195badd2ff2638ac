"""``ldp wait``: for a script that started ``ldp serve`` in the background."""

from __future__ import annotations

import time
import urllib.error
import urllib.request

import click

from aggregator.cli.console import out
from aggregator.cli.options import shown

__all__ = ["WAIT_TIMEOUT", "wait"]


WAIT_TIMEOUT = 180.0
"""``ldp wait``'s default: longer than a start of ``ldp serve`` may take (Redis, then up
to ``READY_TIMEOUT``, 120 s, for the web services on a slow machine)."""


@click.command()
@shown("--url", "http://127.0.0.1:8000", None, "The server (or LDP_URL).", envvar="LDP_URL")
@shown(
    "--timeout",
    WAIT_TIMEOUT,
    click.FloatRange(min=0),
    "Seconds to wait before giving up (exit status 1).",
)
def wait(url: str, timeout: float) -> None:
    """Wait until the server at --url is ready (answers /readyz), e.g. after `ldp serve &`:
    by then its admin token is in <data-dir>/admin-token."""

    if not url.startswith(("http://", "https://")):
        raise click.UsageError(f"--url must start with http:// or https://, got {url!r}")
    deadline = time.monotonic() + timeout
    last = "no answer"
    while True:
        try:
            with urllib.request.urlopen(url.rstrip("/") + "/readyz", timeout=2) as r:
                if r.status == 200:
                    out.print(f"{url} is ready")
                    return
        except urllib.error.HTTPError as exc:
            last = f"/readyz answers {exc.code}"
        except OSError as exc:
            last = f"no answer ({getattr(exc, 'reason', exc)})"
        if time.monotonic() >= deadline:
            raise click.ClickException(
                f"{url} is not ready after {timeout:g} s: {last}; is ldp serve running "
                "(its logs are in its --data-dir)?"
            )
        time.sleep(0.2)

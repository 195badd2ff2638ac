"""The ``ldp`` commands' HTTP client: one request to ``ldp serve``, errors as messages.

``ldp metrics`` (the registry), ``ldp export`` and ``ldp estimates`` (the read APIs, with
a read token) talk to the service through :func:`exchange`: proxies (``HTTPS_PROXY``)
and a CA bundle (``REQUESTS_CA_BUNDLE``) come from the environment, as the SDK's.
"""

from __future__ import annotations

import os
import urllib.parse
from typing import Any

import click
import requests

__all__ = ["Unreachable", "exchange", "request_json"]

TIMEOUT_SECONDS = 30
"""How long a command waits for an answer: a string metric's discovery takes about a
second of the server's CPU, an export window a few; 30 s means the server is stuck."""


class Unreachable(click.ClickException):
    """No answer at all (refused, unknown host, TLS, timeout): nothing listened there."""

    def __init__(self, where: str, why: str) -> None:
        super().__init__(
            f"cannot reach the collector at {where} ({why}); is ldp serve running there? "
            "Point at it with --url or LDP_URL"
        )
        self.where = where
        self.why = why


def request_json(url: str, method: str = "GET", body: Any = None, token: str | None = None) -> Any:
    """The JSON body of a request to the service; errors become ``ClickException``."""
    return exchange(url, method, body, token)[1]


def exchange(
    url: str, method: str = "GET", body: Any = None, token: str | None = None
) -> tuple[int, Any]:
    """A request's status and JSON body.

    Raises:
        click.UsageError: a URL that is not http(s).
        Unreachable: no answer (connection refused, unknown host, TLS, timeout).
        click.ClickException: a 4xx/5xx answer (its status, error and details), or an
            answer that is not JSON.
    """
    if not url.startswith(("http://", "https://")):
        raise click.UsageError(f"--url must start with http:// or https://, got {url!r}")
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    project = os.environ.get("LDP_PROJECT")  # a configured token's project (else default)
    params = {"project": project} if project else None
    try:
        r = requests.request(
            method, url, json=body, headers=headers, params=params, timeout=TIMEOUT_SECONDS
        )
    except requests.RequestException as exc:
        raise Unreachable(*_unreachable(url, exc)) from None
    try:
        payload = r.json() if r.content else None
    except ValueError:
        payload = None
    if r.status_code >= 400:
        raise click.ClickException(_refusal(r.status_code, r.reason, payload)) from None
    if payload is None and r.content:
        raise click.ClickException(f"cannot read the answer of {url}: not JSON")
    return r.status_code, payload


def _refusal(status: int, reason: str, payload: Any) -> str:
    """A 4xx/5xx answer in words: its status, error and details (one a line)."""
    message = payload.get("error", reason) if isinstance(payload, dict) else reason
    details = (payload.get("details") or []) if isinstance(payload, dict) else []
    lines = "\n".join(f"  - {x}" for x in details)
    return f"{status}: {message}" + (f"\n{lines}" if lines else "")


def _unreachable(url: str, exc: Exception) -> tuple[str, str]:
    """Where a request got no answer, and why in words."""
    parts = urllib.parse.urlsplit(url)
    where = f"{parts.scheme}://{parts.netloc}"
    text = str(exc)
    if isinstance(exc, requests.Timeout):
        why = f"no answer within {TIMEOUT_SECONDS} s"
    elif "Connection refused" in text or "NewConnectionError" in text:
        why = "connection refused"
    elif "Name or service not known" in text or "getaddrinfo" in text:
        why = "unknown host"
    elif isinstance(exc, requests.exceptions.SSLError):
        why = "TLS failed (REQUESTS_CA_BUNDLE names a CA bundle)"
    else:
        why = type(exc).__name__
    return where, why

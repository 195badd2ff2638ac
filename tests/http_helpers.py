"""JSON over HTTP to a running server, for the tests and benchmarks that start one.

urllib, no session kept: each call is one request on a fresh connection, as a device's
or an operator's would be. The in-process tests use Flask's test client instead.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


def json_request(
    url: str, method: str = "GET", body: Any = None, token: str | None = None
) -> urllib.request.Request:
    """A request with ``body`` as JSON, and ``token`` as a bearer token when given."""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    return urllib.request.Request(url, data=data, method=method, headers=headers)


def answer(
    url: str,
    method: str = "GET",
    body: Any = None,
    token: str | None = None,
    timeout: float = 30.0,
) -> tuple[str, str]:
    """The content type and text of a 2xx answer (``urllib.error.HTTPError`` otherwise)."""
    with urllib.request.urlopen(json_request(url, method, body, token), timeout=timeout) as r:
        return r.headers.get_content_type(), r.read().decode()


def call(
    url: str,
    method: str = "GET",
    body: Any = None,
    token: str | None = None,
    timeout: float = 30.0,
) -> Any:
    """The JSON answer of a 2xx reply (``urllib.error.HTTPError`` otherwise)."""
    return json.loads(answer(url, method, body, token, timeout)[1])


def status_call(
    url: str,
    method: str = "GET",
    body: Any = None,
    token: str | None = None,
    timeout: float = 30.0,
) -> tuple[int, Any]:
    """The status and JSON answer of any reply, an error's included."""
    try:
        with urllib.request.urlopen(json_request(url, method, body, token), timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())

"""``import client_sdk`` stays light: what only the network path or rare answers need is
imported when first used (measured by ``benchmarks/bench_sdk.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

DEFERRED = ("requests", "http.client", "email.utils", "sqlite3", "client_sdk.store")
"""Loaded by the first request (requests, http.client), an HTTP-date ``Retry-After``
(email.utils) or a client with a ``storage_dir`` (the store and sqlite3)."""


def test_importing_the_sdk_defers_http_email_and_sqlite() -> None:
    code = (
        "import json, sys; import client_sdk; "
        f"print(json.dumps([m for m in {list(DEFERRED)!r} if m in sys.modules]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == []


def test_the_deferred_modules_load_when_used() -> None:
    code = (
        "import json, sys, tempfile\n"
        "from client_sdk import Client\n"
        "from client_sdk.transport import HTTPTransport\n"
        "from client_sdk.uploader import parse_retry_after\n"
        "assert parse_retry_after('Wed, 21 Oct 2015 07:28:00 GMT', 0.0) is not None\n"
        "transport = HTTPTransport('http://127.0.0.1:9')\n"
        "try:\n"
        "    transport.get('/')\n"
        "except OSError:\n"
        "    pass\n"
        "Client('http://127.0.0.1:9', storage_dir=tempfile.mkdtemp()).shutdown(0)\n"
        f"print(json.dumps([m for m in {list(DEFERRED)!r} if m not in sys.modules]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out.splitlines()[-1]) == []

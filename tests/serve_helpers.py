"""`ldp serve` run as a user runs it, for the tests that need the real command; and the
in-process ``Server`` with metrics defined, for the tests that need a system to talk to."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ldp_server.serve import Server
from tests.http_helpers import call
from tests.process_helpers import stop

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def ldp_serve(args: list[str], env: dict[str, str], **popen: Any) -> Iterator[tuple[str, Any]]:
    """``python -m ldp_server serve ARGS``: yields its base URL (from the dashboard line it
    prints once ready) and the process; stops it as Ctrl-C does, then waits (60 s) or
    kills it."""
    serve = subprocess.Popen(
        [sys.executable, "-m", "ldp_server", "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200", **env},
        **popen,
    )
    try:
        assert serve.stdout is not None
        lines: list[str] = []
        while not any(line.lstrip().startswith("dashboard") for line in lines):
            line = serve.stdout.readline()  # blocks until ready (or the process ends)
            assert line, "".join(lines) + (serve.stderr.read() if serve.stderr else "")
            lines.append(line)
        yield lines[-1].split()[-1].rstrip("/"), serve
    finally:
        stop(serve, signal.SIGINT, 60)


@contextmanager
def defined_server(
    data: Path,
    specs: Mapping[str, Any],
    env: Mapping[str, str | None] | None = None,
    web_workers: int = 1,
) -> Iterator[Server]:
    """``Server`` (embedded Redis in ``data``, one aggregator) with each of ``specs``
    defined; ``env`` set (None: unset) while it runs."""
    with pytest.MonkeyPatch.context() as mp:
        for name, value in (env or {}).items():
            if value is None:
                mp.delenv(name, raising=False)
            else:
                mp.setenv(name, value)
        with Server(port=0, data_dir=data, web_workers=web_workers, aggregators=1, quiet=True) as s:
            for name, spec in specs.items():
                call(f"{s.url}/v1/metrics/{name}", "PUT", spec, s.admin_token)
            yield s

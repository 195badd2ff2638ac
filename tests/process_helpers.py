"""Starting servers as processes of their own (``python -m ...`` from this checkout) and
stopping them (``ldp serve``, gunicorn, nginx, the relay)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def stop(process: subprocess.Popen[Any], sig: int = signal.SIGTERM, grace: float = 30.0) -> None:
    """Ask ``process`` to stop with ``sig``; kill it if it has not within ``grace`` seconds."""
    if process.poll() is None:
        process.send_signal(sig)
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def spawn(args: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """``python -m ARGS`` from this checkout in a session (process group) of its own, all
    it prints appended to ``log``."""
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", *args],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

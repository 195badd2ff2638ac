"""Stopping the servers a test started as processes (``ldp serve``, gunicorn, nginx)."""

from __future__ import annotations

import signal
import subprocess
from typing import Any


def stop(process: subprocess.Popen[Any], sig: int = signal.SIGTERM, grace: float = 30.0) -> None:
    """Ask ``process`` to stop with ``sig``; kill it if it has not within ``grace`` seconds."""
    if process.poll() is None:
        process.send_signal(sig)
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()

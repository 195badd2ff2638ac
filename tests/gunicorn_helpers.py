"""Starting the real web service under gunicorn, as deployed, for tests."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "collector" / "gunicorn_conf.py"

COLLECTOR = "collector:create_app()"
"""The collector alone."""

SERVER = "ldp_server.app:create_server_app()"
"""What ``ldp serve`` runs: the collector with the read APIs and the dashboard."""


def start_gunicorn(
    env: Mapping[str, str], output: IO[Any] | int | None, app: str = COLLECTOR
) -> subprocess.Popen[bytes]:
    """gunicorn with the project's config, its settings from ``env``, output to ``output``."""
    return subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", str(CONF), app],
        cwd=ROOT,
        env=dict(env),
        stdout=output,
        stderr=subprocess.STDOUT if output not in (None, subprocess.DEVNULL) else output,
    )

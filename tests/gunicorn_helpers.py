"""Starting the real web service under gunicorn, as deployed, for tests."""

from __future__ import annotations

import os
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


def collector_env(
    redis_url: str, port: int, token: str, logs: Path | None = None, **settings: str
) -> dict[str, str]:
    """The environment without the caller's ``LDP_`` variables, plus the collector's: its
    Redis, admin ``token``, one web worker on 127.0.0.1:``port``; with ``logs``, the access
    and error logs in that folder at debug level; then ``LDP_<NAME>`` for each setting."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LDP_")}
    env.update(
        REDIS_URL=redis_url,
        LDP_ADMIN_TOKEN=token,
        LDP_BIND=f"127.0.0.1:{port}",
        LDP_WEB_WORKERS="1",
    )
    if logs:
        env.update(
            LDP_ACCESS_LOG=str(logs / "access.log"),
            LDP_ERROR_LOG=str(logs / "error.log"),
            LDP_LOG_LEVEL="debug",
        )
    env.update({f"LDP_{name}": value for name, value in settings.items()})
    return env

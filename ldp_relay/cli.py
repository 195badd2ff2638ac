"""``ldp relay``: run the Oblivious HTTP relay under gunicorn (gevent workers).

The options become the ``LDP_RELAY_*`` variables :func:`ldp_relay.create_relay` reads,
and the process becomes gunicorn with ``ldp_relay/gunicorn_conf.py``. In full:
``docs/guides/relay.md``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from ldp_relay.limits import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_SOURCE_CONNECTIONS,
    DEFAULT_SOURCE_REQUESTS_PER_SECOND,
    DEFAULT_TIMEOUT,
    DEFAULT_WORKER_CONNECTIONS,
)

__all__ = ["relay"]


def _count(flag: str, default: int, least: int, help: str) -> Any:
    """A whole-number option of at least ``least``, its default shown in ``--help``."""
    return click.option(
        flag, default=default, show_default=True, type=click.IntRange(min=least), help=help
    )


@click.command()
@click.option(
    "--gateway",
    required=True,
    envvar="LDP_RELAY_GATEWAY",
    help="The collector's gateway: http(s)://HOST[:PORT]/.well-known/ohttp-gateway.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8100, show_default=True, type=click.IntRange(1, 65535))
@click.option("--workers", default=2, show_default=True, type=click.IntRange(min=1))
@_count(
    "--requests-per-second",
    DEFAULT_SOURCE_REQUESTS_PER_SECOND,
    0,
    "Sealed requests (uploads and definition fetches) one device (address) may send "
    "per second, and at once; 0: no limit.",
)
@_count(
    "--source-connections",
    DEFAULT_SOURCE_CONNECTIONS,
    0,
    "Connections one device (address) may hold open at once, per worker; past it, 429 "
    "at once. 0: no cap (also off with --source-header: the proxy in front caps).",
)
@_count(
    "--worker-connections",
    DEFAULT_WORKER_CONNECTIONS,
    1,
    "Connections one worker holds at once (slow ones included).",
)
@click.option(
    "--source-header",
    default=None,
    help="Header a trusted proxy in front of the relay puts the device's address in.",
)
@click.option("--max-body-bytes", default=DEFAULT_MAX_BODY_BYTES, show_default=True, type=int)
@click.option("--timeout", default=DEFAULT_TIMEOUT, show_default=True, type=float)
@click.option(
    "--cors-origins",
    default="",
    envvar="LDP_RELAY_CORS_ORIGINS",
    help="Origins (comma-separated, or *) whose web pages may post through the relay.",
)
def relay(
    gateway: str,
    host: str,
    port: int,
    workers: int,
    requests_per_second: int,
    source_connections: int,
    worker_connections: int,
    source_header: str | None,
    max_body_bytes: int,
    timeout: float,
    cors_origins: str,
) -> None:
    """Forward sealed uploads (message/ohttp-req) to a collector's gateway, blind.

    Run by a party other than the collector's operator: the collector then never sees a
    device's address. Logs nothing about devices.
    """
    if not gateway.startswith(("http://", "https://")):
        raise click.BadParameter("must be an http:// or https:// URL", param_hint="--gateway")
    bind = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    env = {
        **os.environ,
        "LDP_RELAY_GATEWAY": gateway,
        "LDP_RELAY_BIND": bind,
        "LDP_RELAY_WORKERS": str(workers),
        "LDP_RELAY_SOURCE_REQUESTS_PER_SECOND": str(requests_per_second),
        "LDP_RELAY_SOURCE_CONNECTIONS": str(source_connections),
        "LDP_RELAY_WORKER_CONNECTIONS": str(worker_connections),
        "LDP_RELAY_MAX_BODY_BYTES": str(max_body_bytes),
        "LDP_RELAY_TIMEOUT": str(timeout),
        "LDP_RELAY_CORS_ORIGINS": cors_origins,
    }
    if source_header:
        env["LDP_RELAY_SOURCE_HEADER"] = source_header
    conf = Path(__file__).with_name("gunicorn_conf.py")
    argv = [sys.executable, "-m", "gunicorn", "-c", str(conf), "ldp_relay.forward:create_relay()"]
    os.execve(sys.executable, argv, env)

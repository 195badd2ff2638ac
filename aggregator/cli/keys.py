"""``ldp keys list|rotate``: the Oblivious HTTP gateway's keys (:mod:`ldp_store.ohttp_keys`).

Reads and writes Redis directly (``--redis-url``, or the ``ldp serve`` on ``--data-dir``);
the collectors see a rotation within seconds. In full: ``docs/reference/ohttp.md``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import click

from aggregator.cli.console import out
from aggregator.cli.options import redis_options, shown
from ldp_store.connection import connect
from ldp_store.embedded import REDIS_URL_FILE
from ldp_store.ohttp_keys import GatewayKeys, LiveKey

__all__ = ["keys"]


def _when(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def redis_url_of(redis_url: str | None, data_dir: Path) -> str:
    """The URL given, or that of the embedded Redis of the ``ldp serve`` on ``data_dir``.

    Raises:
        click.UsageError: neither.
    """
    if redis_url:
        return redis_url
    found = data_dir / REDIS_URL_FILE
    if not found.is_file():
        raise click.UsageError(
            f"no Redis to read: no ldp serve is running on {data_dir} (pass --data-dir "
            "of the one that is), or pass --redis-url / set REDIS_URL"
        )
    return found.read_text().strip()


def _store(redis_url: str | None, data_dir: Path, lifetime: float, overlap: float) -> GatewayKeys:
    return GatewayKeys(connect(redis_url_of(redis_url, data_dir)), lifetime, overlap)


def _show(live: list[LiveKey]) -> None:
    out.print("key id  current  created               retires               public key")
    for key in live:
        out.print(
            f"{key.config.key_id:>6}  {'yes' if key.expires is None else 'no':<7}  "
            f"{_when(key.created):<20}  {_when(key.expires):<20}  {key.config.public_key.hex()}"
        )


_lifetime = shown(
    "--lifetime",
    7 * 24 * 3600.0,
    click.FloatRange(min=1),
    "Seconds a key is current (as the collectors' LDP_OHTTP_KEY_LIFETIME).",
    envvar="LDP_OHTTP_KEY_LIFETIME",
)
_overlap = shown(
    "--overlap",
    24 * 3600.0,
    click.FloatRange(min=0),
    "Seconds the previous key stays accepted (as LDP_OHTTP_KEY_OVERLAP).",
    envvar="LDP_OHTTP_KEY_OVERLAP",
)


@click.group()
def keys() -> None:
    """The Oblivious HTTP gateway's keys: list them, rotate them."""


@keys.command("list")
@redis_options
@_lifetime
@_overlap
def list_keys(redis_url: str | None, data_dir: Path, lifetime: float, overlap: float) -> None:
    """The live keys (made now if there is none), the current one first."""
    _show(_store(redis_url, data_dir, lifetime, overlap).ensure())


@keys.command()
@redis_options
@_lifetime
@_overlap
def rotate(redis_url: str | None, data_dir: Path, lifetime: float, overlap: float) -> None:
    """Make a new current key now; the previous one is accepted for --overlap more."""
    _show(_store(redis_url, data_dir, lifetime, overlap).rotate())

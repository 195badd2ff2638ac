"""A collector whose project ``shop`` needs its ingest keys, for the SDKs' ingest-key tests
(Python, JavaScript, JVM): served for real (Werkzeug on a loopback port) on a real Redis,
with ``app.theme`` defined in shop and, with another domain, in the default project; and
the count a real stream worker gives each (docs/guides/teams.md#ingest-keys)."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import requests

from aggregator.stream.worker import Worker
from ldp_server.app import create_server_app
from ldp_store.tokens import KINDS, TokenStore
from tests.wsgi_helpers import serving

ADMIN = "sdk-ingest-admin-token-01"
READ = "sdk-ingest-read-token-002"
NAME = "app.theme"
SHOP = {"domain": ["light", "dark", "sepia"], "epsilon": 1.0, "mechanism": "grr"}
DEFAULT = {"domain": ["x", "y"], "epsilon": 2.0, "mechanism": "grr"}


def bearer(text: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {text}"}


@contextmanager
def shop_collector(redis_url: str) -> Iterator[tuple[str, TokenStore]]:
    """Reads closed (a read token), shop's reports need its keys, relayed reports go
    straight to the streams (no shuffle pool); yields the URL and the token store."""
    app = create_server_app(
        {
            "REDIS_URL": redis_url,
            "TESTING": True,
            "ADMIN_TOKEN": ADMIN,
            "READ_TOKEN": READ,
            "INGEST_KEY_PROJECTS": "shop",
            "SHUFFLE_MIN_BATCH": 1,
        }
    )
    store = TokenStore(_redis(redis_url), sleep=lambda s: None)
    with serving(app, threaded=True) as url:
        admin, _ = store.create("shop admin", KINDS["admin"], "shop")
        for spec, token in ((SHOP, admin), (DEFAULT, ADMIN)):
            made = requests.put(f"{url}/v1/metrics/{NAME}", json=spec, headers=bearer(token))
            assert made.status_code == 201, made.text
        yield url, store


def _redis(url: str) -> Any:
    import redis

    return redis.Redis.from_url(url)


def counted(redis_client: Any, url: str, token: str) -> int:
    """Run a worker over what waits, then ``n`` of ``app.theme`` as ``token`` reads it
    (shop's with a shop token, the default project's with ``READ``)."""
    Worker(redis_client, handle_signals=False, block_ms=10).run(once=True)
    got = requests.get(f"{url}/v1/estimates/{NAME}", headers=bearer(token))
    assert got.status_code == 200, got.text
    return int(got.json()["n"])


class Recorder:
    """WSGI middleware (in front of a relay): keeps each request's headers and body."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.seen: list[tuple[dict[str, str], bytes]] = []

    def __call__(self, env: dict[str, Any], start: Callable[..., Any]) -> Iterable[bytes]:
        body = env["wsgi.input"].read(int(env.get("CONTENT_LENGTH") or 0))
        env["wsgi.input"] = io.BytesIO(body)
        self.seen.append(({k: str(v) for k, v in env.items() if k.startswith("HTTP_")}, body))
        return self.app(env, start)

"""A collector whose project ``shop`` needs its ingest keys, for the SDKs' ingest-key tests
(Python, JavaScript, JVM): served for real (Werkzeug on a loopback port) on a real Redis,
with ``app.theme`` defined in shop and, with another domain, in the default project; and
the count a real stream worker gives each (docs/guides/teams.md#ingest-keys)."""

from __future__ import annotations

import io
import json
import subprocess
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import requests

from aggregator.stream.worker import Worker
from client_sdk.ohttp.keys import GATEWAY_PATH
from ldp_relay.forward import create_relay
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


def shop_app(redis_url: str, **settings: Any) -> Any:
    """Reads closed (a read token), shop's reports need one of its keys, the default
    project's stay open."""
    return create_server_app(
        {
            "REDIS_URL": redis_url,
            "TESTING": True,
            "ADMIN_TOKEN": ADMIN,
            "READ_TOKEN": READ,
            "INGEST_KEY_PROJECTS": "shop",
            **settings,
        }
    )


def define(url: str, store: TokenStore, shop_spec: dict[str, Any] = SHOP) -> None:
    """``app.theme`` in shop (by shop's admin token) and in the default project."""
    admin, _ = store.create("shop admin", KINDS["admin"], "shop")
    for spec, token in ((shop_spec, admin), (DEFAULT, ADMIN)):
        made = requests.put(f"{url}/v1/metrics/{NAME}", json=spec, headers=bearer(token))
        assert made.status_code == 201, made.text


@contextmanager
def shop_collector(redis_url: str) -> Iterator[tuple[str, TokenStore]]:
    """``shop_app`` with relayed reports going straight to the streams (no shuffle pool),
    served, ``app.theme`` defined; yields the URL and the token store."""
    store = TokenStore(_redis(redis_url), sleep=lambda s: None)
    with serving(shop_app(redis_url, SHUFFLE_MIN_BATCH=1), threaded=True) as url:
        define(url, store)
        yield url, store


def _redis(url: str) -> Any:
    import redis

    return redis.Redis.from_url(url)


def n_of(url: str, token: str) -> int:
    """``n`` of ``app.theme`` as ``token`` reads it (shop's with a shop token, the default
    project's with ``READ``)."""
    got = requests.get(f"{url}/v1/estimates/{NAME}", headers=bearer(token))
    assert got.status_code == 200, got.text
    return int(got.json()["n"])


def counted(redis_client: Any, url: str, token: str) -> int:
    """Run a worker over what waits, then ``n_of``."""
    Worker(redis_client, handle_signals=False, block_ms=10).run(once=True)
    return n_of(url, token)


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


SdkRun = Callable[[str, str, str, int], dict[str, Any]]
"""Reports ``n`` values of ``app.theme`` with an SDK (collector URL, ingest key, relay URL
or ``""`` for direct, ``n``); what it answered: ``{"ok": reports accepted, "stats": ...}``."""


def reported(command: list[str]) -> dict[str, Any]:
    """Run an SDK's reporting program; what it printed last, as JSON."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def check_the_key_sends_the_reports_to_its_project(
    redis_db: Any, run: SdkRun, sealed: bool, app: str
) -> None:
    """The key (of the SDK's ``app``) picks shop's project; through the relay it goes
    sealed: neither a header nor bytes the relay read."""
    with shop_collector(redis_db.url) as (url, store):
        key, _ = store.create(app, KINDS["ingest"], "shop")
        reader, _ = store.create("shop reader", KINDS["read"], "shop")
        relay = Recorder(create_relay({"LDP_RELAY_GATEWAY": url + GATEWAY_PATH}))
        with serving(relay, threaded=True) as relay_url:
            got = run(url, key, relay_url + "/" if sealed else "", 20)
        assert got["ok"] == 20 and got["stats"]["sent"] == 20, got
        assert counted(redis_db.client(), url, reader) == 20
        assert counted(redis_db.client(), url, READ) == 0
        assert len(relay.seen) == (2 if sealed else 0)  # the definition, the batch
        for headers, body in relay.seen:
            assert "HTTP_AUTHORIZATION" not in headers and key.encode() not in body


def check_a_refused_key_drops_the_batch_without_retrying(redis_db: Any, run: SdkRun) -> None:
    """A token that reads shop's definitions but does not grant ingest: 401, dropped."""
    with shop_collector(redis_db.url) as (url, store):
        reader, _ = store.create("shop reader", KINDS["read"], "shop")
        stats = run(url, reader, "", 5)["stats"]
        assert stats["sent"] == 0 and stats["retries"] == 0, stats
        assert sum(stats["dropped"].values()) == 5, stats
        assert counted(redis_db.client(), url, reader) == 0

"""``Client(url, ingest_key=...)`` end to end: a real collector over HTTP (Werkzeug on a
loopback port), a real Redis and stream worker, and (sealed) a real ``ldp relay`` app in
front of the gateway. The key picks the project of the definitions and reports, admits
them where keys are required, travels inside the sealed request only, and a 401/403 is a
drop, not a retry (docs/guides/teams.md#ingest-keys).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from client_sdk import Client
from client_sdk.ohttp.keys import GATEWAY_PATH
from ldp_relay.forward import create_relay
from ldp_store.tokens import KINDS, TokenStore
from tests.ingest_key_helpers import NAME, READ, SHOP, Recorder, counted, shop_collector
from tests.wsgi_helpers import serving


@pytest.fixture
def shop(redis_db: Any) -> Iterator[tuple[str, TokenStore]]:
    with shop_collector(redis_db.url) as served:
        yield served


def dropped(stats: dict[str, Any]) -> dict[str, int]:
    return {reason: n for reason, n in stats["dropped"].items() if n}


@pytest.mark.parametrize("sealed", [False, True], ids=["direct", "relay"])
def test_the_key_sends_the_reports_to_its_project(redis_db: Any, shop: Any, sealed: bool) -> None:
    url, store = shop
    key, _ = store.create("shop app", KINDS["ingest"], "shop")
    reader, _ = store.create("shop reader", KINDS["read"], "shop")
    relay = Recorder(create_relay({"LDP_RELAY_GATEWAY": url + GATEWAY_PATH}))
    with serving(relay, threaded=True) as relay_url:
        extra: dict[str, Any] = {"relay": relay_url + "/"} if sealed else {}
        client = Client(url, ingest_key=key, flush_at=1000, **extra)
        try:
            assert client.definition(NAME).domain == tuple(SHOP["domain"])
            for i in range(20):
                assert client.report(NAME, SHOP["domain"][i % 3])
            assert client.flush(10)
            stats = client.stats()
        finally:
            client.shutdown()
    assert stats["sent"] == 20 and not dropped(stats), stats
    assert counted(redis_db.client(), url, reader) == 20
    assert counted(redis_db.client(), url, READ) == 0  # not the default project's app.theme
    # Through the relay the key went sealed: neither a header nor bytes the relay read.
    assert len(relay.seen) == (2 if sealed else 0)  # the definition, the batch
    for headers, body in relay.seen:
        assert "HTTP_AUTHORIZATION" not in headers and key.encode() not in body


def test_a_refused_key_drops_the_batch_without_retrying(redis_db: Any, shop: Any) -> None:
    """A token that reads shop's definitions but does not grant ingest: the upload gets
    401, the batch is dropped at once (no retry), nothing counts."""
    url, store = shop
    reader, _ = store.create("shop reader", KINDS["read"], "shop")
    delays: list[float] = []
    client = Client(url, ingest_key=reader, flush_at=1000, sleep=delays.append)
    try:
        for i in range(5):
            assert client.report(NAME, SHOP["domain"][i % 3])
        client.flush(10)
        stats = client.stats()
    finally:
        client.shutdown()
    assert dropped(stats) == {"rejected": 5} and stats["retries"] == 0, stats
    assert stats["last_error"] == "HTTP 401" and delays == []
    assert counted(redis_db.client(), url, reader) == 0


def test_a_revoked_key_reads_no_definition(shop: Any) -> None:
    url, store = shop
    key, token = store.create("shop app", KINDS["ingest"], "shop")
    store.revoke(token.id)
    client = Client(url, ingest_key=key)
    try:
        assert not client.report(NAME, "light")
        assert dropped(client.stats()) == {"unknown_metric": 1}
    finally:
        client.shutdown()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"ingest_key": "two words"}, "no spaces"),
        ({"ingest_key": 12}, "got int"),
        ({"ingest_key": "ldp_x", "transport": object()}, "not both"),
    ],
)
def test_a_bad_ingest_key_raises_at_construction(settings: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Client("http://127.0.0.1:9", **settings)

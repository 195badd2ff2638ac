"""``ClientOptions.builder().ingestKey(key)`` of the JVM SDK (a JVM app,
client_jvm/src/test/java/.../IngestKeyReporter.java) against a real collector on a real
Redis, directly and sealed through a real relay app: the key picks the project, travels
inside the sealed request only, and a 401 is a drop, not a retry
(tests/ingest_key_helpers.py, docs/guides/teams.md#ingest-keys)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from jvm_helpers import built

from client_sdk.ohttp.keys import GATEWAY_PATH
from ldp_relay.forward import create_relay
from ldp_store.tokens import KINDS
from tests.ingest_key_helpers import READ, Recorder, counted, shop_collector
from tests.wsgi_helpers import serving


def run(url: str, key: str, n: int, *relay: str) -> dict[str, Any]:
    build = built()
    done = subprocess.run(
        build.java_command("org.ldptelemetry.IngestKeyReporter", url, key, str(n), *relay),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("sealed", [False, True], ids=["direct", "relay"])
def test_the_key_sends_the_reports_to_its_project(redis_db: Any, sealed: bool) -> None:
    with shop_collector(redis_db.url) as (url, store):
        key, _ = store.create("shop android app", KINDS["ingest"], "shop")
        reader, _ = store.create("shop reader", KINDS["read"], "shop")
        relay = Recorder(create_relay({"LDP_RELAY_GATEWAY": url + GATEWAY_PATH}))
        with serving(relay, threaded=True) as relay_url:
            got = run(url, key, 20, *([relay_url + "/"] if sealed else []))
        assert got["ok"] == 20 and got["stats"]["sent"] == 20, got
        assert counted(redis_db.client(), url, reader) == 20
        assert counted(redis_db.client(), url, READ) == 0
        assert len(relay.seen) == (2 if sealed else 0)  # the definition, the batch
        for headers, body in relay.seen:
            assert "HTTP_AUTHORIZATION" not in headers and key.encode() not in body


def test_a_refused_key_drops_the_batch_without_retrying(redis_db: Any) -> None:
    """A token that reads shop's definitions but does not grant ingest: 401, dropped."""
    with shop_collector(redis_db.url) as (url, store):
        reader, _ = store.create("shop reader", KINDS["read"], "shop")
        stats = run(url, reader, 5)["stats"]
        assert stats["sent"] == 0 and stats["retries"] == 0, stats
        assert sum(stats["dropped"].values()) == 5, stats
        assert counted(redis_db.client(), url, reader) == 0

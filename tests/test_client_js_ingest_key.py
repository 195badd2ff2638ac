"""``new Client(url, { ingestKey })`` of the JavaScript SDK (client_js/src, run by Node 20)
against a real collector on a real Redis, directly and sealed through a real relay app:
the key picks the project, travels inside the sealed request only, and a 401 is a drop,
not a retry (tests/ingest_key_helpers.py, docs/guides/teams.md#ingest-keys)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.ingest_key_helpers import (
    check_a_refused_key_drops_the_batch_without_retrying,
    check_the_key_sends_the_reports_to_its_project,
    reported,
)

ROOT = Path(__file__).resolve().parent.parent
SRC = (ROOT / "client_js" / "src").as_uri()
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(NODE is None, reason="Node 20 is not installed")

CLIENT = f"""
import {{ Client, MemoryStorage }} from "{SRC}/index.js";
import {{ Relay }} from "{SRC}/ohttp.js";
const [collector, ingestKey, relayUrl, n] = process.argv.slice(1);
const relay = relayUrl ? new Relay(relayUrl) : undefined;
const client = new Client(collector, {{ ingestKey, relay, storage: new MemoryStorage(),
                                        flushAt: 1000, random: () => 0 }});
let ok = 0;
const values = ["light", "dark", "sepia"];
for (let i = 0; i < Number(n); i++) ok += await client.report("app.theme", values[i % 3]);
await client.flush();
console.log(JSON.stringify({{ ok, stats: client.stats() }}));
await client.shutdown();
"""


def run(url: str, key: str, relay: str, n: int) -> dict[str, Any]:
    assert NODE is not None
    return reported([NODE, "--input-type=module", "-e", CLIENT, url, key, relay, str(n)])


@pytest.mark.parametrize("sealed", [False, True], ids=["direct", "relay"])
def test_the_key_sends_the_reports_to_its_project(redis_db: Any, sealed: bool) -> None:
    check_the_key_sends_the_reports_to_its_project(redis_db, run, sealed, "shop web app")


def test_a_refused_key_drops_the_batch_without_retrying(redis_db: Any) -> None:
    check_a_refused_key_drops_the_batch_without_retrying(redis_db, run)

"""``ClientOptions.builder().ingestKey(key)`` of the JVM SDK (a JVM app,
client_jvm/src/test/java/.../IngestKeyReporter.java) against a real collector on a real
Redis, directly and sealed through a real relay app: the key picks the project, travels
inside the sealed request only, and a 401 is a drop, not a retry
(tests/ingest_key_helpers.py, docs/guides/teams.md#ingest-keys)."""

from __future__ import annotations

from typing import Any

import pytest
from jvm_helpers import built

from tests.ingest_key_helpers import (
    check_a_refused_key_drops_the_batch_without_retrying,
    check_the_key_sends_the_reports_to_its_project,
    reported,
)


def run(url: str, key: str, relay: str, n: int) -> dict[str, Any]:
    relayed = [relay] if relay else []
    return reported(
        built().java_command("org.ldptelemetry.IngestKeyReporter", url, key, str(n), *relayed)
    )


@pytest.mark.parametrize("sealed", [False, True], ids=["direct", "relay"])
def test_the_key_sends_the_reports_to_its_project(redis_db: Any, sealed: bool) -> None:
    check_the_key_sends_the_reports_to_its_project(redis_db, run, sealed, "shop android app")


def test_a_refused_key_drops_the_batch_without_retrying(redis_db: Any) -> None:
    check_a_refused_key_drops_the_batch_without_retrying(redis_db, run)

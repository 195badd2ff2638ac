"""The shuffler: relayed reports reach the stream in CSPRNG-shuffled batches of at least B.

On a real Redis through the real gateway. The order test is a rank correlation: under a
uniformly random permutation of n reports, Spearman's ρ between arrival rank and stream
rank has mean 0 and variance 1/(n − 1) (exactly), so |ρ| > 5/√(n − 1) has probability
below 10⁻⁶ (Chebyshev would give 1/25; ρ is asymptotically normal, and at n = 300 the normal
tail at 5σ is 6·10⁻⁷). Arrival order kept (no shuffle) gives ρ = 1.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from collector_helpers import define, make_app, reports
from flask import Flask
from flask.testing import FlaskClient
from relay_helpers import age_pool, key_config, opened, post, seal

from client_sdk.wire import MetricDefinition
from collector.context import services
from collector.ohttp_shuffle import POOL, PoolAppender
from ldp_store import keys, shuffle, streams

WIDE_SPEC = {"domain": [f"v{i}" for i in range(400)], "epsilon": 1.0, "mechanism": "grr"}
"""GRR over 400 values: report i carries payload {"v": i}, which names it in the stream."""


def labelled(definition: MetricDefinition, n: int) -> list[dict[str, Any]]:
    """``n`` valid reports, the i-th with payload value i (valid GRR outputs)."""
    made = reports(definition, n)
    return [report | {"payload": {"v": i}} for i, report in enumerate(made)]


def send_one_by_one(client: FlaskClient, batch: list[dict[str, Any]]) -> None:
    config = key_config(client)
    for report in batch:
        sealed, context = seal(config, json.dumps({"reports": [report]}).encode())
        assert opened(post(client, sealed), context).status == 202


def stream_values(app: Flask, definition: MetricDefinition) -> list[int]:
    redis = services(app).redis
    key = keys.stream_key(definition.name, definition.version)
    return [json.loads(payload)["v"] for _, payload in streams.reports(redis, key)]


def pool_length(app: Flask, definition: MetricDefinition) -> int:
    redis = services(app).redis
    return int(redis.xlen(keys.pool_key(definition.name, definition.version)))


def spearman(order: list[int]) -> float:
    """Spearman's ρ between 0..n−1 and ``order`` (a permutation of them)."""
    n = len(order)
    d2 = sum((rank - value) ** 2 for rank, value in enumerate(order))
    return 1 - 6 * d2 / (n * (n * n - 1))


def test_reports_wait_in_the_pool_until_b_then_reach_the_stream_shuffled(redis_db: Any) -> None:
    n = 300
    app = make_app(redis_db.url, SHUFFLE_MIN_BATCH=n)
    client = app.test_client()
    wide = define(client, "app.wide", WIDE_SPEC)
    batch = labelled(wide, n)
    send_one_by_one(client, batch[: n - 1])
    assert stream_values(app, wide) == [] and pool_length(app, wide) == n - 1
    send_one_by_one(client, batch[n - 1 :])
    order = stream_values(app, wide)
    assert sorted(order) == list(range(n))  # every report once
    assert pool_length(app, wide) == 0
    assert abs(spearman(order)) <= 5 / math.sqrt(n - 1), spearman(order)


def test_without_the_shuffler_the_stream_follows_arrival(redis_db: Any) -> None:
    app = make_app(redis_db.url, SHUFFLE_MIN_BATCH=1)
    client = app.test_client()
    wide = define(client, "app.wide", WIDE_SPEC)
    send_one_by_one(client, labelled(wide, 50))
    assert spearman(stream_values(app, wide)) == 1.0


def test_direct_reports_are_not_pooled(redis_db: Any) -> None:
    app = make_app(redis_db.url, SHUFFLE_MIN_BATCH=10)
    client = app.test_client()
    wide = define(client, "app.wide", WIDE_SPEC)
    assert client.post("/v1/reports", json={"reports": labelled(wide, 3)}).status_code == 202
    assert stream_values(app, wide) == [0, 1, 2] and pool_length(app, wide) == 0


def test_a_replay_of_a_pooled_report_is_refused(redis_db: Any) -> None:
    app = make_app(redis_db.url, SHUFFLE_MIN_BATCH=10)
    client = app.test_client()
    wide = define(client, "app.wide", WIDE_SPEC)
    batch = json.dumps({"reports": labelled(wide, 4)}).encode()
    sealed, context = seal(key_config(client), batch)
    assert json.loads(opened(post(client, sealed), context).content)["accepted"] == 4
    again = json.loads(opened(post(client, sealed), context).content)
    assert again == {"accepted": 0, "duplicates": 4, "rejected": []}
    assert pool_length(app, wide) == 4


def test_a_small_pool_waits_for_its_bound_and_goes_once_it_has_passed(redis_db: Any) -> None:
    """Below B the collector leaves a pool to its bound (recorded for the aggregator's
    workers, which release due pools); before the bound not even a direct call releases
    it, after it a release goes through (the script checks by Redis's clock)."""
    app = make_app(redis_db.url, SHUFFLE_MIN_BATCH=10, SHUFFLE_MAX_DELAY=30)
    client = app.test_client()
    wide = define(client, "app.wide", WIDE_SPEC)
    send_one_by_one(client, labelled(wide, 3))
    redis = services(app).redis
    found = shuffle.waiting(redis, wide.name, wide.version)
    [state] = shuffle.pool_states(redis, [(wide.name, wide.version, 0)])
    assert found is not None and found.reports == 3 and pool_length(app, wide) == 3
    assert state.delay == 30 and state.oldest is not None
    assert found.released_by == state.oldest + 30
    assert shuffle.release(redis, wide.name, wide.version, 0, 0) == 0  # not due: refused
    assert shuffle.release_due(redis, [(wide.name, wide.version, 0)]) == 0
    age_pool(redis, wide.name, wide.version, 31)
    assert shuffle.release_due(redis, [(wide.name, wide.version, 0)]) == 3
    assert sorted(stream_values(app, wide)) == [0, 1, 2] and pool_length(app, wide) == 0
    releases = shuffle.released(redis, wide.name, wide.version)
    assert (releases.batches, releases.reports, releases.smallest) == (1, 3, 3)
    assert shuffle.waiting(redis, wide.name, wide.version) is None


def test_the_default_bound_is_an_hour_not_never(redis_db: Any) -> None:
    """Before, LDP_SHUFFLE_MAX_DELAY = 0 (the default) kept a pool below B for good."""
    app = make_app(redis_db.url)
    client = app.test_client()
    wide = define(client, "app.wide", WIDE_SPEC)
    send_one_by_one(client, labelled(wide, 3))
    redis = services(app).redis
    [state] = shuffle.pool_states(redis, [(wide.name, wide.version, 0)])
    assert state.delay == keys.SHUFFLE_MAX_DELAY == 3600
    assert state.oldest is not None and state.due == state.oldest + 3600


@pytest.mark.parametrize("value", [0, -1, 7 * 86_400 + 1, "3", True])
def test_a_bad_max_delay_is_a_config_error(redis_db: Any, value: object) -> None:
    from collector.settings import ConfigError

    with pytest.raises(ConfigError, match="LDP_SHUFFLE_MAX_DELAY"):
        make_app(redis_db.url, SHUFFLE_MAX_DELAY=value)


def test_the_pool_appender_shares_the_appender_state(redis_db: Any) -> None:
    app = make_app(redis_db.url)
    pool = POOL.get(app)
    assert isinstance(pool, PoolAppender)
    assert pool.client is services(app).appender.client
    assert pool.target("a", 1, 0) == keys.pool_key("a", 1, 0)


@pytest.mark.parametrize("value", [0, -1, "3", 2.5, True])
def test_a_bad_min_batch_is_a_config_error(redis_db: Any, value: object) -> None:
    from collector.settings import ConfigError

    with pytest.raises(ConfigError, match="LDP_SHUFFLE_MIN_BATCH"):
        make_app(redis_db.url, SHUFFLE_MIN_BATCH=value)

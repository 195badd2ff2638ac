"""``/metrics`` at many metrics (issue 43): per-metric series only for the metrics in use,
counts of the rest; the counters read of the versions the writers marked in use only
(every metric's once, in a few calls, while no full pass filled that set).

On a real Redis; the counts are written as the worker leaves them.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from aggregator.query import gauges
from aggregator.query.window import counters, lag, reports_counted
from aggregator.stream.worker import Worker
from collector.ingest import Appender
from ldp_server.app import create_server_app
from ldp_store import in_use, keys
from ldp_store.registry import Registry
from tests.aggregator.test_worker import perturbed

SPEC = {"domain": ["a", "b", "c", "d"], "epsilon": 1.0}
DEFINED = 120


def samples(text: str) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            found.setdefault(s.name, []).append(s)
    return found


def test_per_metric_series_only_for_the_metrics_in_use(redis_db: Any) -> None:
    client = redis_db.client()
    registry = Registry(client)
    defined = [registry.put(f"scrape.m{i:03d}", SPEC).definition for i in range(DEFINED)]
    counted, waiting, dead = defined[3], defined[40], defined[77]
    client.hset(keys.counts_key(counted.name, counted.version), mapping={"n": 9, "c:1": 9})
    client.xadd(keys.stream_key(waiting.name, waiting.version), {"p": "{}"})
    client.xadd(keys.dead_key(dead.name, dead.version), {"p": "{}"})

    web = create_server_app({"REDIS_URL": redis_db.url, "TESTING": True}).test_client()
    found = samples(web.get("/metrics").text)

    in_use = {counted.name, waiting.name, dead.name}
    for gauge in ("ldp_reports_counted", "ldp_lag_reports", "ldp_dead_letters"):
        assert {s.labels["metric"] for s in found[gauge]} == in_use, gauge
    by_metric = {s.labels["metric"]: s.value for s in found["ldp_reports_counted"]}
    assert by_metric[counted.name] == 9
    assert {s.labels["metric"]: s.value for s in found["ldp_lag_reports"]}[waiting.name] == 1
    assert {s.labels["metric"]: s.value for s in found["ldp_dead_letters"]}[dead.name] == 1
    assert found["ldp_metrics_defined"][0].value == DEFINED
    assert found["ldp_metrics_active"][0].value == 3
    # No alarm raised, so no alarm series; one metric with reports was tested.
    assert "ldp_poisoning_alarm" not in found
    assert found["ldp_poisoning_metrics_tested"][0].value == 1
    labelled = [s for name, ss in found.items() for s in ss if "metric" in s.labels]
    assert len({s.labels["metric"] for s in labelled}) <= len(in_use) + 1  # + the memory's


def test_counters_of_many_metrics_equal_the_one_by_one_reads(redis_db: Any) -> None:
    client = redis_db.client()
    registry = Registry(client)
    one = registry.put("many.one", SPEC).definition
    two = registry.put("many.two", {**SPEC, "shards": 3}).definition
    client.hset(keys.counts_key(two.name, two.version, "all", 2), mapping={"n": 5})
    client.hset(keys.counts_key(two.name, two.version, "all", 0), mapping={"n": 2})
    client.xadd(keys.stream_key(two.name, two.version, 1), {"p": "{}"})
    client.set(keys.batched_key(two.name, two.version, 1), 4)
    client.xadd(keys.dead_key(one.name, one.version), {"p": "{}"})
    got = counters(client, [one, two])
    assert [(c.n, c.lag, c.dead) for c in got] == [(0, 0, 1), (7, 5, 0)]
    assert [c.n for c in got] == [reports_counted(client, d) for d in (one, two)]
    assert [c.lag for c in got] == [lag(client, d) for d in (one, two)]


def test_the_scrape_reads_only_the_versions_the_writers_marked(
    redis_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Appended (the collector), counted (the worker), lost and swept again: the series of
    a metric in use, its counters read in one pass over the versions marked in use."""
    client = redis_db.client()
    registry = Registry(client)
    defined = [registry.put(f"marked.m{i:02d}", SPEC).definition for i in range(50)]
    used = defined[7]
    passes: list[int] = []

    def counted(client: Any, definitions: Any) -> Any:
        passes.append(len(definitions))
        return counters(client, definitions)

    monkeypatch.setattr(gauges, "counters", counted)
    web = create_server_app({"REDIS_URL": redis_db.url, "TESTING": True}).test_client()
    assert "ldp_lag_reports" not in samples(web.get("/metrics").text)  # a sweep: none in use
    assert passes == [50]

    Appender(client, max_backlog=1000).append(
        used.name,
        used.version,
        [(os.urandom(16), perturbed(used, [1], seed=1)[0])],
        datetime.now(UTC),
    )
    time.sleep(gauges.KEEP_SECONDS)  # the reading the last scrape kept is done with
    found = samples(web.get("/metrics").text)
    assert [(s.labels["metric"], s.value) for s in found["ldp_lag_reports"]] == [(used.name, 1)]
    assert passes[1:] == [1]  # one pass, over the one version marked

    client.srem(keys.IN_USE, in_use.member(used.name, used.version))  # the collector's mark
    Worker(client, handle_signals=False).run(once=True)  # marks what it counts
    time.sleep(gauges.KEEP_SECONDS)
    found = samples(web.get("/metrics").text)
    assert [(s.labels["metric"], s.value) for s in found["ldp_reports_counted"]] == [(used.name, 1)]
    assert found["ldp_poisoning_metrics_tested"][0].value == 1
    client.delete(keys.IN_USE)  # lost (a Redis restored, say): the next scrape sweeps
    time.sleep(gauges.KEEP_SECONDS)
    found = samples(web.get("/metrics").text)
    assert [(s.labels["metric"], s.value) for s in found["ldp_reports_counted"]] == [(used.name, 1)]
    assert passes[2:] == [1, 50]

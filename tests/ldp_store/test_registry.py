"""The registry keeps each version's creation time (memoized intervals bound by it)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import redis

from ldp_store import keys
from ldp_store.embedded import EmbeddedRedis
from ldp_store.registry import CURRENT_TTL, Registry
from tests.round_trips import round_trips

SPEC = {"domain": ["a", "b"], "epsilon": 1.0}


def test_each_version_remembers_when_it_was_created(redis_db: Any) -> None:
    now = [1_700_000_000.0]
    registry = Registry(redis_db.client(), clock=lambda: now[0])
    assert registry.put("app.x", SPEC).definition.version == 1
    now[0] += 3600
    registry.put("app.x", {**SPEC, "description": "same parameters"})  # same version
    assert registry.created("app.x", 1) == 1_700_000_000.0
    assert registry.put("app.x", {**SPEC, "epsilon": 2.0}).definition.version == 2
    assert registry.created("app.x", 2) == 1_700_003_600.0
    assert registry.created("app.x", 3) is None and registry.created("app.y", 1) is None
    assert registry.versions("app.x") == [1, 2]  # the times are not versions


def test_a_metric_another_process_just_created_is_found_at_once(redis_db: Any) -> None:
    """Process B looked the name up before it existed (so it cached "no current
    version"); process A creates it; B's next lookup finds it, not a 404 for up to
    CURRENT_TTL (what `ldp metrics create` then `GET /v1/metrics/<name>` hit with two
    web workers). Fails on the code that trusted the cached absence."""
    a, b = Registry(redis_db.client()), Registry(redis_db.client())
    assert b.get("app.new") is None
    a.put("app.new", SPEC)
    found = b.get("app.new")
    assert found is not None and found.version == 1
    assert b.current_version("app.new") == 1  # the fresh read refreshed the cache


def test_a_metrics_state_stands_while_its_node_cannot_be_read(tmp_path: Path) -> None:
    """The node of a metric's registry key is down (a cluster primary failing over): its
    cached state stands, so its reports still reach the append script and the other
    metrics' reports are not refused with them; a fresh read (an operator's decision)
    still fails."""
    server = EmbeddedRedis(tmp_path / "redis").start()
    try:
        registry = Registry(server.client())
        registry.put("app.x", SPEC)
        assert registry.current_version("app.x") == 1
        server.kill()
        registry._state["app.x"] = (time.monotonic() - 2 * CURRENT_TTL, registry.state("app.x"))
        assert registry.current_version("app.x") == 1
        with pytest.raises(redis.ConnectionError):
            registry.state("app.x", fresh=True)
        with pytest.raises(redis.ConnectionError):
            registry.state("app.y")  # nothing cached: the error is the answer
    finally:
        server.stop()


def test_the_list_of_every_metric_is_kept_until_another_process_changes_the_registry(
    redis_db: Any,
) -> None:
    client = redis_db.client()
    here, there = Registry(client), Registry(redis_db.client())
    spec = {"domain": ["a", "b"], "epsilon": 1.0}
    for name in ("keep.a", "keep.b"):
        there.put(name, spec)
    first = here.snapshot()
    assert [d.name for d in first.definitions] == ["keep.a", "keep.b"]
    before = client.info("commandstats")
    assert here.snapshot() is first  # nothing changed: kept
    after = client.info("commandstats")
    assert after["cmdstat_get"]["calls"] - before["cmdstat_get"]["calls"] == 1
    assert after.get("cmdstat_smembers") == before.get("cmdstat_smembers")  # no list read
    there.put("keep.c", spec)  # a new metric elsewhere: seen at the next look
    assert [d.name for d in here.all_current()] == ["keep.a", "keep.b", "keep.c"]
    there.retire("keep.a")
    here.all_current()
    assert here.retirements()["keep.a"] is not None
    there.unretire("keep.a")
    here.all_current()
    assert here.retirements()["keep.a"] is None
    there.forget("keep.b", [1])
    assert [d.name for d in here.all_current()] == ["keep.a", "keep.c"]


def test_the_guard_units_are_counted_in_a_few_round_trips(redis_db: Any) -> None:
    client = redis_db.client()
    writer, spec = Registry(client), {"domain": ["a", "b"], "epsilon": 1.0}
    assert all(writer.put(f"units.m{i:02d}", spec).created for i in range(40))
    writer.put("units.wide", {**spec, "shards": 3})
    writer.put("units.wide", {**spec, "shards": 2})  # version 2: both versions count
    writer.put("units.gone", spec)
    writer.retire("units.gone")
    Registry(client).units()  # the scripts loaded: a first EVALSHA's NOSCRIPT is not counted
    reader = Registry(client)
    units: list[int] = []
    taken = round_trips(client, lambda: units.append(reader.units()))
    assert units == [40 + 3 + 2]
    assert taken <= 4, taken  # not a few per metric


def test_the_guard_units_are_counted_once_per_registry_change(redis_db: Any) -> None:
    """A count kept in Redis serves every process while the registry's change counter
    stays put (one round trip); a new version, a retirement or a lost count is counted
    again."""
    client = redis_db.client()
    writer, spec = Registry(client), {"domain": ["a", "b"], "epsilon": 1.0}
    writer.put("units.a", spec)
    writer.put("units.b", {**spec, "shards": 4})
    assert Registry(client).units() == 5
    taken = round_trips(client, Registry(client).units)
    assert taken == 1, taken  # the kept count
    writer.put("units.c", spec)
    assert Registry(client).units() == 6
    writer.retire("units.b")
    assert Registry(client).units() == 2
    client.delete(keys.GUARD_UNITS_KEY)
    assert Registry(client).units() == 2

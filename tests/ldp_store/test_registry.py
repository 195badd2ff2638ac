"""The registry keeps each version's creation time (memoized intervals bound by it)."""

from __future__ import annotations

from typing import Any

from ldp_store.registry import Registry

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

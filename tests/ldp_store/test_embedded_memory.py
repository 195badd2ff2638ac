"""The embedded Redis runs with a memory limit and refuses writes (never evicts) at it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ldp_store.embedded import MIN_MAXMEMORY, EmbeddedRedis, default_maxmemory


def test_the_default_limit_is_a_share_of_the_machine_or_the_setting() -> None:
    assert default_maxmemory({"LDP_REDIS_MAXMEMORY": "2gb"}) == "2gb"
    assert int(default_maxmemory({})) >= MIN_MAXMEMORY


def test_the_embedded_redis_has_maxmemory_and_noeviction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LDP_REDIS_MAXMEMORY", "64mb")
    with EmbeddedRedis(tmp_path / "redis") as server:
        config = server.client().config_get("maxmemory*")
    assert config["maxmemory"] == str(64 << 20)
    assert config["maxmemory-policy"] == "noeviction"

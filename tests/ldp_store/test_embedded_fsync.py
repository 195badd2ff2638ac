"""The embedded Redis's AOF fsync policy: everysec by default, LDP_REDIS_APPENDFSYNC else."""

from __future__ import annotations

from pathlib import Path

import pytest

from ldp_store.embedded import EmbeddedRedis


@pytest.mark.parametrize("policy", [None, "always"])
def test_the_policy_reaches_redis(
    policy: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if policy is None:
        monkeypatch.delenv("LDP_REDIS_APPENDFSYNC", raising=False)
    else:
        monkeypatch.setenv("LDP_REDIS_APPENDFSYNC", policy)
    with EmbeddedRedis(tmp_path / "redis") as server:
        config = server.client().config_get("append*")
    assert config["appendonly"] == "yes"
    assert config["appendfsync"] == (policy or "everysec")


def test_an_unknown_policy_is_refused_before_starting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LDP_REDIS_APPENDFSYNC", "sometimes")
    with pytest.raises(ValueError, match="everysec, always, no"):
        EmbeddedRedis(tmp_path / "redis").start()
    assert not (tmp_path / "redis" / "redis.log").exists()

"""The typed script functions: registered once per client, reloaded after a flush."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from ldp_store import guard, schema, scripts


def test_a_script_is_registered_once_per_client(
    redis_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = redis_db.client()
    registered: list[str] = []
    real = client.register_script

    def counting(source: str) -> Any:
        registered.append(source)
        return real(source)

    monkeypatch.setattr(client, "register_script", counting)
    for _ in range(3):
        scripts.read_window(client, name="app.x", version=1, window="all")
    assert registered == [scripts.WINDOW]


def test_a_flushed_script_is_loaded_again(any_redis: Any) -> None:
    """redis-py's Script answers NOSCRIPT by loading the script (a restarted Redis)."""
    client = any_redis.client()
    layout = guard.Layout("app.x", 1, 0, ("2026-11-27", "2026-11-26"))
    reports = [(bytes(16), '{"v":1}')]
    now = guard.day_start("2026-11-27") + 60.0
    call = scripts.append_call(client, layout=layout, reports=reports, max_backlog=10, now=now)
    first = scripts.AppendReply.of(call.run())
    assert first.layout == ((0,), ())  # the guard's first generation: retry with it
    assert first.epochs == ("2026-11-27", "2026-11-26")
    client.script_flush()
    layout = guard.Layout("app.x", 1, 0, layout.days, *first.layout)
    call = scripts.append_call(client, layout=layout, reports=reports, max_backlog=10, now=now)
    assert scripts.AppendReply.of(call.run()) == scripts.AppendReply(1, 0, False, held=(1, 0))
    with pytest.raises(redis.ResponseError, match="FULL|DELTA|SUPPORT") as caught:
        scripts.commit(
            client,
            name="app.x",
            version=1,
            shard=0,
            consumer="w",
            ids=b"0-1",
            hour="hour:2026-11-27T00",
            hour_start=0,
            day="day:2026-11-27",
            day_start=0,
            fence=b"",
            hour_expiry_ms=0,
            day_expiry_ms=0,
            k=2,
            seeds=[],
            increments=schema.Increments(1, values=[5], counts=[1]),
        )
    assert "SUPPORT value 5" in str(caught.value)

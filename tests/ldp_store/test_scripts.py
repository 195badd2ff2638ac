"""The typed script functions: registered once per client, reloaded after a flush."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from ldp_store import guard, keys, schema, scripts


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
        scripts.commit_batch(
            client,
            scripts.CommitBatch(
                name="app.x",
                version=1,
                shard=0,
                consumer="w",
                ids=b"0-1",
                hours=scripts.Hours("hour:2026-11-27T00", 0, "day:2026-11-27", 0, 0, 0),
                fence=b"",
                k=2,
                seeds=[],
                increments=schema.Increments(1, values=[5], counts=[1]),
            ),
        )
    assert "SUPPORT value 5" in str(caught.value)


def test_a_commit_names_its_windows_and_keys_from_its_typed_inputs() -> None:
    """One frozen CommitBatch builds the script's KEYS (one hash slot) and ARGV."""
    ms = int(guard.day_start("2026-11-27") * 1000) + 3 * schema.HOUR_MS + 5
    hour, hour_start, day, day_start = schema.window_names(ms)
    hours = scripts.Hours.of(ms, {hour: 1_000.0, day: 2_000.5}.get)
    assert hours == scripts.Hours(hour, hour_start, day, day_start, 1_000_000, 2_000_500)
    batch = scripts.CommitBatch(
        name="app.x",
        version=2,
        shard=1,
        consumer="w",
        ids=b"1-0,1-1",
        hours=hours,
        fence=b"",
        k=0,
        seeds=[3, 1],
        increments=schema.Increments(2),
    )
    names = batch.script_keys()
    assert names[0] == keys.stream_key("app.x", 2, 1) and len(names) == 17
    assert all(keys.tag("app.x", 2, 1) in name for name in names)  # one slot: a cluster's
    args = batch.script_args()
    assert args[:3] == [keys.GROUP, "w", b"1-0,1-1"] and args[11] == "3,1"
    with pytest.raises(AttributeError):
        batch.k = 3  # type: ignore[misc]

"""String reads kept warm (issue 43 item 5): a string window's discovery is recorded like
the other heavy reads, so a read process that starts makes it (through its read guard)
before its first request, which then runs none; a warm-up when counts moved goes through
the guard's pacing (one discovery per REDISCOVER_SECONDS, made behind the kept one) and
never makes a window the guard dropped for its memory bound."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from aggregator.query import warm
from aggregator.query.estimators import strings
from aggregator.stats.discovery import discover
from aggregator.stream.worker import Worker
from aggregator.web import read_guard
from aggregator.web.estimates import WARMER
from aggregator.web.read_guard import GUARD, REDISCOVER_SECONDS, ReadGuard
from client_sdk.wire import build_report
from ldp_api.context import shared, worker_started
from ldp_server.app import create_server_app
from ldp_store import keys
from ldp_store.registry import Registry

WORDS = "words.long"
SPEC = {"kind": "string", "max_length": 8, "epsilon": 4.0}
VOCABULARY = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
READ = f"/v1/estimates/{WORDS}?candidates=alpha,zulu"
ANY = keys.warm_reads_key("")
APPS: list[Any] = []


class Clock:
    """The guard's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def words(redis_server: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """An app over a fresh string metric, and what sends a batch to it and counts it."""
    monkeypatch.setattr(warm, "POLL_SECONDS", 3600.0)  # the thread waits; the test steps
    monkeypatch.setattr(warm, "WARM_SECONDS", 0.0)  # a short sketch discovers fast
    redis_server.client().flushall()
    definition = Registry(redis_server.client()).put(WORDS, SPEC).definition
    app, client = fresh_process(redis_server)
    rng = random.Random(5)

    def send(count: int) -> None:
        reports = [
            build_report(definition, VOCABULARY[min(int(rng.expovariate(0.8)), 5)], rng=rng)
            for _ in range(count)
        ]
        for start in range(0, len(reports), 500):
            chunk = {"reports": reports[start : start + 500]}
            assert client.post("/v1/reports", json=chunk).status_code == 202
        Worker(redis_server.client(), handle_signals=False).run(once=True)

    return app, client, send


@pytest.fixture(autouse=True)
def _stop_warmers() -> Iterator[None]:
    yield
    while APPS:
        WARMER.get(APPS.pop()).stop()


def fresh_process(redis_server: Any) -> tuple[Any, Any]:
    """A new app on the same Redis: a read worker that just started, no discovery kept."""
    app = create_server_app({"REDIS_URL": redis_server.url, "TESTING": True})
    APPS.append(app)
    return app, app.test_client()


def discoveries(app: Any) -> float:
    """Discoveries ``app``'s read guard ran."""
    found = shared(app=app).telemetry.registry.get_sample_value("ldp_read_discoveries_total")
    return found or 0.0


def get(client: Any, path: str = READ) -> Any:
    reply = client.get(path)
    assert reply.status_code == 200, reply.get_json()
    return reply.get_json()


def test_a_string_read_is_recorded_by_its_window_and_confidence(words: Any) -> None:
    app, client, send = words
    send(1500)
    get(client, READ + "&confidence=0.9")
    (member,) = _record(app)
    assert json.loads(member) == {
        "metric": WORDS,
        "version": 1,
        "window": "all",  # the default window
        "confidence": 0.9,
        "read": "discovery",  # the candidates are not: they change no discovery
    }


def _record(app: Any) -> list[bytes]:
    return list(shared(app=app).redis.zrange(ANY, 0, -1))


def test_a_fresh_process_serves_its_first_string_read_from_its_warm_up(
    words: Any, redis_server: Any
) -> None:
    _, client, send = words
    send(1500)
    get(client)  # served by another process: recorded
    app, client = fresh_process(redis_server)
    warmer = WARMER.get(app)
    assert warmer.load() == 1 and warmer.step() == 1  # before any request
    assert discoveries(app) == 1
    warmed = get(client)
    assert discoveries(app) == 1  # its first read ran none
    other, other_client = fresh_process(redis_server)
    fresh = get(other_client)
    assert discoveries(other) == 1
    assert json.dumps(warmed) == json.dumps(fresh)  # equal to a fresh computation


def test_a_first_read_during_the_start_up_warm_up_waits_on_its_discovery(
    words: Any, redis_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, client, send = words
    send(1500)
    get(client)
    started, release = threading.Event(), threading.Event()

    def held(est: Any) -> Any:
        started.set()
        assert release.wait(60)
        return discover(est)

    monkeypatch.setattr(strings, "discover", held)
    app, client = fresh_process(redis_server)
    worker_started(app)  # gunicorn's post_worker_init: the thread warms at once
    assert started.wait(60)  # the warm-up's discovery under way
    answered: list[Any] = []
    reader = threading.Thread(target=lambda: answered.append(get(client)))
    reader.start()
    reader.join(0.5)
    assert not answered  # the request waits on the warm-up's flight...
    release.set()
    reader.join(60)
    assert answered and discoveries(app) == 1  # ...and runs no other
    assert WARMER.get(app).replays <= 1


def test_a_warm_up_when_counts_moved_respects_the_rediscovery_pacing(
    words: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    app, client, send = words
    clock = Clock()
    monkeypatch.setattr(GUARD.get(app), "_clock", clock)
    send(1000)
    get(client)
    warmer = WARMER.get(app)
    assert discoveries(app) == 1
    send(200)
    assert warmer.step() == 0  # the discovery is younger than REDISCOVER_SECONDS
    assert warmer.step() == 0  # put off: asked again at each pass, running none
    assert discoveries(app) == 1
    clock.now += REDISCOVER_SECONDS
    assert warmer.step() == 1  # due: the kept one stays, a newer one runs behind
    deadline = time.monotonic() + 60
    while GUARD.get(app).peek((WORDS, 1, "all"))[1].n != 1200 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert discoveries(app) == 2
    assert warmer.step() == 0  # no batch since
    send(100)
    assert warmer.step() == 0 and discoveries(app) == 2  # paced again
    assert get(client)["n"] == 1200  # the request is served the kept one, as before


def test_a_warm_up_makes_no_window_the_guard_dropped_or_has_no_room_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(read_guard, "CACHED_WINDOWS", 1)
    guard = ReadGuard(limit=1)
    first, second, third = (("w", 1, f"day:2026-01-0{i}") for i in (1, 2, 3))
    assert guard.warm_state(first) == "run"
    guard.get(first, 10, lambda: "first")
    guard.get(second, 10, lambda: "second")  # drops the first
    assert guard.warm_state(first) == "none"  # dropped: made again only by a request
    assert guard.warm_state(third) == "none"  # no room without dropping another
    assert guard.warm_state(second) == "later"  # kept, younger than REDISCOVER_SECONDS


def test_a_warm_up_of_a_window_not_kept_waits_while_the_bound_is_taken() -> None:
    guard = ReadGuard(limit=1)
    guard._running = 1  # a request's discovery of another window
    assert guard.warm_state(("w", 1, "all")) == "later"  # not refused: asked next pass

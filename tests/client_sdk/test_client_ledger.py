"""The privacy ledger: budgets per metric and period, ε spent, opt-out — in memory and on
disk, across restarts and processes.

Clients talk to the real HTTP test collector of ``test_client.py``; days are driven by an
injected wall clock (``Client(wallclock=...)``), so period rollovers are exact.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from test_client import Answer, Collector, client_maker
from test_client_store import held, stored

from client_sdk import Client, wire
from client_sdk.errors import DefinitionError, ReportingDisabledError
from client_sdk.ledger import (
    Charge,
    Charger,
    MemoryLedger,
    Tally,
    day_of,
    period_start,
    window_start,
)
from client_sdk.queue import MemoryQueue
from client_sdk.store import FILENAME
from client_sdk.uploader import RETRY_CAP
from ldp_store.registry import Registry
from tests.clock import Clock

ROOT = Path(__file__).resolve().parents[2]


def budgeted(
    name: str,
    domain: list[str],
    epsilon: float,
    reports: int,
    period: str,
    permanent_epsilon: float | None = None,
) -> wire.MetricDefinition:
    """A GRR metric with a budget of ``reports`` a ``period`` (memoized at
    ``permanent_epsilon`` if given)."""
    spec: dict[str, Any] = {"domain": domain, "epsilon": epsilon, "mechanism": "grr"}
    if permanent_epsilon is not None:
        spec["longitudinal"] = {"permanent_epsilon": permanent_epsilon}
    spec["budget"] = {"reports_per_period": reports, "period": period}
    return wire.parse_spec(name, spec)


DAILY = budgeted("app.theme", ["light", "dark", "auto"], 0.5, 3, "day")
WEEKLY = budgeted("app.weekly", ["a", "b"], 1.0, 2, "week")
MONTHLY = budgeted("app.monthly", ["a", "b"], 0.1, 3, "month")
FREE = wire.parse_spec("app.free", {"domain": ["a", "b"], "epsilon": 2.0, "mechanism": "grr"})


def at(year: int, month: int, day: int, hour: int = 12) -> float:
    return datetime(year, month, day, hour, tzinfo=UTC).timestamp()


@pytest.fixture
def collector() -> Iterator[Collector]:
    yield from Collector.serving(DAILY, WEEKLY, MONTHLY, FREE)


@pytest.fixture
def clock() -> Clock:
    return Clock(at(2027, 1, 13))  # a Wednesday


@pytest.fixture(params=["memory", "durable"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@contextmanager
def clients_on(
    collector: Collector, clock: Clock, tmp_path: Path, mode: str
) -> Iterator[Callable[..., Client]]:
    """Clients with the ledger in memory or in tmp_path/store, on the injected clock;
    shut down when the block ends (the ledger tests' and the device budget's fixture)."""
    durable = {"storage_dir": tmp_path / "store"} if mode == "durable" else {}
    with client_maker(collector.url, wallclock=clock, **durable) as make:
        yield make


@pytest.fixture
def make_client(
    collector: Collector, clock: Clock, tmp_path: Path, mode: str
) -> Iterator[Callable[..., Client]]:
    """Clients with the ledger in memory or in tmp_path/store, on the injected clock."""
    with clients_on(collector, clock, tmp_path, mode) as make:
        yield make


# -- periods and the tally ---------------------------------------------------------------------


def test_periods_are_utc_days_iso_weeks_and_calendar_months() -> None:
    wednesday = date(2027, 1, 13)
    assert period_start(wednesday, "day") == wednesday
    assert period_start(wednesday, "week") == date(2027, 1, 11)  # Monday
    assert period_start(wednesday, "month") == date(2027, 1, 1)
    assert period_start(date(2027, 1, 3), "week") == date(2026, 12, 28)  # across a year
    assert window_start(date(2027, 1, 3)) == date(2026, 12, 28)
    assert window_start(date(2027, 1, 20)) == date(2027, 1, 1)
    assert day_of(at(2027, 1, 13, 23) + 3599) == date(2027, 1, 13)
    assert day_of(at(2027, 1, 13, 23) + 3600) == date(2027, 1, 14)  # midnight UTC
    with pytest.raises(ValueError, match="period"):
        period_start(wednesday, "year")


def test_a_charge_carries_the_metric_epsilon_day_and_budget_period() -> None:
    charger = Charger()
    assert charger.charge(WEEKLY, at(2027, 1, 13)) == Charge(
        "app.weekly", 1.0, "2027-01-13", "2027-01-11", 2
    )
    assert charger.charge(FREE, at(2027, 1, 14)) == Charge(
        "app.free", 2.0, "2027-01-14", "2027-01-14", None
    )
    assert charger.charge(MONTHLY, at(2027, 2, 1, 0)).since == "2027-02-01"


def test_a_cached_charge_is_reused_within_its_day_only() -> None:
    charger = Charger()
    first = charger.charge(WEEKLY, at(2027, 1, 13))
    assert charger.charge(WEEKLY, at(2027, 1, 13, 23)) is first  # built once a day
    next_day = charger.charge(WEEKLY, at(2027, 1, 14))
    assert (next_day.day, next_day.since) == ("2027-01-14", "2027-01-11")
    assert charger.charge(WEEKLY, at(2027, 1, 13)).day == "2027-01-13"  # a clock set back
    refetched = wire.MetricDefinition.from_dict(WEEKLY.to_dict())  # a new object: own entry
    assert charger.charge(refetched, at(2027, 1, 13)) == first


def test_the_budget_check_allows_exactly_r_reports_despite_float_sums() -> None:
    tally = Tally()
    charge = Charge("m", 0.1, "2027-01-13", "2027-01-01", 3)
    for _ in range(3):
        tally.check(charge)  # 0.1 + 0.1 + 0.1 > 0.3 in floating point: still allowed
        tally.add("m", charge.day, 1, charge.epsilon)
    with pytest.raises(Exception, match="m"):
        tally.check(charge)
    assert tally.spent("m", "2027-01-01", "2027-01-31") == (3, pytest.approx(0.3))


def test_an_epsilon_raised_mid_period_is_held_to_the_new_budget_in_epsilon() -> None:
    tally = Tally()
    tally.add("m", "2027-01-13", 2, 2 * 2.0)  # two reports at ε = 2 earlier today
    tally.check(Charge("m", 2.0, "2027-01-13", "2027-01-13", 3))  # 3rd at ε = 2: fine
    with pytest.raises(Exception, match="m"):  # at ε = 1, 3 reports allow ε = 3 < 4 + 1
        tally.check(Charge("m", 1.0, "2027-01-13", "2027-01-13", 3))


# -- budgets enforced by report() --------------------------------------------------------------


def test_a_device_at_its_budget_gets_false_and_sends_nothing(
    collector: Collector, make_client: Callable[..., Client]
) -> None:
    client = make_client()
    assert [client.report("app.theme", i % 3) for i in range(5)] == [True] * 3 + [False] * 2
    assert client.stats()["dropped"]["budget"] == 2
    assert client.flush(timeout=5) is False  # two reports were refused
    assert len(collector.delivered) == 3
    posts = len(collector.posts)
    assert client.report("app.theme", 0) is False
    assert client.flush(timeout=1) is False and len(collector.posts) == posts  # nothing sent
    assert client.report("app.free", 0) is True  # other metrics are not affected


def test_the_budget_starts_again_in_the_next_period(
    make_client: Callable[..., Client], clock: Clock
) -> None:
    client = make_client()
    assert [client.report("app.theme", 0) for _ in range(4)] == [True] * 3 + [False]
    assert [client.report("app.weekly", 0) for _ in range(3)] == [True, True, False]
    assert [client.report("app.monthly", 0) for _ in range(4)] == [True] * 3 + [False]
    clock.now = at(2027, 1, 14, 0)  # Thursday: a new day, same week and month
    assert client.report("app.theme", 0) is True
    assert client.report("app.weekly", 0) is False
    clock.now = at(2027, 1, 18, 0)  # Monday: a new week
    assert client.report("app.weekly", 0) is True
    assert client.report("app.monthly", 0) is False
    clock.now = at(2027, 2, 1, 0)  # February
    assert client.report("app.monthly", 0) is True


@pytest.mark.parametrize("mode", ["durable"])  # memory: one process, no tries
def test_the_ledger_survives_restarts(
    collector: Collector, make_client: Callable[..., Client], tmp_path: Path, mode: str
) -> None:
    first = make_client()
    assert [first.report("app.theme", 0) for _ in range(3)] == [True] * 3
    assert first.shutdown(timeout=5)
    second = make_client()
    assert second.report("app.theme", 0) is False  # today's budget was spent before
    assert second.stats()["dropped"]["budget"] == 1
    privacy = second.privacy()["metrics"]["app.theme"]
    assert privacy["today"]["reports"] == 3 and privacy["lifetime"]["epsilon"] == 1.5
    assert len(collector.delivered) == 3


def test_a_clock_set_back_does_not_reopen_a_spent_period(
    make_client: Callable[..., Client], clock: Clock
) -> None:
    """Review finding of issue 12: a device clock set back a day must not grant a second
    budget for a day already spent (the server's reports-per-device bound would be
    exceeded and a memoized metric's intervals too narrow)."""
    client = make_client()
    assert [client.report("app.theme", 0) for _ in range(3)] == [True] * 3
    clock.now -= 86_400  # yesterday, by the device's clock
    assert client.report("app.theme", 0) is False
    assert client.stats()["dropped"]["budget"] == 1
    assert client.privacy()["today"] == "2027-01-13"
    clock.now += 2 * 86_400  # the real next day: a new period
    assert client.report("app.theme", 0) is True


def test_a_clock_set_back_before_a_restart_does_not_reopen_a_spent_period(
    collector: Collector, tmp_path: Path, clock: Clock
) -> None:
    """The floor is the latest day in the durable ledger, so a restart keeps it."""
    store = tmp_path / "store"
    first = Client(collector.url, storage_dir=store, wallclock=clock, flush_at=10**6)
    assert [first.report("app.weekly", 0) for _ in range(2)] == [True] * 2
    assert first.shutdown(timeout=5)
    clock.now -= 7 * 86_400  # last week, by the device's clock
    second = Client(collector.url, storage_dir=store, wallclock=clock, flush_at=10**6)
    try:
        assert second.report("app.weekly", 0) is False  # still this week's budget
    finally:
        second.shutdown(timeout=1)


def test_a_clock_set_back_while_the_store_is_busy_charges_nothing_until_the_floor_is_known(
    collector: Collector, tmp_path: Path, clock: Clock
) -> None:
    """Issue 44: a process started with the clock two days behind while another held the
    store could not read the ledger's latest day; it took the clock set back as the floor
    for good, and spent a second budget on a day already spent. The floor now fails
    closed: nothing is charged until the ledger has been read."""
    store = tmp_path / "store"
    first = Client(collector.url, storage_dir=store, wallclock=clock, flush_at=10**6)
    assert [first.report("app.theme", 0) for _ in range(4)] == [True] * 3 + [False]
    first.shutdown(timeout=5)
    behind = Clock(clock.now - 2 * 86_400)  # this process's clock: two days behind
    second = Client(collector.url, storage_dir=store, wallclock=behind, flush_at=10**6)
    try:
        with held(store):
            assert second.report("app.theme", 0) is False
        assert second.stats()["dropped"]["storage_error"] == 1
        assert [second.report("app.theme", 0) for _ in range(3)] == [False] * 3
        assert second.stats()["dropped"]["budget"] == 3  # the day already spent
    finally:
        second.shutdown(timeout=1)
    with sqlite3.connect(store / FILENAME) as conn:
        charged = conn.execute(
            "SELECT count(*) FROM reports WHERE day < '2027-01-13' UNION ALL "
            "SELECT count(*) FROM ledger WHERE day < '2027-01-13'"
        ).fetchall()
    assert charged == [(0,), (0,)]


def test_a_budget_change_reaches_the_device_without_a_new_version(
    collector: Collector, make_client: Callable[..., Client]
) -> None:
    client = make_client(metrics_ttl=0.0)
    assert [client.report("app.theme", 0) for _ in range(4)] == [True] * 3 + [False]
    raised = wire.MetricDefinition.from_dict(
        {**DAILY.to_dict(), "budget": {"reports_per_period": 5, "period": "day"}}
    )
    assert raised.version == DAILY.version
    collector.publish(raised)
    assert [client.report("app.theme", 0) for _ in range(3)] == [True, True, False]


SHARED = r"""
import json, sys
from client_sdk import Client
url, storage = sys.argv[1], sys.argv[2]
client = Client(url, storage_dir=storage, flush_at=10**6, flush_interval=3600)
print(json.dumps(sum(client.report("app.theme", 0) for _ in range(10))))
client.shutdown(timeout=5)
"""


def test_processes_sharing_a_store_share_the_budget(collector: Collector, tmp_path: Path) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SHARED, collector.url, str(tmp_path / "shared")],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for _ in range(3)
    ]
    accepted = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    assert sum(accepted) == 3  # the device's daily budget, however many processes
    assert len(collector.delivered) == 3


# -- privacy() ---------------------------------------------------------------------------------


def test_privacy_shows_epsilon_today_this_period_and_lifetime_with_guarantees(
    make_client: Callable[..., Client], clock: Clock, mode: str
) -> None:
    client = make_client()
    for _ in range(2):
        assert client.report("app.weekly", 0)
    clock.now = at(2027, 1, 14)
    assert client.report("app.weekly", 1) is False  # Thursday: the week's 2 are spent
    assert client.report("app.theme", 0) and client.report("app.free", 1)
    clock.now = at(2027, 1, 18)
    assert client.report("app.weekly", 1)  # a new week
    p = client.privacy()
    assert p["enabled"] is True and p["today"] == "2027-01-18"
    assert p["ledger"].startswith("persistent" if mode == "durable" else "in memory")
    assert "m·ε" in p["accounting"] and "Monday" in p["days"]
    weekly = p["metrics"]["app.weekly"]
    assert weekly["epsilon_per_report"] == 1.0
    assert weekly["budget"] == {
        "reports_per_period": 2,
        "period": "week",
        "epsilon_per_period": 2.0,
        "remaining_reports": 1,
    }
    assert (weekly["today"]["reports"], weekly["today"]["epsilon"]) == (1, 1.0)
    assert weekly["period"]["since"] == "2027-01-18" and weekly["period"]["epsilon"] == 1.0
    assert weekly["lifetime"] == {
        "reports": 3,
        "epsilon": 3.0,
        "since": "2027-01-13",
        "guarantee": weekly["lifetime"]["guarantee"],
    }
    assert "3-LDP" in weekly["lifetime"]["guarantee"]
    assert "sequential composition" in weekly["lifetime"]["guarantee"]
    free = p["metrics"]["app.free"]
    assert free["budget"] is None and free["period"] is None
    assert free["today"]["reports"] == 0 and free["lifetime"]["epsilon"] == 2.0
    assert free["bounds"]["per_report"] == 2.0
    assert p["total"]["lifetime"]["epsilon"] == 3.0 + 0.5 + 2.0
    assert p["total"]["today"]["epsilon"] == 1.0


def test_privacy_after_shutdown_has_the_same_shape(
    make_client: Callable[..., Client], collector: Collector, mode: str
) -> None:
    """After shutdown (a durable store closed), privacy() still answers in full: the ledger
    as it stood at shutdown, not an error dict; an opt-out made after it still shows."""
    client = make_client()
    assert client.report("app.theme", 0) and client.report("app.free", 1)
    before = client.privacy()
    assert client.shutdown(timeout=5)
    assert len(collector.delivered) == 2
    after = client.privacy()
    assert "error" not in after
    assert after == before
    after["metrics"].clear()  # the caller's copy: the next answer is whole
    assert client.privacy() == before
    assert client.report("app.free", 1) is False  # nothing spent after shutdown
    assert client.privacy() == before
    client.shutdown(timeout=1)  # a second shutdown (atexit's) keeps the first one's ledger
    assert client.privacy() == before
    # a durable store is closed: the opt-out holds in this process, not persisted
    assert client.disable() is (mode == "memory")
    assert client.privacy()["enabled"] is False


def test_privacy_counts_queued_reports_and_nothing_for_refused_ones(
    collector: Collector, make_client: Callable[..., Client]
) -> None:
    client = make_client()
    assert not client.report("app.unknown", 0) and not client.report("app.free", "zzz")
    metrics = client.privacy()["metrics"]  # known metrics are listed, spent or not
    assert list(metrics) == ["app.free"] and metrics["app.free"]["lifetime"]["reports"] == 0
    assert client.report("app.free", 0)  # queued, not sent yet: already spent
    assert client.privacy()["metrics"]["app.free"]["today"]["epsilon"] == 2.0
    assert collector.delivered == []


# -- opt-out -------------------------------------------------------------------------------------


def test_disable_wipes_the_queue_refunds_unsent_reports_and_stops_reporting(
    collector: Collector, make_client: Callable[..., Client], tmp_path: Path, mode: str
) -> None:
    client = make_client()
    assert client.report("app.free", 0) and client.flush(timeout=5)  # one sent
    # flush() returns once the queue is empty; the upload thread may still be in its
    # drain loop and would take a report queued now. Wait until it is idle again, so the
    # next four wait for flush_interval (an hour) and are provably never sent.
    deadline = time.monotonic() + 5
    while client._uploader._flush_requested and time.monotonic() < deadline:
        time.sleep(0.001)
    assert not client._uploader._flush_requested
    for _ in range(4):
        assert client.report("app.free", 1)  # four waiting
    assert client.disable() is True
    stats = client.stats()
    assert stats["queued"] == 0 and stats["dropped"]["disabled"] == 4
    assert client.report("app.free", 0) is False
    assert client.stats()["dropped"]["disabled"] == 5
    assert client.flush(timeout=1) is False and len(collector.delivered) == 1
    lifetime = client.privacy()["metrics"]["app.free"]["lifetime"]
    if mode == "durable":  # the four never left the device: refunded
        assert lifetime["reports"] == 1 and stored(tmp_path / "store") == []
    else:  # the memory queue keeps no charges: they stay (an overstatement)
        assert lifetime["reports"] == 5
    assert client.privacy()["enabled"] is False
    assert client.enable() is True
    assert client.report("app.free", 0) is True and client.privacy()["enabled"] is True


@pytest.mark.parametrize("mode", ["durable"])  # memory: one process, no tries
def test_disable_keeps_the_charges_of_reports_that_may_have_left(
    collector: Collector, make_client: Callable[..., Client], mode: str
) -> None:
    collector.post_default = Answer(503)  # the collector may have stored them anyway
    resume = threading.Event()

    def sleep(delay: float) -> None:
        if delay >= RETRY_CAP:
            resume.wait(10)

    client = make_client(sleep=sleep)
    for _ in range(3):
        assert client.report("app.free", 0)
    assert client.flush() is False  # attempted three times, then paused
    assert client.report("app.free", 1)  # never attempted
    assert client.disable()
    resume.set()
    lifetime = client.privacy()["metrics"]["app.free"]["lifetime"]
    assert (lifetime["reports"], lifetime["epsilon"]) == (3, 6.0)


def test_disable_deletes_the_device_secret_and_is_remembered_after_a_restart(
    make_client: Callable[..., Client], tmp_path: Path, mode: str
) -> None:
    client = make_client()
    secret = client._device_secret()
    assert len(secret) == 32 and client._device_secret() == secret
    assert client.report("app.theme", 0)
    assert client.disable()
    with pytest.raises(ReportingDisabledError):
        client._device_secret()
    if mode == "durable":
        with sqlite3.connect(tmp_path / "store" / FILENAME) as conn:
            assert conn.execute(
                "SELECT count(*) FROM meta WHERE key = 'device_secret'"
            ).fetchone() == (0,)
        client.shutdown(timeout=0.5)
        after = make_client()
        assert after.report("app.theme", 0) is False  # still opted out
        assert after.stats()["dropped"]["disabled"] == 1
        client = after
    assert client.enable()
    assert client._device_secret() != secret  # a new device, as far as memoization goes
    assert client.report("app.theme", 1) is True


def test_an_opt_out_in_one_process_stops_the_others(
    collector: Collector, clock: Clock, tmp_path: Path
) -> None:
    a = Client(collector.url, storage_dir=tmp_path / "s", wallclock=clock, flush_at=10**6)
    b = Client(collector.url, storage_dir=tmp_path / "s", wallclock=clock, flush_at=10**6)
    try:
        assert a.report("app.free", 0) and b.report("app.free", 1)
        assert a.disable()
        assert b.report("app.free", 0) is False and b.stats()["dropped"]["disabled"] == 1
        assert b.enable()
        assert a.report("app.free", 0) is True
    finally:
        a.shutdown(timeout=0.2)
        b.shutdown(timeout=0.2)


def test_the_memory_ledger_charges_only_what_was_queued() -> None:
    ledger = MemoryLedger()
    queue = MemoryQueue(max_bytes=4)
    charge = Charge("m", 1.0, "2027-01-13", "2027-01-13", 5)
    ledger.enqueue(queue, b"ok", charge)
    with pytest.raises(Exception, match="exceeds"):
        ledger.enqueue(queue, b"too long", charge)
    rows, lifetime = ledger.ledger("2027-01-01")
    assert rows == [("m", "2027-01-13", 1, 1.0)] and lifetime == {"m": (1, 1.0, "2027-01-13")}


# -- the budget in metric definitions ----------------------------------------------------------


@pytest.mark.parametrize(
    ("budget", "problem"),
    [
        ({"reports_per_period": 0, "period": "day"}, "reports_per_period must be an integer"),
        ({"reports_per_period": 1.5, "period": "day"}, "reports_per_period must be an integer"),
        ({"reports_per_period": True, "period": "day"}, "reports_per_period must be an integer"),
        ({"reports_per_period": 10**7, "period": "day"}, "reports_per_period must be an integer"),
        ({"reports_per_period": 3, "period": "year"}, "period must be one of day, week, month"),
        ({"reports_per_period": 3}, "budget must be"),
        ({"reports_per_period": 3, "period": "day", "x": 1}, "budget must be"),
        ([3, "day"], "budget must be"),
    ],
)
def test_an_invalid_budget_is_a_clear_problem(budget: Any, problem: str) -> None:
    spec = {"domain": ["a", "b"], "epsilon": 1.0, "budget": budget}
    with pytest.raises(DefinitionError, match=problem):
        wire.parse_spec("app.x", spec)
    data = {**FREE.to_dict(), "budget": budget}
    with pytest.raises(DefinitionError, match=problem):
        wire.MetricDefinition.from_dict(data)


def test_the_budget_round_trips_and_is_not_a_decoding_parameter() -> None:
    assert DAILY.budget == wire.Budget(3, "day")
    assert DAILY.to_dict()["budget"] == {"reports_per_period": 3, "period": "day"}
    assert FREE.to_dict()["budget"] is None
    assert wire.MetricDefinition.from_dict(DAILY.to_dict()) == DAILY
    assert wire.MetricDefinition.from_dict(FREE.to_dict()) == FREE
    other = wire.MetricDefinition.from_dict({**DAILY.to_dict(), "budget": None})
    assert other.same_parameters(DAILY) and other != DAILY


def test_a_budget_change_in_the_registry_keeps_the_version(redis_db: Any) -> None:
    registry = Registry(redis_db.client())
    spec = {"domain": ["a", "b"], "epsilon": 1.0, "mechanism": "grr"}
    assert registry.put("app.x", spec).definition.version == 1
    change = registry.put("app.x", {**spec, "budget": {"reports_per_period": 4, "period": "week"}})
    assert (change.created, change.changed, change.definition.version) == (False, True, 1)
    stored_now = registry.get("app.x")
    assert stored_now is not None and stored_now.budget == wire.Budget(4, "week")
    same = registry.put("app.x", {**spec, "budget": {"reports_per_period": 4, "period": "week"}})
    assert same.changed is False
    new = registry.put("app.x", {**spec, "epsilon": 2.0})
    assert new.definition.version == 2 and new.definition.budget is None


@pytest.mark.parametrize("mode", ["durable"])  # memory: a secret per process by design
def test_the_device_secret_survives_restarts_and_memoized_reports_use_it(
    collector: Collector, make_client: Callable[..., Client]
) -> None:
    longitudinal = wire.parse_spec(
        "app.long",
        {
            "domain": ["a", "b", "c"],
            "epsilon": 1.0,
            "mechanism": "grr",
            "longitudinal": {"permanent_epsilon": 3.0},
            "budget": {"reports_per_period": 5, "period": "day"},
        },
    )
    collector.publish(longitudinal)
    first = make_client()
    secret = first._device_secret()
    assert first.report("app.long", "b") and first.flush(timeout=5)
    first.shutdown(timeout=1)
    second = make_client()
    assert second._device_secret() == secret
    assert second.report("app.long", "b") and second.flush(timeout=5)
    assert len(collector.delivered) == 2
    entry = second.privacy()["metrics"]["app.long"]
    assert entry["bounds"]["per_report"] == 1.0
    assert entry["bounds"]["unlimited_same_value"] == 3.0  # ε∞, besides m·ε
    assert entry["lifetime"]["epsilon"] == 2.0

"""The device-wide budget: a cap on the total ε over all metrics, per day and lifetime.

Clients talk to the real HTTP test collector of ``test_client.py`` (which can publish caps
beside each definition, as the collector does); days are driven by an injected clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from test_client import Collector
from test_client_ledger import DAILY, FREE, at, budgeted
from test_client_ledger import make_client as make_client  # the ledger tests' fixture

from client_sdk import Client
from client_sdk.device import DeviceCaps, device_total
from client_sdk.errors import DeviceBudgetExhaustedError
from client_sdk.ledger import Charger, Tally
from tests.clock import Clock

MEMO = budgeted("app.memo", ["a", "b", "c"], 1.0, 10, "day", permanent_epsilon=2.0)


@pytest.fixture
def collector() -> Iterator[Collector]:
    yield from Collector.serving(DAILY, FREE, MEMO)


@pytest.fixture
def clock() -> Clock:
    return Clock(at(2027, 1, 13))


@pytest.fixture(params=["memory", "durable"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_a_report_past_the_daily_cap_is_refused_across_metrics(
    make_client: Callable[..., Client], clock: Clock
) -> None:
    client = make_client(device_budget={"epsilon_per_day": 3.0})
    assert client.report("app.free", 0)  # ε = 2
    assert client.report("app.theme", 0)  # ε = 0.5: 2.5
    assert client.report("app.theme", 1)  # 3.0: exactly the cap
    assert client.report("app.theme", 2) is False  # its own budget (3 a day) allows it
    assert client.report("app.free", 1) is False
    dropped = client.stats()["dropped"]
    assert dropped["device_budget"] == 2 and dropped["budget"] == 0
    device = client.privacy()["device_budget"]
    assert device["epsilon_per_day"] == 3.0 and device["epsilon_lifetime"] is None
    assert device["spent_today"] == 3.0 and device["remaining_today"] == 0.0
    clock.now = at(2027, 1, 14)  # a new UTC day
    assert client.report("app.free", 0)
    assert client.privacy()["device_budget"]["spent_today"] == 2.0


def test_the_lifetime_cap_holds_over_days(make_client: Callable[..., Client], clock: Clock) -> None:
    client = make_client(device_budget={"epsilon_lifetime": 5.0})
    for day in (13, 14):
        clock.now = at(2027, 1, day)
        assert client.report("app.free", 0)
    clock.now = at(2027, 1, 15)
    assert client.report("app.theme", 0)  # 4.5
    assert client.report("app.free", 0) is False  # would be 6.5
    assert client.report("app.theme", 0)  # 5.0
    assert client.report("app.theme", 0) is False
    device = client.privacy()["device_budget"]
    assert device["spent_lifetime"] == 5.0 and device["remaining_lifetime"] == 0.0


@pytest.mark.parametrize("mode", ["durable"])
def test_the_device_budget_survives_a_restart(
    make_client: Callable[..., Client], clock: Clock, mode: str
) -> None:
    caps = {"epsilon_per_day": 4.0, "epsilon_lifetime": 6.0}
    first = make_client(device_budget=caps)
    assert first.report("app.free", 0) and first.report("app.free", 1)
    assert first.report("app.free", 0) is False  # 6 > 4 today
    assert first.shutdown(timeout=5) is False  # one report was refused
    second = make_client(device_budget=caps)
    assert second.report("app.theme", 0) is False  # 4.5 > 4 today, after a restart
    assert second.stats()["dropped"]["device_budget"] == 1
    # Three months on, the days of January are outside the ledger's window of detail:
    # the lifetime sums still hold them.
    clock.now = at(2027, 4, 20)
    assert second.report("app.free", 0)  # 6.0: the lifetime cap
    assert second.shutdown(timeout=5) is False  # app.theme was refused
    third = make_client(device_budget=caps)
    assert third.report("app.theme", 0) is False
    assert third.privacy()["device_budget"]["spent_lifetime"] == 6.0


def test_the_collectors_cap_reaches_the_client_and_the_stricter_applies(
    collector: Collector, make_client: Callable[..., Client]
) -> None:
    collector.device_budget = {"epsilon_per_day": 2.5, "epsilon_lifetime": None}
    client = make_client(device_budget={"epsilon_per_day": 10.0, "epsilon_lifetime": 100.0})
    assert client.report("app.free", 0)
    assert client.report("app.theme", 0)  # 2.5
    assert client.report("app.theme", 0) is False  # the server's 2.5, not the app's 10
    device = client.privacy()["device_budget"]
    assert device["epsilon_per_day"] == 2.5 and device["epsilon_lifetime"] == 100.0


def test_a_memoized_metric_counts_at_most_its_permanent_epsilon(
    make_client: Callable[..., Client],
) -> None:
    client = make_client(device_budget={"epsilon_per_day": 3.0})
    assert all(client.report("app.memo", "a") for _ in range(5))  # 5 × ε₁ = 5, ε∞ = 2
    assert client.privacy()["device_budget"]["spent_today"] == 2.0
    assert client.report("app.theme", 0) and client.report("app.theme", 0)  # 3.0
    assert client.report("app.free", 0) is False


def test_without_caps_nothing_is_refused_and_privacy_says_so(
    make_client: Callable[..., Client],
) -> None:
    client = make_client()
    assert all(client.report("app.free", 0) for _ in range(20))
    device = client.privacy()["device_budget"]
    assert device["epsilon_per_day"] is None and device["remaining_today"] is None
    assert device["spent_today"] == 40.0


@pytest.mark.parametrize(
    ("caps", "problem"),
    [
        ({"epsilon_per_day": 0}, "epsilon_per_day must be a positive number"),
        ({"epsilon_per_day": "2"}, "epsilon_per_day must be a positive number"),
        ({"per_day": 2}, "device_budget must be"),
        ([2, 3], "device_budget must be"),
    ],
)
def test_bad_app_caps_raise_at_construction(caps: object, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        Client("http://127.0.0.1:9", device_budget=caps)


def test_the_tally_refuses_with_the_device_reason() -> None:
    charger, tally = Charger(), Tally()
    charger.device = DeviceCaps(epsilon_per_day=1.0)
    charge = charger.charge(FREE, at(2027, 1, 13))
    assert charge.device == DeviceCaps(epsilon_per_day=1.0)
    with pytest.raises(DeviceBudgetExhaustedError):
        tally.check(charge)  # ε = 2 alone is past the cap


def test_stricter_and_device_total() -> None:
    app = DeviceCaps(epsilon_per_day=3.0)
    server = DeviceCaps(epsilon_per_day=5.0, epsilon_lifetime=50.0)
    assert app.stricter(server) == DeviceCaps(3.0, 50.0)
    assert app.stricter(None) == app
    assert device_total([("a", 1.0), ("m", 1.0), ("m", 4.0)], {"m": 2.0}) == 3.0


@pytest.mark.parametrize("mode", ["durable"])
def test_the_collectors_cap_holds_on_an_offline_start(
    collector: Collector, make_client: Callable[..., Client], mode: str
) -> None:
    from test_client import Answer

    collector.device_budget = {"epsilon_per_day": 2.5}
    first = make_client()
    assert first.report("app.free", 0)  # 2.0, the definition and the caps kept
    first.definition("app.theme")  # fetched (and kept) too
    assert first.shutdown(timeout=5)
    collector.get_answers.extend([Answer(503)] * 10)  # the collector is unreachable now
    second = make_client()
    assert second.report("app.theme", 0)  # 2.5, from the kept definition
    assert second.report("app.theme", 0) is False
    assert second.stats()["dropped"]["device_budget"] == 1

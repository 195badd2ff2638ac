"""The shared request context (ldp_api/context.py): attached once, read through typed accessors."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from flask import Flask
from prometheus_client import CollectorRegistry
from prometheus_client.registry import Collector

from collector import create_app
from collector.context import Services, services
from ldp_api.context import SharedContext, Slot, attach, shared
from ldp_store.lifecycle import MemoryUsage
from ldp_store.registry import Registry


class Hooks:
    """The app metrics a read side needs, without the collector's."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.added: list[Collector] = []

    def add_collector(self, collector: Collector) -> None:
        self.added.append(collector)


def _plain_context() -> SharedContext:
    client = redis.Redis(port=1)  # never connected: nothing here runs a command
    return SharedContext(client, Registry(client), MemoryUsage(client), Hooks())


def test_the_collector_attaches_its_services_as_the_shared_context(redis_db: Any) -> None:
    app = create_app({"REDIS_URL": redis_db.url, "TESTING": True})
    found = services(app)
    assert isinstance(found, Services)
    assert shared(app=app) is found and shared(Services, app) is found
    with app.app_context():
        assert shared() is found and services() is found


def test_an_app_without_a_context_says_so() -> None:
    with pytest.raises(LookupError, match="no ldp attached"):
        shared(app=Flask(__name__))


def test_a_context_of_another_kind_is_refused() -> None:
    app = Flask(__name__)
    attach(app, _plain_context())
    assert isinstance(shared(app=app), SharedContext)
    with pytest.raises(TypeError, match="not a Services"):
        services(app)


def test_a_slot_holds_one_kind() -> None:
    app = Flask(__name__)
    slot: Slot[Hooks] = Slot("test_hooks", Hooks)
    assert slot.find(app) is None
    with pytest.raises(TypeError, match="expected Hooks"):
        slot.attach(app, "not hooks")  # type: ignore[arg-type]
    hooks = Hooks()
    slot.attach(app, hooks)
    with app.app_context():
        assert slot.get() is hooks

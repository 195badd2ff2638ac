"""The client across ``os.fork()``: a forked child works like a fresh process whatever the
parent's threads were doing, and never spends a budget it cannot share.

Real forks of the test process, beside real threads, on a real SQLite store and the real
HTTP test collector of ``test_client.py``. A child that does not exit in time is killed
and counted as hung.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fork_helpers import CHILD_TIMEOUT, in_child, reap
from test_client import PAGE, THEME, THEME_LABELS, Collector
from test_client_ledger import budgeted

from client_sdk import Client
from client_sdk.store import FILENAME
from client_sdk.store import sqlite as store_sqlite

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

FORKS = 100
"""Children forked beside a reporting thread (issue 44: 40 forks left 1 hung and 4
unusable, 120 left 3 and 10)."""

DAILY = budgeted("app.mode", THEME_LABELS, 1.0, 3, "day")


@pytest.fixture
def collector() -> Iterator[Collector]:
    yield from Collector.serving(THEME, PAGE, DAILY)


def test_forks_beside_a_reporting_thread_give_children_that_work(
    collector: Collector, tmp_path: Path
) -> None:
    """Issue 44: a fork while another thread was inside SQLite gave children that hung
    for ever in their first report() (a SQLite lock inherited held) or could never use
    the store ("database is locked"). The store is now quiesced and closed around a fork:
    every child reports, and every report a child made is delivered."""
    store = tmp_path / "store"
    client = Client(collector.url, storage_dir=store, flush_at=50, flush_interval=0.05)
    assert client.report("app.theme", 0) and client.report("app.page", 0)  # definitions
    stop = threading.Event()

    def reporter() -> None:  # the app's thread, in and out of SQLite all the time
        while not stop.is_set():
            client.report("app.theme", 1)
            time.sleep(0.0002)

    thread = threading.Thread(target=reporter, daemon=True)
    thread.start()
    outcomes: Counter[str] = Counter()
    try:
        for _ in range(FORKS):
            pid = os.fork()
            if pid == 0:  # the child: one report of app.page, then a look at the ledger
                code = 3
                try:  # unusable: a store it can never use (a first try may find it busy)
                    ok = any(client.report("app.page", 1) for _ in range(3))
                    ok = ok and any("error" not in client.privacy() for _ in range(3))
                    code = 0 if ok else 4
                finally:
                    os._exit(code)
            code = reap(pid, CHILD_TIMEOUT)
            outcomes["hung" if code is None else "ok" if code == 0 else "unusable"] += 1
    finally:
        stop.set()
        thread.join()
    assert outcomes == {"ok": FORKS}
    client.flush(timeout=120)
    client.shutdown(timeout=5)
    delivered = [r for r in collector.delivered if r["metric"] == "app.page"]
    with sqlite3.connect(store / FILENAME) as conn:
        (left,) = conn.execute("SELECT count(*) FROM reports WHERE metric = 'app.page'").fetchone()
    assert len(delivered) + left == FORKS + 1  # the parent's one and each child's


def test_a_fork_that_cannot_quiesce_the_store_gives_a_child_that_leaves_it_alone(
    collector: Collector, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Should a thread stay inside the store past FORK_WAIT (here the forking thread holds
    the store's lock itself), the child does not touch the store: its reports are dropped
    as storage_error instead of waiting for a lock inherited held; the parent goes on."""
    monkeypatch.setattr(store_sqlite, "FORK_WAIT", 0.1)
    client = Client(collector.url, storage_dir=tmp_path / "store", flush_at=10_000)
    assert client.report("app.theme", 0)
    durable = client._durable
    assert durable is not None

    def child() -> dict[str, Any]:
        return {"ok": client.report("app.theme", 1), "dropped": client.stats()["dropped"]}

    with durable._lock:  # e.g. a fork from a callback of the store's own thread
        _, result = in_child(child)
    assert result is not None and result["ok"] is False
    assert result["dropped"]["storage_error"] == 1
    assert client.report("app.theme", 2) is True
    client.shutdown(timeout=1)


def test_a_child_of_a_client_without_storage_does_not_spend_the_parents_budget(
    collector: Collector,
) -> None:
    """Issue 44: without storage_dir, 4 workers forked from a parent that reported once
    each spent the parent's remaining budget again (11 reports under a 3-per-day budget).
    A child now refuses every metric with a budget, once with a warning, and still
    reports the others."""
    client = Client(collector.url, flush_at=10_000, flush_interval=3600.0)
    assert client.report("app.mode", 1)

    def child() -> dict[str, Any]:
        said: list[str] = []
        handler = logging.Handler(logging.WARNING)
        handler.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
        logging.getLogger("client_sdk").addHandler(handler)
        budgeted = [client.report("app.mode", 1) for _ in range(3)]
        free = client.report("app.theme", 0)
        stats = client.stats()
        return {
            "budgeted": budgeted,
            "free": free,
            "flushed": client.flush(timeout=30),
            "dropped": {k: v for k, v in stats["dropped"].items() if v},
            "said": said,
        }

    results = [in_child(child)[1] for _ in range(4)]
    for result in results:
        assert result is not None
        assert result["budgeted"] == [False] * 3 and result["free"] is True
        assert result["dropped"] == {"budget_not_shared_after_fork": 3}
        assert result["flushed"] is False  # three were dropped
        (warning,) = result["said"]  # once, though three were dropped
        assert "budget_not_shared_after_fork" in warning and "storage_dir" in warning
    assert [client.report("app.mode", 1) for _ in range(3)] == [True, True, False]
    assert client.flush(timeout=30) is False  # the third was over budget
    modes = [r for r in collector.delivered if r["metric"] == "app.mode"]
    assert len(modes) == 3  # the budget, once
    assert sum(r["metric"] == "app.theme" for r in collector.delivered) == 4
    client.shutdown(timeout=1)

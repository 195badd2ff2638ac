"""The durable store (``Client(url, storage_dir=...)``): persist, then upload; quotas;
restarts; offline periods; several processes and forks on one directory; a broken disk.

Every test talks to the real HTTP test collector of ``test_client.py`` (it validates each
report like the collector does and records what it delivered); processes are real
subprocesses or forks. The SIGKILL-in-the-middle-of-a-flush test against the real stack
is in ``test_client_store_crash.py``.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fork_helpers import in_child
from test_client import PAGE, THEME, Answer, Collector, FakeTime, _Handler, _Server, client_maker

from client_sdk import Client
from client_sdk.errors import StoreError
from client_sdk.ledger import Charge
from client_sdk.store import FILENAME, Store
from client_sdk.store import sqlite as store_sqlite
from client_sdk.uploader import FAILURES_PER_RUN, RETRY_CAP

ROOT = Path(__file__).resolve().parents[2]


class PortCollector(Collector):
    """The test collector, optionally on a given port (to come back where it was)."""

    def __init__(self, *definitions: Any, port: int = 0) -> None:
        super().__init__(*definitions)
        if port:
            self.server.server_close()
            self.server = _Server(("127.0.0.1", port), _Handler)
            self.server.collector = self
            self._thread = threading.Thread(
                target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
            )

    def restarted(self) -> PortCollector:
        """Stop this one; start a fresh one (nothing delivered yet) on the same port."""
        self.stop()
        port = self.server.server_address[1]
        return PortCollector(*self.versions.values(), port=port).start()  # type: ignore[return-value]


@pytest.fixture
def collector() -> Iterator[PortCollector]:
    yield from PortCollector.serving(THEME, PAGE)


@pytest.fixture
def make_client(collector: Collector, tmp_path: Path) -> Iterator[Callable[..., Client]]:
    """Durable clients on the test collector (storage in tmp_path/store by default)."""
    with client_maker(collector.url, storage_dir=tmp_path / "store", timeout=5.0) as make:
        yield make


def stored(directory: Path) -> list[dict[str, Any]]:
    """The reports in a store, oldest first, read with a separate connection."""
    with sqlite3.connect(directory / FILENAME) as conn:
        return [
            json.loads(data) for (data,) in conn.execute("SELECT data FROM reports ORDER BY id")
        ]


def ids(reports: list[dict[str, Any]]) -> list[str]:
    return [r["id"] for r in reports]


HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
sys.stdin.readline()
conn.execute("COMMIT")
"""


@contextmanager
def held(directory: Path) -> Iterator[None]:
    """Another process holds the store's write lock (``BEGIN IMMEDIATE``) for the block."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(directory / FILENAME)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdin is not None and holder.stdout is not None
    try:
        assert holder.stdout.readline().strip() == "held"
        yield
    finally:
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.wait(timeout=30) == 0


CHARGE = Charge("app.theme", 1.0, "2027-01-15", "2027-01-15")


# -- persist, then upload ----------------------------------------------------------------------


def test_a_report_is_committed_before_report_returns_and_before_it_is_sent(
    collector: Collector, make_client: Callable[..., Client], tmp_path: Path
) -> None:
    seen_on_disk: list[bool] = []
    original = collector.on_post

    def on_post(handler: _Handler, body: bytes) -> None:
        on_disk = set(ids(stored(tmp_path / "store")))
        seen_on_disk.append(all(r["id"] in on_disk for r in json.loads(body)["reports"]))
        original(handler, body)

    collector.on_post = on_post  # type: ignore[method-assign]
    client = make_client()
    for i in range(5):
        assert client.report("app.theme", i % 3)
        assert len(stored(tmp_path / "store")) == i + 1  # another connection sees it
    assert client.flush(timeout=5)
    assert seen_on_disk == [True] and len(collector.delivered) == 5
    assert stored(tmp_path / "store") == []  # deleted after the 2xx
    stats = client.stats()
    assert (stats["queued"], stats["sent"], stats["reported"]) == (0, 5, 5)


def test_the_store_file_is_private_to_the_user(
    make_client: Callable[..., Client], tmp_path: Path
) -> None:
    client = make_client(storage_dir=tmp_path / "new" / "dir")
    assert client.report("app.theme", 0)
    assert (tmp_path / "new" / "dir" / FILENAME).stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "new" / "dir").stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("status", [400, 422])
def test_reports_rejected_as_invalid_are_deleted(
    collector: Collector, make_client: Callable[..., Client], tmp_path: Path, status: int
) -> None:
    collector.post_answers.extend([Answer(status), Answer(202, reject=(1,))])
    client = make_client()
    for i in range(2):
        assert client.report("app.theme", i)
    assert client.flush(timeout=5) is False  # the first batch: 400/422, dropped
    for i in range(3):
        assert client.report("app.theme", i)
    assert client.flush(timeout=5) is False  # one of three rejected inside a 202
    assert stored(tmp_path / "store") == []
    assert client.stats()["dropped"]["rejected"] == 3 and len(collector.delivered) == 2


@pytest.mark.parametrize("failure", [503, 500, 429, 408, "dropped connection"])
def test_recoverable_failures_keep_the_reports_stored_until_delivered(
    collector: Collector, make_client: Callable[..., Client], tmp_path: Path, failure: Any
) -> None:
    answer = Answer(drop=True) if failure == "dropped connection" else Answer(int(failure))
    collector.post_answers.extend([answer] * 2)
    fake = FakeTime()
    client = make_client(sleep=fake.sleep)
    for i in range(4):
        assert client.report("app.theme", i % 3)
    made = ids(stored(tmp_path / "store"))
    assert client.flush(timeout=5)
    assert ids(collector.delivered) == made and stored(tmp_path / "store") == []


def test_a_batch_stops_after_a_bounded_number_of_failures_per_window(
    collector: Collector, make_client: Callable[..., Client], tmp_path: Path
) -> None:
    collector.post_default = Answer(503)
    windows: list[float] = []
    resume = threading.Event()

    def sleep(delay: float) -> None:
        if delay >= RETRY_CAP:  # the uploader waits for the next upload window
            windows.append(delay)
            resume.wait(10)

    client = make_client(sleep=sleep)
    for i in range(3):
        assert client.report("app.theme", i)
    assert client.flush() is False  # returns when the window's failures are used up
    assert len(collector.posts) == FAILURES_PER_RUN and windows == [RETRY_CAP]
    assert client.stats()["retries"] == FAILURES_PER_RUN
    assert len(stored(tmp_path / "store")) == 3  # nothing lost meanwhile
    collector.post_default = Answer(202)
    resume.set()
    assert client.flush(timeout=5) and len(collector.delivered) == 3


# -- restarts and offline periods ------------------------------------------------------------


def test_reports_made_offline_are_delivered_after_a_restart(
    collector: PortCollector, make_client: Callable[..., Client], tmp_path: Path
) -> None:
    first = make_client()
    assert first.report("app.theme", 0) and first.report("app.page", 1)  # definitions kept
    assert first.flush(timeout=5)
    collector.stop()  # offline from here on
    for i in range(30):
        assert first.report("app.theme", i % 3)
    assert first.flush(timeout=0.3) is False
    assert first.shutdown(timeout=0.3) is False
    assert first.stats()["dropped"]["shutdown"] == 0  # kept on disk, not dropped
    # The app starts again, still offline: the definitions come from the store.
    second = make_client()
    assert second.stats()["queued"] == 30
    for i in range(20):
        assert second.report("app.page", i)
    made = ids(stored(tmp_path / "store"))
    assert len(made) == 50 and second.stats()["dropped"]["unreachable"] == 0
    back = collector.restarted()
    assert second.flush(timeout=10)
    assert ids(back.delivered) == made  # every one, once, oldest first
    assert stored(tmp_path / "store") == []


def test_the_backlog_of_an_earlier_run_is_sent_without_new_reports(
    collector: PortCollector, make_client: Callable[..., Client], tmp_path: Path
) -> None:
    first = make_client()
    assert first.report("app.theme", 0) and first.flush(timeout=5)
    collector.stop()
    for i in range(3):
        assert first.report("app.theme", i)
    first.shutdown(timeout=0.2)
    back = collector.restarted()
    second = make_client(flush_interval=0.05)  # the uploader starts with the client
    deadline = time.monotonic() + 5
    while len(back.delivered) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(back.delivered) == 3 and second.stats()["reported"] == 0


@pytest.mark.parametrize("quota", ["count", "bytes"])
def test_over_quota_the_oldest_reports_are_dropped_and_counted(
    collector: PortCollector, make_client: Callable[..., Client], tmp_path: Path, quota: str
) -> None:
    size = len(
        json.dumps(Client(collector.url).build_report("app.theme", 0), separators=(",", ":"))
    )
    limits = {"max_queue": 40} if quota == "count" else {"max_queue_bytes": 40 * size + size // 2}
    client = make_client(**limits)
    assert client.report("app.theme", 0) and client.flush(timeout=5)
    collector.stop()
    made = []
    for i in range(50):
        assert client.report("app.theme", i % 3)
        made.append(stored(tmp_path / "store")[-1]["id"])
    stats = client.stats()
    assert stats["queued"] == 40 and stats["dropped"]["queue_full"] == 10
    assert stats["queued_bytes"] == sum(
        len(json.dumps(r, separators=(",", ":"))) for r in stored(tmp_path / "store")
    )
    back = collector.restarted()
    assert client.flush(timeout=10) is False  # ten were evicted
    assert ids(back.delivered) == made[10:]  # the newest 40, in order


def test_an_item_larger_than_the_byte_quota_is_refused_and_charged_nothing(
    make_client: Callable[..., Client],
) -> None:
    client = make_client(max_queue_bytes=100)
    assert client.report("app.theme", 0)
    assert client.report("app.page", 0) is False  # a 200-value OUE report
    assert client.stats()["dropped"]["queue_full"] == 1
    assert "app.page" not in client.privacy()["metrics"] or (
        client.privacy()["metrics"]["app.page"]["lifetime"]["reports"] == 0
    )


# -- the store itself --------------------------------------------------------------------------


def test_store_quota_keeps_count_and_bytes_exact_across_restarts(tmp_path: Path) -> None:
    store = Store(tmp_path, max_count=3, max_bytes=10**6)
    for i in range(5):
        store.put(b"x" * (i + 1), CHARGE)
    assert (len(store), store.nbytes, store.evicted) == (3, 3 + 4 + 5, 2)
    store.close()
    again = Store(tmp_path, max_count=3, max_bytes=10**6)
    assert (len(again), again.nbytes) == (3, 12)
    assert [e.data for e in again.peek(10, 10**6)] == [b"xxx", b"xxxx", b"xxxxx"]


def test_two_stores_never_claim_the_same_report(tmp_path: Path) -> None:
    a, b = Store(tmp_path), Store(tmp_path)
    for i in range(6):
        a.put(b"%d" % i, CHARGE)
    first = a.peek(4, 10**6)
    second = b.peek(10, 10**6)
    assert {e.key for e in first}.isdisjoint(e.key for e in second)
    assert len(first) + len(second) == 6
    b.ack([e.key for e in first])  # not b's: ignored
    assert len(b) == 6
    a.close()  # releases a's leases
    assert len(b.peek(10, 10**6)) == 6


def test_the_lease_of_a_dead_process_is_released_at_once(tmp_path: Path) -> None:
    store = Store(tmp_path)
    for i in range(3):
        store.put(b"%d" % i, CHARGE)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    pid = int(dead.stdout)
    with sqlite3.connect(tmp_path / FILENAME) as conn:  # as if that process had claimed them
        conn.execute(
            "UPDATE reports SET owner = ?, lease_until = ?", (f"{pid}:0000", time.time() + 100)
        )
    assert len(store.peek(10, 10**6)) == 3


def test_reports_are_retried_by_another_process_after_a_lease_expires(tmp_path: Path) -> None:
    now = [1_800_000_000.0]
    a = Store(tmp_path, wallclock=lambda: now[0])
    b = Store(tmp_path, wallclock=lambda: now[0])
    a.put(b"r", CHARGE)
    assert len(a.peek(10, 10**6)) == 1 and b.peek(10, 10**6) == []
    now[0] += 301
    assert [e.data for e in b.peek(10, 10**6)] == [b"r"]


# -- several processes, fork -----------------------------------------------------------------

APP = r"""
import json, sys
from client_sdk import Client
url, storage, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
client = Client(url, storage_dir=storage, flush_at=20, timeout=5)
ok = [client.report("app.theme", i % 3) for i in range(n)]
flushed = client.flush(timeout=30)
print(json.dumps({"ok": sum(ok), "flushed": flushed, "stats": client.stats()}))
"""


def test_two_processes_on_one_directory_deliver_everything_exactly_once(
    collector: Collector, tmp_path: Path
) -> None:
    storage = tmp_path / "shared"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", APP, collector.url, str(storage), "300"],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for _ in range(2)
    ]
    results = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert [r["ok"] for r in results] == [300, 300], [r["stats"] for r in results]
    for r in results:
        assert sum(r["stats"]["dropped"].values()) == 0
    Client(collector.url, storage_dir=storage).flush(timeout=10)  # anything left over
    assert len(collector.delivered) == 600  # unique ids: each counted once
    with sqlite3.connect(storage / FILENAME) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("SELECT count(*) FROM reports").fetchone() == (0,)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_opens_its_own_connection_and_both_deliver(
    collector: Collector, make_client: Callable[..., Client], tmp_path: Path
) -> None:
    client = make_client()
    assert client.report("app.theme", 0)  # the parent's connection is open
    parent_conn = client._durable._conn  # type: ignore[union-attr]
    assert parent_conn is not None

    def child() -> dict[str, Any]:
        reported = [client.report("app.theme", i) for i in (1, 2)]
        own = client._durable._conn  # type: ignore[union-attr]
        flushed = client.flush(timeout=5)
        return {"reported": reported, "flushed": flushed, "own": own is not parent_conn}

    _, result = in_child(child)
    assert result is not None  # the child exited 0
    assert result == {"reported": [True, True], "flushed": True, "own": True}
    assert client.report("app.theme", 0)  # the parent's connection still works
    assert client.flush(timeout=5)
    assert len(collector.delivered) == 4  # the child may have sent the parent's first one
    with sqlite3.connect(tmp_path / "store" / FILENAME) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


# -- a broken store never raises into the app --------------------------------------------------


def test_a_store_that_cannot_be_opened_drops_reports_as_storage_error(
    make_client: Callable[..., Client], tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    client = make_client(storage_dir=blocker)
    assert client.report("app.theme", 0) is False
    assert client.report("app.theme", 1) is False  # no new attempt for a while
    stats = client.stats()
    assert stats["dropped"]["storage_error"] == 2 and stats["queued"] == 0
    assert client.flush(timeout=0.5) is False  # nothing queued, and nothing delivered
    assert client.flush(timeout=0.5) is True  # no drop since the previous flush
    assert client.shutdown(timeout=0.5) is True
    assert client.privacy()["enabled"] is True  # answers, never raises


def test_a_corrupt_store_drops_reports_as_storage_error(
    make_client: Callable[..., Client], tmp_path: Path
) -> None:
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / FILENAME).write_bytes(b"this is not a database" * 100)
    client = make_client()
    assert client.report("app.theme", 0) is False
    assert client.stats()["dropped"]["storage_error"] == 1
    assert "error" in client.privacy()


def test_a_store_locked_by_another_process_drops_then_recovers(
    make_client: Callable[..., Client], tmp_path: Path
) -> None:
    client = make_client()
    assert client.report("app.theme", 0)
    other = sqlite3.connect(tmp_path / "store" / FILENAME, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    start = time.monotonic()
    assert client.report("app.theme", 1) is False
    assert time.monotonic() - start < 3  # waits about BUSY_TIMEOUT, not forever
    assert client.stats()["dropped"]["storage_error"] == 1
    other.execute("ROLLBACK")
    other.close()
    assert client.report("app.theme", 2) is True  # the connection was kept


def test_a_report_waits_for_a_held_store_once_not_once_per_store_call(
    collector: Collector,
    make_client: Callable[..., Client],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 44: a report() at an app's start, the store held by another process, made
    five store calls that each waited BUSY_TIMEOUT (5.9 s in all). They now share one
    limit: the first that waits uses it up, the others fail at once. Counted, not timed:
    each wait that ends in "database is locked" is logged (at DEBUG) by the waiting thread."""
    first = make_client()
    assert first.report("app.theme", 0) and first.flush(timeout=5)
    first.shutdown(timeout=1)  # the store holds a definition and a ledger day
    caplog.set_level(logging.DEBUG, logger="client_sdk")
    with held(tmp_path / "store"):
        client = make_client()  # a fresh process's client: nothing cached
        caplog.clear()
        assert client.report("app.theme", 1) is False
        mine = threading.get_ident()
        waits = [
            r.getMessage()
            for r in caplog.records
            if r.thread == mine and r.getMessage().startswith("report store error")
        ]
        assert len(waits) <= 1, waits
        assert client.stats()["dropped"]["storage_error"] == 1
    assert client.report("app.theme", 2) is True  # the next call has its own limit


def test_a_call_with_no_time_left_to_wait_does_not_keep_the_store_closed(
    tmp_path: Path,
) -> None:
    """A report() that used up its waits before the store was even opened (e.g. for the
    store's lock, held by the uploader) fails that call only: the next one opens the
    store, it is not refused for REOPEN_DELAY like a broken file."""
    store = Store(tmp_path / "store")
    store.limit_waits(0.0)
    with pytest.raises(StoreError):
        store.put(b"{}")
    store.limit_waits(None)
    assert store.put(b"{}") == 1
    store.close()


def test_a_full_disk_drops_reports_as_storage_error(
    make_client: Callable[..., Client], tmp_path: Path
) -> None:
    client = make_client()
    assert client.report("app.page", 0)
    conn = client._durable._conn  # type: ignore[union-attr]
    assert conn is not None
    (pages,) = conn.execute("PRAGMA page_count").fetchone()
    conn.execute(f"PRAGMA max_page_count = {pages}")  # SQLITE_FULL from now on
    results = [client.report("app.page", i) for i in range(40)]
    assert results.count(False) >= 1 and client.stats()["dropped"]["storage_error"] >= 1
    assert len(stored(tmp_path / "store")) == 1 + results.count(True)


# -- durability on disk --------------------------------------------------------------------------


def test_every_upload_is_preceded_by_an_fsync_of_the_store(
    collector: Collector,
    make_client: Callable[..., Client],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        events.append("fsync")
        real_fsync(fd)

    monkeypatch.setattr(store_sqlite.os, "fsync", fsync)
    original = collector.on_post

    def on_post(handler: _Handler, body: bytes) -> None:
        events.append("post")
        original(handler, body)

    collector.on_post = on_post  # type: ignore[method-assign]
    client = make_client(max_batch_reports=3)
    for i in range(7):
        assert client.report("app.theme", i % 3)
    assert client.flush(timeout=5) and len(collector.delivered) == 7
    assert events.count("post") == 3
    for i, event in enumerate(events):
        if event == "post":  # the claim of this batch was flushed to disk first
            assert events[i - 1] == "fsync"


def test_the_wal_is_checkpointed_and_stays_small(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_sqlite, "CHECKPOINT_BACKSTOP", 10)  # no uploader checkpoints
    store = Store(tmp_path, max_count=10**6, max_bytes=10**9)
    for i in range(500):
        store.put(b"r%d" % i, CHARGE)
    wal = tmp_path / (FILENAME + "-wal")
    assert wal.stat().st_size < 100 * 1024  # 500 commits of a page each would be 500 KiB
    assert len(store) == 500


def test_reports_never_checkpoint_the_uploader_does_on_its_own_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_sqlite, "CHECKPOINT_EVERY", 10)
    store = Store(tmp_path, max_count=10**6, max_bytes=10**9)
    store.put(b"first", CHARGE)
    assert store._conn is not None
    statements: list[str] = []
    store._conn.set_trace_callback(statements.append)
    for i in range(100):
        store.put(b"r%d" % i, CHARGE)
    assert not [s for s in statements if "checkpoint" in s.lower()]  # no fsync in report()
    assert store.checkpoint_due
    wal = tmp_path / (FILENAME + "-wal")
    grown = wal.stat().st_size
    assert len(store.peek(10, 10**6)) == 10  # the uploader's call checkpoints first
    assert not store.checkpoint_due
    assert not [s for s in statements if "checkpoint" in s.lower()]  # not on this connection
    for i in range(50):  # the WAL was copied into the database: writes restart at its start
        store.put(b"s%d" % i, CHARGE)
    assert wal.stat().st_size == grown and len(store) == 151
    store.close()
    with sqlite3.connect(tmp_path / FILENAME) as conn:
        assert conn.execute("SELECT count(*) FROM reports").fetchone() == (151,)

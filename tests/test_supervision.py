"""`ldp serve` keeps its children up: kill -9 each one, and the rest rides out its absence.

The real stack (``Server``: embedded redis-server, gunicorn, aggregator workers). Each
test kills one child with SIGKILL, as a crash or the OOM killer would, and checks that
the supervisor starts it again, that the collector answered 503 + ``Retry-After`` while
Redis was away, that ``/metrics`` counts the restart, and that the aggregator's n equals
the number of reports acknowledged with 202: no report lost, none counted twice. The
last test gives ``ldp serve`` a child that cannot start again and expects it to give up,
say why on stderr, and exit non-zero.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families
from supervisor_helpers import held_down

from aggregator.query.window import read_counts
from client_sdk.wire import MetricDefinition, build_report
from ldp_server.serve import Server, _members, _signal, _ticks_now
from ldp_server.supervise import (
    FAST_FAILURE_SECONDS,
    GIVE_UP_FAILURES,
    Backoff,
    Child,
    Supervisor,
    describe_exit,
)

ROOT = Path(__file__).resolve().parents[1]
SPEC = {"domain": ["light", "dark", "auto"], "epsilon": 1.0, "mechanism": "grr"}
FIRST_DELAY = 3.0
"""The test server waits this long before a restart (a test that must see the outage
holds the restart instead: ``supervisor_helpers.held_down``)."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("supervised")
    backoff = Backoff(first=FIRST_DELAY)
    with Server(
        port=0, data_dir=data, web_workers=2, aggregators=1, quiet=True, backoff=backoff
    ) as s:
        yield s


def request(
    server: Server, method: str, path: str, body: Any = None
) -> tuple[int, dict[str, str], Any]:
    """(status, headers, JSON body or None) of one request; HTTP errors are answers too."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(server.url + path, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    req.add_header("Authorization", f"Bearer {server.admin_token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            status, headers, raw = r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as exc:
        status, headers, raw = exc.code, dict(exc.headers), exc.read()
    try:
        return status, headers, json.loads(raw)
    except ValueError:
        return status, headers, raw.decode(errors="replace")


def define(server: Server, name: str) -> MetricDefinition:
    status, _, body = request(server, "PUT", f"/v1/metrics/{name}", SPEC)
    assert status in (200, 201), body
    return MetricDefinition.from_dict(body)


def batch(definition: MetricDefinition, n: int, rng: random.Random) -> dict[str, Any]:
    return {"reports": [build_report(definition, rng.randrange(3), rng) for _ in range(n)]}


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout:.0f} s: {what}")


def ready(server: Server) -> bool:
    try:
        return request(server, "GET", "/readyz")[0] == 200
    except OSError:  # the web service is being restarted
        return False


def counted(server: Server, definition: MetricDefinition) -> int:
    client = redis.Redis.from_url(server.redis_url or "", socket_timeout=5)
    try:
        return read_counts(client, definition).n
    finally:
        client.close()


def aof_written(server: Server) -> bool:
    """Everything Redis acknowledged is in its AOF file (the OS's cache), so a kill -9 of
    the process loses none of it: under appendfsync everysec Redis postpones that write by
    up to 2 s while an earlier fsync is still under way (a slow disk, a loaded machine)."""
    from ldp_store.connection import connect

    assert server.redis_url is not None
    info = connect(server.redis_url).info("persistence")
    return info.get("aof_buffer_length", 0) == 0 and info.get("aof_pending_bio_fsync", 0) == 0


def assert_counted_exactly(server: Server, definition: MetricDefinition, accepted: int) -> None:
    """The aggregator's n reaches the acknowledged count and does not pass it."""
    wait_for(lambda: counted(server, definition) >= accepted, f"{accepted} counted")
    time.sleep(1.0)  # a double count would show up by now: the worker polls every ~0.1 s
    assert counted(server, definition) == accepted


def restarts_in_metrics(server: Server) -> dict[str, float]:
    with urllib.request.urlopen(f"{server.url}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {
        s.labels["child"]: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "ldp_supervisor_restarts_total"
    }


def test_kill_9_redis_503_while_down_then_back_nothing_lost_or_doubled(server: Server) -> None:
    theme = define(server, "sup.redis")
    rng = random.Random(1)
    accepted = 0
    for _ in range(5):
        status, _, body = request(server, "POST", "/v1/reports", batch(theme, 50, rng))
        assert status == 202, body
        accepted += body["accepted"]
    before = server.restarts()["redis"]
    assert server.redis is not None and server.redis.process is not None
    wait_for(lambda: aof_written(server), "what Redis acknowledged is in its AOF")
    held = batch(theme, 70, rng)
    with held_down(server, "redis") as release:  # away until seen away, however slow
        os.kill(server.redis.process.pid, signal.SIGKILL)
        status, headers, body = request(server, "POST", "/v1/reports", held)
        assert status == 503, body
        assert int(headers["Retry-After"]) > 0 and body["error"]
        assert request(server, "GET", "/readyz")[0] == 503
        release()
    wait_for(lambda: server.restarts()["redis"] == before + 1, "redis restarted")
    wait_for(lambda: ready(server), "ready again")
    status, _, body = request(server, "POST", "/v1/reports", held)  # the client's retry
    assert status == 202, body
    assert body == {"accepted": 70, "duplicates": 0, "rejected": []}
    accepted += body["accepted"]
    for _ in range(3):
        status, _, body = request(server, "POST", "/v1/reports", batch(theme, 50, rng))
        assert status == 202, body
        accepted += body["accepted"]
    assert_counted_exactly(server, theme, accepted)
    assert restarts_in_metrics(server)["redis"] == before + 1
    assert server.check() is None


def test_kill_9_aggregator_worker_restarted_counting_resumes_exactly(server: Server) -> None:
    theme = define(server, "sup.worker")
    rng = random.Random(2)
    accepted = 0
    before = server.restarts()["aggregator-1"]
    old_pid = server.workers[0].pid
    for i in range(12):
        status, _, body = request(server, "POST", "/v1/reports", batch(theme, 100, rng))
        assert status == 202, body
        accepted += body["accepted"]
        if i == 5:  # mid-stream: it has entries read, maybe counted but not yet acked
            os.kill(old_pid, signal.SIGKILL)
    wait_for(lambda: server.restarts()["aggregator-1"] == before + 1, "worker restarted")
    assert server.workers[0].pid != old_pid
    assert_counted_exactly(server, theme, accepted)
    assert restarts_in_metrics(server)["aggregator-1"] == before + 1


def test_kill_9_gunicorn_master_restarted(server: Server) -> None:
    theme = define(server, "sup.web")
    rng = random.Random(3)
    status, _, body = request(server, "POST", "/v1/reports", batch(theme, 40, rng))
    assert status == 202, body
    accepted = body["accepted"]
    before = server.restarts()["web"]
    assert server.web is not None
    old_pid = server.web.pid
    os.kill(old_pid, signal.SIGKILL)
    wait_for(lambda: server.restarts()["web"] == before + 1, "web restarted")
    assert server.web.pid != old_pid
    wait_for(lambda: ready(server), "ready again")
    status, _, body = request(server, "POST", "/v1/reports", batch(theme, 40, rng))
    assert status == 202, body
    accepted += body["accepted"]
    assert_counted_exactly(server, theme, accepted)
    # The new master's workers read the same multiprocess folder: counts survive.
    assert restarts_in_metrics(server)["web"] == before + 1
    log = (server.data_dir / "supervisor.log").read_text()
    assert "web killed by SIGKILL" in log and "web restarted" in log


class PortSquatter:
    """Something else on Redis's port: it listens, and drops every connection at once
    (so clients get a quick error, not a hang on a server that never answers)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))  # OSError while Redis holds the port
        self.sock.listen()
        self.sock.settimeout(0.1)
        self.running = True
        self.thread = threading.Thread(target=self._drop, daemon=True)
        self.thread.start()

    def _drop(self) -> None:
        while self.running:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            conn.close()

    def close(self) -> None:
        self.running = False
        self.thread.join()
        self.sock.close()


def take_redis_port(port: int, kill: Callable[[], None]) -> PortSquatter:
    """Kill Redis and take its port before the supervisor restarts it (it waits 0.5 s)."""
    for _ in range(5):
        kill()
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            try:
                return PortSquatter(port)
            except OSError:
                time.sleep(0.01)
    raise AssertionError(f"could not take port {port} from the restarted Redis")


def test_a_child_that_keeps_dying_makes_ldp_serve_give_up_non_zero(tmp_path: Path) -> None:
    """Redis cannot start again (its port was taken): after GIVE_UP_FAILURES fast failures
    `ldp serve` says why on stderr, stops the rest and exits 1 (about 8 s of backoff)."""
    serve = subprocess.Popen(
        [sys.executable, "-m", "ldp_server", "serve", "--port", "0"]
        + ["--data-dir", str(tmp_path / "data"), "--aggregators", "1", "--web-workers", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200"},
    )
    taken = None
    try:
        assert serve.stdout is not None
        line = serve.stdout.readline()
        assert "running" in line, line + (serve.stderr.read() if serve.stderr else "")
        # The printed URL hides the password; the data dir's redis-url file has it.
        url = (tmp_path / "data" / "redis-url").read_text().strip()
        port = int(url.rsplit(":", 1)[1].split("/")[0])

        def kill() -> None:
            pid = redis.Redis.from_url(url, socket_timeout=5).info("server")["process_id"]
            os.kill(int(pid), signal.SIGKILL)

        taken = take_redis_port(port, kill)
        _, stderr = serve.communicate(timeout=90)
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
        if taken is not None:
            taken.close()
    assert serve.returncode == 1, stderr
    assert f"redis failed {GIVE_UP_FAILURES} times in a row" in stderr, stderr
    assert "giving up" in stderr and "stopping everything" in stderr
    assert stderr.count("restarting in") == GIVE_UP_FAILURES - 1
    log = (tmp_path / "data" / "supervisor.log").read_text()
    assert "redis killed by SIGKILL" in log and "giving up" in log


def test_how_a_child_ended_is_said_plainly() -> None:
    assert describe_exit(-signal.SIGKILL) == "killed by SIGKILL"
    assert describe_exit(1) == "exit status 1"
    assert [Backoff().delay(n) for n in range(1, 8)] == [0.5, 1, 2, 4, 8, 16, 30]


def test_a_child_that_ran_a_minute_is_healthy_again_and_five_fast_exits_give_up() -> None:
    """The give-up rule on a real process that exits at once, with a scripted clock."""
    now = [0.0]
    said: list[str] = []
    procs: list[subprocess.Popen[bytes]] = []

    def start() -> None:
        procs.append(subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"]))
        procs[-1].wait()

    start()
    child = Child("flaky", start, lambda: procs[-1].poll())
    backoff = Backoff(first=1.0, cap=4.0)
    supervisor = Supervisor([child], said.append, backoff=backoff, clock=lambda: now[0])

    def step(seconds: float) -> None:
        now[0] += seconds
        supervisor.poll()

    step(0.1)  # exit 1: restart in 1 s
    step(1.0)  # restarted
    step(FAST_FAILURE_SECONDS)  # exit 2 noticed only now, a minute after its start
    assert child.failures == 1 and "restarting in 1.0 s" in said[-1]  # healthy again
    for n in range(2, GIVE_UP_FAILURES + 1):
        step(child.restart_at - now[0] if child.restart_at else 0)  # restart
        step(0.1)  # exit n
        assert child.failures == n
    assert supervisor.gave_up is not None and "flaky failed 5 times" in supervisor.gave_up
    assert said[-1] == supervisor.gave_up and "exit status 3" in said[-1]
    assert child.restarts == GIVE_UP_FAILURES  # one after the slow exit, four after fast ones


def test_exits_after_progress_never_give_up_exits_without_progress_do() -> None:
    """Issue 28 item 0: workers that ran and counted, then each exited within seconds (a
    metric deleted under them), made `ldp serve` give up and stop everything. Only
    failures that repeat without progress count now: a real process that writes its
    progress file (as `ldp aggregate --progress-file` does) and then exits is restarted
    for ever at the first delay; once it exits without writing it, five in a row give up."""
    now = [0.0]
    said: list[str] = []
    procs: list[subprocess.Popen[bytes]] = []
    work = [True]
    progress = Path(os.environ.get("TMPDIR", "/tmp")) / f"ldp-progress-{os.getpid()}"
    code = f"import pathlib, sys; pathlib.Path({str(progress)!r}).write_text('1'); sys.exit(3)"

    def start() -> None:
        progress.unlink(missing_ok=True)
        command = code if work[0] else "raise SystemExit(3)"
        procs.append(subprocess.Popen([sys.executable, "-c", command]))
        procs[-1].wait()

    try:
        start()
        child = Child("worker", start, lambda: procs[-1].poll(), progressed=progress.exists)
        backoff = Backoff(first=1.0, cap=4.0)
        supervisor = Supervisor([child], said.append, backoff=backoff, clock=lambda: now[0])

        def step(seconds: float) -> None:
            now[0] += seconds
            supervisor.poll()

        for _ in range(3 * GIVE_UP_FAILURES):  # each a few seconds after its start
            step(2.0)  # the exit
            assert supervisor.gave_up is None and child.failures == 1
            assert "restarting in 1.0 s" in said[-1] and "after a healthy run" in said[-1]
            step(1.0)  # restarted
        assert child.restarts == 3 * GIVE_UP_FAILURES
        step(2.0)  # the last exit after progress
        work[0] = False  # from now on it exits without progress: a crash loop
        for n in range(2, GIVE_UP_FAILURES + 1):
            assert child.restart_at is not None
            step(child.restart_at - now[0])  # restarted
            step(2.0)  # the exit
            assert child.failures == n
        assert supervisor.gave_up is not None and "without progress" in supervisor.gave_up
    finally:
        progress.unlink(missing_ok=True)


def test_a_running_child_that_made_progress_is_healthy_again() -> None:
    """A restarted child that works (progress while running) starts its count again."""
    now, running, progressed = [0.0], [False], [False]
    child = Child(
        "worker",
        lambda: running.__setitem__(0, True),
        lambda: None if running[0] else 1,
        progressed=lambda: progressed[0],
    )
    supervisor = Supervisor([child], lambda line: None, clock=lambda: now[0])
    for n in range(1, GIVE_UP_FAILURES):  # four fast failures without progress
        now[0] += 0.1
        supervisor.poll()
        assert child.failures == n
        now[0] += 60
        supervisor.poll()  # restarted
        running[0] = False
    running[0] = True
    supervisor.poll()
    assert child.failures == GIVE_UP_FAILURES - 1  # still running, no progress yet
    progressed[0] = True
    supervisor.poll()
    assert child.failures == 0 and supervisor.gave_up is None


GROUP = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
time.sleep(60)
"""


@pytest.mark.skipif(not Path("/proc/uptime").exists(), reason="needs /proc")
def test_orphans_are_found_by_group_and_start_time_so_a_reused_id_is_spared() -> None:
    """Review finding of issue 12: after gunicorn's master died, its group id may be reused
    once the group is empty; only processes started before the death was seen count."""
    before = _ticks_now()
    time.sleep(0.05)  # start times are in clock ticks (10 ms): the group starts later
    leader = subprocess.Popen([sys.executable, "-c", GROUP], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while len(_members(leader.pid, None)) < 2:  # the leader and its child
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.05)
        now = _ticks_now()
        assert sorted(_members(leader.pid, now))[0] == leader.pid
        assert len(_members(leader.pid, now)) == 2
        assert _members(leader.pid, before) == []  # "started after the death": not ours
        for pid in _members(leader.pid, now):
            _signal(pid, leader.pid, before, signal.SIGTERM)  # refused: too new
        time.sleep(0.2)
        assert leader.poll() is None and len(_members(leader.pid, now)) == 2
        for pid in _members(leader.pid, now):
            _signal(pid, leader.pid, now, signal.SIGTERM)
        assert leader.wait(5) == -signal.SIGTERM
        deadline = time.monotonic() + 10
        while _members(leader.pid, now):
            left = _members(leader.pid, now)
            assert time.monotonic() < deadline, [Path(f"/proc/{p}/stat").read_text() for p in left]
            time.sleep(0.05)
    finally:
        os.killpg(leader.pid, signal.SIGKILL) if _members(leader.pid, None) else None
        leader.wait(5)

"""``ldp serve``: the whole system on one machine.

One supervisor process starts and watches:

* Redis — the server at ``--redis-url``/``REDIS_URL``, or an embedded real
  ``redis-server`` with AOF and RDB in ``--data-dir`` (see :mod:`ldp_store.embedded`);
* the web service under gunicorn on ``--port``: the collector's API (``/v1/metrics``,
  ``/v1/reports``, health, Prometheus), which forwards the read routes (estimates API,
  overview, plans, dashboard) to
* the read service: a second gunicorn on a loopback port, at a lower CPU priority, so
  reads (a string discovery is a second of CPU) wait behind ingest, never in its event
  loop (:func:`ldp_server.app.create_ingest_app`, :mod:`ldp_server.forward`); in two
  lanes, so that a cheap read never waits behind an expensive one: light-lane workers
  sized to the machine, and a heavy lane at a lower priority still
  (:mod:`aggregator.web.lanes`);
* one or more aggregator workers (``ldp aggregate`` processes).

A child that exits is started again with backoff, alone: the others ride out its absence
(the collector answers 503 + ``Retry-After`` while Redis is away), and the supervisor
gives up only on a child that keeps failing fast (:mod:`ldp_server.supervise`).
Each child runs in its own session, so a Ctrl-C at the terminal reaches only the
supervisor, which stops the workers after their current batch, then gunicorn, then the
embedded Redis, in that order, so nothing accepted is lost.
"""

from __future__ import annotations

import fcntl
import importlib.machinery
import importlib.util
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import redis

from ldp_server.supervise import Backoff, Child, RestartCounter, Supervisor
from ldp_store.connection import connect
from ldp_store.embedded import (
    REDIS_URL_FILE,
    EmbeddedRedis,
    Service,
    die_with_parent,
    free_port,
    open_private,
    private_folder,
    write_private,
)

__all__ = ["PORT_HINT", "Server", "check_port", "host_port"]

PROMETHEUS_FOLDER = ".prometheus-multiproc"
"""prometheus-client's per-process files of the web workers, in the data dir."""

READY_TIMEOUT = 120.0
"""Seconds to wait for gunicorn to answer /readyz (imports numpy, scipy, flask): a few
seconds idle, 15–18 s measured on two cores at load 12–15, so a ceiling far above both
(a web service that exits is reported at once, without waiting for it)."""

STOP_TIMEOUT = 20.0
"""Seconds a worker gets to finish its batch after SIGTERM before it is killed."""

POLL_SECONDS = 0.2
"""How often the supervisor looks at its children: a dead one is noticed this fast."""

READ_WORKERS = max(1, min((os.cpu_count() or 1) - 1, 4))
"""Gunicorn worker processes of the read service's light lane: a core for each but one
(ingest's), at most 4 (cheap reads are tens of ms; past that, more machines)."""

HEAVY_READ_WORKERS = 1
"""Worker processes of the read service's heavy lane (full tables of many values, string
discoveries, exports: :func:`aggregator.web.lanes.heavy_read`), a fork each: one, so
expensive reads take turns instead of taking every core. Each runs at most
``LDP_READ_DISCOVERIES`` discoveries at once (:mod:`aggregator.web.read_guard`)."""

READ_NICENESS = 10
"""How much lower the read service's CPU priority is than ingest's (``nice``): when both
want the CPU, ingest gets it (Linux gives a nice-10 process about a tenth of a nice-0
one's share), and reads use whatever ingest leaves."""

ORPHAN_TIMEOUT = 5.0
"""Seconds the web workers of a dead gunicorn master get to finish their requests after
SIGTERM before they are killed: they hold the port the next master must bind."""


PORT_HINT = "stop what uses it, or pass --port 0 for a free port"
"""The way out of a taken port, in every message that says it is taken."""


def host_port(host: str, port: int) -> str:
    """``host:port`` as gunicorn's bind and a URL take it: an IPv6 address in brackets
    (``[::1]:8000``), a name or an IPv4 address as it is."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def check_port(host: str, port: int) -> None:
    """Refuse, with the way out, a ``host:port`` the web service could not listen on.

    The probe binds as gunicorn will (``SO_REUSEADDR``, the address family of ``host``):
    a port held only by TIME-WAIT connections of a stopped run is free, one another
    process listens on is not. ``ldp serve`` and ``ldp demo`` both ask this.

    Raises:
        RuntimeError: the host does not resolve, or ``port`` is taken on it.
    """
    where = host_port(host, port)
    try:
        family, _, _, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except (OSError, UnicodeError) as exc:
        raise RuntimeError(f"cannot listen on {where}: {exc}") from None
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise RuntimeError(
                f"cannot listen on {where}: {exc.strerror or exc} ({PORT_HINT})"
            ) from None


def _child_setup() -> None:
    """Children of the supervisor die with it (Linux), so none outlives a SIGKILL, and
    create their files for this user only (umask 077: the web workers' Prometheus files,
    the aggregators' progress files)."""
    os.umask(0o077)
    if sys.platform == "linux":
        die_with_parent()


def _read_setup() -> None:
    """The read service's start: as any child, at :data:`READ_NICENESS`."""
    _child_setup()
    os.nice(READ_NICENESS)


def _ticks_now() -> int:
    """Clock ticks since boot, the unit of a process's start time in ``/proc/<pid>/stat``."""
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    return int(uptime * os.sysconf("SC_CLK_TCK")) + 1


def _members(group: int, started_by: int | None) -> list[int]:
    """The live processes (zombies excluded: they hold no socket, and where nothing reaps
    orphans, a container's PID 1, they stay) of process group ``group`` that started by
    tick ``started_by``. Without ``/proc``: the group's leader id if it has members.

    The start-time bound is what makes the group id safe to use after its leader died:
    once every member is gone the id may be reused by a new process, which started later.
    """
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(group, 0)
        except (ProcessLookupError, PermissionError):
            return []
        return [-group]
    found = []
    for stat in proc.glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # it ended while we looked
            continue
        fields = text[text.rindex(")") + 2 :].split()
        state, pgrp, start = fields[0], int(fields[2]), int(fields[19])
        if state != "Z" and pgrp == group and (started_by is None or start <= started_by):
            found.append(int(stat.parent.name))
    return found


def _signal(pid: int, group: int, started_by: int | None, sig: signal.Signals) -> None:
    """Send ``sig`` to member ``pid`` of ``group`` (a negative pid: the whole group,
    where there is no ``/proc``), through a pidfd where Linux has them, so a pid reused
    since it was listed is never signalled."""
    if pid < 0:
        os.killpg(-pid, sig)
        return
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:
        os.kill(pid, sig)
        return
    fd = pidfd_open(pid)
    try:
        if pid in _members(group, started_by):  # still that process: the fd pins it
            signal.pidfd_send_signal(fd, sig)
    finally:
        os.close(fd)


def _collector_file(name: str) -> Path:
    """A file of the :mod:`collector` package the children will import, found without
    importing it (the supervisor loads no Flask).

    A child (``python -m gunicorn``) looks in its working directory and ``PYTHONPATH``
    before the installed packages, so a checkout put there serves its own gunicorn config
    beside its own app, not this process's.
    """
    ahead = [os.getcwd(), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    spec = importlib.machinery.PathFinder.find_spec("collector", ahead)
    spec = spec or importlib.util.find_spec("collector")
    assert spec is not None and spec.origin is not None, "the collector is not installed"
    return Path(spec.origin).parent / name


def _at_the_mark(error: urllib.error.HTTPError) -> bool:
    """Whether a ``/readyz`` 503 says Redis is at the memory high-water mark (the service
    is up; ingest waits for the aggregator to drain)."""
    try:
        return str(json.loads(error.read()).get("error", "")).startswith("storage memory is")
    except (OSError, ValueError, AttributeError):
        return False


class Server(Service):
    """Start Redis (unless given), the web service and the workers; stop them in order.

    Args:
        host, port: where the web service listens.
        redis_url: an existing Redis; None starts an embedded one in ``data_dir``.
        data_dir: the embedded Redis's AOF/RDB folder (and the admin token file).
        web_workers: gunicorn worker processes of the web service (ingest).
        read_workers: gunicorn worker processes of the read service's light lane.
        heavy_read_workers: those of its heavy lane.
        aggregators: aggregator worker processes.
        admin_token: the bearer token for metric changes (default: env or generated).
        quiet: send the children's output to log files in ``data_dir`` instead.
        backoff: delays before restarting a child that exited (tests lengthen the first
            to watch an outage).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 8000,
        redis_url: str | None = None,
        data_dir: str | os.PathLike[str] = "ldp-data",
        web_workers: int = 2,
        aggregators: int = 1,
        read_workers: int = READ_WORKERS,
        heavy_read_workers: int = HEAVY_READ_WORKERS,
        admin_token: str | None = None,
        quiet: bool = False,
        backoff: Backoff | None = None,
    ) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.redis_url = redis_url
        self.data_dir = Path(data_dir)
        self.web_workers = web_workers
        self.read_workers = read_workers
        self.heavy_read_workers = heavy_read_workers
        self.read_port = 0
        self.heavy_port = 0
        self.aggregators = aggregators
        self.admin_token = admin_token or os.environ.get("LDP_ADMIN_TOKEN") or ""
        self.quiet = quiet
        self.backoff = backoff or Backoff()
        self.redis: EmbeddedRedis | None = None
        self.web: subprocess.Popen[bytes] | None = None
        self.read: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []
        self.supervisor: Supervisor | None = None
        self._logs: dict[str, Any] = {}
        self._lock: Any = None
        self._prometheus = ""
        self._counter: RestartCounter | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._done = threading.Event()
        self._restarting = threading.Lock()  # a restart and stop() never overlap

    @property
    def url(self) -> str:
        """Base URL of the web service."""
        return f"http://{host_port(self.host, self.port)}"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        assert self.redis_url is not None
        env.update(
            {
                "LDP_REDIS_URL": self.redis_url,
                "REDIS_URL": self.redis_url,
                "LDP_ADMIN_TOKEN": self.admin_token,
                "LDP_BIND": host_port(self.host, self.port),
                "LDP_WEB_WORKERS": str(self.web_workers),
            }
        )
        return env

    def _prometheus_dir(self) -> str:
        """An empty folder for prometheus-client's multiprocess mode: ``/metrics`` then adds
        up every gunicorn worker's counters instead of answering with one worker's.

        ``PROMETHEUS_MULTIPROC_DIR`` if set (created if missing; its contents are the
        operator's to manage), else :data:`PROMETHEUS_FOLDER` in the data dir, a name only
        this program uses: the data dir's lock makes it ours, and it is emptied at each
        start (last run's counters are not this run's).
        """
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            folder = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
            folder.mkdir(parents=True, exist_ok=True)
            return str(folder)
        folder = self.data_dir / PROMETHEUS_FOLDER
        if folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder)
        elif folder.exists() or folder.is_symlink():
            folder.unlink()
        folder.mkdir(mode=0o700)  # its files: the workers' umask 077 (_child_setup)
        return str(folder)

    def _output(self, name: str) -> Any:
        if not self.quiet:
            return None
        if name not in self._logs:  # a restarted child appends to its log
            self._logs[name] = open_private(self.data_dir / f"{name}.log")
        return self._logs[name]

    def _say(self, message: str) -> None:
        """A supervisor event: to stderr, and with the time to ``supervisor.log``."""
        print(f"ldp serve: {message}", file=sys.stderr, flush=True)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        try:
            with open_private(self.data_dir / "supervisor.log", "a") as log:
                log.write(f"{stamp} {message}\n")
        except OSError:  # a full or read-only disk must not stop the supervision
            pass

    def _preflight(self) -> None:
        """Fail early, with the reason, on what would otherwise surface as a dead child."""
        private_folder(self.data_dir)  # logs, Prometheus files, tokens: this user's only
        self._lock = open_private(self.data_dir / ".lock", "w")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock.close()
            self._lock = None
            raise RuntimeError(
                f"another ldp serve is using {self.data_dir} (its Redis files must not be shared)"
            ) from None
        check_port(self.host, self.port)
        if self.redis_url is not None:
            try:
                connect(self.redis_url, socket_connect_timeout=3, socket_timeout=3).ping()
            except (ValueError, redis.RedisError) as exc:
                raise RuntimeError(f"cannot use Redis at {self.redis_url}: {exc}") from None

    def start(self) -> Server:
        """Start everything and wait until the web service is ready.

        A start that fails stops what it started and removes what it created: the data
        directory's ``.lock`` file, and the data directory itself if this start made it
        and no log in it says why it failed.
        """
        fresh = not self.data_dir.exists()
        had_lock = (self.data_dir / ".lock").exists()
        try:
            self._start()
        except BaseException:
            self.stop()  # what did start; unlocks
            self._undo_start(fresh, had_lock)
            raise
        return self

    def _undo_start(self, fresh: bool, had_lock: bool) -> None:
        """After a failed start: remove the lock file it made, and the data dir it made
        unless a log there (the web service's, Redis's) holds the reason."""
        if not had_lock:
            (self.data_dir / ".lock").unlink(missing_ok=True)
        if fresh and self.data_dir.is_dir():
            logs = [p for p in self.data_dir.rglob("*.log") if p.is_file() and p.stat().st_size]
            if not logs:
                shutil.rmtree(self.data_dir, ignore_errors=True)

    def _start(self) -> None:
        self._preflight()
        if not self.admin_token:
            token_file = self.data_dir / "admin-token"
            if token_file.exists():
                self.admin_token = token_file.read_text().strip()
            else:
                self.admin_token = secrets.token_urlsafe(24)
                write_private(token_file, self.admin_token + "\n")
        if self.redis_url is None:
            self.redis = EmbeddedRedis(self.data_dir / "redis").start()
            self.redis_url = self.redis.url
            # So ldp export / aggregate / … find it by the data dir (its port is random);
            # it holds the password: this user's only.
            write_private(self.data_dir / REDIS_URL_FILE, self.redis_url + "\n")
        self._prometheus = self._prometheus_dir()  # emptied once: restarts keep counts
        self.read_port = free_port()  # kept across restarts: the web service forwards to it
        self.heavy_port = free_port()
        self._start_read()
        self._start_web()
        for i in range(self.aggregators):
            self.workers.append(self._start_worker(i))
        self._wait_ready()
        self._supervise()

    def _gunicorn(self, name: str, app: str, env: dict[str, str], setup: Any) -> Any:
        conf = _collector_file("gunicorn_conf.py")
        out = self._output(name)
        return subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", str(conf), app],
            env={**env, "PROMETHEUS_MULTIPROC_DIR": self._prometheus},
            stdout=out,
            stderr=out,
            preexec_fn=setup,
            start_new_session=True,  # Ctrl-C reaches the supervisor only; see _stop_orphans
        )

    def _start_web(self) -> None:
        env = {**self._env(), "LDP_READ_UPSTREAM": f"127.0.0.1:{self.read_port}"}
        if self.heavy_read_workers:
            env["LDP_HEAVY_UPSTREAM"] = f"127.0.0.1:{self.heavy_port}"
        app = "ldp_server.app:create_ingest_app()"
        self.web = self._gunicorn("web", app, env, _child_setup)

    def _start_read(self) -> None:
        env = {
            **self._env(),
            "LDP_BIND": f"127.0.0.1:{self.read_port}",
            "LDP_WEB_WORKERS": str(self.read_workers),
        }
        if self.heavy_read_workers:  # the heavy lane: workers of its own on a second port
            env["LDP_HEAVY_BIND"] = f"127.0.0.1:{self.heavy_port}"
            env["LDP_HEAVY_WORKERS"] = str(self.heavy_read_workers)
        app = "ldp_server.app:create_server_app()"
        self.read = self._gunicorn("read", app, env, _read_setup)

    def _progress_file(self, i: int) -> Path:
        """Where worker ``i`` says it works (``ldp aggregate --progress-file``): the
        supervisor's sign that a worker which exits had made progress first."""
        return self.data_dir / f"aggregator-{i + 1}.progress"

    def _start_worker(self, i: int) -> subprocess.Popen[bytes]:
        out = self._output(f"aggregator-{i + 1}")
        progress = self._progress_file(i)
        progress.unlink(missing_ok=True)  # what this start writes is this start's progress
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ldp_server",
                "aggregate",
                "--name",
                f"worker-{i + 1}",  # the same consumer again: it rereads its pending entries
                "--progress-file",
                str(progress),
            ],
            env=self._env(),
            stdout=out,
            stderr=out,
            preexec_fn=_child_setup,
            start_new_session=True,
        )

    def _stop_orphans(self, master: subprocess.Popen[bytes] | None = None) -> None:
        """After a gunicorn master died (default: the web service's): SIGTERM its workers
        (its process group), which would otherwise serve on, holding the port, until they
        notice (up to 15 s); SIGKILL those still there after :data:`ORPHAN_TIMEOUT`. Only
        processes that started before the master's death was seen are signalled (see
        :func:`_members`)."""
        master = master or self.web
        assert master is not None
        group = master.pid  # the master led its own session, so its group
        started_by = _ticks_now() if Path("/proc/uptime").exists() else None
        deadline = time.monotonic() + ORPHAN_TIMEOUT
        signalled: dict[int, signal.Signals] = {}
        while members := _members(group, started_by):
            wanted = signal.SIGTERM if time.monotonic() < deadline else signal.SIGKILL
            for pid in members:
                if signalled.get(pid) != wanted:
                    try:
                        _signal(pid, group, started_by, wanted)
                    except (ProcessLookupError, PermissionError):
                        pass
                    signalled[pid] = wanted
            time.sleep(0.05)

    def _children(self) -> list[Child]:
        children = []
        if self.redis is not None:
            children.append(Child("redis", self._start_redis, self._redis_status))
        children.append(Child("web", self._start_web, self._web_status, self._stop_orphans))
        children.append(
            Child(
                "read", self._start_read, self._read_status, lambda: self._stop_orphans(self.read)
            )
        )
        for i in range(len(self.workers)):
            start, status = self._worker_hooks(i)
            progressed = self._progress_file(i).exists
            children.append(Child(f"aggregator-{i + 1}", start, status, progressed=progressed))
        return children

    def _start_redis(self) -> None:
        assert self.redis is not None
        self.redis.start()  # the same port and data directory

    def _redis_status(self) -> int | None:
        assert self.redis is not None
        return self.redis.returncode

    def _web_status(self) -> int | None:
        assert self.web is not None
        return self.web.poll()

    def _read_status(self) -> int | None:
        assert self.read is not None
        return self.read.poll()

    def _worker_hooks(self, i: int) -> tuple[Any, Any]:
        def start() -> None:
            self.workers[i] = self._start_worker(i)

        return start, lambda: self.workers[i].poll()

    def _supervise(self) -> None:
        """Start the thread that restarts children (it outlives them: see stop())."""
        children = self._children()
        self._counter = RestartCounter(self._prometheus, [c.name for c in children])
        self.supervisor = Supervisor(children, self._say, self._counter, self.backoff)
        self._thread = threading.Thread(target=self._watch, name="ldp-supervisor", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        # Children started here get SIGTERM when this thread ends (PR_SET_PDEATHSIG is
        # per thread), so it runs until stop() has stopped them in order.
        while not self._done.wait(POLL_SECONDS):
            with self._restarting:
                if self._stopping or self.supervisor is None:
                    continue
                try:
                    self.supervisor.poll()
                except Exception as exc:  # noqa: BLE001  # a dead watcher is a dead service
                    # Unforeseen: give up loudly (check() reports it, ldp serve exits 1)
                    # rather than end this thread, which would take its children with it.
                    self.supervisor.gave_up = f"the supervisor failed: {exc!r}; stopping"
                    self._say(self.supervisor.gave_up)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        waiting = [("web", self.url), ("read", f"http://127.0.0.1:{self.read_port}")]
        while waiting and time.monotonic() < deadline:
            name, url = waiting[0]
            child = self.web if name == "web" else self.read
            if child is not None and child.poll() is not None:
                # start() stops what did start and removes what this start created
                raise RuntimeError(f"the {name} service exited with status {child.returncode}")
            if _ready(url):
                waiting.pop(0)
                continue
            time.sleep(0.2)
        if waiting:
            raise RuntimeError(
                f"the {waiting[0][0]} service did not become ready within {READY_TIMEOUT:.0f} s"
            )

    def check(self) -> str | None:
        """None while supervision goes on (a crashed child is being restarted), else why
        it gave up: a child failed fast too many times in a row."""
        return self.supervisor.gave_up if self.supervisor is not None else None

    def restarts(self) -> dict[str, int]:
        """Restarts so far, by child (``redis``, ``web``, ``aggregator-N``)."""
        if self.supervisor is None:
            return {}
        return {c.name: c.restarts for c in self.supervisor.children}

    def stop(self) -> None:
        """Workers (finish their batch), then the web and read services, then Redis."""
        with self._restarting:  # waits for a restart under way; no more after it
            self._stopping = True
        _stop_together(self.workers)
        # Both gunicorns at once: each takes seconds to drain (its gevent workers look once
        # a second whether kept-alive connections are still open), and neither needs the
        # other gone first.
        webs = [web for web in (self.web, self.read) if web is not None]
        _stop_together(webs)
        for web in webs:
            self._stop_orphans(web)  # workers of a master that died at the wrong moment
        if self.redis is not None:
            self.redis.stop()
            (self.data_dir / REDIS_URL_FILE).unlink(missing_ok=True)
        self._done.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        if self._counter is not None:
            self._counter.close()
            self._counter = None
        for handle in self._logs.values():
            handle.close()
        self._logs.clear()
        self._unlock()

    def _unlock(self) -> None:
        if self._lock is not None:
            self._lock.close()  # closing the file releases the flock
            self._lock = None


def _stop_together(children: Sequence[subprocess.Popen[Any]]) -> None:
    """Tell every child still running to stop (SIGTERM), then wait for each in turn (see
    :func:`_wait_or_kill`): their shutdowns overlap."""
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    for child in children:
        _wait_or_kill(child)


def _wait_or_kill(child: subprocess.Popen[Any]) -> None:
    """Wait up to :data:`STOP_TIMEOUT` for a child told to stop, then kill it."""
    try:
        child.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def _ready(url: str) -> bool:
    """Whether the service at ``url`` answers ``/readyz`` as ready, or as up with Redis
    full of reports to count (the aggregator started beside it is what drains it)."""
    try:
        with urllib.request.urlopen(url + "/readyz", timeout=2) as r:
            return bool(r.status == 200)
    except urllib.error.HTTPError as exc:
        return exc.code == 503 and _at_the_mark(exc)
    except OSError:
        return False

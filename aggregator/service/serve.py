"""``ldp serve``: the whole system on one machine.

One supervisor process starts and watches:

* Redis — the server at ``--redis-url``/``REDIS_URL``, or an embedded real
  ``redis-server`` with AOF and RDB in ``--data-dir`` (see :mod:`ldp_store.embedded`);
* the web service under gunicorn: the collector's API (``/v1/metrics``, ``/v1/reports``,
  health, Prometheus) and the aggregator's estimates API and dashboard, in one WSGI app
  (:func:`aggregator.service.app.create_server_app`);
* one or more aggregator workers (``ldp aggregate`` processes).

Ctrl-C (or SIGTERM) stops the workers after their current batch, then gunicorn, then
the embedded Redis, in that order, so nothing accepted is lost.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path
from typing import Any

import redis

from ldp_store.connection import connect
from ldp_store.embedded import EmbeddedRedis, Service, die_with_parent, free_port

__all__ = ["Server", "load_metrics_file"]

PROMETHEUS_FOLDER = ".prometheus-multiproc"
"""prometheus-client's per-process files of the web workers, in the data dir."""

READY_TIMEOUT = 30.0
"""Seconds to wait for gunicorn to answer /readyz (imports numpy, scipy, flask)."""

STOP_TIMEOUT = 20.0
"""Seconds a worker gets to finish its batch after SIGTERM before it is killed."""


def _child_setup() -> None:
    """Children of the supervisor die with it (Linux), so none outlives a SIGKILL."""
    if sys.platform == "linux":
        die_with_parent()


def load_metrics_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read ``{name: spec}`` from a JSON or TOML file (``[metrics."app.theme"]`` tables).

    Raises:
        ValueError: unreadable file or wrong shape.
    """
    file = Path(path)
    try:
        text = file.read_text()
        data = tomllib.loads(text) if file.suffix == ".toml" else json.loads(text)
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read metrics file {file}: {exc}") from None
    metrics = data.get("metrics", data) if isinstance(data, dict) else None
    if not isinstance(metrics, dict) or not all(isinstance(v, dict) for v in metrics.values()):
        raise ValueError(f"{file}: expected an object of metric name → definition")
    return metrics


class Server(Service):
    """Start Redis (unless given), the web service and the workers; stop them in order.

    Args:
        host, port: where the web service listens.
        redis_url: an existing Redis; None starts an embedded one in ``data_dir``.
        data_dir: the embedded Redis's AOF/RDB folder (and the admin token file).
        web_workers: gunicorn worker processes.
        aggregators: aggregator worker processes.
        admin_token: the bearer token for metric changes (default: env or generated).
        quiet: send the children's output to log files in ``data_dir`` instead.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 8000,
        redis_url: str | None = None,
        data_dir: str | os.PathLike[str] = "ldp-data",
        web_workers: int = 2,
        aggregators: int = 1,
        admin_token: str | None = None,
        quiet: bool = False,
    ) -> None:
        self.host = host
        self.port = port or free_port()
        self.redis_url = redis_url
        self.data_dir = Path(data_dir)
        self.web_workers = web_workers
        self.aggregators = aggregators
        self.admin_token = admin_token or os.environ.get("LDP_ADMIN_TOKEN") or ""
        self.quiet = quiet
        self.redis: EmbeddedRedis | None = None
        self.web: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []
        self._logs: list[Any] = []
        self._lock: Any = None

    @property
    def url(self) -> str:
        """Base URL of the web service."""
        return f"http://{self.host}:{self.port}"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        assert self.redis_url is not None
        env.update(
            {
                "LDP_REDIS_URL": self.redis_url,
                "REDIS_URL": self.redis_url,
                "LDP_ADMIN_TOKEN": self.admin_token,
                "LDP_BIND": f"{self.host}:{self.port}",
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
        folder.mkdir()
        return str(folder)

    def _output(self, name: str) -> Any:
        if not self.quiet:
            return None
        handle = open(self.data_dir / f"{name}.log", "ab")  # noqa: SIM115
        self._logs.append(handle)
        return handle

    def _preflight(self) -> None:
        """Fail early, with the reason, on what would otherwise surface as a dead child."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock = open(self.data_dir / ".lock", "w")  # noqa: SIM115
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock.close()
            self._lock = None
            raise RuntimeError(
                f"another ldp serve is using {self.data_dir} (its Redis files must not be shared)"
            ) from None
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((self.host, self.port))
            except OSError as exc:
                raise RuntimeError(
                    f"cannot listen on {self.host}:{self.port}: {exc.strerror}"
                ) from None
        if self.redis_url is not None:
            try:
                connect(self.redis_url, socket_connect_timeout=3, socket_timeout=3).ping()
            except (ValueError, redis.RedisError) as exc:
                raise RuntimeError(f"cannot use Redis at {self.redis_url}: {exc}") from None

    def start(self) -> Server:
        """Start everything and wait until the web service is ready."""
        try:
            self._preflight()
        except RuntimeError:
            self._unlock()
            raise
        if not self.admin_token:
            token_file = self.data_dir / "admin-token"
            if token_file.exists():
                self.admin_token = token_file.read_text().strip()
            else:
                self.admin_token = secrets.token_urlsafe(24)
                token_file.write_text(self.admin_token + "\n")
                token_file.chmod(0o600)
        if self.redis_url is None:
            self.redis = EmbeddedRedis(self.data_dir / "redis").start()
            self.redis_url = self.redis.url
        env = self._env()
        conf = Path(__file__).resolve().parents[2] / "collector" / "gunicorn_conf.py"
        out = self._output("web")
        self.web = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "-c",
                str(conf),
                "aggregator.service.app:create_server_app()",
            ],
            env={**env, "PROMETHEUS_MULTIPROC_DIR": self._prometheus_dir()},
            stdout=out,
            stderr=out,
            preexec_fn=_child_setup,
        )
        for i in range(self.aggregators):
            out = self._output(f"aggregator-{i + 1}")
            self.workers.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "aggregator.cli",
                        "aggregate",
                        "--name",
                        f"worker-{i + 1}",
                    ],
                    env=env,
                    stdout=out,
                    stderr=out,
                    preexec_fn=_child_setup,
                )
            )
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self.web is not None and self.web.poll() is not None:
                self.stop()
                raise RuntimeError(f"the web service exited with status {self.web.returncode}")
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the web service did not become ready within {READY_TIMEOUT:.0f} s")

    def check(self) -> str | None:
        """None while every child runs, else which one died."""
        if self.web is not None and self.web.poll() is not None:
            return f"web service exited ({self.web.returncode})"
        for i, w in enumerate(self.workers):
            if w.poll() is not None:
                return f"aggregator worker-{i + 1} exited ({w.returncode})"
        if self.redis is not None and not self.redis.running():
            return "embedded redis-server exited"
        return None

    def stop(self) -> None:
        """Workers (finish their batch), then the web service, then Redis."""
        for w in self.workers:
            if w.poll() is None:
                w.send_signal(signal.SIGTERM)
        for w in self.workers:
            try:
                w.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                w.kill()
                w.wait()
        if self.web is not None and self.web.poll() is None:
            self.web.send_signal(signal.SIGTERM)
            try:
                self.web.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.web.kill()
                self.web.wait()
        if self.redis is not None:
            self.redis.stop()
        for handle in self._logs:
            handle.close()
        self._logs.clear()
        self._unlock()

    def _unlock(self) -> None:
        if self._lock is not None:
            self._lock.close()  # closing the file releases the flock
            self._lock = None

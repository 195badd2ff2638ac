"""Gunicorn settings for the collector.

Run: ``gunicorn -c collector/gunicorn_conf.py 'collector:create_app()'``.

In full: ``docs/guides/operating.md``.
"""

from __future__ import annotations

import gc
import os
from typing import Any

WORKER_CLASS = os.environ.get("LDP_WORKER_CLASS") or "gevent"
if WORKER_CLASS == "gevent":
    # Patch before the logger's package imports redis (and with it ssl and socket users):
    # gunicorn's gevent worker patches again after the fork, too late for modules the
    # master already imported (gevent warns; a rediss:// URL would use an unpatched ssl).
    from gevent import monkey  # type: ignore[import-untyped]

    monkey.patch_all()

from ldp_edge.gunicorn_logging import PrivateGunicornLogger  # noqa: E402
from ldp_edge.gunicorn_worker import capped_worker  # noqa: E402

MAX_DEFAULT_WORKERS = 8
"""Workers are cheap but each holds a Redis connection pool; past 8 per machine,
run more machines behind the load balancer (collectors are stateless)."""

TIMEOUT_SECONDS = 30
"""A request validates at most MAX_REPORTS reports and runs a few Lua scripts: far under
a second. A worker silent for 30 s is stuck (e.g. on a dead Redis) and is restarted."""

WORKER_CONNECTIONS = 1000
"""Connections one gevent (or gthread) worker holds at once, slow ones included; past it
the worker stops accepting until one closes. 1000 slow sockets cost a few MB per worker;
a request in progress also holds one pooled Redis connection (Redis allows 10,000)."""

KEEPALIVE_SECONDS = 5
"""How long an idle kept-alive connection stays open: an SDK uploading a batch every few
seconds reuses its connection; an idle one is closed instead of being held forever."""

GRACEFUL_TIMEOUT_SECONDS = 20
"""On SIGTERM, workers finish the requests they have (each answers only after Redis
confirmed the append) within this time."""


HEAVY_BIND = os.environ.get("LDP_HEAVY_BIND") or ""
"""A second listener served by workers of its own (``ldp serve``'s read service: its
heavy lane, ``docs/architecture/read-side.md``); empty: one listener, every worker on it."""

HEAVY_WORKERS = int(os.environ.get("LDP_HEAVY_WORKERS") or 1) if HEAVY_BIND else 0
"""Workers that serve only ``HEAVY_BIND`` (the others never accept on it)."""

HEAVY_NICENESS = 5
"""How much lower the heavy lane's CPU priority is than the other workers': when both want
the CPU, a cheap read gets it (about three times the share, per Linux's weights)."""


def _bind() -> list[str]:
    if os.environ.get("LDP_BIND"):
        return [os.environ["LDP_BIND"]]
    if os.environ.get("PORT"):
        return [f"0.0.0.0:{os.environ['PORT']}"]
    return ["127.0.0.1:8000"]


def _workers() -> int:
    raw = os.environ.get("LDP_WEB_WORKERS")
    if raw:
        return int(raw)
    return min(2 * (os.cpu_count() or 1) + 1, MAX_DEFAULT_WORKERS)


def _worker_class() -> Any:
    """The worker: gevent's with the edge's per-source connection cap
    (``LDP_SOURCE_CONNECTIONS``; off behind a trusted proxy, ``LDP_SOURCE_HEADER``, which
    caps per address itself), or the class named."""
    cap = int(os.environ.get("LDP_SOURCE_CONNECTIONS") or 0)
    if not cap or WORKER_CLASS != "gevent" or os.environ.get("LDP_SOURCE_HEADER"):
        return WORKER_CLASS
    return capped_worker(cap)


bind = _bind() + ([HEAVY_BIND] if HEAVY_BIND else [])
workers = _workers() + HEAVY_WORKERS
# With lanes, the master imports the app once and every worker is a fork of it: a second
# lane costs a fork, not another import of numpy and Flask.
preload_app = bool(HEAVY_BIND)
worker_class = _worker_class()
worker_connections = WORKER_CONNECTIONS
keepalive = KEEPALIVE_SECONDS
timeout = TIMEOUT_SECONDS
graceful_timeout = GRACEFUL_TIMEOUT_SECONDS

logger_class = PrivateGunicornLogger
_access = os.environ.get("LDP_ACCESS_LOG", "-")
accesslog = None if _access == "off" else _access
access_log_format = '"%(m)s %(U)s" %(s)s %(b)s %(M)sms'
errorlog = os.environ.get("LDP_ERROR_LOG", "-")
loglevel = os.environ.get("LDP_LOG_LEVEL", "info")

# gunicorn ≥ 27 opens a control socket at one per-user path: several collectors (or test
# servers) on a machine would fight over it, and nothing here uses it. Older versions
# ignore the unknown setting.
control_socket_disable = True

# Never take a client address from proxy headers or the PROXY protocol.
forwarded_allow_ips = ""
proxy_allow_ips = ""
proxy_protocol = False


def child_exit(server: Any, worker: Any) -> None:
    """Let prometheus-client's multiprocess mode forget a dead worker's live gauges."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess  # noqa: PLC0415

        multiprocess.mark_process_dead(worker.pid)


def _port(listener: Any) -> int:
    return int(listener.getsockname()[1])


def pre_fork(server: Any, worker: Any) -> None:
    """With ``HEAVY_BIND``: the new worker takes the heavy lane if it lacks a worker (at
    start, or after its worker died), else the other."""
    if not HEAVY_BIND:
        return
    heavy = sum(getattr(w, "ldp_lane", "") == "heavy" for w in server.WORKERS.values())
    worker.ldp_lane = "heavy" if heavy < HEAVY_WORKERS else "light"


def post_fork(server: Any, worker: Any) -> None:
    """With ``HEAVY_BIND``: each worker accepts on its lane's listener only; the heavy
    lane's run at :data:`HEAVY_NICENESS`."""
    if not HEAVY_BIND:
        return
    heavy_port = int(HEAVY_BIND.rpartition(":")[2])
    heavy = getattr(worker, "ldp_lane", "") == "heavy"
    # The reads a worker warms at start are those its lane served (aggregator.query.warm).
    os.environ["LDP_READ_LANE"] = "heavy" if heavy else "light"
    worker.sockets = [s for s in worker.sockets if (_port(s) == heavy_port) == heavy]
    if heavy:
        os.nice(HEAVY_NICENESS)


def post_worker_init(worker: Any) -> None:
    """The app is loaded in this worker (after the fork and gevent's patching): start
    what it runs beside its requests (the read side's warm-ups, before the first read)."""
    from flask import Flask  # noqa: PLC0415  # the app's, loaded by now

    from ldp_api.context import worker_started  # noqa: PLC0415

    if isinstance(worker.wsgi, Flask):
        worker_started(worker.wsgi)
    # The app and what it loaded live as long as the worker: frozen, no collection scans
    # them again (a request's garbage is young).
    gc.collect()
    gc.freeze()

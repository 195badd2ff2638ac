"""Gunicorn settings for the relay: ``gunicorn -c ldp_relay/gunicorn_conf.py
'ldp_relay.forward:create_relay()'`` (what ``ldp relay`` runs). Gevent workers with the
edge's per-source connection cap (:mod:`ldp_edge.gunicorn_worker`; off behind a trusted
proxy, ``LDP_RELAY_SOURCE_HEADER``); headers and idle connections cut after
``keepalive`` seconds, bodies by the app's deadline. No access log; the error log is
gunicorn's private one (:class:`ldp_edge.gunicorn_logging.PrivateGunicornLogger`), which
never prints an address. In full: ``docs/guides/relay.md``.
"""

from __future__ import annotations

import os

from gevent import monkey  # type: ignore[import-untyped]

monkey.patch_all()  # before urllib3 and its ssl are imported

from ldp_edge.gunicorn_logging import PrivateGunicornLogger  # noqa: E402
from ldp_edge.gunicorn_worker import capped_worker  # noqa: E402
from ldp_relay.limits import (  # noqa: E402
    DEFAULT_SOURCE_CONNECTIONS,
    DEFAULT_WORKER_CONNECTIONS,
    KEEPALIVE_SECONDS,
)

_behind_proxy = bool(os.environ.get("LDP_RELAY_SOURCE_HEADER"))
_cap = int(os.environ.get("LDP_RELAY_SOURCE_CONNECTIONS", DEFAULT_SOURCE_CONNECTIONS))

bind = [os.environ.get("LDP_RELAY_BIND", "127.0.0.1:8100")]
workers = int(os.environ.get("LDP_RELAY_WORKERS", "2"))
worker_class = capped_worker(0 if _behind_proxy else _cap)
worker_connections = int(os.environ.get("LDP_RELAY_WORKER_CONNECTIONS", DEFAULT_WORKER_CONNECTIONS))
keepalive = KEEPALIVE_SECONDS
timeout = 30
graceful_timeout = 20
logger_class = PrivateGunicornLogger
accesslog = None
errorlog = "-"
loglevel = os.environ.get("LDP_LOG_LEVEL", "info")
control_socket_disable = True
forwarded_allow_ips = ""
proxy_allow_ips = ""
proxy_protocol = False

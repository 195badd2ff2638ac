"""Gunicorn settings for the relay: ``gunicorn -c ldp_relay/gunicorn_conf.py
'ldp_relay.forward:create_relay()'`` (what ``ldp relay`` runs). No access log; the error log is
gunicorn's private one (:class:`ldp_edge.gunicorn_logging.PrivateGunicornLogger`), which
never prints an address. In full: ``docs/guides/relay.md``.
"""

from __future__ import annotations

import os

from gevent import monkey  # type: ignore[import-untyped]

monkey.patch_all()  # before requests and its ssl are imported

from ldp_edge.gunicorn_logging import PrivateGunicornLogger  # noqa: E402

bind = [os.environ.get("LDP_RELAY_BIND", "127.0.0.1:8100")]
workers = int(os.environ.get("LDP_RELAY_WORKERS", "2"))
worker_class = "gevent"
worker_connections = 1000
keepalive = 5
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

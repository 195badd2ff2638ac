"""The whole web service composed: the collector plus the read side, on one app.

Collector and aggregator are peers that share Redis through :mod:`ldp_store` and the
request context through :mod:`ldp_api.context`; neither imports the other. ``ldp serve``
(and compose's ``dashboard`` service) run one WSGI app that holds both (``ldp serve``
twice: its public gunicorn forwards the read routes to the other, see
:func:`create_ingest_app`), and this module is where the two meet.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from flask import Flask

import aggregator.web
from aggregator.web import estimates, lanes
from collector import create_app
from ldp_server.forward import ForwardReads

__all__ = ["READ_ENDPOINTS", "create_ingest_app", "create_server_app"]

READ_ENDPOINTS = ("ops.prometheus",)
"""Collector endpoints the read workers answer in ``ldp serve``: ``/metrics``, whose
poisoning alarms (:class:`aggregator.query.alarms.AlarmGauges`) read and test every
metric's recent windows at each scrape."""


def create_server_app(test_config: dict[str, Any] | None = None) -> Flask:
    """The collector app with the estimates API, planning API and the dashboard mounted.

    With ``READ_TOKEN`` (``LDP_READ_TOKEN``) set, those need it: see
    :mod:`aggregator.web.access`.

    Args:
        test_config: settings that replace the environment's (as ``create_app``'s).

    Returns:
        The WSGI app gunicorn serves (``ldp_server.app:create_server_app()``).
    """
    app = create_app(test_config)
    aggregator.web.install(app)
    return app


def create_ingest_app(
    test_config: dict[str, Any] | None = None,
    upstream: str | None = None,
    heavy_upstream: str | None = None,
) -> Flask:
    """The app of ``ldp serve``'s ingest workers: :func:`create_server_app`, with every
    read route forwarded to the read workers (:mod:`ldp_server.forward`), the expensive
    ones (:func:`aggregator.web.lanes.heavy_read`) to their heavy lane.

    Args:
        test_config: as :func:`create_server_app`'s.
        upstream: ``host:port`` of the read workers; default ``LDP_READ_UPSTREAM``, and
            without either nothing is forwarded.
        heavy_upstream: ``host:port`` of the heavy lane; default ``LDP_HEAVY_UPSTREAM``,
            and without either every read goes to ``upstream``.

    Returns:
        The WSGI app (``ldp_server.app:create_ingest_app()``).
    """
    app = create_server_app(test_config)
    upstream = upstream or os.environ.get("LDP_READ_UPSTREAM")
    heavy_upstream = heavy_upstream or os.environ.get("LDP_HEAVY_UPSTREAM")
    if upstream:
        estimates.reads_forwarded(app)  # the read workers keep them warm
        names = [bp.name for bp in aggregator.web.BLUEPRINTS]
        app.wsgi_app = ForwardReads(  # type: ignore[method-assign, assignment]
            app.wsgi_app,
            app,
            upstream,
            names,
            READ_ENDPOINTS,
            heavy_upstream=heavy_upstream,
            heavy=functools.partial(lanes.heavy_read, app),
            sent_at_header=lanes.SENT_AT_HEADER,
        )
    return app

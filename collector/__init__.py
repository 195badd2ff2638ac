"""The collector: the public ingestion service (a Flask app; gunicorn in production).

It serves metric definitions, validates reports strictly with the SDK's own wire code
and appends the valid ones to Redis Streams, once each. It stores and logs nothing about
a client: no address, user agent or time (see :mod:`collector.logs`).

>>> app = create_app({"REDIS_URL": "redis://127.0.0.1:6390/0"})  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import redis
from flask import Flask, Response

from collector import api_metrics, api_ops, api_reports, settings
from collector.context import Services
from collector.errors import register_error_handlers
from collector.ingest import Appender
from collector.logs import StripClientMetadata, install_werkzeug_filter
from collector.telemetry import Telemetry
from ldp_store import connection
from ldp_store.registry import Registry

__all__ = ["answer_headers", "create_app", "open_redis"]

CONNECT_TIMEOUT = 2.0
"""Seconds to wait for a TCP connection to Redis: on a LAN it takes milliseconds, so a
client gets its 503 quickly when Redis is unreachable instead of timing out itself."""

SOCKET_TIMEOUT = 5.0
"""Seconds to wait for a Redis reply: the longest script appends MAX_REPORTS entries,
about a millisecond of work; more means Redis is stuck (answer 503)."""

REDIS_RETRIES = 2
"""Retries of a command after a connection error: enough to replace the pooled
connections a Redis restart left dead, few enough that an outage answers 503 within a
fraction of a second. Re-running the append script is harmless: replays are skipped."""


def open_redis(url: str) -> redis.Redis:
    """A Redis (or Redis Cluster) client for the collector, with the timeouts and retries
    above: see :func:`ldp_store.connection.connect` for how a cluster is recognised."""
    return connection.connect(
        url,
        socket_connect_timeout=CONNECT_TIMEOUT,
        socket_timeout=SOCKET_TIMEOUT,
        retries=REDIS_RETRIES,
    )


def answer_headers(response: Response) -> Response:
    """Headers of every answer: ``X-Content-Type-Options: nosniff`` (a browser must not
    read a JSON error that echoes client input as HTML or script), and for JSON also
    ``Cache-Control: no-store`` (estimates, definitions and errors are not for caches,
    shared ones least). A view that set its own value keeps it."""
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    if response.is_json:
        response.headers.setdefault("Cache-Control", "no-store")
    return response


def create_app(test_config: Mapping[str, Any] | None = None) -> Flask:
    """Build the collector app.

    Args:
        test_config: settings to use instead of the environment (tests, ``ldp serve``);
            None reads ``REDIS_URL`` and the ``LDP_``-prefixed variables.

    Returns:
        The app, with its Redis client, registry, appender and telemetry attached once
        as ``app.extensions["ldp"]``.

    Raises:
        collector.settings.ConfigError: a setting is missing or invalid.
    """
    app = Flask(__name__, static_folder=None)
    app.config.from_mapping(settings.DEFAULTS)
    if test_config is None:
        url = settings.redis_url_from_env()
        if url:
            app.config["REDIS_URL"] = url
        app.config.from_prefixed_env("LDP")
    else:
        app.config.from_mapping(test_config)
    app.config.update(settings.checked(app.config))
    # Werkzeug refuses a longer Content-Length with 413, but cuts a chunked body off at
    # exactly this many bytes without an error: one byte more than we accept lets
    # read_json see the overflow and answer 413 instead of parsing a truncated body.
    app.config["MAX_CONTENT_LENGTH"] = app.config["MAX_BODY_BYTES"] + 1
    app.json.sort_keys = False  # type: ignore[attr-defined]  # definitions read in order

    client = open_redis(app.config["REDIS_URL"])
    telemetry = Telemetry()
    app.extensions["ldp"] = Services(
        redis=client,
        registry=Registry(client),
        appender=Appender(client, app.config["MAX_BACKLOG"]),
        telemetry=telemetry,
    )
    register_error_handlers(app)
    app.after_request(answer_headers)  # errors pass through it too
    telemetry.install(app)
    for blueprint in (api_metrics.bp, api_reports.bp, api_ops.bp):
        app.register_blueprint(blueprint)

    app.wsgi_app = StripClientMetadata(app.wsgi_app)  # type: ignore[method-assign]
    install_werkzeug_filter()
    return app

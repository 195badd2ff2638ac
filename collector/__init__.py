"""The collector: the public ingestion service (a Flask app; gunicorn in production).

It serves metric definitions, validates reports strictly with the SDK's own wire code
and appends the valid ones to Redis Streams, once each. It stores and logs nothing about
a client: no address, user agent or time (see :mod:`collector.logs`); a keyed hash of the
address lives in memory for the per-source limits (:mod:`ldp_edge.admission`).

>>> app = create_app({"REDIS_URL": "redis://127.0.0.1:6390/0"})  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import redis
from flask import Flask, Response

from collector import (
    api_audit,
    api_lifecycle,
    api_metrics,
    api_ops,
    api_reports,
    api_sdk,
    api_tokens,
    cors,
    ohttp_gateway,
    ohttp_shuffle,
    quotas,
    settings,
)
from collector.context import Services
from collector.errors import register_error_handlers
from collector.ingest import Appender
from collector.logs import StripClientMetadata, install_werkzeug_filter
from collector.telemetry import Telemetry
from collector.throttle_log import ThrottleLog
from ldp_api import auditing, auth, context, projects, sessions
from ldp_edge.admission import Admission, IdentifySource, environ_key
from ldp_edge.slow_bodies import BodyDeadline
from ldp_store import connection
from ldp_store.auditlog import AuditLog
from ldp_store.lifecycle import MemoryUsage
from ldp_store.registry import Registry
from ldp_store.tokens import TokenStore

__all__ = ["answer_headers", "create_app", "open_redis"]

CONNECT_TIMEOUT = 0.5
"""Seconds to wait for a TCP connection to Redis: on a LAN or loopback it takes well
under a millisecond, so a Redis that is unreachable (or whose listen queue is full) is
answered with 503 quickly instead of the client timing out itself. Not retried."""

SOCKET_TIMEOUT = 1.0
"""Seconds to wait for a Redis reply. The longest script appends MAX_REPORTS entries and
the longest read sums a metric's counts: about a millisecond of work each, so 1 s is a
thousand times the normal need; more means Redis is stalled (SIGSTOP, a swap storm, a
disk that holds the AOF write back) and the request answers 503. A reply that comes
later than this is not lost: the append ran, and the client's retry of the batch is
skipped as a replay. Timeouts are not retried (another try would only wait again)."""

REDIS_RETRIES = 2
"""Retries of a command after a connection error (refused, reset), with 10–100 ms of
jittered backoff: enough to replace the pooled connections a Redis restart left dead, few
enough that an outage answers 503 within a fraction of a second. Re-running the append
script is harmless: replays are skipped."""

LONGEST_REDIS_WAIT = CONNECT_TIMEOUT + SOCKET_TIMEOUT + REDIS_RETRIES * connection.RETRY_BACKOFF_CAP
"""The longest a request waits on Redis before it answers 503: 1.7 s (one connect and one
read timeout, and the backoffs of retries after errors that come at once: refused, reset;
measured ~1.0 s against a SIGSTOPped Redis by ``benchmarks/bench_stalled_redis.py``). Under
the 2 s the operator is promised, and far under the SDK's
:data:`client_sdk.options.DEFAULT_TIMEOUT` (10 s), so a client sees the 503 and its
``Retry-After`` instead of a dead socket. (Was 3 tries × 5 s = 15 s, longer than the
SDK waited: issue 12.)"""


def open_redis(url: str) -> redis.Redis:
    """A Redis (or Redis Cluster) client for the collector, with the timeouts and retries
    above: see :func:`ldp_store.connection.connect` for how a cluster is recognised."""
    return connection.connect(
        url,
        socket_connect_timeout=CONNECT_TIMEOUT,
        socket_timeout=SOCKET_TIMEOUT,
        retries=REDIS_RETRIES,
        retry_timeouts=False,
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
        as its shared context (:func:`ldp_api.context.shared`).

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
        app.config.update(settings.tokens_from_env())  # text, not JSON
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
    header = app.config["SOURCE_HEADER"]
    admission = Admission(
        app.config["SOURCE_REQUESTS_PER_SECOND"], app.config["SOURCE_REPORTS_PER_MINUTE"], header
    )
    registry = Registry(client)
    appender = Appender(
        client,
        app.config["MAX_BACKLOG"],
        app.config["MEMORY_HIGH_WATER"] / 100,
        replica_acks=app.config["REPLICA_ACKS"],
        replica_wait_ms=app.config["REPLICA_WAIT_MS"],
        guard_share=app.config["GUARD_BUDGET"] / 100,
        units=registry.units,
    )
    appender.shortened = telemetry.guard_shortened.inc
    services = Services(
        redis=client,
        registry=registry,
        appender=appender,
        telemetry=telemetry,
        admission=admission,
        throttle_log=ThrottleLog(admission),
        memory=MemoryUsage(client),
    )
    context.attach(app, services)
    register_error_handlers(app, lambda reason: telemetry.unavailable.labels(reason=reason).inc())
    app.after_request(answer_headers)  # errors pass through it too
    cors.install(app, app.config["CORS_ORIGINS"])  # ingest and definitions only
    telemetry.install(app)
    auth.install(app, TokenStore(client))  # every route's scope, before its view
    projects.install(app)  # the request's project, after its scope check
    quotas.QUOTAS.attach(app, quotas.ProjectQuotas(app.config["PROJECT_QUOTAS"]))
    audit_log = AuditLog(
        client, app.config["AUDIT_RETENTION_DAYS"], app.config["AUDIT_MAX_ENTRIES"]
    )
    auditing.install(app, audit_log)  # every admin action, after its view
    signin = sessions.install(app)  # a dashboard session is a credential too (LDP_OIDC_…)
    for blueprint in (
        api_metrics.bp,
        api_lifecycle.bp,
        api_reports.bp,
        api_ops.bp,
        api_sdk.bp,
        api_tokens.bp,
        api_audit.bp,
    ):
        app.register_blueprint(blueprint)

    # The source's keyed hash is taken first; then the address leaves the environ.
    # Only the dashboard's own session cookies pass, and only with sign-in configured.
    private = StripClientMetadata(
        app.wsgi_app,
        [environ_key(header)] if header else [],
        sessions.COOKIE_NAMES if signin is not None else (),
    )
    # The Oblivious HTTP gateway serves its inner requests through `private` too; their
    # reports go to the shuffle pools (ohttp_shuffle).
    pool = ohttp_shuffle.install(app.config, services.appender, client, telemetry.registry)
    if pool is not None:
        ohttp_shuffle.POOL.attach(app, pool)
    gateway = ohttp_gateway.install(app.config, private, client, telemetry.registry, pool)
    identified = IdentifySource(gateway, admission)
    # A body that comes too slowly is cut (408) before any of that runs.
    app.wsgi_app = BodyDeadline(  # type: ignore[method-assign, assignment]
        identified, app.config["MAX_BODY_BYTES"], telemetry.slow_bodies.inc
    )
    install_werkzeug_filter()
    return app

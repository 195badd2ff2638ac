"""The read side's web layer: estimates, overview and planning APIs, the dashboard.

Flask blueprints over the read package (:mod:`aggregator.query`: a window's counts, its
estimate for any kind, alarms, the answers); views and the dashboard, no state and no
statistics of their own. :func:`install` mounts them on an app that carries the shared
request context (Redis, the metric registry, memory readings, the app's metrics:
:mod:`ldp_api.context`), as the collector's app factory attaches it;
:mod:`ldp_server.app` composes the two.

* :mod:`~aggregator.web.estimates`: ``/v1/estimates/<name>``, ``…/trend``
* :mod:`~aggregator.web.export`: ``/v1/export``, ``/v1/export/<name>`` (``ldp export``)
* :mod:`~aggregator.web.status`: ``/v1/overview``
* :mod:`~aggregator.query.alarms`: poisoning alarms for both, and for ``/metrics``
* :mod:`~aggregator.web.plan`: ``/v1/plan``, ``/v1/plan/curve``
* :mod:`~aggregator.web.alerts`: ``/v1/alerts…`` (rules, their state, dead letters)
* :mod:`~aggregator.web.dashboard`: ``/``, ``/ui/…``
* :mod:`~aggregator.web.access`: the read token in front of all of them
* :mod:`~aggregator.web.signin`: ``/ui/signin…``, ``/ui/signout`` (OpenID Connect)
* :mod:`~aggregator.web.read_guard`: the bound and cache of expensive reads
* :mod:`~aggregator.web.lanes`: which reads are expensive (``ldp serve``'s heavy lane)
"""

from __future__ import annotations

from flask import Blueprint, Flask

from aggregator.query.alarms import AlarmGauges
from aggregator.query.gauges import InUse, PipelineGauges
from aggregator.web import (
    access,
    alerts,
    dashboard,
    estimates,
    export,
    lanes,
    plan,
    read_guard,
    signin,
    status,
    strings,
)
from ldp_api.context import shared

__all__ = ["BLUEPRINTS", "install"]

BLUEPRINTS: tuple[Blueprint, ...] = (
    estimates.bp,
    export.bp,
    status.bp,
    plan.bp,
    strings.bp,
    alerts.bp,
    dashboard.bp,
)
"""Every route of the read side (``ldp serve`` sends these to its read workers)."""


def install(app: Flask) -> None:
    """Mount the read APIs and the dashboard on ``app``, behind the read token; add the
    poisoning alarms to its ``/metrics``.

    Raises:
        ValueError: ``LDP_ALARM_RATE``, ``LDP_MIN_SEGMENT_REPORTS`` or
            ``LDP_READ_DISCOVERIES`` out of range, or a
            retention variable out of range (``LDP_RETENTION_…``).
    """
    status.install_retention(app)
    ext = shared(app=app)
    counted = InUse(ext.redis, ext.registry)  # one pass over the counters for both
    ext.telemetry.add_collector(
        AlarmGauges(ext.redis, ext.registry, status.alarm_rate(app), counted)
    )
    ext.telemetry.add_collector(PipelineGauges(ext.redis, ext.registry, counted))
    estimates.min_segment_reports(app)  # refused at start, not at the first breakdown
    read_guard.install(app)
    estimates.install_warmer(app)
    lanes.install(app)
    for blueprint in BLUEPRINTS:
        app.register_blueprint(blueprint)
    access.install(app)
    signin.install(app)  # with LDP_OIDC_ISSUER: sign-in pages, refused pages sent there

"""The read side's web layer: estimates, overview and planning APIs, the dashboard.

Flask blueprints over the counts in Redis (:mod:`aggregator.stream.counts`) and the
statistics (:mod:`aggregator.stats`); no state of their own. :func:`install` mounts them
on an app that already carries ``app.extensions["ldp"]`` (Redis and the metric registry,
as the collector's app factory sets them up): see :mod:`aggregator.service.app`.

* :mod:`~aggregator.web.estimates`: ``/v1/estimates/<name>``, ``…/trend``
* :mod:`~aggregator.web.status`: ``/v1/overview``
* :mod:`~aggregator.web.alarms`: poisoning alarms for both, and for ``/metrics``
* :mod:`~aggregator.web.plan`: ``/v1/plan``, ``/v1/plan/curve``
* :mod:`~aggregator.web.dashboard`: ``/``, ``/ui/…``
* :mod:`~aggregator.web.access`: the read token in front of all of them
"""

from __future__ import annotations

from flask import Flask

from aggregator.web import access, alarms, dashboard, estimates, plan, status, strings

__all__ = ["install"]


def install(app: Flask) -> None:
    """Mount the read APIs and the dashboard on ``app``, behind the read token; add the
    poisoning alarms to its ``/metrics``.

    Raises:
        ValueError: ``LDP_ALARM_RATE`` out of range, or a retention variable out of range
            (``LDP_RETENTION_…``).
    """
    status.install_retention(app)
    ext = app.extensions["ldp"]
    ext.telemetry.add_collector(alarms.AlarmGauges(ext.redis, ext.registry, alarms.alarm_rate(app)))
    app.register_blueprint(estimates.bp)
    app.register_blueprint(status.bp)
    app.register_blueprint(plan.bp)
    app.register_blueprint(strings.bp)
    app.register_blueprint(dashboard.bp)
    access.install(app)

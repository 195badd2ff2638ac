"""The one place that composes the whole web service: the collector plus the read side.

Collector and aggregator are peers that share Redis through :mod:`ldp_store`; neither
imports the other. ``ldp serve`` (and compose's ``dashboard`` service) run one WSGI app
that holds both, and this module is where the two meet — ``tests/test_architecture.py``
allows ``import collector`` under ``aggregator/`` here and nowhere else.
"""

from __future__ import annotations

from typing import Any

from flask import Flask

import aggregator.web
from collector import create_app, settings

__all__ = ["check_tokens", "create_server_app"]


def check_tokens() -> None:
    """Refuse, before anything starts, the environment's tokens the app would refuse
    (``ldp serve`` calls it so a bad token is a message, not a web child that dies).

    Raises:
        collector.settings.ConfigError: a token is too short (or not text).
    """
    settings.check_tokens(settings.tokens_from_env())


def create_server_app(test_config: dict[str, Any] | None = None) -> Flask:
    """The collector app with the estimates API, planning API and the dashboard mounted.

    With ``READ_TOKEN`` (``LDP_READ_TOKEN``) set, those need it: see
    :mod:`aggregator.web.access`.

    Args:
        test_config: settings that replace the environment's (as ``create_app``'s).

    Returns:
        The WSGI app gunicorn serves (``aggregator.service.app:create_server_app()``).
    """
    app = create_app(test_config)
    aggregator.web.install(app)
    return app

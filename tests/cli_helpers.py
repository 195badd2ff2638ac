"""The ``ldp`` command run in-process (click's runner), and a real collector for it to
talk to over HTTP."""

from __future__ import annotations

from collections.abc import Iterator

from click.testing import CliRunner

from collector import create_app
from ldp_server.cli import main
from tests.wsgi_helpers import serving


def ldp(*args: str, charset: str = "utf-8") -> tuple[int, str]:
    """``ldp ARGS…``: its exit code and output."""
    result = CliRunner(charset=charset).invoke(main, list(args))
    return result.exit_code, result.output


def collector_serving(redis_url: str, admin_token: str) -> Iterator[str]:
    """A real collector on a free port, on ``redis_url``: its base URL, for a fixture to
    ``yield from``."""
    app = create_app({"REDIS_URL": redis_url, "ADMIN_TOKEN": admin_token, "TESTING": True})
    with serving(app) as url:
        yield url

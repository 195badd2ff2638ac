"""The table of environment variables (docs/reference/configuration.md) names every one read.

Twelve-factor configuration is only as good as its documentation: this scans the service
code for the variables it reads (``os.environ``, click's ``envvar=``, the collector's
``LDP_``-prefixed Flask settings, the ``ldp`` commands' options) and fails when one is
missing from the table, or when the table lists one nothing reads.
"""

from __future__ import annotations

import re
from pathlib import Path

import click

from collector import settings
from ldp_server import cli

ROOT = Path(__file__).resolve().parents[1]
SERVICE_CODE = [
    "aggregator",
    "collector",
    "ldp_store",
    "ldp_api",
    "ldp_edge",
    "ldp_server",
    "ldp_relay",
]
READ = re.compile(
    r"""environ(?:\.get)?[\[(]\s*["']([A-Z][A-Z0-9_]+)["']"""
    r"""|envvar=\[?([^\]\n)]*)"""
)
NAME = re.compile(r"""["']([A-Z][A-Z0-9_]+)["']""")
SETTING = re.compile(r'config(?:\.get)?[\[(]"([A-Z][A-Z0-9_]+)"')
FLASK_OWN = {"MAX_CONTENT_LENGTH", "REDIS_URL"}
"""Config keys set from code, not the environment (REDIS_URL has its own variable)."""
ROW = re.compile(r"^\| (`[A-Z][A-Z0-9_]+`.*?) \|", re.M)


def variables_read() -> set[str]:
    found: set[str] = set()
    for folder in SERVICE_CODE:
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text()
            for direct, envvar in READ.findall(text):
                found.update([direct] if direct else NAME.findall(envvar))
            # The apps read their settings with Flask's from_prefixed_env("LDP").
            found.update(f"LDP_{key}" for key in SETTING.findall(text) if key not in FLASK_OWN)
    found.update(f"LDP_{key}" for key in settings.DEFAULTS if key not in FLASK_OWN)
    found.update(click_envvars(cli.main))
    return found


def click_envvars(command: click.Command) -> set[str]:
    """Every variable an ``ldp`` command's options read, however the option was built."""
    found: set[str] = set()
    for param in command.params:
        envvar = getattr(param, "envvar", None)
        found.update([envvar] if isinstance(envvar, str) else envvar or [])
    if isinstance(command, click.Group):  # its commands as click finds them (lazy ones too)
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None:
                found |= click_envvars(sub)
    return found


def variables_documented() -> set[str]:
    text = (ROOT / "docs" / "reference" / "configuration.md").read_text()
    table = text.split("## Configuration (environment)", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for cell in ROW.findall(table):
        names.update(re.findall(r"`([A-Z][A-Z0-9_]+)`", cell))
    return names


def test_every_variable_read_is_documented() -> None:
    read = variables_read()
    assert {"REDIS_URL", "LDP_BIND", "LDP_WORKER_NAME", "LDP_MAX_BACKLOG"} <= read  # the scan works
    assert read - variables_documented() == set()


def test_the_table_lists_nothing_unread() -> None:
    assert variables_documented() - variables_read() == set()

"""The ``ldp`` command line: the aggregator's commands (:mod:`aggregator.cli`) with
``serve``, ``demo`` and ``wait`` (:mod:`ldp_server.commands`) and ``relay``
(:mod:`ldp_relay.cli`), the console script of the package.

Each command imports what its job needs when it runs, so ``ldp --help`` loads neither
numpy nor Redis, and ``ldp aggregate`` neither Flask nor the collector.
"""

from __future__ import annotations

import click

from aggregator.cli import COMMANDS
from ldp_relay.cli import relay
from ldp_server import commands

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="ldp-telemetry")
def main() -> None:
    """ldp-telemetry: usage telemetry under local differential privacy."""


for _command in (*COMMANDS, commands.serve, commands.demo, commands.wait, relay):
    main.add_command(_command)

"""The ``ldp`` command line: one module per command group (as ``rq/cli/``).

* :mod:`~aggregator.cli.study`: ``simulate``, ``plan``, ``audit``, ``tradeoff``
* :mod:`~aggregator.cli.attack`: ``attack poison``
* :mod:`~aggregator.cli.server`: ``serve``, ``demo``
* :mod:`~aggregator.cli.metrics`: ``metrics list|show|create|retire|unretire|delete``
* :mod:`~aggregator.cli.export`: ``export``
* :mod:`~aggregator.cli.estimates`: ``estimates``
* :mod:`~aggregator.cli.aggregate`: ``aggregate``
* :mod:`~aggregator.cli.keys`: ``keys list|rotate`` (the Oblivious HTTP gateway's keys)
* :mod:`ldp_relay.cli`: ``relay`` (the Oblivious HTTP relay, a package of its own)
* :mod:`~aggregator.cli.options`: options the study commands share
* :mod:`~aggregator.cli.console`: rich output, JSON, progress bars

Each command imports what its job needs when it runs, so ``ldp --help`` loads neither
numpy nor Redis.
"""

from __future__ import annotations

import click

from aggregator.cli import (
    aggregate,
    attack,
    estimates,
    export,
    keys,
    metrics,
    server,
    study,
)
from aggregator.cli.console import err, out, progress_bar
from ldp_relay.cli import relay

__all__ = ["err", "main", "out", "progress_bar"]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="ldp-telemetry")
def main() -> None:
    """ldp-telemetry: usage telemetry under local differential privacy."""


for _command in (
    *study.COMMANDS,
    attack.attack,
    server.serve,
    server.demo,
    metrics.metrics,
    aggregate.aggregate,
    export.export,
    estimates.estimates,
    keys.keys,
    relay,
):
    main.add_command(_command)

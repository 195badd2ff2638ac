"""The ``ldp`` command line: the aggregator's commands (:mod:`aggregator.cli`) with
``serve``, ``demo`` and ``wait`` (:mod:`ldp_server`) and ``relay`` (:mod:`ldp_relay.cli`),
the console script of the package.

The group names each command's module in :data:`COMMANDS` and imports only the module of
the command invoked (click's "lazily loading subcommands"), so ``ldp --help`` loads
neither numpy nor Redis, and ``ldp aggregate`` neither Flask nor the collector; each
command module imports what its job needs at its top.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import click

__all__ = ["ATTACKS", "COMMANDS", "LazyCommand", "LazyGroup", "attack", "main"]


@dataclass(frozen=True)
class LazyCommand:
    """Where a command is defined (``"module.path:attribute"``) and its one-line help,
    shown by ``ldp --help`` without importing the module (a test checks it is the
    command's own)."""

    target: str
    summary: str

    def load(self) -> click.Command:
        """The command itself (its module imported now).

        Raises:
            TypeError: the target is not a click command.
        """
        module, _, attribute = self.target.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.target} is not a click command")
        return command


class LazyGroup(click.Group):
    """A group whose commands are imported when invoked (or their help asked), not when
    the group is built. ``commands`` holds only those added eagerly (none here): tools
    that read the tree (mkdocs-click, shell completion) go through :meth:`list_commands`
    and :meth:`get_command`, as click itself does."""

    def __init__(self, *args: Any, lazy: dict[str, LazyCommand], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:  # noqa: D102
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:  # noqa: D102
        if cmd_name in self.lazy:
            return self.lazy[cmd_name].load()  # a module imported once, then found in sys.modules
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands and their one-line help, as click writes them, the lazy ones' from
        the table (their modules not imported)."""
        listed = [
            (name, self.commands.get(name) or click.Command(name, help=self.lazy[name].summary))
            for name in self.list_commands(ctx)
        ]
        shown = [(name, command) for name, command in listed if not command.hidden]
        if not shown:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in shown)
        with formatter.section("Commands"):
            formatter.write_dl([(name, c.get_short_help_str(limit)) for name, c in shown])


ATTACKS: dict[str, LazyCommand] = {
    "poison": LazyCommand(
        "aggregator.cli.poison:poison",
        "Fake clients: the maximal gain attack against the real decoders, per target.",
    ),
    "reconstruct": LazyCommand(
        "aggregator.cli.reconstruct:reconstruct",
        "Dinur & Nissim's reconstruction attack: exact aggregates give the data back.",
    ),
}
"""``ldp attack``'s commands, each with its own stack (scipy's linear programs for
``reconstruct`` alone)."""

attack = LazyGroup(
    "attack",
    lazy=ATTACKS,
    help="Measured threats: fake clients (poison), reconstruction from aggregates.",
)
"""``ldp attack``: a lazy group like ``ldp``."""


COMMANDS: dict[str, LazyCommand] = {
    "aggregate": LazyCommand(
        "aggregator.cli.aggregate:aggregate",
        "Run the aggregator worker: count every report in the streams exactly once.",
    ),
    "alerts": LazyCommand(
        "aggregator.cli.alerts:alerts",
        "Alert rules on the estimates, with a false-alarm guarantee (docs: Alerts guide).",
    ),
    "attack": LazyCommand("ldp_server.cli:attack", attack.help or ""),
    "audit": LazyCommand(
        "aggregator.cli.audit:audit",
        "Lower-bound the ε the real perturb code realises; exit 1 if above the declared ε.",
    ),
    "audit-log": LazyCommand(
        "aggregator.cli.auditlog:audit_log",
        "Who did which admin action (metrics, tokens, exports), when, and how it ended.",
    ),
    "demo": LazyCommand(
        "ldp_server.demo_command:demo",
        "Serve, define demo metrics, simulate users through real HTTP, compare with the truth.",
    ),
    "dictionary": LazyCommand(
        "aggregator.cli.catalog:dictionary",
        "Write the privacy dictionary of a registry as one static HTML page: every metric, "
        "what it asks, its ε and share of the budget, owner, expiry, and what one report "
        "can and cannot reveal.",
    ),
    "estimates": LazyCommand(
        "aggregator.cli.estimates:estimates",
        "Print one window's estimates with intervals (as GET /v1/estimates computes them).",
    ),
    "export": LazyCommand(
        "aggregator.cli.export:export",
        "Write every window's counts and estimates with intervals to a file (CSV or Parquet).",
    ),
    "generate": LazyCommand(
        "aggregator.cli.catalog:generate",
        "Typed metric APIs from a registry: Python (Literal types, for mypy), TypeScript for "
        "the browser SDK (for tsc), Java for the JVM SDK (enums, for javac).",
    ),
    "keys": LazyCommand(
        "aggregator.cli.keys:keys", "The Oblivious HTTP gateway's keys: list them, rotate them."
    ),
    "lint": LazyCommand(
        "aggregator.cli.catalog:lint",
        "Check a metrics registry and add up each device's privacy loss across its metrics.",
    ),
    "metrics": LazyCommand(
        "aggregator.cli.metrics:metrics",
        "The metric registry: list, show, create or change metrics (as GET/PUT do).",
    ),
    "plan": LazyCommand(
        "aggregator.cli.plan:plan",
        "Interval half-width N users buy, or N needed for a half-width, per mechanism.",
    ),
    "relay": LazyCommand(
        "ldp_relay.cli:relay",
        "Forward sealed uploads (message/ohttp-req) to a collector's gateway, blind.",
    ),
    "serve": LazyCommand(
        "ldp_server.commands:serve",
        "Run collector, aggregator workers and dashboard; embedded Redis unless --redis-url.",
    ),
    "simulate": LazyCommand(
        "aggregator.cli.simulate:simulate",
        "Simulate populations: MSE against the exact variance, and interval coverage.",
    ),
    "tokens": LazyCommand(
        "aggregator.cli.tokens:tokens",
        "Scoped tokens: create, list, rotate, revoke (stored hashed; shown once).",
    ),
    "tradeoff": LazyCommand(
        "aggregator.cli.tradeoff:tradeoff",
        "Privacy–utility–N: CSV and plots of error vs ε and N, per mechanism, vs central Laplace.",
    ),
    "wait": LazyCommand(
        "ldp_server.wait:wait",
        "Wait until the server at --url is ready (answers /readyz), e.g. after `ldp serve &`: "
        "by then its admin token is in <data-dir>/admin-token.",
    ),
}
"""Every ``ldp`` command: its name, where it is defined, its one-line help."""


@click.group(
    cls=LazyGroup,
    lazy=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(package_name="ldp-telemetry")
def main() -> None:
    """ldp-telemetry: usage telemetry under local differential privacy."""

"""The ``ldp`` group's table of commands: every entry is a click command, named as the
table names it, with the one-line help ``ldp --help`` shows for it; the table's help
output is click's own."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from ldp_server.cli import COMMANDS, LazyCommand, main


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_table_entry_is_a_click_command_with_its_own_summary(name: str) -> None:
    entry = COMMANDS[name]
    command = entry.load()
    assert command.name == name, f"{entry.target} is the command {command.name!r}"
    assert entry.summary == command.get_short_help_str(limit=10**6), entry.target


def test_a_target_that_is_no_command_fails() -> None:
    with pytest.raises(TypeError, match="not a click command"):
        LazyCommand("ldp_server.cli:COMMANDS", "").load()


def test_the_help_lists_every_command_as_click_would() -> None:
    """What ``ldp --help`` prints from the table is what click prints from the commands."""
    eager = click.Group(
        "main",
        commands={name: entry.load() for name, entry in COMMANDS.items()},
        help=main.help,
        context_settings=main.context_settings,
    )
    eager.params = main.params
    runner = CliRunner()
    lazy_help = runner.invoke(main, ["--help"], prog_name="ldp")
    eager_help = runner.invoke(eager, ["--help"], prog_name="ldp")
    assert lazy_help.exit_code == 0, lazy_help.output
    assert lazy_help.output == eager_help.output
    assert all(f"\n  {name} " in lazy_help.output for name in COMMANDS)


def test_a_misspelt_command_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["metric", "list"])
    assert result.exit_code == 2
    assert "No such command 'metric'" in result.output


def test_a_group_s_subcommands_and_help_work_through_the_table() -> None:
    result = CliRunner().invoke(main, ["keys", "--help"])
    assert result.exit_code == 0, result.output
    assert "list" in result.output and "rotate" in result.output

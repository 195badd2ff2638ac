"""The ``ldp`` group's tables of commands (``ldp`` itself and ``ldp attack``): every entry
is a click command, named as the table names it, with the one-line help the group's help
shows for it; the help printed from a table is click's own."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from ldp_server.cli import COMMANDS, LazyCommand, LazyGroup, attack, main

TABLES: dict[str, LazyGroup] = {"ldp": main, "attack": attack}
"""Every lazy group, by the name typed to reach it."""

ENTRIES = [(path, name) for path, group in TABLES.items() for name in sorted(group.lazy)]


def test_every_lazy_group_is_in_a_table() -> None:
    """A lazy group reached from ``ldp`` is one this file checks."""
    groups = {name for name, entry in COMMANDS.items() if isinstance(entry.load(), LazyGroup)}
    assert groups == set(TABLES) - {"ldp"}


def test_the_groups_hold_no_command_eagerly() -> None:
    """Tools that read ``Group.commands`` when it is not empty (mkdocs-click, which writes
    docs/reference/cli.md's command list) must fall back to ``list_commands``: a lazy
    group holds its commands in its table only, loaded or not."""
    runner = CliRunner()
    assert runner.invoke(main, ["attack", "poison", "--help"]).exit_code == 0
    assert main.commands == {} and attack.commands == {}
    assert {"serve", "aggregate", "metrics", "attack", "relay"} <= set(
        main.list_commands(click.Context(main))
    )


@pytest.mark.parametrize(("path", "name"), ENTRIES)
def test_every_table_entry_is_a_click_command_with_its_own_summary(path: str, name: str) -> None:
    entry = TABLES[path].lazy[name]
    command = entry.load()
    assert command.name == name, f"{entry.target} is the command {command.name!r}"
    assert entry.summary == command.get_short_help_str(limit=10**6), entry.target


def test_a_target_that_is_no_command_fails() -> None:
    with pytest.raises(TypeError, match="not a click command"):
        LazyCommand("ldp_server.cli:COMMANDS", "").load()


def commands_section(help_text: str) -> str:
    """The "Commands:" section of a group's help."""
    return help_text.split("\nCommands:\n", 1)[1]


@pytest.mark.parametrize("path", sorted(TABLES))
def test_the_help_lists_every_command_as_click_would(path: str) -> None:
    """What a lazy group's ``--help`` lists from its table is what click lists from the
    commands themselves (at the width ``ldp`` sets)."""
    group = TABLES[path]
    eager = click.Group(
        group.name,
        commands={name: entry.load() for name, entry in group.lazy.items()},
        context_settings=main.context_settings,
    )
    runner = CliRunner()
    lazy_help = runner.invoke(main, [*([] if group is main else [path]), "--help"])
    eager_help = runner.invoke(eager, ["--help"])
    assert lazy_help.exit_code == 0, lazy_help.output
    assert commands_section(lazy_help.output) == commands_section(eager_help.output)
    assert all(f"\n  {name} " in lazy_help.output for name in group.lazy)


@pytest.mark.parametrize(
    ("args", "unknown"), [(["metric", "list"], "metric"), (["attack", "poisn"], "poisn")]
)
def test_a_misspelt_command_is_a_usage_error(args: list[str], unknown: str) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert f"No such command '{unknown}'" in result.output


@pytest.mark.parametrize(
    ("args", "listed"),
    [(["keys", "--help"], ("list", "rotate")), (["attack", "--help"], ("poison", "reconstruct"))],
)
def test_a_group_s_subcommands_and_help_work_through_the_table(
    args: list[str], listed: tuple[str, ...]
) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert all(f"\n  {name} " in result.output for name in listed)

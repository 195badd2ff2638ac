"""The ``ldp`` group's tables of commands (``ldp`` itself and ``ldp attack``): every entry
is a click command, named as the table names it, with the one-line help the group's help
shows for it; the help printed from a table is click's own."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from ldp_server.cli import GROUPS, LazyCommand, LazyGroup, main

TABLES: dict[str, LazyGroup] = {"ldp": main, **{group.name or "": group for group in GROUPS}}
"""Every lazy group, by the path typed to reach it."""

ENTRIES = [(path, name) for path, group in TABLES.items() for name in sorted(group.lazy)]


def test_main_is_a_lazy_group_with_every_command() -> None:
    assert isinstance(main, LazyGroup)
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


@pytest.mark.parametrize("path", sorted(TABLES))
def test_the_help_lists_every_command_as_click_would(path: str) -> None:
    """What a lazy group's ``--help`` prints from its table is what click prints from the
    commands themselves."""
    group = TABLES[path]
    commands = {name: entry.load() for name, entry in group.lazy.items()}
    eager = click.Group(
        group.name,
        commands={**group.commands, **commands},
        help=group.help,
        context_settings=group.context_settings,
    )
    eager.params = group.params
    lazy_copy = LazyGroup(  # none of the table's commands loaded yet, whatever ran before
        group.name,
        lazy=group.lazy,
        commands={n: c for n, c in group.commands.items() if n not in group.lazy},
        help=group.help,
        context_settings=group.context_settings,
    )
    lazy_copy.params = group.params
    runner = CliRunner()
    lazy_help = runner.invoke(lazy_copy, ["--help"], prog_name="ldp")
    eager_help = runner.invoke(eager, ["--help"], prog_name="ldp")
    assert lazy_help.exit_code == 0, lazy_help.output
    assert lazy_help.output == eager_help.output
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

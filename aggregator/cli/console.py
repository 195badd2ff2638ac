"""Terminal output shared by the ``ldp`` commands: rich consoles and progress bars."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

__all__ = ["Advance", "echo_json", "err", "or_dash", "out", "progress_bar"]

err = Console(stderr=True, soft_wrap=True)
out = Console(soft_wrap=True)  # long URLs and messages stay on one line in logs and pipes


def echo_json(data: Any) -> None:
    """Print ``data`` as indented JSON on stdout, with ε and labels as themselves.

    Non-ASCII characters are written as they are (``ε``, not ``\\u03b5``) when stdout can
    encode them, and as JSON escapes otherwise (a pipe or terminal in ASCII or Latin-1),
    so the output is valid JSON either way.
    """
    text = json.dumps(data, indent=2, ensure_ascii=False)
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        text = json.dumps(data, indent=2)
    click.echo(text)


def or_dash(value: object, spec: str = "") -> str:
    """A table cell: ``value`` formatted by ``spec`` (``format(value, spec)``), a dash
    when it is None (not defined, not measured)."""
    return "—" if value is None else format(value, spec)


class Advance(Protocol):
    """What :func:`progress_bar` yields: ``advance(n)``, and a new stage's description."""

    def __call__(self, n: int, description: str | None = None) -> None: ...


@contextmanager
def progress_bar(description: str, total: int, enabled: bool = True) -> Iterator[Advance]:
    """A rich progress bar on stderr; yields ``advance(n, description=None)``, whose
    description (when given) replaces the bar's: a long command names its stage."""
    if not enabled:
        yield lambda n, description=None: None
        return
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=total)

        def advance(n: int, description: str | None = None) -> None:
            bar.update(task, advance=n, description=description)  # None: unchanged

        yield advance

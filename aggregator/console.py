"""Terminal output shared by the ``ldp`` commands: rich consoles and progress bars."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

__all__ = ["err", "out", "progress_bar"]

err = Console(stderr=True, soft_wrap=True)
out = Console(soft_wrap=True)  # long URLs and messages stay on one line in logs and pipes


@contextmanager
def progress_bar(
    description: str, total: int, enabled: bool = True
) -> Iterator[Callable[[int], None]]:
    """A rich progress bar on stderr; yields an ``advance(n)`` callable."""
    if not enabled:
        yield lambda n: None
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
        yield lambda n: bar.advance(task, n)

"""Projects: every metric belongs to one; names are unique within it.

The default project's metrics keep their names, and so every Redis key they had: a
deployment from before projects is the default project, with nothing to migrate. A
metric ``signup`` of project ``shop`` is stored as ``shop/signup`` (its *qualified*
name): a metric name allows no ``/`` (:data:`client_sdk.wire.NAME_PATTERN`), so no
default-project name can be a qualified one, and the hash tag ``{m:shop/signup:1:0}``
keeps each version's keys in one slot as before. Workers, retention and deletes work
on qualified names unchanged; the HTTP layer turns a request's project and a bare name
into the qualified one (``ldp_api/projects.py``).

:data:`CURRENT` is the project a request acts in; :meth:`ldp_store.registry.Registry.names`
lists only its metrics while it is set (None: every project, as workers and the command
line see them). Docs: docs/guides/teams.md, docs/architecture/storage.md.
"""

from __future__ import annotations

import re
from contextvars import ContextVar

from client_sdk.wire import check_name

__all__ = [
    "CURRENT",
    "DEFAULT",
    "MAX_PROJECT_LENGTH",
    "PROJECT_PATTERN",
    "bare",
    "check_project",
    "in_project",
    "project_of",
    "qualify",
    "valid_qualified",
]

DEFAULT = "default"
"""The project of every metric and token made without one (a deployment from before
projects is all of it)."""

PROJECT_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]*")
"""A project's name: like a metric's, without ``.`` (nothing to confuse with a name)."""

MAX_PROJECT_LENGTH = 40
"""Short enough that a qualified name still fits comfortably in a key and a log line."""

SEPARATOR = "/"

CURRENT: ContextVar[str | None] = ContextVar("ldp_project", default=None)
"""The project the current request acts in (None: outside requests, every project)."""


def check_project(project: object) -> str:
    """``project`` if it is a valid project name.

    Raises:
        ValueError: not one, with the rule in the message.
    """
    if (
        not isinstance(project, str)
        or len(project) > MAX_PROJECT_LENGTH
        or not PROJECT_PATTERN.fullmatch(project)
    ):
        raise ValueError(
            f"project must be 1-{MAX_PROJECT_LENGTH} of a-z, 0-9, '_', '-' starting with a "
            f"letter or digit; got {str(project)[:60]!r}"
        )
    return project


def qualify(project: str, name: str) -> str:
    """The stored name of metric ``name`` of ``project`` (``name`` itself in the default
    project)."""
    return name if project == DEFAULT else f"{project}{SEPARATOR}{name}"


def project_of(qualified: str) -> str:
    """The project of a stored metric name."""
    head, sep, _ = qualified.partition(SEPARATOR)
    return head if sep else DEFAULT


def bare(qualified: str) -> str:
    """A stored metric name without its project (what apps and people call it)."""
    return qualified.rpartition(SEPARATOR)[2]


def in_project(qualified: str, project: str | None) -> bool:
    """Whether stored name ``qualified`` is of ``project`` (None: of any)."""
    return project is None or project_of(qualified) == project


def valid_qualified(qualified: str) -> bool:
    """Whether ``qualified`` is a metric name, bare or of a (valid) project."""
    head, sep, name = qualified.partition(SEPARATOR)
    if sep:
        if head == DEFAULT or not PROJECT_PATTERN.fullmatch(head) or len(head) > MAX_PROJECT_LENGTH:
            return False
    else:
        name = head
    try:
        check_name(name)
    except ValueError:
        return False
    return True

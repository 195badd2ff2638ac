"""How a storage script is called: registered once per client, sent as one :class:`Call`.

Every script of :mod:`ldp_store.scripts` goes through :func:`script` (redis-py's
``register_script``, which reloads a script after a restart: ``NOSCRIPT``). See
``docs/architecture/storage.md``.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import redis
from redis.commands.core import Script

__all__ = ["ID_CHUNK", "Call", "script"]

ID_CHUNK = 1_000
"""Ids per command inside a script: Lua's ``unpack`` fails beyond about 8,000 values."""

_REGISTERED: weakref.WeakKeyDictionary[Any, dict[str, Script]] = weakref.WeakKeyDictionary()
"""Per client: its registered scripts, by source."""


def script(client: redis.Redis, source: str) -> Script:
    """``client.register_script(source)``, once per client."""
    mine = _REGISTERED.get(client)
    if mine is None:
        mine = _REGISTERED[client] = {}
    found = mine.get(source)
    if found is None:
        found = mine[source] = client.register_script(source)
    return found


@dataclass(frozen=True, slots=True)
class Call:
    """One script call as a function below builds it: :meth:`run` it, or hand it to a
    runner that sends it its own way (:class:`collector.replicas.ReplicaWait`)."""

    script: Script
    keys: list[str]
    args: list[Any]

    @property
    def slot_key(self) -> str:
        """A key of the call's one hash slot (every key of a call shares it)."""
        return self.keys[0]

    @property
    def source(self) -> str:
        """The script's Lua source (to load it on a node that lacks it)."""
        return str(self.script.script)

    def run(self) -> Any:
        """The script's reply (``EVALSHA``, loading the script on ``NOSCRIPT``)."""
        return self.script(keys=self.keys, args=self.args)

    def queue(self, pipe: Any) -> None:
        """Queue the call on a pipeline as a bare ``EVALSHA`` (its ``NOSCRIPT`` is the
        caller's: :meth:`load`, then queue it again)."""
        pipe.evalsha(self.script.sha, len(self.keys), *self.keys, *self.args)

    def load(self, node: Any) -> None:
        """Load the script on a node (``SCRIPT LOAD``) that answered ``NOSCRIPT``."""
        node.script_load(self.source)

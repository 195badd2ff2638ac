"""Every Lua script of the storage contract, a module per job (as rq keeps its scripts
beside their calls in ``rq/scripts.py``).

Each script touches only keys of one metric version and shard, which share a hash tag
(:func:`ldp_store.keys.tag`), so every one runs unchanged on a Redis Cluster (but MANY,
which reads many metrics' keys on one node, and is a pipeline on a cluster; and APPEND
and SHUFFLE ring the doorbell, :data:`ldp_store.keys.DOORBELL`, on a single Redis only). Beside each
script is the typed function that calls it: the only code that knows its KEYS/ARGV
layout; callers pass named values (or, for the commit, one frozen :class:`CommitBatch`).
Each function registers its script once per client (:func:`ldp_store.scripts.call.script`).

| module | script → function | caller | what |
|---|---|---|---|
| append | APPEND → :func:`append_call` | collector | replay guard + ``XADD``, or "backlog" |
| append | FORGET → :func:`forget_epochs` | collector | delete a guard epoch ended early |
| read | READ → :func:`read_batch` | worker | history or claim reads, one packed reply |
| commit | COMMIT → :func:`commit_batch` | worker | acknowledge + count, exactly once; trim |
| dead_letter | DEAD → :func:`dead` | worker | dead-letter undecodable entries once; trim |
| window | WINDOW → :func:`read_window`, :func:`read_windows` | readers | a window's counts |
| fold | FOLD → :func:`fold_window` | worker | fold a window's deltas into its counts |
| shuffle | SHUFFLE → :func:`shuffle_call` | collector, worker | a pool into the stream |
| trim | TRIM, UNLINK | scripts above; lifecycle | trim below every group; unlink |
| many | MANY → :func:`read_many` | registry, gauges, worker | one read over many keys |
| many | IN_USE → :func:`units_in_use` | gauges, overview | many versions' counters, those in use |
| many | GUARD_UNITS → :func:`guard_units` | registry | the replay guard's units, summed |
"""

from __future__ import annotations

from ldp_store.scripts.append import APPEND, FORGET, AppendReply, append_call, forget_epochs
from ldp_store.scripts.call import ID_CHUNK, Call
from ldp_store.scripts.commit import COMMIT, CommitBatch, Hours, commit_batch
from ldp_store.scripts.dead_letter import DEAD, dead
from ldp_store.scripts.fold import FOLD, fold_window
from ldp_store.scripts.many import (
    GUARD_UNITS,
    IN_USE,
    MANY,
    UnitCounters,
    guard_units,
    read_many,
    units_in_use,
)
from ldp_store.scripts.read import READ, read_batch
from ldp_store.scripts.shuffle import SHUFFLE, shuffle_call
from ldp_store.scripts.trim import UNLINK
from ldp_store.scripts.window import WINDOW, WindowReply, read_window, read_windows

__all__ = [
    "APPEND",
    "COMMIT",
    "DEAD",
    "FOLD",
    "FORGET",
    "GUARD_UNITS",
    "IN_USE",
    "MANY",
    "ID_CHUNK",
    "READ",
    "SHUFFLE",
    "UNLINK",
    "WINDOW",
    "AppendReply",
    "Call",
    "CommitBatch",
    "Hours",
    "UnitCounters",
    "append_call",
    "commit_batch",
    "dead",
    "fold_window",
    "guard_units",
    "forget_epochs",
    "read_batch",
    "WindowReply",
    "read_many",
    "read_window",
    "read_windows",
    "shuffle_call",
    "units_in_use",
]

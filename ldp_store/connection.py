"""One Redis client factory for every process of the system: a server or a Redis Cluster.

``REDIS_URL`` may name either, and nothing else changes:

* ``redis://`` and ``rediss://`` URLs are probed once with ``INFO cluster`` on the named
  (seed) node. ``cluster_enabled:1`` gives redis-py's :class:`redis.cluster.RedisCluster`,
  which learns the other nodes and the slot map from the seed and follows ``MOVED`` and
  ``ASK`` redirections; anything else gives a plain :class:`redis.Redis`. A seed that
  cannot be reached gives a plain client too (a single server down at start-up, which the
  collector answers with 503 until it is back).
* ``redis+cluster://`` and ``rediss+cluster://`` ask for a cluster explicitly: no probe,
  and a process whose seed is down at start fails there instead of later treating one
  node of a cluster as the whole database. Use them in deployments that are always a
  cluster.
* ``unix://`` is always a single server.

Everything the system does is cluster-safe: every multi-key command and Lua script
touches keys of one hash slot (:mod:`ldp_store.keys`), the registry's two keys are
written in a crash-safe order (:mod:`ldp_store.registry`), nothing SCANs, and the
aggregator does not block on several streams at once on a cluster
(:meth:`aggregator.stream.worker.Worker._wait_for_entries`).
"""

from __future__ import annotations

import socket
from typing import Any, cast
from urllib.parse import urlsplit, urlunsplit

import redis
from redis.backoff import ExponentialWithJitterBackoff
from redis.cluster import RedisCluster
from redis.exceptions import RedisClusterException
from redis.retry import Retry

__all__ = [
    "CLUSTER_SCHEMES",
    "PROBE_TIMEOUT",
    "RETRY_BACKOFF_BASE",
    "RETRY_BACKOFF_CAP",
    "UNAVAILABLE",
    "connect",
    "GONE_REPLIES",
    "is_cluster",
    "node_infos",
    "out_of_memory",
    "redacted",
    "stream_gone",
    "unavailable",
]

CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
"""URL schemes that ask for a cluster client without probing, and the scheme redis-py
gets."""

PROBE_TIMEOUT = 2.0
"""Seconds the ``INFO cluster`` probe may take: on a LAN a reply takes milliseconds."""


RETRY_BACKOFF_BASE = 0.01
RETRY_BACKOFF_CAP = 0.1
"""Jittered exponential backoff between retries, from 10 ms to at most 100 ms: a Redis
that restarts is back within a second, and a request must not wait longer than its
client would (see the collector's ``LONGEST_REDIS_WAIT``)."""


def _cluster_enabled(url: str, timeout: float) -> bool:
    """Whether the server at ``url`` runs in cluster mode (False if unreachable)."""
    probe = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
    try:
        info = probe.info("cluster")
    except redis.RedisError:  # unreachable, auth trouble, INFO renamed: a single server
        return False
    finally:
        probe.close()
    return bool(int(info.get("cluster_enabled", 0)))


def connect(
    url: str,
    *,
    socket_connect_timeout: float | None = None,
    socket_timeout: float | None = None,
    retries: int | None = None,
    retry_timeouts: bool = True,
    probe_timeout: float = PROBE_TIMEOUT,
) -> redis.Redis:
    """A client for the Redis server or Redis Cluster at ``url``.

    Args:
        url: ``redis://``, ``rediss://``, ``unix://``, or ``redis+cluster://`` /
            ``rediss+cluster://`` for a cluster without probing.
        socket_connect_timeout: seconds to wait for a TCP connection (None: no limit).
        socket_timeout: seconds to wait for a reply (None: no limit; the aggregator's
            blocking reads need more than their ``block_ms``).
        retries: retries of a command after a connection error, with jittered
            exponential backoff from 10 ms to 100 ms (a cluster client also retries
            through failovers this many times); None: redis-py's default.
        retry_timeouts: whether a timeout is retried like a connection error. A refused
            or reset connection (a Redis restart left the pooled one dead) is cured by a
            new one at once; a timeout means the server is stalled or out of reach, and
            another try would only wait again: the collector says False, so the longest
            a request can wait on Redis is one ``socket_timeout``, not ``retries + 1``.
        probe_timeout: seconds the ``INFO cluster`` probe of a plain URL may take.

    Returns:
        A :class:`redis.Redis`, or a :class:`redis.cluster.RedisCluster` (typed as
        ``redis.Redis``: it has the same commands, and the code uses only those that
        keep to one hash slot; :func:`is_cluster` tells them apart).

    Raises:
        ValueError: the URL cannot name a cluster (a database other than 0, a socket
            path), or the cluster's slot map could not be read.
        redis.RedisError: an explicit cluster URL whose seed node is unreachable.
    """
    options: dict[str, Any] = {
        "socket_connect_timeout": socket_connect_timeout,
        "socket_timeout": socket_timeout,
    }
    if retries is not None:
        errors: tuple[type[Exception], ...] = (redis.ConnectionError,)
        if retry_timeouts:
            errors += (redis.TimeoutError, socket.timeout)
        options["retry"] = Retry(
            ExponentialWithJitterBackoff(base=RETRY_BACKOFF_BASE, cap=RETRY_BACKOFF_CAP),
            retries,
            supported_errors=errors,
        )
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme in CLUSTER_SCHEMES:
        url = urlunsplit(parts._replace(scheme=CLUSTER_SCHEMES[scheme]))
        cluster = True
    else:
        cluster = scheme in ("redis", "rediss") and _cluster_enabled(url, probe_timeout)
    if not cluster:
        return redis.Redis.from_url(url, **options)
    try:
        client = RedisCluster.from_url(url, **options)
    except RedisClusterException as exc:
        raise ValueError(f"cannot use the Redis Cluster at {url}: {exc}") from None
    return cast(redis.Redis, client)


UNAVAILABLE: tuple[type[Exception], ...] = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.exceptions.ClusterError,  # CLUSTERDOWN, or redirections (MOVED, ASK) past TTL
    redis.exceptions.TryAgainError,  # a multi-key command on a slot mid-move
    redis.exceptions.SlotNotCoveredError,
)
"""Errors that mean Redis (or a cluster slot's node, in a failover or resharding) cannot
be reached for now: retry later, nothing is lost. Measured against real failovers and
slot moves by ``tests/test_cluster_failover.py`` and ``tests/test_cluster_resharding.py``."""

_TRANSIENT_CLUSTER = ("cannot be connected", "All slots are not covered")
"""Words of redis-py's plain RedisClusterExceptions that mean "not reachable now": no
node answered, or the slot map it read mid-failover had holes."""


def unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says Redis is out of reach for now, not that a command is wrong.

    redis-py's cluster client wraps a lost cluster (no node answers) in a plain
    RedisClusterException raised from the ConnectionError; other RedisClusterExceptions
    (keys of several slots in one command, say) are bugs and must not be retried forever.
    """
    if isinstance(exc, UNAVAILABLE):
        return True
    if isinstance(exc, RedisClusterException):
        cause = exc.__cause__ or exc.__context__
        if cause is not None and unavailable(cause):
            return True
        return any(words in str(exc) for words in _TRANSIENT_CLUSTER)
    return False


def out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is Redis refusing a write at ``maxmemory`` (Redis 7 answers ``OOM``
    to the script call; 6.2 wraps it in "Error running script")."""
    return isinstance(exc, redis.exceptions.OutOfMemoryError) or "-OOM " in str(exc)


GONE_REPLIES = ("NOGROUP", "UNBLOCKED", "ERR no such key")
"""How Redis says a stream or its group went away under a command: ``NOGROUP`` (no
stream or no group; Redis 6.2 and 7), ``UNBLOCKED the stream key no longer exists``
(Redis 7, to a read blocked on a stream that was deleted), ``ERR no such key`` (XINFO).
``ldp metrics delete`` causes all three while workers read: never a reason to stop."""


def stream_gone(exc: BaseException) -> bool:
    """Whether ``exc`` says a stream or its consumer group no longer exists
    (:data:`GONE_REPLIES`; in a script's or a pipeline's error too)."""
    if not isinstance(exc, redis.ResponseError):
        return False
    text = str(exc)
    return any(reply in text for reply in GONE_REPLIES)


def is_cluster(client: object) -> bool:
    """Whether ``client`` talks to a Redis Cluster (a :class:`RedisCluster`)."""
    return isinstance(client, RedisCluster)


def node_infos(info: Any) -> list[Any]:
    """The nodes' answers in an ``INFO`` answer: a server's fields, or (a cluster client
    asking several nodes) a mapping of node name to each one's fields."""
    return (
        list(info.values()) if info and all(isinstance(v, dict) for v in info.values()) else [info]
    )


def as_text(reply: Any) -> str:
    """A reply's bytes as text (a client made with ``decode_responses`` gives str already;
    any other value, as ``str`` writes it)."""
    return reply.decode() if isinstance(reply, bytes) else str(reply)


def redacted(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``: for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))

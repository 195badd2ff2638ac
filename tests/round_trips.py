"""Counting the round trips a piece of code makes to Redis (a test of "a few calls,
whatever the number of metrics")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis


def round_trips(client: redis.Redis, work: Callable[[], Any]) -> int:
    """Commands and pipelines ``work()`` sends through ``client`` (each takes a connection
    from the pool once)."""
    pool = client.connection_pool
    original = pool.get_connection
    taken = 0

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal taken
        taken += 1
        return original(*args, **kwargs)

    pool.get_connection = counted  # type: ignore[method-assign]
    try:
        work()
    finally:
        pool.get_connection = original  # type: ignore[method-assign]
    return taken

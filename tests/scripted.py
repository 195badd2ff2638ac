"""The scripted generator of the golden-vector tests (imported as ``scripted``).

Kept out of conftest.py: ``tests/collector`` has a conftest of its own, and a plain
``from conftest import`` could resolve to either.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

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

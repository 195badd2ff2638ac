"""A clock the test moves by hand, for code that takes its time source as a callable."""

from __future__ import annotations


class Clock:
    """Seconds (wall or monotonic) that move only when the test sets :attr:`now`."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

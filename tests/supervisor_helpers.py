"""Outages a test can watch whatever the machine's load (issue 36, item 9).

A fixed restart delay is a race against the load: a test that kills Redis and expects a
503 before the supervisor brings it back fails when the machine is slow enough that its
next request comes after the restart. :func:`held_down` keeps the child down until the
test has seen what it came for.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ldp_server.serve import Server
from ldp_server.supervise import Backoff

HOLD_SECONDS = 3600.0
"""The restart delay while held: longer than any test waits."""


@contextmanager
def held_down(server: Server, name: str) -> Iterator[Callable[[], None]]:
    """While inside, a death of the child ``name`` (``redis``, ``web``, …) is restarted an
    hour later; the yielded ``release()`` makes the restart due at the supervisor's next
    poll (once it has seen the death). Leaving releases it too, and puts the server's own
    backoff back."""
    supervisor = server.supervisor
    assert supervisor is not None
    child = next(c for c in supervisor.children if c.name == name)
    saved = supervisor.backoff
    supervisor.backoff = Backoff(first=HOLD_SECONDS, cap=HOLD_SECONDS)

    def release() -> None:
        deadline = time.monotonic() + 120  # a bound against a hang, not a speed limit
        while child.restart_at is None:
            assert time.monotonic() < deadline, f"the supervisor never saw {name} end"
            time.sleep(0.05)
        child.restart_at = 0.0  # due: the supervisor restarts it at its next poll

    try:
        yield release
    finally:
        supervisor.backoff = saved
        if child.restart_at is not None:
            child.restart_at = 0.0

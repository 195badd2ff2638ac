"""Many connections held open at once, for the tests of slow clients: all of them are
closed again when opening one fails."""

from __future__ import annotations

import socket
from collections.abc import Callable


def open_many(count: int, open_one: Callable[[int], socket.socket]) -> list[socket.socket]:
    """``open_one(i)`` for i in 0..count-1; on any failure the ones opened are closed and
    the failure raised."""
    opened: list[socket.socket] = []
    try:
        for i in range(count):
            opened.append(open_one(i))
    except BaseException:
        for s in opened:
            s.close()
        raise
    return opened

"""Work done in a forked child of the test process, its result sent back through a pipe;
a child that does not exit in time is killed and counted as hung."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from typing import Any

CHILD_TIMEOUT = 60.0
"""Seconds a child may take to report once and exit before it counts as hung: a healthy
one takes milliseconds; a hung one never exits."""


def reap(pid: int, timeout: float) -> int | None:
    """Wait for child ``pid``; its exit code, or None if it had to be killed (hung)."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.002)


def in_child(work: Callable[[], dict[str, Any]]) -> tuple[int, dict[str, Any] | None]:
    """Fork; the child runs ``work`` and sends its result back; never returns into pytest
    in the child. Returns the child's pid and result (None if it hung or failed)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read_end)
            os.write(write_end, json.dumps(work()).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    code = reap(pid, CHILD_TIMEOUT)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read() if code == 0 else b""
    return pid, json.loads(data) if data else None

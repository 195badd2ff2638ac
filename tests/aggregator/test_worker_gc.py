"""The stream worker freezes what its start built: no collection scans it again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

RUN_AND_COUNT = """
import gc, runpy, sys
sys.argv = ["ldp", *sys.argv[1:]]
try:
    runpy.run_module("ldp_server", run_name="__main__")
finally:
    print("frozen", gc.get_freeze_count(), file=sys.stderr)
"""


def test_the_worker_process_runs_with_its_start_frozen(redis_db: Any) -> None:
    done = subprocess.run(
        [sys.executable, "-c", RUN_AND_COUNT, "aggregate", "--once", "--redis-url", redis_db.url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    frozen = int(done.stderr.rpartition("frozen ")[2])
    # Every module, class and function the worker loaded: tens of thousands of objects.
    assert frozen > 10_000

"""``ldp serve`` run from a given checkout, for the benchmarks that compare two trees
(``--before``'s and this one) in one run; the load average they print at each step.

Used by ``bench_read_isolation.py`` and ``bench_read_side.py`` (how to run them: their
docstrings); figures in ``docs/benchmarks/``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ldp_store.embedded import free_port  # noqa: E402
from tests.http_helpers import call  # noqa: E402


def load() -> str:
    """The 1, 5 and 15 minute load averages (the machine is shared)."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def serve_tree(
    tree: Path, data: Path, settings: dict[str, str], seconds: float
) -> tuple[subprocess.Popen[bytes], str]:
    """``ldp serve`` from ``tree`` on a free loopback port (embedded Redis in ``data``, 2 web
    workers, 1 aggregator), no ``LDP_`` variable but ``settings``; its process and URL once
    ``/readyz`` answers.

    Raises:
        RuntimeError: it exited, or did not answer within ``seconds``.
    """
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LDP_")}
    env.update(settings, PYTHONPATH=str(tree))
    args = [sys.executable, "-m", "ldp_server", "serve", "--port", str(port)]
    args += ["--data-dir", str(data), "--web-workers", "2", "--aggregators", "1"]
    process = subprocess.Popen(
        args, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + seconds
    while True:
        try:
            call(url + "/readyz", timeout=60)
            return process, url
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ldp serve from {tree} did not start") from None
            time.sleep(0.5)

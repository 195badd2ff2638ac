"""The replay guard's budget under a flood: how far the ids it holds pass the budget.

    python benchmarks/bench_guard_budget.py [--workers 4] [--seconds 8] [--before PATH]

Issue 35: a flood filled the guard, and it held 149-232 % of its budget before it
refused. Here ``--workers`` processes, each with its own collector ``Appender`` (its own
memory guard and readings, as gunicorn workers have), append batches of 500 fresh ids as
fast as they can, two processes to each of ``workers / 2`` metric versions, with the
streams drained (as the aggregator would). A sampler counts the ids every guard bucket
holds (``SCARD``, exact) every few milliseconds; the figure is the worst count over the
budget (``LDP_GUARD_BUDGET`` of ``maxmemory`` in ids of ``BYTES_PER_ID``), and the margin
the docs state for it: what the other processes append in one reading interval and one
send interval. ``--before PATH`` runs the same flood with the code of a checkout (the
yardstick: main before the guard's shares), whose ``MemoryGuard.check`` refuses at the
budget. Prints the load average: the machine is shared, so rates vary; the overshoot is
what it is at the rate reached.
"""

from __future__ import annotations

import argparse
import inspect
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUDGET_PERCENT = 5
MAXMEMORY = 64 * 2**20
"""The default ``--maxmemory``: the guard's budget is then 167,772 ids."""
BATCH = 500
MARGIN_SECONDS = 0.25
"""The docs' margin: two ``near_interval`` (a reading of the counts, a send of them), and
the time one request takes between reading its shares and running its script."""


def worker(code: str, url: str, name: str, seconds: float, units: int, seed: int) -> None:
    """One collector process flooding ``name``: prints its appended ids and refusals."""
    sys.path.insert(0, code)
    import random  # noqa: PLC0415
    from datetime import UTC, datetime  # noqa: PLC0415

    from collector.errors import Unavailable  # noqa: PLC0415
    from collector.ingest import Appender  # noqa: PLC0415
    from ldp_store import keys  # noqa: PLC0415
    from ldp_store.connection import connect  # noqa: PLC0415

    r = connect(url)
    extra = {"units": lambda: units} if "units" in inspect.signature(Appender).parameters else {}
    appender = Appender(r, 10**9, 1.0, guard_share=BUDGET_PERCENT / 100, **extra)  # type: ignore[arg-type]
    rng = random.Random(seed)
    stream = keys.stream_key(name, 1)
    appended = refused = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        now = datetime.now(UTC)
        batch = [(rng.randbytes(16), b"{}") for _ in range(BATCH)]
        try:
            appender.memory.check(now)
            appended += appender.append(name, 1, batch, now)[0]
        except Unavailable as exc:
            appended += getattr(exc, "appended", 0)
            refused += 1
        r.xtrim(stream, maxlen=0)
    print(appended, refused, flush=True)


def held(r: object) -> int:
    """Ids in every guard bucket (not the hashes or bitmaps): the guard as it is."""
    total = 0
    found = [k for k in r.scan_iter(match="ldp:{m:*}:guard:*:*:*", count=1000)]  # type: ignore[attr-defined]
    with r.pipeline(transaction=False) as pipe:  # type: ignore[attr-defined]
        for key in found:
            if not key.endswith(b":made"):
                pipe.scard(key)
        total = sum(pipe.execute())
    return total


def run(code: str, workers: int, seconds: float, maxmemory: int) -> dict[str, float]:
    sys.path.insert(0, str(ROOT))
    from ldp_store import guard  # noqa: PLC0415
    from ldp_store.embedded import EmbeddedRedis  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as folder:
        server = EmbeddedRedis(Path(folder)).start()
        try:
            r = server.client()
            r.config_set("maxmemory", maxmemory)
            budget = maxmemory * BUDGET_PERCENT // 100 // guard.BYTES_PER_ID
            units = max(1, workers // 2)
            procs = [
                subprocess.Popen(
                    [
                        sys.executable,
                        __file__,
                        "--worker",
                        code,
                        server.url,
                        f"bench.u{i % units}",
                        str(seconds),
                        str(units),
                        str(i),
                    ],
                    stdout=subprocess.PIPE,
                    text=True,
                )
                for i in range(workers)
            ]
            samples: list[tuple[float, int]] = []
            stop = threading.Event()

            def sample() -> None:
                while not stop.is_set():
                    samples.append((time.monotonic(), held(r)))
                    time.sleep(0.005)

            sampler = threading.Thread(target=sample)
            sampler.start()
            started = time.monotonic()
            outputs = [p.communicate()[0].split() for p in procs]
            elapsed = time.monotonic() - started
            stop.set()
            sampler.join()
            samples.append((time.monotonic(), held(r)))
            guard_keys = list(r.scan_iter(match="ldp:{m:*}:guard:*", count=1000))
            with r.pipeline(transaction=False) as pipe:
                for key in guard_keys:
                    pipe.memory_usage(key, samples=0)
                measured = sum(int(x or 0) for x in pipe.execute())
            appended = sum(int(o[0]) for o in outputs)
            refused = sum(int(o[1]) for o in outputs)
        finally:
            server.stop()
    # The margin: the most ids the guard took in any MARGIN_SECONDS (every process's; the
    # docs' bound counts only the others'), from the samples.
    window, first = 0, 0
    for t, count in samples:
        while samples[first][0] < t - MARGIN_SECONDS:
            first += 1
        window = max(window, count - min(c for _, c in samples[first:] if _ <= t))
    return {
        "budget": budget,
        "worst": max(c for _, c in samples),
        "appended": appended,
        "refused": refused,
        "rate": appended / elapsed,
        "samples": len(samples),
        "margin": window,
        "bytes": measured,
        "budget_bytes": maxmemory * BUDGET_PERCENT // 100,
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        code, url, name, seconds, units, seed = sys.argv[2:8]
        worker(code, url, name, float(seconds), int(units), int(seed))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--maxmemory", type=int, default=MAXMEMORY, help="bytes")
    parser.add_argument("--before", help="a checkout to run the same flood with (yardstick)")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(
        f"{args.workers} processes flood {max(1, args.workers // 2)} versions for "
        f"{args.seconds:.0f} s; budget {BUDGET_PERCENT} % of {args.maxmemory / 2**20:.0f} MiB"
    )
    runs = [("this tree", str(ROOT))]
    if args.before:
        runs.insert(0, (f"before ({args.before})", str(Path(args.before).resolve())))
    for label, code in runs:
        got = run(code, args.workers, args.seconds, args.maxmemory)
        over = got["worst"] - got["budget"]
        print(
            f"{label}: budget {got['budget']:,.0f} ids; worst held {got['worst']:,.0f} ids "
            f"({got['worst'] / got['budget']:.1%} of it, {max(0, over):,.0f} over); "
            f"{got['appended']:,.0f} appended at {got['rate']:,.0f} ids/s, "
            f"{got['refused']:,.0f} requests refused; {got['samples']:,.0f} samples"
        )
        print(
            f"  the most ids taken in any {MARGIN_SECONDS} s (the stated margin's bound): "
            f"{got['margin']:,.0f}; at the end the guard's keys take {got['bytes']:,.0f} "
            f"bytes (MEMORY USAGE), {got['bytes'] / got['budget_bytes']:.1%} of the budget's "
            f"{got['budget_bytes']:,.0f}"
        )


if __name__ == "__main__":
    main()

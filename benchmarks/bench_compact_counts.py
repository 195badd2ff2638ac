"""Counts hashes against compact support counts: bytes per value, drain rate, read time.

    python benchmarks/bench_compact_counts.py                       # against 80f7c9f
    python benchmarks/bench_compact_counts.py --rev 80f7c9f -n 200000 --rounds 2

The code of ``--rev`` (the last revision with counts hashes) is unpacked with ``git
archive`` into a temporary folder; for each k, a metric is loaded with the same N
payloads and drained by ``ldp aggregate --once`` of that revision (``PYTHONPATH`` on the
unpacked tree: it writes counts hashes) and of this tree (packed support strings),
alternately, on one embedded Redis (AOF on, as ``ldp serve`` runs it), best of
``--rounds``. The table gives

* bytes per value of one window: ``MEMORY USAGE … SAMPLES 0`` (every field counted) of
  the hour window's keys (the hash; now the hash with ``n`` and the support string),
  divided by k;
* drain: reports/s of the worker process, start-up included (the same for both);
* read: milliseconds of this tree's ``read_counts`` of that window (old windows are read
  by the same HGETALL and field parsing the old code used), best of 20;

then the memory of one metric for a year: 8,760 hour windows, 365 day windows and the
all-time one, without retention, and with the default retention (336 hours and 365 days
kept after a year). Payloads are Hadamard response reports of the real SDK: every C(v) is
about n/2, so every value is present in a hash, as in any long-lived window.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aggregator.query.window import read_counts  # noqa: E402
from ldp_store import keys, schema  # noqa: E402
from ldp_store.embedded import EmbeddedRedis  # noqa: E402
from ldp_store.registry import Registry  # noqa: E402
from ldp_store.retention import DEFAULT_HOUR_SECONDS  # noqa: E402

POOL = 5_000
"""Distinct SDK payloads per metric, appended round-robin."""

HOURS_A_YEAR, DAYS_A_YEAR = 8_760, 365

_LOADER = "for i = 1, #ARGV do redis.call('XADD', KEYS[1], '*', 'p', ARGV[i]) end return #ARGV"


def unpack(rev: str, into: Path) -> Path:
    """The tree of ``rev``, from ``git archive`` (no worktree, nothing left behind)."""
    archive = into / "old.tar"
    subprocess.run(["git", "archive", "-o", str(archive), rev], cwd=ROOT, check=True)
    tree = into / "old"
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    return tree


def load(client: redis.Redis, name: str, k: int, reports: int) -> None:
    definition = (
        Registry(client)
        .put(name, {"domain": [f"v{i}" for i in range(k)], "epsilon": 1.0, "mechanism": "hr"})
        .definition
    )
    rng = random.Random(2026)
    m = definition.mechanism
    pool = [
        json.dumps(m.perturb(rng.randrange(k), rng=rng), separators=(",", ":")) for _ in range(POOL)
    ]
    loader = client.register_script(_LOADER)
    stream = keys.stream_key(name, definition.version)
    for start in range(0, reports, 5_000):
        stop = min(reports, start + 5_000)
        loader(keys=[stream], args=[pool[i % POOL] for i in range(start, stop)])


def drain(url: str, tree: Path) -> float:
    """Seconds a burst-mode worker of ``tree`` takes to drain everything."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, "-m", "ldp_server", "aggregate", "--once", "--redis-url", url]
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=tree, env=env, check=True, capture_output=True)
    return time.perf_counter() - t0


def window_bytes(client: redis.Redis, name: str, window: str) -> int:
    """MEMORY USAGE of every key of one window (fields all counted)."""
    total = 0
    for key in keys.window_keys(name, 1, window):
        usage = client.memory_usage(key, samples=0)
        total += int(usage or 0)
    return total


def read_ms(client: redis.Redis, name: str, window: str) -> float:
    definition = Registry(client).get(name)
    assert definition is not None
    best = float("inf")
    for _ in range(20):
        t0 = time.perf_counter()
        read_counts(client, definition, window)
        best = min(best, time.perf_counter() - t0)
    return best * 1000


def main() -> None:
    """Load, drain and measure each k with the old and the new code, alternately."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rev", default="80f7c9f", help="the revision with counts hashes")
    ap.add_argument("--reports", "-n", type=int, default=200_000)
    ap.add_argument("--ks", default="16,1024,65536")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()}", flush=True)
    results: dict[tuple[str, int], dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        old_tree = unpack(args.rev, Path(tmp))
        server = EmbeddedRedis(Path(tmp) / "redis").start()
        try:
            client = redis.Redis.from_url(server.url)
            for k in map(int, args.ks.split(",")):
                for rnd in range(args.rounds):
                    for label, tree in (("hashes", old_tree), ("compact", ROOT)):
                        name = f"bench.{label}.k{k}.r{rnd}"
                        load(client, name, k, args.reports)
                        seconds = drain(server.url, tree)
                        n = int(client.hget(keys.counts_key(name, 1), "n") or 0)
                        if n != args.reports:
                            raise SystemExit(f"{name}: counted {n:,} of {args.reports:,}")
                        now_ms = int(time.time() * 1000)
                        hour, _, day, _ = schema.window_names(now_ms)
                        hours = [
                            m.decode()
                            for m in client.zrange(keys.windows_key(name, 1), 0, -1)
                            if m.startswith(b"hour:")
                        ]
                        hour = max(hours)  # the window the drain wrote
                        day = "day:" + hour[5:15]
                        row = results.setdefault((label, k), {"rate": 0.0, "read": 1e9})
                        row["rate"] = max(row["rate"], n / seconds)
                        row["read"] = min(row["read"], read_ms(client, name, hour))
                        row["hour"] = window_bytes(client, name, hour)
                        row["day"] = window_bytes(client, name, day)
                        row["all"] = window_bytes(client, name, "all")
                        for window in ("all", hour, day):
                            client.delete(*keys.window_keys(name, 1, window))
                        print(f"  {label:>7} k={k:<6} round {rnd}: {n / seconds:>9,.0f} reports/s"
                              f", {row['hour'] / k:.2f} B/value", flush=True)  # fmt: skip
        finally:
            server.stop()
    print(f"load average after: {os.getloadavg()}\n")
    head = ("k", "format", "B/value", "over 8k B", "drain rep/s", "read ms", "year", "year kept")
    print("{:>6} {:>8} {:>8} {:>8} {:>12} {:>8} {:>10} {:>10}".format(*head))
    kept_hours = DEFAULT_HOUR_SECONDS // 3600
    for k in map(int, args.ks.split(",")):
        for label in ("hashes", "compact"):
            r = results[(label, k)]
            year = HOURS_A_YEAR * r["hour"] + DAYS_A_YEAR * r["day"] + r["all"]
            kept = (kept_hours + 1) * r["hour"] + DAYS_A_YEAR * r["day"] + r["all"]
            fixed = r["hour"] - schema.SUPPORT_BYTES * k if label == "compact" else float("nan")
            cells = (k, label, r["hour"] / k, fixed, r["rate"], r["read"], _size(year), _size(kept))
            print("{:>6} {:>8} {:>8.2f} {:>8.0f} {:>12,.0f} {:>8.2f} {:>10} {:>10}".format(*cells))
    print(
        "\nB/value: one hour window's bytes / k; over 8k B: what a compact window takes"
        "\nbeyond 8 bytes a value (allocator rounding, the hash with n, key overheads);"
        "\nyear: 8,760 hour + 365 day windows + all, kept; year kept: with the default"
        f" retention ({kept_hours + 1} hour windows live at a time)"
    )


def _size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000:
            return f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} PB"


if __name__ == "__main__":
    main()
